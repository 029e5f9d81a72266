"""What a search asks of the meaning index: is it ready, and which messages are near.

One :class:`MeaningReader` per archive, shared by every profile's reader (the vectors
are the whole archive's; a profile's scope is applied to the messages found, as for
words). The embedder loads on the first question (0.2 s), or at the warm-up.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable

from dashboard.meaning.builder import MeaningStatus, read_status
from dashboard.meaning.embedder import Embedder, WordLlamaEmbedder
from dashboard.meaning.index import MeaningIndex, Near


class MeaningReader:
    """The archive's meaning index for searches (see the module)."""

    def __init__(self, embedder: Callable[[], Embedder] = WordLlamaEmbedder) -> None:
        self.index = MeaningIndex()
        self._make = embedder
        self._embedder: Embedder | None = None
        self._lock = threading.Lock()

    def status(self, conn: sqlite3.Connection) -> MeaningStatus:
        return read_status(conn)

    def follow(self, conn: sqlite3.Connection) -> None:
        """Take in the vectors written since the last search (the warm-up calls it too,
        so a first search after start does not read a million of them)."""
        self.index.follow(conn)
        self._embedder_now()

    def nearest(self, conn: sqlite3.Connection, text: str, limit: int) -> list[Near]:
        """The messages closest in meaning to ``text``, closest first, as ``conn``
        sees the index."""
        self.index.follow(conn)
        vector = self._embedder_now().embed([text])[0]
        return self.index.nearest(vector, limit)

    def _embedder_now(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                self._embedder = self._make()
            return self._embedder
