"""``recall serve`` as a real process: what it prepares before the first request."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

from dashboard.repository.readonly import readonly_uri
from tests import hermes_shapes as shapes
from tests.browser_support import running_server


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
