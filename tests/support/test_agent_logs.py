"""Checks that ``agent_logs`` writes and rotates agent.log as Python's logging does for Hermes."""

from __future__ import annotations

import logging
import logging.handlers
import os
from pathlib import Path

from tests.support import agent_logs as al

AT = 1_790_000_000.0


class _SessionTag(logging.Filter):
    """What hermes_logging adds to every record: `` [<session id>]`` or nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.session: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        record.session_tag = f" [{self.session}]" if self.session else ""
        return True


def _entries() -> list[al.Call | al.Other]:
    calls = al.turn_calls("20260920_101500_ab12cd", AT) + [
        al.unpriced_call(None, AT + 20.5),
        al.Call(AT + 30.25, "s2", 1, al.SMALL_MODEL, prompt=300, output=20),
    ]
    return al.with_noise(calls)


def _hermes_handler(path: Path, max_bytes: int = 0) -> logging.Handler:
    handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=max_bytes, backupCount=al.BACKUPS, encoding="utf-8"
    )
    handler.setFormatter(logging.Formatter(al.FORMAT))
    return handler


def _emit(handler: logging.Handler, tag: _SessionTag, entry: al.Call | al.Other) -> None:
    if isinstance(entry, al.Call):
        level, name, text = logging.INFO, "run_agent", entry.message()
    else:
        level, name, text = entry.level, entry.name, entry.text
    record = logging.LogRecord(name, level, "run_agent.py", 1, text, None, None)
    record.created = entry.at
    record.msecs = int((entry.at - int(entry.at)) * 1000) + 0.0
    tag.session = entry.session
    tag.filter(record)
    handler.handle(record)


def test_lines_are_byte_for_byte_what_logging_writes(tmp_path: Path) -> None:
    theirs = tmp_path / "hermes" / "agent.log"
    theirs.parent.mkdir()
    handler, tag = _hermes_handler(theirs), _SessionTag()
    for entry in _entries():
        _emit(handler, tag, entry)
    handler.close()
    mine = al.write_log(tmp_path / "home", _entries())
    assert mine.read_bytes() == theirs.read_bytes()


def test_rotation_renames_as_the_handler_does(tmp_path: Path) -> None:
    theirs = tmp_path / "hermes" / "agent.log"
    theirs.parent.mkdir()
    handler, tag = _hermes_handler(theirs, max_bytes=350), _SessionTag()
    home = tmp_path / "home"
    mine = al.log_path(home)
    for entry in _entries():
        inodes = {p.name: p.stat().st_ino for p in theirs.parent.iterdir()}
        _emit(handler, tag, entry)
        # The handler rolls over before a record that would reach maxBytes: do the same.
        after = {p.name: p.stat().st_ino for p in theirs.parent.iterdir()}
        text = f"{al.line(entry)}\n".encode()
        if mine.exists() and mine.stat().st_size + len(text) >= 350:
            mine_inodes = {p.name: p.stat().st_ino for p in mine.parent.iterdir()}
            al.rotate(home)
            moved = {p.name: p.stat().st_ino for p in mine.parent.iterdir()}
            # agent.log -> .1, .1 -> .2 …: the same file (inode) under the next name.
            for name, ino in mine_inodes.items():
                nxt = "agent.log.1" if name == "agent.log" else f"agent.log.{int(name[10:]) + 1}"
                if nxt in moved:
                    assert moved[nxt] == ino
            assert inodes.get("agent.log") == after.get("agent.log.1")
        al.write_log(home, [entry])
    handler.close()
    names = sorted(os.listdir(theirs.parent))
    assert sorted(os.listdir(mine.parent)) == names
    assert len(names) == al.BACKUPS + 1
    for name in names:
        assert (mine.parent / name).read_bytes() == (theirs.parent / name).read_bytes()
