"""The costliest sessions of a range add up to the period sums, by the same rules and days."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from dashboard.demo.build import build_demo_home
from dashboard.repository.cost_rollup import CostRollup
from dashboard.repository.cost_sessions import check_sort, costly_sessions
from dashboard.repository.costs import plan, range_rows, spend
from dashboard.repository.errors import ValidationError
from dashboard.repository.layout import detect_layout
from dashboard.repository.lineage import load_lineage
from dashboard.repository.readonly import open_readonly
from dashboard.repository.recalldb import RecallData
from tests import hermes_shapes as shapes

RANGE = {"start": date(2026, 6, 1), "end": date(2026, 12, 1), "timezone": "UTC"}


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("cost-sessions") / "demo"
    build_demo_home(home, sessions=60, messages=1500, anchor_day="2026-11-30")
    return home / "state.db"


@pytest.fixture
def data(tmp_path: Path) -> Iterator[RecallData]:
    recall = RecallData(tmp_path / "recall" / "recall.db")
    yield recall
    recall.close()


def every_session(db: Path, rollup: CostRollup | None = None, **options: object):
    """(costly sessions, all of them, from raw rows or the rollup; the spend; the plan)."""
    conn = open_readonly(db)
    try:
        layout = detect_layout(conn, db)
        question = plan(layout, **{**RANGE, **options})
        rows = rollup.range_rows(conn, layout, question) if rollup else None
        if rows is None:
            rows = range_rows(conn, layout, question)
        found = costly_sessions(
            conn, layout, load_lineage(conn, layout), rows.values(), question, limit=10_000
        )
        return found, spend(conn, layout, **{**RANGE, **options})
    finally:
        conn.close()


@pytest.mark.parametrize("period", ["month", "day"])
def test_sessions_add_up_to_the_total(demo_db: Path, period: str) -> None:
    found, total = every_session(demo_db, period=period)
    assert found.total == total.totals.sessions == len(found.sessions)  # distinct sessions
    assert len({s.session_id for s in found.sessions}) == found.total
    summed = sum(s.spend.effective_usd or 0.0 for s in found.sessions)
    assert summed == pytest.approx(total.totals.effective_usd, abs=1e-9)
    calls = sum(s.spend.api_calls for s in found.sessions)
    assert calls == total.totals.api_calls
    # First by effective spend, biggest first.
    costs = [s.spend.effective_usd or 0.0 for s in found.sessions]
    assert costs[:10] == sorted(costs, reverse=True)[:10]


def test_one_month_is_that_months_sum(demo_db: Path) -> None:
    """A session spread over two months counts only its days inside the range."""
    month = {"start": date(2026, 10, 1), "end": date(2026, 11, 1)}
    found, total = every_session(demo_db, **month)
    assert sum(s.spend.effective_usd or 0 for s in found.sessions) == pytest.approx(
        total.totals.effective_usd, abs=1e-9
    )
    assert sum(s.tokens for s in found.sessions) == sum(total.totals.tokens.values())


def test_the_rollup_gives_the_same_sessions(demo_db: Path, data: RecallData) -> None:
    rollup = CostRollup(data.core, str(demo_db))
    raw, _ = every_session(demo_db, sources=("cli", "telegram"))
    rolled, _ = every_session(demo_db, rollup, sources=("cli", "telegram"))
    assert [s.session_id for s in rolled.sessions] == [s.session_id for s in raw.sessions]
    for a, b in zip(raw.sessions, rolled.sessions, strict=True):
        assert a.spend.effective_usd == pytest.approx(b.spend.effective_usd, abs=1e-9)
        assert a.spend.status_mix == b.spend.status_mix and a.source in ("cli", "telegram")


def test_unknown_price_sorts_last_and_stays_unknown(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    shapes.build_cost_facts(db)
    conn = open_readonly(db)
    try:
        layout = detect_layout(conn, db)
        question = plan(layout, start=date(2000, 1, 1), end=date(2009, 1, 1), timezone="UTC")
        everything = plan(layout, start=date(2020, 1, 1), end=date(2029, 12, 1), timezone="UTC")
        lineage = load_lineage(conn, layout)
        assert costly_sessions(conn, layout, lineage, [], question).sessions == []
        found = costly_sessions(
            conn, layout, lineage, range_rows(conn, layout, everything).values(), everything
        )
        ascending = costly_sessions(
            conn, layout, lineage, range_rows(conn, layout, everything).values(), everything,
            descending=False,
        )  # fmt: skip
    finally:
        conn.close()
    known = [s.spend.effective_usd for s in found.sessions]
    assert None in known, "the fixture has a session of unknown price"
    assert known[known.index(None) :] == [None] * known.count(None)  # last, either way
    assert [s.spend.effective_usd for s in ascending.sessions][-1] is None


def test_bad_sort_is_a_validation_error() -> None:
    assert check_sort(None, None) == ("cost", True)
    assert check_sort("tokens", "asc") == ("tokens", False)
    with pytest.raises(ValidationError):
        check_sort("price", None)
    with pytest.raises(ValidationError):
        check_sort("cost", "up")
