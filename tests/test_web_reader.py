"""The app's reader: pages that need no database never wait on state.db's lock."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

from tests import hermes_shapes as shapes
from tests.conftest import make_app

LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()  # hold the lock until the test says so
"""

NO_DATABASE = ["/memory", "/memory/MEMORY.md", "/api/memory/user", "/static/app.css", "/nope"]


def test_pages_without_database_work_answer_while_an_exclusive_lock_is_held(
    tmp_path: Path,
) -> None:
    """Hermes in DELETE-journal mode holds EXCLUSIVE while it writes; a reader waits 5 s."""
    db = shapes.build_delete_journal(tmp_path / "home" / "state.db")
    app = make_app(db.parent, tmp_path / "data")
    done: list[str] = []
    statuses: dict[str, int] = {}

    def get(path: str) -> None:
        with app.test_client().get(path) as response:  # a client per thread, as browsers are
            statuses[path] = response.status_code
        done.append(path)

    with subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    ) as locker:  # fmt: skip
        try:
            assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
            # /healthz reads the database: it waits out the busy timeout, then says "locked".
            waiting = threading.Thread(target=get, args=("/healthz",))
            waiting.start()
            free = [threading.Thread(target=get, args=(p,)) for p in NO_DATABASE * 3]
            for thread in free:
                thread.start()
            for thread in free:
                thread.join(timeout=120)
            # Every page without database work answered before the one that waits did.
            assert "/healthz" not in done and len(done) == len(free)
            assert waiting.is_alive()
            waiting.join(timeout=120)  # the lock outlasts its busy timeout
        finally:
            assert locker.stdin is not None
            locker.stdin.write("go\n")
            locker.stdin.close()
            locker.wait(timeout=30)
    assert statuses["/healthz"] == 503
    assert {statuses[p] for p in NO_DATABASE} == {200, 404}
    assert statuses["/nope"] == 404


def test_the_demo_banner_is_learned_once_the_lock_is_gone(tmp_path: Path) -> None:
    from dashboard.demo.build import build_demo_home

    report = build_demo_home(tmp_path / "demo", sessions=4, messages=40, anchor_day="2026-11-30")
    client = make_app(report.home, tmp_path / "data").test_client()
    assert b"Demo data." in client.get("/memory").data
    assert re.search(rb"Demo data\.", client.get("/nope").data)
