"""``recall serve`` when its own data folder fails: deleted, read-only, on a full disk.

Real faults, a real server, a real writer: the folder is made immutable (``chattr +i``:
root too is refused, as on a read-only mount), deleted, or is a tmpfs of a few hundred
KB that the test fills (:func:`on_small_disk`). Every page answers below 500, the
banner and ``/healthz`` name Recall's folder (never Hermes's ``state.db``), and the log
holds no traceback.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support import hermes_shapes as shapes
from tests.support.browser_support import Server, on_small_disk, running_server, seen_by
from tests.support.waiting import wait_for

#: Every screen a person opens, the JSON a script reads and the liveness check.
PAGES = (
    "/",
    f"/?q={shapes.UNIQUE_WORD}",
    f"/sessions/{shapes.S_ROOT}",
    "/chains",
    f"/chains/{shapes.S_ROOT}",
    "/costs",
    "/archive",
    "/memory",
    "/overview",
    "/preview",
    f"/api/search?q={shapes.UNIQUE_WORD}",
    "/healthz",
)
NEW_WORD = "quillwort"  # said after the folder failed: in the archive only once it is fixed


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    return home


def _hermes_writes(home: Path, turns: int = 1, size: int = 1) -> None:
    """Hermes goes on: ``turns`` more turns in the first session, each ``size`` × a line."""
    for n in range(turns):
        line = f"{NEW_WORD} turn {n} " * size
        shapes.append_turn(home / "state.db", shapes.S_ROOT, line, line, time.time())


def _sync(server: Server) -> dict:
    return httpx.get(f"{server.url}/healthz", timeout=30).json()["sync"]


def _every_page_answers(server: Server, folder: Path) -> str:
    """Every page below 500; the banner (on the first page) names ``folder``; its text."""
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for path in PAGES:
            answer = client.get(path)
            assert answer.status_code < 500, f"{path}: {answer.status_code} {answer.text[:500]}"
        page = client.get("/").text
    assert f"data folder {folder}" in page, page[:3000]
    assert "state.db is damaged" not in page and "Hermes's history cannot be read" not in page
    return page


def _found(server: Server, word: str) -> int:
    """Messages holding ``word`` (words only: meaning would also find look-alikes)."""
    asked = {"q": word, "mode": "words"}
    answer = httpx.get(f"{server.url}/api/search", params=asked, timeout=30).json()
    return answer["total_matches"]


def _no_traceback(server: Server) -> None:
    log = server.log.read_text()
    assert "Traceback" not in log, log[-3000:]


def _recall_files(data: Path) -> list[Path]:
    """The folder and Recall's files in it, but not the ``-shm`` files: those are mapped,
    and ``chattr +i`` on a mapped page kills its process with SIGBUS (a read-only mount
    cannot be made under open files at all, so that is the test's doing, not a fault)."""
    return [data, *(p for p in data.iterdir() if not p.name.endswith("-shm"))]


def test_a_folder_made_read_only_while_serving_is_named_and_the_archive_still_read(
    tmp_path: Path,
) -> None:
    home, data = _home(tmp_path), tmp_path / "data"
    with running_server(["--home", str(home), "--data-dir", str(data)], tmp_path) as server:
        with shapes.read_only(*_recall_files(data)):
            _hermes_writes(home)
            state = wait_for(lambda: (s := _sync(server))["folder_reason"] and s)
            assert state["folder_reason"] == "folder-readonly" and state["reason"] is None
            assert str(data) in state["folder_error"] and "--data-dir" in state["folder_error"]
            health = httpx.get(f"{server.url}/healthz", timeout=30).json()
            assert health["folder_ok"] is False and health["source_ok"] is True
            page = _every_page_answers(server, data)
            assert "read-only" in page
            assert _found(server, shapes.UNIQUE_WORD) > 0  # the archive is still read
        # Writable again: the next pass saves what Hermes wrote meanwhile.
        wait_for(lambda: _found(server, NEW_WORD) > 0)
        # The pass commits its rows, then says the folder is fine: a look in between
        # sees both the new word and the old fault.
        wait_for(lambda: _sync(server)["folder_reason"] is None)
        _no_traceback(server)


def test_a_full_disk_while_serving_is_named_and_the_archive_still_read(tmp_path: Path) -> None:
    home, data = _home(tmp_path), tmp_path / "data"
    data.mkdir()
    args = ["--home", str(home), "--data-dir", str(data)]
    with running_server(args, tmp_path, wrapper=on_small_disk(data, 4096)) as server:
        filler = seen_by(server, data) / "filler"
        # Unbuffered: a buffered file's close flushes what a full disk refused once more
        # (and fails), depending on how the disk's free space falls against the blocks.
        with filler.open("wb", buffering=0) as out:  # the disk fills up, as disks do
            try:
                while True:
                    out.write(b"\0" * (64 << 10))
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
        _hermes_writes(home, turns=20, size=200)
        # Hermes's last close checkpoints its -wal under an exclusive lock: a pass then may
        # see the source "locked" a moment; the next pass that reaches the folder clears it.
        state = wait_for(lambda: (s := _sync(server))["folder_reason"] and not s["reason"] and s)
        assert state["folder_reason"] == "folder-full" and state["reason"] is None
        assert str(data) in state["folder_error"]
        page = _every_page_answers(server, data)
        assert "full disk" in page
        assert _found(server, shapes.UNIQUE_WORD) > 0
        filler.unlink()  # space again: the next pass saves what was waiting
        wait_for(lambda: _found(server, NEW_WORD) > 0)
        # The pass commits its rows, then says the folder is fine: a look in between
        # sees both the new word and the old fault.
        wait_for(lambda: _sync(server)["folder_reason"] is None)
        _no_traceback(server)


def test_a_folder_deleted_while_serving_gets_its_archive_back(tmp_path: Path) -> None:
    home, data = _home(tmp_path), tmp_path / "data"
    with running_server(["--home", str(home), "--data-dir", str(data)], tmp_path) as server:
        before = _found(server, shapes.UNIQUE_WORD)
        shutil.rmtree(data)
        _hermes_writes(home)
        wait_for(lambda: _sync(server)["restored_at"])
        assert (data / "archive.db").is_file()
        page = _every_page_answers(server, data)
        assert "was deleted while Recall was running" in page
        assert _found(server, shapes.UNIQUE_WORD) == before  # nothing it held was lost
        wait_for(lambda: _found(server, NEW_WORD) > 0)
        with sqlite3.connect(data / "archive.db") as conn:  # the file on disk holds both
            words = conn.execute(
                "SELECT count(*) FROM messages WHERE content LIKE ? OR content LIKE ?",
                (f"%{shapes.UNIQUE_WORD}%", f"%{NEW_WORD}%"),
            ).fetchone()[0]
        assert words >= 2
        _no_traceback(server)


def test_a_read_only_folder_with_an_archive_is_served_as_it_is(tmp_path: Path) -> None:
    home, data = _home(tmp_path), tmp_path / "data"
    with running_server(["--home", str(home), "--data-dir", str(data)], tmp_path):
        pass  # an archive, then Recall stops (its -wal and -shm folded in and removed)
    _hermes_writes(home)
    with (
        shapes.read_only(*_recall_files(data)),
        running_server(["--home", str(home), "--data-dir", str(data)], tmp_path) as server,
    ):
        assert "read-only" in server.log.read_text()
        state = _sync(server)
        assert state["folder_reason"] == "folder-readonly" and state["imported"]
        _every_page_answers(server, data)
        assert _found(server, shapes.UNIQUE_WORD) > 0 and _found(server, NEW_WORD) == 0
        _no_traceback(server)


def _serve_once(home: Path, data: Path, *wrapper: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "dashboard.cli", "serve", "--port", "0"]
    return subprocess.run(
        [*wrapper, *command, "--home", str(home), "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("fault", ["read-only", "full disk"])
def test_an_empty_folder_that_cannot_be_written_is_one_line_and_exit_2(
    fault: str, tmp_path: Path
) -> None:
    """Nothing archived yet, nowhere to archive: nothing to serve (every page reads the
    archive), so ``recall serve`` says why in one line and exits 2."""
    home, data = _home(tmp_path), tmp_path / "data"
    data.mkdir()
    if fault == "read-only":
        with shapes.read_only(data):
            out = _serve_once(home, data)
    else:  # a disk with less room than one sync needs
        out = _serve_once(home, data, *on_small_disk(data, 64))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert "Recall is serving" not in out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert f"Recall's data folder {data} is" in lines[0] and fault in lines[0]
    assert "--data-dir" in lines[0] and "state.db" not in lines[0]
    assert list(data.iterdir()) == []


def test_a_damaged_hermes_file_is_still_said_as_that(tmp_path: Path) -> None:
    """The other side of the line: Hermes's own file broken, Recall's folder fine."""
    home, data = _home(tmp_path), tmp_path / "data"
    with running_server(["--home", str(home), "--data-dir", str(data)], tmp_path) as server:
        db = home / "state.db"
        for side in (Path(f"{db}-wal"), Path(f"{db}-shm")):
            side.unlink(missing_ok=True)
        damaged = home / "damaged"
        damaged.write_bytes(b"this is not a database" * 500)
        damaged.replace(db)  # another file at the path: the watcher looks at it at once
        state = wait_for(lambda: (s := _sync(server))["reason"] and s)
        assert state["reason"] == "corrupt" and state["folder_reason"] is None
        page = httpx.get(server.url, timeout=30).text
        assert "Hermes's history cannot be read" in page and "data folder" not in page
        _no_traceback(server)
