"""The file watch that wakes the syncer: real inotify on a real folder."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path

from dashboard.archive.source_events import SourceEvents
from dashboard.store.readonly import open_readonly
from tests.support import hermes_shapes as shapes
from tests.support.waiting import wait_for

QUIET_S = 0.3  # long after any event of what was done would have come


def test_a_write_to_the_source_wakes_and_nothing_else_does(tmp_path: Path) -> None:
    db = shapes.build_current_views(tmp_path / "home" / "state.db")
    wake = threading.Event()
    events = SourceEvents([db], wake)
    assert events.start() is None
    try:
        # Other files of the folder, the -shm, and a read of the source: no wake.
        (db.parent / "config.yaml").write_text("model: x\n")
        Path(f"{db}-shm").touch()
        conn = open_readonly(db)
        conn.execute("SELECT count(*) FROM messages").fetchone()
        conn.close()
        time.sleep(QUIET_S)
        assert not wake.is_set() and events.events == 0

        with closing(sqlite3.connect(db, isolation_level=None)) as writer:
            writer.execute(
                "INSERT INTO messages(session_id, role, content, timestamp) "
                f"VALUES ('{shapes.S_ROOT}', 'user', 'hello', 1)"
            )
            wait_for(wake.is_set, timeout=5)
        assert events.events >= 1
    finally:
        events.stop()


def test_a_folder_that_cannot_be_watched_is_said(tmp_path: Path) -> None:
    events = SourceEvents([tmp_path / "gone" / "state.db"], threading.Event())
    why = events.start()
    assert why is not None and why.startswith(f"cannot watch {tmp_path / 'gone'}")
    events.stop()  # nothing runs: stopping is harmless
    assert [t for t in threading.enumerate() if "Observer" in type(t).__name__] == []
