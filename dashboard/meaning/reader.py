"""What a search asks of the meaning index: is it ready, and which messages are near.

One :class:`MeaningReader` per archive, shared by every profile's reader (the vectors
are the whole archive's; a profile's scope is applied to the messages found, as for
words). The embedder loads on the first question (0.2 s), or at the warm-up.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass

from dashboard.meaning.builder import MeaningStatus, read_status
from dashboard.meaning.embedder import Embedder, EmbedderChoice
from dashboard.meaning.index import MeaningIndex, Near


@dataclass(frozen=True)
class Nearby:
    messages: list[Near]  # closest first
    titles: dict[str, float]  # session id -> its title's closeness (titled sessions)


class MeaningReader:
    """The archive's meaning index for searches (see the module)."""

    def __init__(self, choice: EmbedderChoice | None = None) -> None:
        self.index = MeaningIndex()
        self.choice = choice if choice is not None else EmbedderChoice.from_env()
        self._make: Callable[[], Embedder] = self.choice.make
        self._embedder: Embedder | None = None
        self._lock = threading.Lock()

    def status(self, conn: sqlite3.Connection) -> MeaningStatus:
        return read_status(conn)

    def follow(self, conn: sqlite3.Connection) -> None:
        """Take in the vectors written since the last search (the warm-up calls it too,
        so a first search after start does not read a million of them)."""
        self.index.follow(conn)
        self._embedder_now()

    def nearby(self, conn: sqlite3.Connection, text: str, limit: int) -> Nearby:
        """The ``limit`` messages closest in meaning to ``text`` (closest first) and how
        close each session's title is, as ``conn`` sees the index."""
        self.index.follow(conn)
        vector = self._embedder_now().embed([text])[0]
        return Nearby(self.index.nearest(vector, limit), self.index.title_closeness(vector))

    def _embedder_now(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                self._embedder = self._make()
            return self._embedder
