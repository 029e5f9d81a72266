"""The write path: BEGIN IMMEDIATE, jittered retry on lock, checkpoints, file modes."""

from __future__ import annotations

import random
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dashboard.store import writecore
from dashboard.store.writecore import WriteCore, is_lock_error

HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("INSERT INTO t(x) VALUES ('holder')")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


def _table(core: WriteCore) -> None:
    core.write(lambda c: c.execute("CREATE TABLE IF NOT EXISTS t(x TEXT)"))


@contextmanager
def _hold_lock(path: Path, seconds: float) -> Iterator[subprocess.Popen[str]]:
    """Run a real process that takes the write lock and keeps it for ``seconds``."""
    with subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "locked"
        try:
            yield proc
        finally:
            proc.kill()


def test_write_commits_and_returns_result(tmp_path: Path) -> None:
    with WriteCore(tmp_path / "a.db") as core:
        _table(core)
        rowid = core.write(lambda c: c.execute("INSERT INTO t VALUES ('x')").lastrowid)
        assert rowid == 1
        assert core.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    check = sqlite3.connect(tmp_path / "a.db")
    assert check.execute("SELECT x FROM t").fetchall() == [("x",)]
    check.close()


def test_failed_callback_rolls_back_and_is_not_retried(tmp_path: Path) -> None:
    calls = []

    def fails(conn: sqlite3.Connection) -> None:
        calls.append(1)
        conn.execute("INSERT INTO t VALUES ('half')")
        conn.execute("INSERT INTO missing_table VALUES (1)")

    with WriteCore(tmp_path / "a.db") as core:
        _table(core)
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            core.write(fails)
        assert calls == [1]
        assert core.retries == 0
        assert core.conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
        assert not core.conn.in_transaction


def test_lock_held_by_another_process_is_waited_out(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with WriteCore(path) as core:
        _table(core)
        with _hold_lock(path, 1.6) as holder:
            core.write(lambda c: c.execute("INSERT INTO t VALUES ('mine')"))
            assert holder.wait(timeout=30) == 0
        # timeout=1.0 runs out while the holder sleeps, so at least one jittered retry ran.
        assert core.retries >= 1
        rows = sorted(r[0] for r in core.conn.execute("SELECT x FROM t"))
        assert rows == ["holder", "mine"]


def test_gives_up_after_max_tries(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with WriteCore(path, max_tries=2) as core:
        _table(core)
        with _hold_lock(path, 6), pytest.raises(sqlite3.OperationalError) as info:
            core.write(lambda c: c.execute("INSERT INTO t VALUES ('mine')"))
        assert is_lock_error(info.value)
        assert core.retries == 1


def test_retry_sleeps_are_random_within_bounds(tmp_path: Path) -> None:
    waits: list[float] = []
    attempts = []

    def flaky(conn: sqlite3.Connection) -> str:
        attempts.append(1)
        if len(attempts) < 8:
            raise sqlite3.OperationalError("database is locked")
        return "done"

    core = WriteCore(tmp_path / "a.db", rng=random.Random(7), sleep=waits.append)
    try:
        assert core.write(flaky) == "done"
    finally:
        core.close()
    assert len(attempts) == 8 and len(waits) == 7
    assert all(writecore.RETRY_MIN_S <= w <= writecore.RETRY_MAX_S for w in waits)
    assert len(set(waits)) == len(waits)  # jitter, not a fixed backoff


def test_patience_budget_stops_retrying(tmp_path: Path) -> None:
    attempts = []

    def locked(conn: sqlite3.Connection) -> None:
        attempts.append(1)
        raise sqlite3.OperationalError("database is locked")

    core = WriteCore(tmp_path / "a.db", patience_s=0.0, sleep=lambda s: None)
    try:
        with pytest.raises(sqlite3.OperationalError):
            core.write(locked)
    finally:
        core.close()
    assert attempts == [1]


class CountingCore(WriteCore):
    """A real WriteCore that remembers each checkpoint's result."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.checkpoints: list[tuple[int, int, int] | None] = []
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def checkpoint(self) -> tuple[int, int, int] | None:
        result = super().checkpoint()
        self.checkpoints.append(result)
        return result


def test_passive_checkpoint_every_fifty_writes_and_at_close(tmp_path: Path) -> None:
    core = CountingCore(tmp_path / "a.db")
    _table(core)
    for i in range(99):
        core.write(lambda c, i=i: c.execute("INSERT INTO t VALUES (?)", (str(i),)))
    # write 50 and write 100 (the CREATE was write 1) each checkpointed once.
    assert len(core.checkpoints) == 2
    busy, wal_frames, moved = core.checkpoints[-1]
    assert busy == 0 and wal_frames == moved > 0
    core.close()
    assert len(core.checkpoints) == 3


def test_nested_write_joins_the_outer_transaction(tmp_path: Path) -> None:
    with WriteCore(tmp_path / "a.db") as core:
        _table(core)

        def outer(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO t VALUES ('outer')")
            core.write(lambda c: c.execute("INSERT INTO t VALUES ('inner')"))
            raise ValueError("roll both back")

        with pytest.raises(ValueError):
            core.write(outer)
        assert core.conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0


def test_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with WriteCore(path) as core:
        _table(core)
        core.write(lambda c: c.execute("INSERT INTO t VALUES ('x')"))
        for suffix in ("", "-wal", "-shm"):
            mode = stat.S_IMODE(Path(f"{path}{suffix}").stat().st_mode)
            assert mode == 0o600, suffix


def test_is_lock_error() -> None:
    assert is_lock_error(sqlite3.OperationalError("database is locked"))
    assert not is_lock_error(sqlite3.OperationalError("no such table: x"))
    assert not is_lock_error(ValueError("locked"))


def test_an_attached_file_is_read_only_and_detached_after(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
    conn.close()
    before = other.read_bytes()
    core = WriteCore(tmp_path / "main.db")
    try:
        _table(core)
        with core.attached_readonly(other, "src") as name:
            core.write(lambda c: c.execute(f"INSERT INTO t(x) SELECT x FROM {name}.t"))
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                core.write(lambda c: c.execute(f"INSERT INTO {name}.t VALUES (2)"))
        schemas = [r[1] for r in core.conn.execute("PRAGMA database_list")]
        assert schemas == ["main"]
        assert core.conn.execute("SELECT count(*) FROM t").fetchone()[0] == 1
    finally:
        core.close()
    assert other.read_bytes() == before


def test_the_stamp_runs_in_every_transaction_and_rolls_back_with_it(tmp_path: Path) -> None:
    stamps: list[int] = []

    def stamp(conn: sqlite3.Connection) -> None:
        assert conn.in_transaction  # inside the write, before its COMMIT
        conn.execute("INSERT INTO t VALUES ('stamp')")
        stamps.append(1)

    with WriteCore(tmp_path / "a.db", stamp=stamp) as core:
        core.write(lambda c: c.execute("CREATE TABLE t(x TEXT)"))
        core.write(lambda c: c.execute("INSERT INTO t VALUES ('one')"))
        core.write(lambda _: core.write(lambda c: c.execute("INSERT INTO t VALUES ('two')")))
        with pytest.raises(ValueError):
            core.write(lambda c: (c.execute("INSERT INTO t VALUES ('three')"), int("x")))
        rows = [r[0] for r in core.conn.execute("SELECT x FROM t ORDER BY rowid")]
    # Once per transaction (a nested write joins its outer one); none for a failed one.
    assert rows == ["stamp", "one", "stamp", "two", "stamp"] and len(stamps) == 3
