"""The costliest sessions of a range add up to the period sums, by the same rules and days."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from dashboard.costs.costly import (
    check_sort,
    costly_sessions,
    rank_sessions,
    raw_session_sums,
)
from dashboard.costs.rollup import CostRollup
from dashboard.costs.spend import plan, spend
from dashboard.demo.build import build_demo_home
from dashboard.errors import ValidationError
from dashboard.lineage.graph import load_lineage
from dashboard.store.readonly import open_readonly
from dashboard.store.recalldb import RecallData
from dashboard.store.records import Usage
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as shapes
from tests.support.cost_homes import archived
from tests.support.demo_homes import demo_home_copy

RANGE = {"start": date(2026, 6, 1), "end": date(2026, 12, 1), "timezone": "UTC"}


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("cost-sessions") / "demo"
    demo_home_copy(tmp_path_factory, home, sessions=60, messages=1500, anchor_day="2026-11-30")
    return home / "state.db"


@pytest.fixture
def data(tmp_path: Path) -> Iterator[RecallData]:
    recall = RecallData(tmp_path / "recall" / "recall.db")
    yield recall
    recall.close()


def every_session(
    db: Path,
    rollup: CostRollup | None = None,
    sort: str = "cost",
    descending: bool = True,
    limit: int = 10_000,
    **options: object,
):
    """(costly sessions from raw rows or the rollup, the spend of the same question)."""
    conn = open_readonly(db)
    try:
        question = plan(**{**RANGE, **options})
        order = {"sort": sort, "descending": descending, "limit": limit}
        found = rollup.session_sums(conn, question, **order) if rollup else None
        if found is None:
            sums = raw_session_sums(conn, question)
            found = len(sums), rank_sessions(sums, **order)
        listed = costly_sessions(conn, load_lineage(conn), *found, sort=sort, descending=descending)
        return listed, spend(conn, **{**RANGE, **options})
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


@pytest.mark.parametrize(
    ("sort", "descending"), [("cost", True), ("cost", False), ("tokens", True), ("calls", False)]
)
def test_the_rollup_gives_the_same_sessions(
    demo_db: Path, data: RecallData, sort: str, descending: bool
) -> None:
    rollup = CostRollup(data.core, str(demo_db))
    options = {"sources": ("cli", "telegram"), "sort": sort, "descending": descending}
    raw, _ = every_session(demo_db, limit=12, **options)
    rolled, _ = every_session(demo_db, rollup, limit=12, **options)
    assert rolled.total == raw.total and len(raw.sessions) == 12
    assert [s.session_id for s in rolled.sessions] == [s.session_id for s in raw.sessions]
    for a, b in zip(raw.sessions, rolled.sessions, strict=True):
        if a.spend.effective_usd is None:
            assert b.spend.effective_usd is None
        else:
            assert a.spend.effective_usd == pytest.approx(b.spend.effective_usd, abs=1e-9)
        assert a.spend.status_mix == b.spend.status_mix and a.source in ("cli", "telegram")
        assert a.tokens == b.tokens and a.spend.api_calls == b.spend.api_calls


def test_the_rollup_follows_a_new_call(tmp_path: Path, data: RecallData) -> None:
    """A call recorded after the build moves its session up the list."""
    db = tmp_path / "home" / "state.db"
    build_demo_home(db.parent, sessions=20, messages=300, anchor_day="2026-11-30")
    rollup = CostRollup(data.core, str(db))
    until_next_year = {"end": date(date.today().year + 1, 1, 1)}  # the new call is today's
    before, _ = every_session(db, rollup, **until_next_year)
    last = before.sessions[-1].session_id
    with SessionStore(db) as store:
        store.record_usage(
            last, Usage(model="m", estimated_cost_usd=500.0, cost_status="estimated")
        )
    after, _ = every_session(db, rollup, **until_next_year)
    raw, _ = every_session(db, **until_next_year)
    assert "apply_ms" in rollup.last_refresh  # applied to the sums, not rebuilt
    assert after.sessions[0].session_id == last == raw.sessions[0].session_id
    assert after.sessions[0].spend.effective_usd == pytest.approx(
        raw.sessions[0].spend.effective_usd, abs=1e-9
    )


def test_unknown_price_sorts_last_and_stays_unknown(tmp_path: Path) -> None:
    db = archived(shapes.build_cost_facts, tmp_path)
    everything = {"start": date(2020, 1, 1), "end": date(2029, 12, 1)}
    found, _ = every_session(db, **everything)
    ascending, _ = every_session(db, descending=False, **everything)
    known = [s.spend.effective_usd for s in found.sessions]
    assert None in known, "the fixture has a session of unknown price"
    assert known[known.index(None) :] == [None] * known.count(None)  # last, either way
    assert [s.spend.effective_usd for s in ascending.sessions][-1] is None
    nothing, _ = every_session(db, start=date(2000, 1, 1), end=date(2009, 1, 1))
    assert nothing.sessions == [] and nothing.total == 0


def test_bad_sort_is_a_validation_error() -> None:
    assert check_sort(None, None) == ("cost", True)
    assert check_sort("tokens", "asc") == ("tokens", False)
    with pytest.raises(ValidationError):
        check_sort("price", None)
    with pytest.raises(ValidationError):
        check_sort("cost", "up")


@pytest.mark.parametrize("shape", sorted(shapes.COST_SHAPES))
def test_each_cost_shape_adds_up_after_its_import(tmp_path: Path, shape: str) -> None:
    """With usage rows and without (the archive derives one row per session): the listed
    sessions add up to the range's total, partly billed ones included."""
    db = archived(shapes.COST_SHAPES[shape], tmp_path)
    everything = {"start": date(2026, 1, 1), "end": date(2027, 1, 1)}
    found, total = every_session(db, **everything)
    assert found.total == total.totals.sessions == len(found.sessions) > 0
    summed = sum(s.spend.effective_usd or 0.0 for s in found.sessions)
    assert summed == pytest.approx(total.totals.effective_usd, abs=1e-9)
    assert sum(s.spend.status_mix["partial"] for s in found.sessions) >= 1
