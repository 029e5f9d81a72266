"""Search by meaning: the embedder, the index kept in the archive, the nearest messages."""
