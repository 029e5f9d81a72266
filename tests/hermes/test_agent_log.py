"""hermes/agent_log: the per-call lines of agent.log, read as Hermes writes them."""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

import pytest

from dashboard.hermes.agent_log import log_files, parse_line, parse_lines
from tests.support import agent_logs as al

AT = datetime(2026, 10, 1, 12, 34, 56).timestamp() + 0.789


def test_a_priced_line_with_cache_read_and_write() -> None:
    call = al.Call(
        AT,
        "20261001_123400_ab12cd",
        3,
        al.MODEL,
        prompt=212_000,
        output=800,
        cache_read=9_000,
        cache_write=500,
        latency=3.2,
    )
    text = al.line(call)
    assert text.startswith("2026-10-01 12:34:56,789 INFO [20261001_123400_ab12cd] run_agent: ")
    got = parse_line(text)
    assert got is not None
    assert (got.session_id, got.number, got.model, got.provider) == (
        "20261001_123400_ab12cd",
        3,
        al.MODEL,
        "openrouter",
    )
    assert (got.prompt, got.output, got.cache_read, got.cache_write) == (212_000, 800, 9_000, 500)
    assert got.at == call.logged_at
    assert got.priced


def test_an_untagged_line_and_one_without_cache() -> None:
    got = parse_line(al.line(al.Call(AT, None, 1, al.SMALL_MODEL, prompt=50, output=5)))
    assert got is not None
    assert got.session_id is None
    assert (got.prompt, got.output, got.cache_read, got.cache_write) == (50, 5, 0, 0)


@pytest.mark.parametrize("unknown", ["?", "unknown"])
def test_a_call_without_usage_is_read_but_not_priced(unknown: str) -> None:
    text = al.line(al.unpriced_call("s1", AT)).replace("in=?", f"in={unknown}")
    text = text.replace("out=?", f"out={unknown}")
    got = parse_line(text)
    assert got is not None
    assert (got.prompt, got.output) == (None, None)
    assert not got.priced


def test_other_lines_are_not_calls() -> None:
    for entry in (
        al.Other(AT, "running: ls -la", session="s1"),
        al.Other(AT, "API call #2 completed", level=logging.DEBUG, name="run_agent"),
        al.Other(AT, "Rate limited; retrying in 2s", level=logging.WARNING, name="run_agent"),
    ):
        assert parse_line(al.line(entry)) is None
    assert parse_line('  File "run_agent.py", line 812') is None
    assert parse_line("") is None


def test_damaged_lines_are_skipped() -> None:
    whole = al.line(al.Call(AT, "s1", 2, al.MODEL, prompt=1_000, output=10))
    cut = whole[: whole.index(" latency=")]  # a file cut mid-line
    interleaved = whole[:40] + al.line(al.Other(AT, "tool ran"))  # two writers, one line
    bad_date = whole.replace("2026-10-01 12:34:56", "2026-13-45 12:34:56")
    bad_count = whole.replace("in=1000", "in=1e3")
    assert parse_line(cut) is None
    assert parse_line(interleaved) is None
    assert parse_line(bad_date) is None
    got = parse_line(bad_count)  # a count that is no number: the call, unpriced
    assert got is not None and got.prompt is None and not got.priced


def test_line_endings_and_order_of_many_lines() -> None:
    calls = al.turn_calls("s1", AT, calls=3)
    lines = [f"{al.line(e)}\r\n" for e in al.with_noise(calls)]
    assert [(c.number, c.at) for c in parse_lines(lines)] == [
        (c.number, c.logged_at) for c in calls
    ]


def test_log_files_oldest_first(tmp_path: Path) -> None:
    assert log_files(tmp_path) == []  # no logs/ folder: none
    al.write_log(tmp_path, [al.Call(AT, "s1", 1, al.MODEL)])
    for _ in range(2):
        al.rotate(tmp_path)
        al.write_log(tmp_path, [al.Call(AT, "s1", 1, al.MODEL)])
    (tmp_path / "logs" / "agent.log.bak").write_text("not a rotation\n")
    names = [p.name for p in log_files(tmp_path)]
    assert names == ["agent.log.2", "agent.log.1", "agent.log"]


def test_rotation_keeps_three_old_files(tmp_path: Path) -> None:
    for n in range(6):
        al.write_log(tmp_path, [al.Call(AT + n, "s1", n + 1, al.MODEL)])
        al.rotate(tmp_path)
    names = [p.name for p in log_files(tmp_path)]
    assert names == ["agent.log.3", "agent.log.2", "agent.log.1", "agent.log"]
    text = [p.read_text().splitlines() for p in log_files(tmp_path)]
    numbers = [c.number for lines in text for c in parse_lines(lines)]
    assert numbers == [4, 5, 6]  # the oldest three went; agent.log is new and empty
