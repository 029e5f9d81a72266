"""The app's reader: pages that need no database never wait on state.db's lock, and what
a sync adds to the archive reaches every cached answer."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import threading
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support import hermes_shapes as shapes
from tests.support.app import make_app
from tests.support.hermes_writer import LOCKED_MID_WRITE

NO_DATABASE = ["/memory", "/memory/MEMORY.md", "/api/memory/user", "/static/app.css", "/nope"]


def test_pages_without_database_work_answer_while_an_exclusive_lock_is_held(
    tmp_path: Path,
) -> None:
    """Hermes in DELETE-journal mode holds EXCLUSIVE while it writes; a reader waits 5 s.

    The pages read Recall's archive, so none of them waits: /healthz answers from the
    archive and says the source is locked (a sync pass waits at most
    ``syncer.SOURCE_BUSY_S`` for the source's lock).
    """
    db = shapes.build_delete_journal(tmp_path / "home" / "state.db")
    app = make_app(db.parent, tmp_path / "data")
    done: list[str] = []
    statuses: dict[str, int] = {}
    bodies: dict[str, object] = {}

    def get(path: str) -> None:
        with app.test_client().get(path) as response:  # a client per thread, as browsers are
            statuses[path] = response.status_code
            bodies[path] = response.get_json(silent=True)
        done.append(path)

    with subprocess.Popen(
        [sys.executable, "-c", LOCKED_MID_WRITE, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as locker:
        try:
            assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
            threads = [
                threading.Thread(target=get, args=(p,)) for p in [*NO_DATABASE * 3, "/healthz"]
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=120)
            assert len(done) == len(threads)
        finally:
            assert locker.stdin is not None
            locker.stdin.write("go\n")
            locker.stdin.close()
            locker.wait(timeout=30)
    assert statuses["/healthz"] == 200
    health = bodies["/healthz"]
    assert isinstance(health, dict) and health["source_ok"] is False
    assert health["sync"]["reason"] == "locked"
    assert {statuses[p] for p in NO_DATABASE} == {200, 404}
    assert statuses["/nope"] == 404


def test_the_demo_banner_is_learned_once_the_lock_is_gone(tmp_path: Path) -> None:
    from dashboard.demo.build import build_demo_home

    report = build_demo_home(tmp_path / "demo", sessions=4, messages=40, anchor_day="2026-11-30")
    client = make_app(report.home, tmp_path / "data").test_client()
    assert b"Demo data." in client.get("/memory").data
    assert re.search(rb"Demo data\.", client.get("/nope").data)


YEAR = {"from": "2026-01-01", "to": "2027-01-01"}


def add_child_with_usage(db: Path, parent: str, child: str, cost: float) -> None:
    """Hermes compresses ``parent`` into ``child`` and records the child's spend."""
    at = datetime(2026, 7, 20, 12, tzinfo=UTC).timestamp()
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO sessions(id, source, started_at, model, parent_session_id, "
            "title) VALUES (?, 'cli', ?, 'gpt-5', ?, 'the continuation')",
            (child, at, parent),
        )
        conn.execute(
            "INSERT INTO messages(session_id, role, content, timestamp) "
            "VALUES (?, 'assistant', 'the wombatcache is warm', ?)",
            (child, at + 5),
        )
        conn.execute(
            "INSERT INTO session_model_usage(session_id, model, billing_provider, "
            "task, api_call_count, input_tokens, output_tokens, estimated_cost_usd, "
            "actual_cost_usd, cost_status, first_seen, last_seen) VALUES "
            "(?, 'gpt-5', 'openai', '', 1, 10, 10, ?, ?, 'actual', ?, ?)",
            (child, cost, cost, at + 5, at + 5),
        )
        conn.execute("COMMIT")


@pytest.mark.parametrize("rollup", ["on", "off"])
def test_a_synced_row_reaches_search_lineage_and_spend(tmp_path: Path, rollup: str) -> None:
    home = tmp_path / "home"
    db = shapes.build_current_views(home / "state.db")
    app = make_app(
        home,
        tmp_path / "data",
        COST_ROLLUP=rollup,
        TIMEZONE="UTC",
        COSTS_NOW=datetime(2026, 7, 25, tzinfo=UTC).timestamp(),
    )
    client = app.test_client()
    assert client.get("/api/search?q=wombatcache").json["results"] == []
    before = client.get("/api/costs", query_string=YEAR).json["totals"]["effective_usd"]
    family = client.get(f"/api/chains/{shapes.S_ROOT}").json
    if rollup == "on":
        app.extensions["recall.cost_rollup"].wait_until_built(timeout=60)
        assert client.get("/api/costs", query_string=YEAR).json["totals"]["effective_usd"] == (
            before
        )
    last = family["line"][-1]
    add_child_with_usage(db, last, "child-new", 12.5)
    found = client.get("/api/search?q=wombatcache").json["results"]
    assert [r["session_id"] for r in found] == ["child-new"]
    chain = client.get(f"/api/chains/{shapes.S_ROOT}").json  # the lineage saw the new session
    assert "child-new" in [n["session_id"] for n in chain["nodes"]]
    after = client.get("/api/costs", query_string=YEAR).json["totals"]["effective_usd"]
    assert after == pytest.approx((before or 0) + 12.5)


def test_the_archive_lives_in_the_data_directory_unless_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shapes.build_current_views(home / "state.db")
    app = make_app(home, tmp_path / "data")
    assert app.extensions["recall.reader"].path == tmp_path / "data" / "archive.db"
    assert (tmp_path / "data" / "archive.db").is_file()  # the first sync filled it
    monkeypatch.setenv("RECALL_ARCHIVE", str(tmp_path / "named.db"))
    named = make_app(home, tmp_path / "data2")
    assert named.extensions["recall.reader"].path == tmp_path / "named.db"
