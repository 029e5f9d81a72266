"""Read-only connections to the archive kept between units of work, one per thread.

Opening the archive costs more than a short search answers in: the connect and the
schema read, and above all what a new connection does not have yet, its page cache
(the b-tree pages a query walks) and FTS5's structure record of each index. At a
million messages a rare word ranks in ~0.6 ms on a kept connection and ~4 ms on a new
one. A connection kept for its thread's next unit of work keeps both, and stays
correct: every read transaction starts by checking whether the file changed (the WAL
index, or the change counter of a rollback-journal file) and drops stale pages, and
FTS5 reads its structure again when ``PRAGMA data_version`` moved.

A connection is kept only while the file at the path is the one it opened: the
file's identity (device, inode) and a non-zero size are checked at every take, so a
file replaced (renamed over, deleted, truncated to 0 bytes) is opened afresh with
:func:`readonly.open_own`'s checks and reasons, and every idle connection to the old
file is closed then (each holds the old file open, and its disk space with it). A
connection that saw any error, that was opened ``immutable`` (a read-only folder:
such a connection never sees a later change), or that is handed back inside a
transaction is closed, never kept.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dashboard.store.readonly import open_own

Identity = tuple[int, int]


def file_identity(path: Path) -> Identity | None:
    """The file's (device, inode); None when it is missing or empty (never reused)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if st.st_size > 0 else None


class KeptConnections:
    """At most one idle connection per thread, to one path, set up once by ``setup``."""

    def __init__(self, path: Path, setup: Callable[[sqlite3.Connection], None]) -> None:
        self.path = Path(path)
        self._setup = setup
        self._lock = threading.Lock()
        # thread id -> (its idle connection, the file identity it opened)
        self._idle: dict[int, tuple[sqlite3.Connection, Identity]] = {}
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """This thread's kept connection, or a new one (set up); kept again afterwards
        when the unit of work ended cleanly."""
        identity = file_identity(self.path)
        conn = self._take(identity)
        keep = identity is not None
        if conn is None:
            conn, immutable = open_own(self.path)
            keep = keep and not immutable
            try:
                self._setup(conn)
            except BaseException:
                conn.close()
                raise
        clean = False
        try:
            yield conn
            clean = not conn.in_transaction
        finally:
            if clean and keep and identity is not None:
                self._give(conn, identity)
            else:
                conn.close()

    def _take(self, identity: Identity | None) -> sqlite3.Connection | None:
        stale: list[sqlite3.Connection] = []
        with self._lock:
            found = self._idle.pop(threading.get_ident(), None)
            if found is not None and found[1] != identity:
                stale.append(found[0])
                found = None
            if stale:  # the file was replaced: let go of every connection to the old one
                for key in [k for k, (_, i) in self._idle.items() if i != identity]:
                    stale.append(self._idle.pop(key)[0])
        for conn in stale:
            conn.close()
        return found[0] if found is not None else None

    def _give(self, conn: sqlite3.Connection, identity: Identity) -> None:
        with self._lock:
            here = threading.get_ident()
            if not self._closed and here not in self._idle:
                self._idle[here] = (conn, identity)
                return
        conn.close()  # a nested unit of work's second connection

    def close(self) -> None:
        """Close every idle connection, and from now on each one handed back."""
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle.values()), {}
        for conn, _ in idle:
            conn.close()
