"""Recall's own files: the read-only opener, the write path, the schema, recall.db."""
