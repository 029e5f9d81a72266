"""The write path: one writer connection, BEGIN IMMEDIATE, jittered retry, checkpoints.

Every write Recall makes to a SQLite file goes through :class:`WriteCore`. It is
the only place in the project that sleeps or retries on a locked database.

Why this shape (seeds, PERF_NOTES "Writes under contention"):

* ``timeout=1.0`` keeps SQLite's own busy handler short; its waits are not fair
  between processes, and with only ``busy_timeout=5000`` 2 of 4000 writes were
  lost under 8 writers.
* ``BEGIN IMMEDIATE`` takes the write lock at the start of the transaction, so a
  conflict shows up before any work is done and the whole callback can be re-run.
* A random 20-150 ms sleep between tries breaks the convoy a deterministic
  backoff makes when several processes wake up together.
* A PASSIVE checkpoint every 50 writes keeps the WAL short without ever waiting
  for readers; TRUNCATE would block on them.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from dashboard.store.readonly import readonly_uri

T = TypeVar("T")

CONNECT_TIMEOUT_S = 1.0
MAX_TRIES = 15
RETRY_MIN_S = 0.020
RETRY_MAX_S = 0.150
CHECKPOINT_EVERY = 50
FILE_MODE = 0o600

# Primary result codes (the low byte of extended codes such as SQLITE_BUSY_SNAPSHOT).
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6


def is_lock_error(exc: BaseException) -> bool:
    """Return True when ``exc`` means "another connection holds the lock"."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class WriteCore:
    """A writer connection to one SQLite file with Hermes's retry discipline.

    Args:
        path: the database file; created when missing.
        wal: switch a file to WAL when opening it (only for files Recall owns).
        max_tries: attempts per write before the lock error is raised.
        patience_s: optional overall budget per write; when it runs out no new
            attempt starts even if tries remain.
        rng: source of jitter (tests pass a seeded one).
        sleep: how to wait between tries (tests record the waits).
        stamp: run inside every write transaction, after its callback and before
            COMMIT (a store counts its writes with it, so readers can tell it changed).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        wal: bool = True,
        max_tries: int = MAX_TRIES,
        patience_s: float | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] = time.sleep,
        stamp: Callable[[sqlite3.Connection], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self._stamp = stamp
        self.max_tries = max_tries
        self.patience_s = patience_s
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._lock = threading.RLock()
        self.writes = 0
        self.retries = 0
        self._secured: set[str] = set()
        self._closed = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(
            self.path,
            timeout=CONNECT_TIMEOUT_S,
            isolation_level=None,  # autocommit: we issue BEGIN IMMEDIATE ourselves
            check_same_thread=False,
        )
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA foreign_keys=ON")
        if wal:
            self._retry(lambda: self.conn.execute("PRAGMA journal_mode=WAL").fetchone())
        # FULL, not NORMAL: in WAL mode NORMAL may drop the last commits on power
        # loss, and an agent's memory must not silently lose a turn.
        self.conn.execute("PRAGMA synchronous=FULL")
        self._secure_files()

    # -- the write path -------------------------------------------------------------

    def write(self, fn: Callable[[sqlite3.Connection], T], *, foreign_keys: bool = True) -> T:
        """Run ``fn(conn)`` in one ``BEGIN IMMEDIATE`` transaction and return its result.

        On a lock/busy error the transaction is rolled back and the whole callback
        runs again after a random 20-150 ms sleep; any other error is raised at
        once. A write issued from inside another write joins the outer transaction.
        ``foreign_keys=False`` runs this one transaction without the checks (an
        importer landing a child before its parent): the pragma is per connection
        and can only change outside a transaction, so it is flipped and restored
        under the lock, never seen by another thread's write.
        """
        with self._lock:
            if self.conn.in_transaction:
                return fn(self.conn)
            if not foreign_keys:
                self.conn.execute("PRAGMA foreign_keys=OFF")
            try:
                result = self._retry(lambda: self._transaction(fn))
            finally:
                if not foreign_keys:
                    self.conn.execute("PRAGMA foreign_keys=ON")
            self.writes += 1
            if self.writes % CHECKPOINT_EVERY == 0:
                self.checkpoint()
            if len(self._secured) < 3:
                self._secure_files()
            return result

    def _transaction(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(self.conn)
            if self._stamp is not None:
                self._stamp(self.conn)
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        return result

    def _retry(self, attempt: Callable[[], T]) -> T:
        deadline = None if self.patience_s is None else time.monotonic() + self.patience_s
        for tries in range(1, self.max_tries + 1):
            try:
                return attempt()
            except sqlite3.OperationalError as exc:
                out_of_patience = deadline is not None and time.monotonic() >= deadline
                if not is_lock_error(exc) or tries == self.max_tries or out_of_patience:
                    raise
            self.retries += 1
            self._sleep(self._rng.uniform(RETRY_MIN_S, RETRY_MAX_S))
        raise AssertionError("unreachable: the last try raises")

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection, for a read that must not interleave with another thread's write."""
        with self._lock:
            yield self.conn

    # -- maintenance ----------------------------------------------------------------

    @contextmanager
    def attached_readonly(self, path: Path, name: str) -> Iterator[str]:
        """``path`` attached to the writer as schema ``name``, read-only, while the block runs.

        For the bulk path's ``INSERT … SELECT`` straight from another file (the first
        import), with no row passing through Python. The ``mode=ro`` URI makes SQLite
        refuse any write to it; if this SQLite did not take the URI (then it names another
        file) nothing is read. ATTACH and DETACH take the lock: neither may run inside a
        transaction another thread has open.
        """
        with self._lock:
            self.conn.execute(f"ATTACH DATABASE ? AS {name}", (readonly_uri(path),))
            files = {row[1]: row[2] for row in self.conn.execute("PRAGMA database_list")}
        try:
            if not files.get(name) or Path(files[name]).resolve() != Path(path).resolve():
                raise sqlite3.OperationalError(f"{path} was not attached read-only")
            yield name
        finally:
            with self._lock:
                self.conn.execute(f"DETACH DATABASE {name}")

    def checkpoint(self) -> tuple[int, int, int] | None:
        """Run a PASSIVE WAL checkpoint; it never waits for readers or writers."""
        with self._lock:
            try:
                row = self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except sqlite3.OperationalError as exc:
                if is_lock_error(exc):
                    return None  # someone else is checkpointing; try again later
                raise
            return tuple(row) if row else None

    def _secure_files(self) -> None:
        """chmod the database and its -wal/-shm to 0600, by path, once each exists."""
        for suffix in ("", "-wal", "-shm"):
            if suffix in self._secured:
                continue
            target = Path(f"{self.path}{suffix}")
            try:
                os.chmod(target, FILE_MODE)
            except FileNotFoundError:
                continue
            self._secured.add(suffix)

    def close(self) -> None:
        """Checkpoint (PASSIVE) and close the connection; closing twice does nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self.checkpoint()
                self._secure_files()
            finally:
                self.conn.close()

    def __enter__(self) -> WriteCore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
