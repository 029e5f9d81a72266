"""Open a foreign ``state.db`` strictly read-only.

A user's Hermes home belongs to their agent. Recall opens its ``state.db`` with a
``mode=ro`` URI and ``query_only``, never runs DDL and never sets a pragma that
writes (not even ``journal_mode``: a DELETE-mode file stays DELETE-mode). It never
memory-maps the file either: a mapped file that someone truncates or rewrites in
place (``: > state.db``, ``cp backup state.db``) raises SIGBUS in the reader when
it touches a page past the new end, and that kills the whole server.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from dashboard.errors import StoreUnavailableError
from dashboard.store.datadir import folder_fault

BUSY_TIMEOUT_S = 5.0
IO_RETRIES = 3
IO_RETRY_SLEEP_S = 0.05

_SQLITE_IOERR = 10
_SQLITE_CORRUPT = 11
_SQLITE_CANTOPEN = 14
_SQLITE_NOTADB = 26
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_READONLY = 8
# Extended code: a hot journal (a writer died mid-transaction) must be rolled back
# before anyone can read the file, and a read-only connection may not do that.
_SQLITE_READONLY_ROLLBACK = 776


def readonly_uri(path: str | Path) -> str:
    """The ``file:`` URI opening ``path`` read-only (spaces, ``?`` and ``#`` escaped)."""
    return f"file:{quote(str(Path(path).resolve()))}?mode=ro"


def open_readonly(
    path: str | Path, *, timeout: float = BUSY_TIMEOUT_S, io_retries: int = IO_RETRIES
) -> sqlite3.Connection:
    """Connect read-only and prove the file is a readable SQLite database.

    A transient disk I/O error (network filesystems, a checkpoint in progress)
    is retried a few times; a missing, corrupt, locked or non-SQLite file raises
    :class:`StoreUnavailableError` with a reason the web layer can explain, and so
    does a 0-byte file beside a ``-wal`` ("empty"), which is never opened.
    """
    target = Path(path)
    if not target.is_file():
        raise StoreUnavailableError("missing", str(target), "no such file")
    if target.stat().st_size == 0 and Path(f"{target}-wal").exists():
        # Truncated while its writer works in WAL mode: SQLite opening a 0-byte file
        # deletes the -wal beside it, the only copy of the writer's newest rows.
        raise StoreUnavailableError("empty", str(target), "0 bytes beside a -wal")
    for attempt in range(io_retries + 1):
        try:
            conn = sqlite3.connect(
                readonly_uri(target), uri=True, timeout=timeout, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise classify(exc, target) from exc
        try:
            return _prepared(conn)
        except sqlite3.Error as exc:
            conn.close()
            error = classify(exc, target)
            if error.reason != "io" or attempt == io_retries:
                raise error from exc
        time.sleep(IO_RETRY_SLEEP_S * (attempt + 1))
    raise AssertionError("unreachable: the last attempt raises")


def open_own_readonly(
    path: str | Path, *, timeout: float = BUSY_TIMEOUT_S, io_retries: int = IO_RETRIES
) -> sqlite3.Connection:
    """:func:`open_readonly` for a file of Recall's own (the archive), whose folder may fail.

    A WAL file needs its ``-shm`` even to be read, and a read-only folder cannot hold a
    new one: there nobody can write the file either, so it is opened ``immutable``
    (SQLite then needs no ``-shm`` and takes no lock). A file that cannot be opened
    because of its folder (gone, read-only) says so: the folder's fault, not the file's.
    """
    return open_own(path, timeout=timeout, io_retries=io_retries)[0]


def open_own(
    path: str | Path, *, timeout: float = BUSY_TIMEOUT_S, io_retries: int = IO_RETRIES
) -> tuple[sqlite3.Connection, bool]:
    """:func:`open_own_readonly`, and whether the file was opened ``immutable`` (such a
    connection never sees a later change: it is for the one unit of work at hand)."""
    try:
        return open_readonly(path, timeout=timeout, io_retries=io_retries), False
    except StoreUnavailableError as exc:
        if exc.reason not in ("readonly", "missing", "io"):
            raise
        fault = folder_fault(Path(path).parent, (), exc.__cause__ or exc)
        if fault is None:
            raise
        if fault.kind != "readonly" or not Path(path).is_file():
            raise fault.error() from exc
    try:
        conn = sqlite3.connect(
            readonly_uri(path) + "&immutable=1", uri=True, timeout=timeout, check_same_thread=False
        )
        return _prepared(conn), True
    except sqlite3.Error as exc:
        raise classify(exc, Path(path)) from exc


def _prepared(conn: sqlite3.Connection) -> sqlite3.Connection:
    """A read-only connection set up, its schema read once (a broken file fails here)."""
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA query_only=1")
    # Plain read() calls, never a memory map (SIGBUS on a file truncated in place).
    # 0 is SQLite's default; set here so a build with another default cannot bring the
    # map back. Per connection, nothing is written.
    conn.execute("PRAGMA mmap_size=0")
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return conn


@contextmanager
def read_snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Statements inside see one state of the file (a read transaction); joins an open one."""
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


def classify(exc: sqlite3.Error, path: Path) -> StoreUnavailableError:
    """Turn a sqlite3 error into a reason a person can act on."""
    extended = getattr(exc, "sqlite_errorcode", None) or 0
    code = extended & 0xFF
    text = str(exc)
    lowered = text.lower()
    if extended == _SQLITE_READONLY_ROLLBACK:
        reason = "rollback"
    elif code == _SQLITE_READONLY or "readonly database" in lowered:
        # Also the WAL cases: the -shm cannot be created, locked or initialised.
        reason = "readonly"
    elif (
        code in (_SQLITE_NOTADB, _SQLITE_CORRUPT)
        or "not a database" in lowered
        or "malformed" in lowered
    ):
        reason = "corrupt"
    elif code in (_SQLITE_BUSY, _SQLITE_LOCKED) or "locked" in lowered:
        reason = "locked"
    elif code == _SQLITE_IOERR or "disk i/o" in lowered:
        reason = "io"
    elif code == _SQLITE_CANTOPEN or "unable to open" in lowered:
        reason = "missing" if not path.exists() else "readonly"
    else:
        reason = "corrupt"
    return StoreUnavailableError(reason, str(path), text)
