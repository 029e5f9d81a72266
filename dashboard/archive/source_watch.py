"""Has the source changed since the last look? Told from two ``stat`` calls, nothing opened.

The syncer's look (:class:`SourceWatch`), on each file event and every ``POLL_S``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from dashboard.errors import StoreUnavailableError


@dataclass(frozen=True)
class FileStamp:
    """What one ``stat`` tells of a file: which file it is, its size, its last write."""

    dev: int
    ino: int
    size: int
    mtime_ns: int


def file_stamp(path: Path) -> FileStamp | None:
    """The stamp of ``path`` (None: no such file)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return FileStamp(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def source_stamps(path: Path) -> tuple[FileStamp | None, FileStamp | None]:
    """The stamps of ``state.db`` and its ``-wal``; an empty ``-wal`` counts as none (it
    holds nothing: a read-only open makes one after Hermes's close deleted it)."""
    wal = file_stamp(Path(f"{path}-wal"))
    return file_stamp(path), (None if wal is not None and wal.size == 0 else wal)


class SourceWatch:
    """Has the source changed since the last look? Told from the files alone.

    Each look is two ``stat`` calls, of ``state.db`` and of its ``-wal``; nothing is
    opened. A commit changes one of them: in rollback mode it writes the database
    file, in WAL mode it appends to the ``-wal`` (its size grows) or, once a
    checkpoint let the log start over, rewrites it from the start (its mtime moves).
    A restore, a truncation, a checkpoint, a VACUUM change them too. Holding no
    connection matters: a process that keeps a WAL file open keeps reading a ``-wal``
    and ``-shm`` that a restore deleted, and so never sees the restored file.

    A write in the same clock tick as the look could leave the stamps as they were (a
    rewritten ``-wal`` keeps its size), so a look at a file written within ``GRAIN_NS``
    waits for the clock to pass that tick and stats again: a later write then moves the
    stamps. A file written without pause (still that recent after
    :attr:`SETTLE_TRIES` waits) is "racily clean", as Git says: the next look says
    "changed" once more. A look that trusted a racy stamp at once made the pass after a
    write run twice, at random.

    Besides whether it changed, a look says whether the file needs a full comparison
    (:attr:`suspect`): another file at the path (:attr:`replaced`), a database file that
    shrank (a restore or a truncation; also a VACUUM, which costs one reconciliation),
    or a file that was missing or empty meanwhile. The syncer clears it with
    :meth:`settled` once a pass has compared.
    """

    GRAIN_NS = 20_000_000  # above the coarsest tick of a local filesystem's mtime
    SETTLE_TRIES = 3  # waits of at most GRAIN_NS for a just-written file's tick to pass

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.wal = Path(f"{self.path}-wal")
        self._stamps: tuple[FileStamp, FileStamp | None] | None = None
        self._racy = False
        self._file: tuple[int, int] | None = None  # (dev, ino) of the last file seen
        self.replaced = False  # the last look found another file than the one before
        self.suspect = False  # replaced, shrunk, missing or empty since the last full pass
        self.moved = False  # the last look's stamps differed (not only a racy second look)

    def changed(self) -> bool:
        """True when the stamps moved since the last look (or it is the first look).

        Raises :class:`StoreUnavailableError`, without opening anything, when the file
        is missing or empty: a 0-byte ``state.db`` beside a ``-wal`` is a file truncated
        while Hermes writes, and an SQLite connection opened on it deletes that ``-wal``.
        """
        db, wal, racy = self._look()
        # Another file at the path: a restored backup (by rename), a reset home.
        # Compared with the last file seen even across a missing spell.
        self.replaced = self._file is not None and (db.dev, db.ino) != self._file
        self._file = (db.dev, db.ino)
        last = self._stamps
        shrunk = last is not None and not self.replaced and db.size < last[0].size
        self.suspect = self.suspect or self.replaced or shrunk
        if db.size == 0:
            self.suspect = True
            raise StoreUnavailableError("empty", str(self.path), "0 bytes")
        stamps = (db, wal)
        self.moved = stamps != last
        again = self._racy
        self._stamps = stamps
        self._racy = racy
        return self.moved or again

    def _look(self) -> tuple[FileStamp, FileStamp | None, bool]:
        """The stamps of ``state.db`` and its ``-wal``, taken once the clock has moved
        past their newest write's tick (up to :attr:`SETTLE_TRIES` short waits), and
        whether they are still racy (a file written all the time)."""
        for attempt in range(self.SETTLE_TRIES + 1):
            now = time.time_ns()
            # An empty -wal must not count as a change either (a pass, and a file
            # event, per checkpoint).
            db, wal = source_stamps(self.path)
            if db is None:
                self.suspect = True
                raise StoreUnavailableError("missing", str(self.path), "no such file")
            wait = max(db.mtime_ns, wal.mtime_ns if wal else 0) + self.GRAIN_NS - now
            if wait <= 0:
                return db, wal, False
            if attempt < self.SETTLE_TRIES:
                time.sleep(wait / 1e9)
        return db, wal, True

    def settled(self) -> None:
        """A pass compared the whole file: what made it suspect is dealt with."""
        self.suspect = False

    def forget(self) -> None:
        """Count the next look as a change (a pass that failed is tried again)."""
        self._stamps = None
