"""The syncer through the source's faults, inside a real ``recall serve`` with a real
Hermes-style writer process (tests/support/hermes_writer.py), on a WAL home and on a
rollback-journal (v31) home: a backup restored in place or by rename, a file truncated
while Hermes writes. Nothing of the source stays open between passes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support import hermes_shapes as shapes
from tests.support.browser_support import Server, running_server
from tests.support.commands import ROOT
from tests.support.hermes_v31 import build_v31_home
from tests.support.hermes_writer import turn_word
from tests.support.open_files import held_source_files

DEADLINE_S = 15.0  # a bound for what should take a second or two, never a speed asserted


def _wal_home(root: Path) -> Path:
    return shapes.build_current_views(root / "state.db")


def _rollback_home(root: Path) -> Path:
    build_v31_home(root)  # journal mode delete, state_meta's store_instance_id & co.
    return root / "state.db"


HOMES = {"wal": _wal_home, "rollback": _rollback_home}


class Client:
    """The server's HTTP API, remembering every 5xx it ever answered."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.http = httpx.Client(base_url=server.url, timeout=30)
        self.errors: list[str] = []

    def get(self, path: str, **params: str) -> httpx.Response:
        response = self.http.get(path, params=params)
        if response.status_code >= 500:
            self.errors.append(f"{path} {params}: {response.status_code} {response.text[:300]}")
        return response

    def found(self, word: str) -> bool:
        return bool(self.get("/api/search", q=word).json().get("results"))

    def health(self) -> dict:
        return self.get("/healthz").json()

    def until(self, check: Callable[[], object], what: str) -> float:
        """Poll ``check`` until truthy; the seconds it took (reported, never asserted)."""
        began = time.monotonic()
        while time.monotonic() - began < DEADLINE_S:
            if check():
                return time.monotonic() - began
            time.sleep(0.05)
        raise AssertionError(f"{what}: not within {DEADLINE_S}s; health: {self.health()}")


@contextmanager
def serving(tmp_path: Path, home: Path) -> Iterator[Client]:
    args = ["--home", str(home), "--data-dir", str(tmp_path / "data")]
    with running_server(args, tmp_path) as server:
        client = Client(server)
        try:
            yield client
        finally:
            client.http.close()
    log = server.log.read_text()
    assert "Traceback" not in log, log[-3000:]
    assert client.errors == []


def write(db: Path, session: str, word: str, turns: int, pause: float = 0.02) -> dict:
    """Run the writer to its end; what it wrote and every error it met."""
    with writer(db, session, word, turns, pause) as process:
        return json.loads(process.communicate(timeout=120)[0])


def writer(db: Path, session: str, word: str, turns: int, pause: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.hermes_writer"]
        + [str(db), session, word, str(turns), str(pause)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def assert_nothing_held_between_passes(client: Client, db: Path) -> None:
    """Between passes the server holds none of the source's files: ten looks at its open
    files, each between two answers of /healthz that show no pass running or finished
    in between (a look that overlapped a pass does not count)."""
    began = time.monotonic()
    clean = 0
    while clean < 10:
        assert time.monotonic() - began < DEADLINE_S, "the syncer never stood still"
        before = client.health()["sync"]
        held = held_source_files(client.server.process.pid, db)
        after = client.health()["sync"]
        if before["running"] or after["running"] or before["last_sync_at"] != after["last_sync_at"]:
            continue
        assert held == []
        clean += 1
        time.sleep(0.05)


def _restore_in_place(backup: Path, db: Path) -> None:
    shapes.restore_copy(backup, db)  # Hermes stopped, -wal/-shm removed, cp backup state.db


def _restore_by_rename(backup: Path, db: Path) -> None:
    for suffix in ("-wal", "-shm", "-journal"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    copy = db.with_name("state.db.restoring")
    copy.write_bytes(backup.read_bytes())
    os.replace(copy, db)


@pytest.mark.parametrize(
    ("shape", "restore", "why"),
    [
        ("wal", _restore_in_place, "older copy"),
        ("rollback", _restore_in_place, "older copy"),
        ("wal", _restore_by_rename, "another file"),
    ],
    ids=["wal-in-place", "rollback-in-place", "wal-by-rename"],
)
def test_a_restored_backup_is_followed_and_said(
    tmp_path: Path, shape: str, restore: Callable[[Path, Path], None], why: str
) -> None:
    db = HOMES[shape](tmp_path / "home")
    inode = db.stat().st_ino
    with serving(tmp_path, db.parent) as client:
        assert client.health()["sync"]["watch"] == "events"  # file events, polls as fallback
        assert write(db, "w-kept", "keptword", 3)["errors"] == []
        client.until(lambda: client.found(turn_word("keptword", 2)), "first rows archived")
        backup = shapes.backup_copy(db, tmp_path / "backup.db")
        # Rows the backup will not have: Recall archives them, then Hermes loses them.
        assert write(db, "w-lost", "lostword", 5)["errors"] == []
        client.until(lambda: client.found(turn_word("lostword", 4)), "rows before the restore")
        assert_nothing_held_between_passes(client, db)

        restore(backup, db)  # Hermes is stopped meanwhile
        assert (db.stat().st_ino == inode) == (restore is _restore_in_place)
        with writer(db, "w-after", "afterword", 20, 0.05) as resumed:  # Hermes starts again
            took = client.until(lambda: client.found(turn_word("afterword", 0)), "a new row")
            print(f"{shape} {restore.__name__}: first new row searchable {took:.2f}s after")
            out, _ = resumed.communicate(timeout=120)
        result = json.loads(out)
        assert result["errors"] == []  # never "disk I/O error" while Recall runs
        assert result["written"] == list(range(20))
        client.until(lambda: client.found(turn_word("afterword", 19)), "the writer's last row")

        sync = client.health()["sync"]
        assert sync["replaced_at"] and why in sync["replaced_why"], sync
        # How many sessions the replacement's pass re-read is 0 when a file event ran a
        # pass between the -wal's removal and the copy's arrival: that pass, on the old
        # file without its log, already marked the lost rows gone (a race of the
        # restore's steps, not of Recall's; both orders end as asserted below). A
        # rollback file has no log to lose first.
        assert sync["replaced_sessions"] >= (1 if shape == "rollback" else 0)
        assert sync["reason"] is None
        assert client.health()["status"] == "ok"
        page = client.get("/").text
        assert "state.db was replaced" in page and why in page
        overview = client.get("/overview").text
        assert "Replaced file" in overview and why in overview
        # What the backup lacks stays in the archive (kept, marked gone from Hermes).
        assert client.found(turn_word("lostword", 0)) and client.found(turn_word("keptword", 0))
        assert_nothing_held_between_passes(client, db)


@pytest.mark.parametrize("shape", ["wal", "rollback"])
def test_a_file_truncated_while_hermes_writes_is_reported_within_seconds(
    tmp_path: Path, shape: str
) -> None:
    db = HOMES[shape](tmp_path / "home")
    wal = db.with_name(db.name + "-wal")
    with serving(tmp_path, db.parent) as client:
        with writer(db, "w-busy", "busyword", 2000, 0.01) as hermes:
            try:
                client.until(lambda: client.found(turn_word("busyword", 0)), "the writer's rows")
                had_wal = wal.exists()
                with db.open("r+b") as handle:  # ": > state.db" while Hermes writes
                    handle.truncate(0)
                took = client.until(
                    lambda: client.health()["status"] == "degraded", "the truncation reported"
                )
                print(f"{shape}: truncation reported {took:.2f}s after it")
                health = client.health()
                assert health["source_ok"] is False and health["sync"]["reason"] in (
                    "empty",
                    "corrupt",
                )
                assert str(db) in health["problem"]
                assert "cannot be read right now" in client.get("/").text
                # Recall never deletes the -wal beside the emptied file (SQLite would, opening it).
                assert wal.exists() == had_wal
                assert client.found(turn_word("busyword", 0))  # the archive still answers
            finally:
                hermes.kill()
