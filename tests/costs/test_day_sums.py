"""The raw sums, with their one-day rows summed by SQLite, answer what the rollup answers
(which reads every row one by one) and what a plain SQL sum over the rows gives."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from dashboard.costs.costly import raw_session_sums, session_sums
from dashboard.costs.day_sums import day_sums
from dashboard.costs.days import DayClock
from dashboard.costs.rollup import CostRollup
from dashboard.costs.rules import money
from dashboard.costs.spend import DIMENSIONS, PERIODS, Spend, plan, spend
from dashboard.costs.usage import KEY_SQL, read_rows
from dashboard.store.readonly import open_readonly
from dashboard.store.recalldb import RecallData
from dashboard.store.records import Usage
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as shapes
from tests.support.cost_homes import TZ, archived, assert_same

ZONE = ZoneInfo(TZ)
WHOLE = {"start": date(2026, 1, 1), "end": date(2027, 1, 1)}  # every fixture row


def raw_and_rolled(db: Path, rollup: CostRollup, **options: object) -> tuple[Spend, Spend]:
    conn = open_readonly(db)
    try:
        raw, rolled = spend(conn, **options), rollup.spend(conn, **options)
    finally:
        conn.close()
    assert rolled is not None
    return raw, rolled


def plain_sums(db: Path) -> tuple[int, int, int]:
    """Input tokens, calls (at least one a row) and sessions, by a plain SQL sum."""
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return conn.execute(
            "SELECT sum(input_tokens), sum(max(api_call_count, 1)), count(DISTINCT session_id) "
            "FROM session_model_usage"
        ).fetchone()


@pytest.mark.parametrize("shape", sorted(shapes.COST_SHAPES))
def test_cost_shapes_every_period_and_dimension(
    tmp_path: Path, data: RecallData, shape: str
) -> None:
    # The cost facts: NULL-status auxiliary rows, a partly billed row, a week of calls,
    # replies without token counts; the sessions-only form's rows derived from sessions.
    db = archived(shapes.COST_SHAPES[shape], tmp_path)
    rollup = CostRollup(data.core, str(db))
    tokens, calls, sessions = plain_sums(db)
    for period in PERIODS:
        for by in DIMENSIONS:
            raw, rolled = raw_and_rolled(db, rollup, period=period, by=by, timezone=TZ, **WHOLE)
            assert_same(raw, rolled)
            assert raw.totals.tokens["input"] == tokens, (period, by)
            assert raw.totals.api_calls == calls, (period, by)
            assert raw.totals.sessions == sessions, (period, by)
            assert sum(c.tokens["input"] for c in raw.rows) == tokens, (period, by)


def test_cost_facts_are_summed_by_sqlite_and_the_week_read_row_by_row(tmp_path: Path) -> None:
    # Not vacuous: the statement sums most rows and leaves the row spread over a week.
    db = archived(shapes.build_cost_facts, tmp_path)
    found = ask_day_sums(db, period="month", by="model", timezone=TZ, **WHOLE)
    assert found.groups and found.others
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        left = {
            r[0]
            for r in conn.execute(
                "SELECT session_id FROM session_model_usage WHERE rowid IN "
                f"({','.join(map(str, found.others))})"
            )
        }
    assert shapes.S_WEEK in left


def ask_day_sums(db: Path, **options: object):
    question = plan(**options)  # type: ignore[arg-type]
    conn = open_readonly(db)
    try:
        return day_sums(
            conn,
            DayClock(question.zone),
            key=KEY_SQL[question.by],
            days=question.days,
            uniform=None,
            edges=question.edges,
            where="1",
            params=[],
        )
    finally:
        conn.close()


def at(day: date, hour: int, minute: int = 0, second: float = 0.0) -> float:
    whole = datetime(day.year, day.month, day.day, hour, minute, tzinfo=ZONE).timestamp()
    return whole + second


# (model, first call, last call): where each row's calls were, in Stockholm.
EDGE_ROWS = (
    ("noon", at(date(2026, 11, 10), 12), at(date(2026, 11, 10), 13)),
    ("before-midnight", at(date(2026, 11, 11), 23, 59, 59.6), at(date(2026, 11, 11), 23, 59, 59.6)),
    ("at-midnight", at(date(2026, 11, 12), 0), at(date(2026, 11, 12), 0)),
    ("dst-day", at(date(2026, 10, 25), 12), at(date(2026, 10, 25), 12)),  # clocks go back
    ("two-days", at(date(2026, 11, 13), 22), at(date(2026, 11, 14), 2)),
    ("week-start", at(date(2026, 11, 16), 0, 0, 1.5), at(date(2026, 11, 16), 9)),
)


def edge_home(path: Path) -> Path:
    """One session per row of :data:`EDGE_ROWS`, each call recorded at its times."""
    with SessionStore(path) as store:
        for n, (model, first, last) in enumerate(EDGE_ROWS):
            sid = store.create_session("cli", started_at=first - 60)
            for when in (first, last):
                call = Usage(
                    model=model,
                    billing_provider="openrouter",
                    input_tokens=100 + n,
                    estimated_cost_usd=0.01 * (n + 1),
                    cost_status="estimated",
                    at=when,
                )
                store.record_usage(sid, call)
    return path


@pytest.mark.parametrize("period", PERIODS)
def test_rows_near_midnight_and_offset_changes_are_read_one_by_one(
    tmp_path: Path, data: RecallData, period: str
) -> None:
    db = edge_home(tmp_path / "state.db")
    ask = {"period": period, "timezone": TZ, "start": date(2026, 10, 1), "end": date(2026, 12, 1)}
    found = ask_day_sums(db, by="model", **ask)
    with closing(sqlite3.connect(db)) as conn:
        model = dict(conn.execute("SELECT rowid, model FROM session_model_usage"))
    left = {model[r] for r in found.others}
    assert left == {"before-midnight", "at-midnight", "dst-day", "two-days"}
    rollup = CostRollup(data.core, str(db))
    for by in DIMENSIONS:
        raw, rolled = raw_and_rolled(db, rollup, by=by, **ask)
        assert_same(raw, rolled)
        assert raw.totals.sessions == len(EDGE_ROWS)
    by_model = raw_and_rolled(db, rollup, by="model", **ask)[0]
    days = {c.key: c.period for c in by_model.rows if period == "day"}
    if days:  # each row on the day its calls were (the one over two days on both)
        assert days["before-midnight"] == "2026-11-11"
        assert days["at-midnight"] == "2026-11-12"
        assert days["week-start"] == "2026-11-16"


@pytest.mark.parametrize("shape", sorted(shapes.COST_SHAPES))
def test_each_sessions_sums_equal_its_rows_read_one_by_one(tmp_path: Path, shape: str) -> None:
    # The costliest sessions before the rollup: every figure as the rows read one by one.
    db = archived(shapes.COST_SHAPES[shape], tmp_path)
    conn = open_readonly(db)
    try:
        for period in PERIODS:
            question = plan(period=period, timezone=TZ, **WHOLE)
            fast = raw_session_sums(conn, question)
            slow = session_sums(read_rows(conn, DayClock(question.zone)).values(), question)
            assert sorted(fast) == sorted(slow) and fast, period
            for sid, vector in slow.items():
                assert [money(v) for v in fast[sid]] == [money(v) for v in vector], (period, sid)
    finally:
        conn.close()


@pytest.mark.parametrize(
    "odd",
    [
        "input_tokens = 2.7",
        "api_call_count = 1.5",
        "output_tokens = 'many'",
        "estimated_cost_usd = x'00'",
        "actual_cost_usd = 'billed'",
    ],
)
def test_a_figure_that_is_not_a_plain_number_is_read_one_by_one(
    tmp_path: Path, data: RecallData, odd: str
) -> None:
    # SQLite would sum such a figure its own way (2.7 tokens, a blob as 0.0); the rules
    # read it otherwise (2 tokens, no estimate). Its group fails the check, and the
    # statement runs again checking every row.
    db = edge_home(tmp_path / "state.db")
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(f"UPDATE session_model_usage SET {odd} WHERE model = 'noon'")
    ask = {"timezone": TZ, "start": date(2026, 10, 1), "end": date(2026, 12, 1)}
    found = ask_day_sums(db, period="month", by="model", **ask)
    with closing(sqlite3.connect(db)) as conn:
        model = dict(conn.execute("SELECT rowid, model FROM session_model_usage"))
    assert "noon" in {model[r] for r in found.others}
    assert "week-start" not in {model[r] for r in found.others}  # the others still summed
    rollup = CostRollup(data.core, str(db))
    for period in PERIODS:
        for by in DIMENSIONS:
            assert_same(*raw_and_rolled(db, rollup, period=period, by=by, **ask))
