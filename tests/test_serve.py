"""``recall serve`` as a real process: what it prepares before the first request."""

from __future__ import annotations

import errno
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from dashboard.demo.build import build_demo_home
from dashboard.serve import port_taken
from dashboard.store.readonly import readonly_uri
from dashboard.store.recalldb import RecallData
from dashboard.web.security import load_secret_key
from tests.support import hermes_shapes as shapes
from tests.support.archive_checks import FTS, fts_checks, meta
from tests.support.browser_support import running_server
from tests.support.demo_homes import demo_home_copy


def test_serve_builds_the_cost_rollup_before_anyone_asks(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    data = tmp_path / "data"
    env = {"RECALL_TIMEZONE": "Asia/Tokyo"}
    with running_server(["--home", str(home), "--data-dir", str(data)], tmp_path, env):
        deadline = time.monotonic() + 30
        row = None
        while row is None and time.monotonic() < deadline:
            time.sleep(0.1)
            if (data / "recall.db").exists():
                with closing(sqlite3.connect(readonly_uri(data / "recall.db"), uri=True)) as conn:
                    try:
                        row = conn.execute(
                            "SELECT zone, row_count FROM cost_rollup_state"
                        ).fetchone()
                    except sqlite3.OperationalError:  # not migrated yet
                        row = None
    assert row is not None, "no cost rollup was built at start"
    zone, rows = row
    assert zone == "Asia/Tokyo" and rows > 0


def _searchers(url: str, stop: threading.Event, answers: list[int], failures: list[str]) -> None:
    """Search until ``stop``; record every status, and every request that got no answer."""
    queries = ("redis", "docker compose", "deploy*", "postgres OR kubectl", "")
    with httpx.Client(base_url=url, timeout=60) as client:
        turn = 0
        while not stop.is_set():
            path = "/api/search" if turn % 2 else "/"
            try:
                answers.append(client.get(path, params={"q": queries[turn % 5]}).status_code)
            except httpx.TransportError as exc:
                failures.append(f"{path}: {exc!r}")
            turn += 1


def test_state_db_truncated_and_rewritten_in_place_while_three_threads_search(
    tmp_path: Path,
) -> None:
    """``: > state.db`` then ``cp backup state.db``, 20 times: every request answered, server up.

    A memory-mapped reader touching a page past the new end of the file gets SIGBUS,
    which kills the whole process; Recall must never map a file it does not own.
    """
    home = tmp_path / "home"
    build_demo_home(home, sessions=60, anchor_day="2026-11-30", bulk=True)  # the rows only
    db = home / "state.db"
    with closing(sqlite3.connect(db)) as conn:  # the test owns this copy: fold the WAL in
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    backup = db.read_bytes()
    with running_server(
        ["--home", str(home), "--data-dir", str(tmp_path / "data")], tmp_path
    ) as server:
        stop = threading.Event()
        answers: list[int] = []
        failures: list[str] = []
        threads = [
            threading.Thread(target=_searchers, args=(server.url, stop, answers, failures))
            for _ in range(3)
        ]
        for thread in threads:
            thread.start()
        try:
            for _ in range(20):
                with db.open("r+b") as handle:  # ": > state.db": same inode, now empty
                    handle.truncate(0)
                time.sleep(0.05)
                with db.open("r+b") as handle:  # "cp backup state.db": rewritten in place
                    for start in range(0, len(backup), 1 << 16):
                        handle.write(backup[start : start + (1 << 16)])
                        handle.flush()
                time.sleep(0.05)
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=120)
        assert server.process.poll() is None, server.log.read_text()[-3000:]
        assert failures == []
        assert len(answers) >= 20 and all(100 <= code < 600 for code in answers)
        assert httpx.get(f"{server.url}/healthz", timeout=30).status_code == 200


def test_serve_keeps_its_own_data_out_of_the_hermes_home(tmp_path: Path) -> None:
    """No --data-dir: the data directory (XDG), one folder per home; an old one moved there."""
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    legacy = home / "recall"
    key = load_secret_key(legacy)  # what an older Recall left in the home
    old = RecallData(legacy / "recall.db")
    old.add_revision(str(home.resolve()), "USER.md", "Name: Ada", note="saved by an older Recall")
    old.close()
    xdg = tmp_path / "xdg"
    before = sorted(p.name for p in home.iterdir() if p != legacy)
    with running_server(["--home", str(home)], tmp_path, {"XDG_DATA_HOME": str(xdg)}) as server:
        page = httpx.get(f"{server.url}/memory", timeout=30).text
    assert "saved by an older Recall" in page
    assert sorted(p.name for p in home.iterdir()) == before  # the old recall/ is gone
    (folder,) = (xdg / "recall" / "homes").iterdir()
    assert (folder / "secret_key").read_bytes() == key and (folder / "recall.db").exists()
    assert "moved" in server.log.read_text()


def test_a_port_already_in_use_is_one_line_naming_port_and_exit_2(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "dashboard.cli",
                "serve",
                "--home",
                str(home),
                "--data-dir",
                str(tmp_path / "data"),
                "--port",
                str(port),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert "Recall is serving" not in out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{port}" in lines[0] and "--port" in lines[0], out.stderr


def test_a_hermes_file_named_as_the_archive_is_refused_before_serving(tmp_path: Path) -> None:
    home, other = tmp_path / "home", tmp_path / "other"
    shapes.build_current_views(home / "state.db")
    foreign = shapes.build_current_views(other / "state.db")
    before = foreign.read_bytes()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dashboard.cli",
            "serve",
            "--home",
            str(home),
            "--data-dir",
            str(tmp_path / "data"),
            "--port",
            "0",
            "--archive",
            str(foreign),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert "Recall is serving" not in out.stdout
    assert str(foreign) in out.stderr and "not Recall's" in out.stderr and "--archive" in out.stderr
    assert foreign.read_bytes() == before


def test_the_port_suggested_when_one_is_taken_is_a_port() -> None:
    taken = OSError(errno.EADDRINUSE, "Address already in use")
    assert port_taken("127.0.0.1", 8750, taken).endswith("--port 8751")
    assert port_taken("127.0.0.1", 65535, taken).endswith("--port 65534")
    assert port_taken("127.0.0.1", 8750, OSError(errno.EACCES, "Permission denied")) is None


# --- The archive's syncer inside a real `recall serve` -----------------------------------


def _health(url: str) -> dict:
    return httpx.get(f"{url}/healthz", timeout=30).json()


def _wait_importing(url: str, past: int) -> dict:
    """Poll /healthz until the first import is more than ``past`` sessions in."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        sync = _health(url)["sync"]
        if sync["importing"] and sync["sessions_done"] > past:
            return sync
        assert not sync["last_sync_at"], "the import finished before the test could cut it"
        time.sleep(0.05)
    raise AssertionError("the first import never got going")


def _checked(archive: Path, against_content: tuple[str, ...] = FTS) -> None:
    """:func:`archive_checks.fts_checks` on the file, through a connection of its own."""
    with closing(sqlite3.connect(archive)) as conn:
        fts_checks(conn, against_content=against_content)


def _meta(archive: Path, key: str) -> str | None:
    with closing(sqlite3.connect(readonly_uri(archive), uri=True)) as conn:
        return meta(conn, key)


def _counts(db: Path) -> tuple[int, int, int]:
    with closing(sqlite3.connect(readonly_uri(db), uri=True)) as conn:
        return tuple(
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("sessions", "messages", "session_model_usage")
        )  # type: ignore[return-value]


@pytest.fixture(scope="module")
def big_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home whose first import takes several seconds in five-session transactions."""
    home = tmp_path_factory.mktemp("big") / "home"
    demo_home_copy(tmp_path_factory, home, sessions=300, messages=30_000, anchor_day="2026-11-30")
    return home


def test_kill_9_mid_import_leaves_a_sound_archive_and_the_next_start_finishes(
    big_source: Path, tmp_path: Path
) -> None:
    archive = tmp_path / "archive.db"
    args = [
        "--home",
        str(big_source),
        "--data-dir",
        str(tmp_path / "data"),
        "--archive",
        str(archive),
    ]
    env = {"RECALL_SYNC_BATCH": "5"}
    with running_server(args, tmp_path, env, wait_for_import=False) as server:
        _wait_importing(server.url, past=60)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=30)
    cut = _counts(archive)
    assert 0 < cut[0] < 300
    # Each batch of the first import word-indexes its rows in its own transaction; the
    # trigram index is built once at the end. Cut off: the file is sound, the word index
    # agrees with the messages that landed, the trigram index is well formed and marked
    # pending (search scans for parts of words until the next start builds it).
    _checked(archive, against_content=("messages_fts",))
    assert _meta(archive, "fts_trigram_pending") == "1"
    with running_server(args, tmp_path, env) as server:
        sync = _health(server.url)["sync"]
        assert sync["last_sync_at"] and sync["reason"] is None
    assert _counts(archive) == _counts(big_source / "state.db")
    _checked(archive)
    assert _meta(archive, "fts_trigram_pending") is None


def test_sigterm_mid_import_stops_at_a_batch_and_exits_cleanly(
    big_source: Path, tmp_path: Path
) -> None:
    archive = tmp_path / "archive.db"
    args = [
        "--home",
        str(big_source),
        "--data-dir",
        str(tmp_path / "data"),
        "--archive",
        str(archive),
    ]
    with running_server(args, tmp_path, {"RECALL_SYNC_BATCH": "5"}, wait_for_import=False) as s:
        _wait_importing(s.url, past=30)
        s.process.terminate()
        assert s.process.wait(timeout=60) == 0
    assert "Traceback" not in s.log.read_text()
    assert 0 < _counts(archive)[0] < 300
    # Stopped, not killed: sound, the word index agrees with what landed.
    _checked(archive, against_content=("messages_fts",))


def test_an_unknown_profile_is_refused_before_serving_naming_the_profiles(
    tmp_path: Path,
) -> None:
    facts = shapes.build_profiles_home(tmp_path / "hermes")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dashboard.cli",
            "serve",
            "--home",
            str(facts.root),
            "--data-dir",
            str(tmp_path / "data"),
            "--port",
            "0",
            "--profile",
            "nope",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert "Recall is serving" not in out.stdout
    assert "no profile called 'nope'" in out.stderr and "default, empty, legacy" in out.stderr
    assert not (tmp_path / "data").exists()  # refused before anything was prepared


def test_serve_reads_several_homes_or_one_profile_and_says_which(tmp_path: Path) -> None:
    facts = shapes.build_profiles_home(tmp_path / "hermes")
    other = tmp_path / "work"
    shapes.build_current_views(other / "state.db")
    shapes.append_turn(other / "state.db", shapes.S_CRON, "the wombat deploy?", "wombat ok", 1.79e9)
    homes = ["--home", str(facts.root), "--home", str(other)]

    def found(url: str, word: str) -> set[str]:
        # Words only: which profile *says* the word (meaning would find look-alikes).
        asked = {"q": word, "source": "cron", "profile": "all", "mode": "words"}
        body = httpx.get(f"{url}/api/search", params=asked, timeout=30).json()
        return {r["session_id"] for r in body["results"]}

    with running_server([*homes, "--data-dir", str(tmp_path / "data")], tmp_path) as server:
        assert found(server.url, "wombat") == {f"work:{shapes.S_CRON}"}
        assert found(server.url, facts.words["legacy"]) == {f"legacy:{shapes.S_CRON}"}
    assert "profiles served: default, empty, legacy, work" in server.log.read_text()
    with running_server(
        [*homes, "--profile", "work", "--data-dir", str(tmp_path / "data")], tmp_path
    ) as server:
        assert found(server.url, "wombat") == {f"work:{shapes.S_CRON}"}
        assert found(server.url, facts.words["legacy"]) == set()
    assert "profile served: work only" in server.log.read_text()
