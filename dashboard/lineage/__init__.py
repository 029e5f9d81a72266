"""What continues what: the session graph, compaction chains, in-place epochs."""
