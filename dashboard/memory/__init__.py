"""USER.md and MEMORY.md: entries, checks, safe saves, revisions, merges."""
