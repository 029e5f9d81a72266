"""Connections kept per thread: reused while the file is the same, never stale, never
kept after an error, and let go of when the file is replaced."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest

from dashboard.errors import StoreUnavailableError
from dashboard.store.kept import KeptConnections
from tests.support.open_files import open_files


def _db(path: Path, rows: int) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (x INTEGER)")
    conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(rows)])
    conn.commit()
    conn.close()
    return path


def _count(kept: KeptConnections) -> tuple[int, sqlite3.Connection]:
    with kept.connection() as conn:
        return conn.execute("SELECT count(*) FROM t").fetchone()[0], conn


def _in_thread(kept: KeptConnections) -> sqlite3.Connection:
    """The connection another thread used (and left idle, kept)."""
    seen: list[sqlite3.Connection] = []
    worker = threading.Thread(target=lambda: seen.append(_count(kept)[1]))
    worker.start()
    worker.join()
    return seen[0]


def test_a_thread_reuses_its_connection_and_sees_every_write(tmp_path: Path) -> None:
    db = _db(tmp_path / "a.db", 3)
    made: list[sqlite3.Connection] = []
    kept = KeptConnections(db, made.append)
    first, conn1 = _count(kept)
    with sqlite3.connect(db) as writer:  # another connection writes between two reads
        writer.execute("INSERT INTO t VALUES (99)")
    second, conn2 = _count(kept)
    assert (first, second) == (3, 4)
    assert conn1 is conn2 and len(made) == 1  # set up once
    kept.close()


def test_each_thread_has_its_own_and_a_nested_use_gets_a_second(tmp_path: Path) -> None:
    db = _db(tmp_path / "a.db", 1)
    kept = KeptConnections(db, lambda conn: None)
    assert _in_thread(kept) is not _count(kept)[1]
    with kept.connection() as outer, kept.connection() as inner:
        assert outer is not inner
    assert _count(kept)[1] in (outer, inner)
    kept.close()


def test_an_error_or_an_open_transaction_is_never_kept(tmp_path: Path) -> None:
    db = _db(tmp_path / "a.db", 1)
    kept = KeptConnections(db, lambda conn: None)
    with pytest.raises(sqlite3.OperationalError), kept.connection() as failed:
        failed.execute("SELECT nothing FROM nowhere")
    with pytest.raises(sqlite3.ProgrammingError):
        failed.execute("SELECT 1")  # closed
    with kept.connection() as left_open:
        left_open.execute("BEGIN")
        left_open.execute("SELECT count(*) FROM t").fetchone()
    with pytest.raises(sqlite3.ProgrammingError):
        left_open.execute("SELECT 1")
    kept.close()


def test_a_replaced_file_is_opened_afresh_and_the_old_one_let_go(tmp_path: Path) -> None:
    db = _db(tmp_path / "a.db", 2)
    kept = KeptConnections(db, lambda conn: None)
    other = _in_thread(kept)  # an idle connection of another thread, to the old file
    assert _count(kept)[0] == 2
    new = _db(tmp_path / "b.db", 5)
    os.replace(new, db)  # renamed over: a new inode at the same path
    for suffix in ("-wal", "-shm"):
        Path(f"{new}{suffix}").unlink(missing_ok=True)
    assert _count(kept)[0] == 5
    with pytest.raises(sqlite3.ProgrammingError):
        other.execute("SELECT 1")  # the other thread's old connection was closed
    held = [p for p in open_files() if p.startswith(str(db)) and p.endswith("(deleted)")]
    assert not held, held  # nothing holds the replaced file open
    kept.close()


def test_a_file_emptied_in_place_is_not_read_through_a_kept_connection(tmp_path: Path) -> None:
    db = _db(tmp_path / "a.db", 2)
    kept = KeptConnections(db, lambda conn: None)
    assert _count(kept)[0] == 2
    Path(f"{db}-wal").write_bytes(b"")  # a -wal beside it, as a writer in WAL mode has
    os.truncate(db, 0)
    with pytest.raises(StoreUnavailableError) as caught:
        _count(kept)
    assert caught.value.reason == "empty"
    kept.close()


def test_after_close_nothing_is_kept(tmp_path: Path) -> None:
    db = _db(tmp_path / "a.db", 1)
    kept = KeptConnections(db, lambda conn: None)
    with kept.connection() as conn:
        kept.close()
    with pytest.raises(sqlite3.ProgrammingError):
        conn.execute("SELECT 1")
