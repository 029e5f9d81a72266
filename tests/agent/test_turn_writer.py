"""TurnWriter: the agent's turns written in order, off its thread, never dropped."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from dashboard.agent.turn_writer import TurnWriter
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore


def rows(db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT session_id, role, content FROM messages ORDER BY id").fetchall()


def test_operations_apply_in_queue_order_on_another_thread(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    with SessionStore(db) as store:
        writer = TurnWriter(store)
        writer.create_session("s1", source="telegram", model="m")
        for n in range(20):
            writer.append_turn(
                "s1", [NewMessage("user", f"q{n}"), NewMessage("assistant", f"a{n}")]
            )
        writer.end_session("s1", "user_exit")
        assert writer._thread.ident != threading.get_ident()
        assert writer.flush(timeout=30)
        writer.close()
    got = rows(db)
    assert [c for _, _, c in got] == [x for n in range(20) for x in (f"q{n}", f"a{n}")]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT source, end_reason FROM sessions").fetchone() == (
            "telegram",
            "user_exit",
        )


def test_a_resumed_session_is_not_an_error(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "state.db") as store:
        store.create_session("cli", session_id="s1")
        writer = TurnWriter(store)
        writer.create_session("s1", source="cli")  # exists already: resume
        writer.append_turn("s1", [NewMessage("user", "again")])
        assert writer.flush(timeout=10) and writer.rejected == []
        writer.close()
    assert rows(tmp_path / "state.db") == [("s1", "user", "again")]


def test_refused_operations_are_kept_and_do_not_stall_the_queue(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "state.db") as store:
        writer = TurnWriter(store)
        writer.append_turn("ghost", [NewMessage("user", "for nobody")])
        writer.create_session("s1", source="cli", colour="red")  # not a session field
        writer.create_session("s2", source="cli")
        writer.append_turn("s2", [NewMessage("user", "kept")])
        assert writer.flush(timeout=10)
        writer.close()
    assert [(kind, sid) for kind, sid, _ in writer.rejected] == [
        ("turn", "ghost"),
        ("create", "s1"),
    ]
    assert "does not exist" in writer.rejected[0][2] and "colour" in writer.rejected[1][2]
    assert rows(tmp_path / "state.db") == [("s2", "user", "kept")]


def test_a_locked_file_is_waited_out_not_dropped(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    with SessionStore(db, patience_s=0.2) as store:
        writer = TurnWriter(store)
        writer.create_session("s1", source="cli")
        assert writer.flush(timeout=10)
        blocker = sqlite3.connect(db, timeout=0)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            writer.append_turn("s1", [NewMessage("user", "patient")])
            deadline = time.monotonic() + 30
            while writer.failures < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert writer.failures >= 2 and writer.pending == 1  # retried, still queued
            assert not writer.flush(timeout=0.1)
        finally:
            blocker.rollback()
            blocker.close()
        assert writer.flush(timeout=30)
        writer.close()
    assert rows(db) == [("s1", "user", "patient")]


def test_close_flushes_then_refuses_more_work(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "state.db") as store:
        writer = TurnWriter(store)
        writer.create_session("s1", source="cli")
        for n in range(50):
            writer.append_turn("s1", [NewMessage("user", f"m{n}")])
        assert writer.close()
        assert writer.pending == 0 and writer.close()  # a second close is harmless
        with pytest.raises(RuntimeError):
            writer.append_turn("s1", [NewMessage("user", "late")])
    assert len(rows(tmp_path / "state.db")) == 50
