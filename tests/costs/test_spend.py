"""Spend figures checked against an independent computation over the archive's raw rows.

Every Hermes shape is imported first (tests/support/archived.py), as the pages read it; the
cost facts of each shape (NULL-status auxiliary rows, partly billed rows, a source
without ``session_model_usage``) are checked as figures after the import.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from dashboard.costs.spend import DIMENSIONS, spend
from dashboard.errors import ValidationError
from dashboard.hermes.home import HermesHome
from dashboard.reader.reader import StateReader
from dashboard.store.readonly import open_readonly
from dashboard.store.records import Usage
from dashboard.store.schema import DERIVED_USAGE_PREFIX
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as shapes
from tests.support.cost_homes import (
    PROFILES_ASK,
    TZ,
    archived,
    assert_matches,
    independent,
    profiles_reader,
)
from tests.support.demo_homes import demo_home_copy


def _check(db: Path, period: str, by: str, start: date, end: date) -> None:
    conn = open_readonly(db)
    try:
        result = spend(conn, period=period, by=by, start=start, end=end, timezone=TZ)
    finally:
        conn.close()
    assert_matches(result, *independent(db, period, by, start, end, TZ))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("costs") / "home"
    demo_home_copy(tmp_path_factory, home, sessions=300, messages=6000, anchor_day="2026-11-30")
    return home / "state.db"


@pytest.mark.parametrize("by", ["provider", "model", "source", "task"])
@pytest.mark.parametrize("period", ["month", "week", "day"])
def test_demo_home_matches_independent_sums(demo: Path, period: str, by: str) -> None:
    start = {"month": date(2025, 12, 1), "week": date(2026, 9, 7), "day": date(2026, 11, 1)}
    _check(demo, period, by, start[period], date(2026, 12, 1))


ALL_SHAPES = {**shapes.SHAPES, **shapes.COST_SHAPES}


@pytest.mark.parametrize("shape", sorted(ALL_SHAPES))
def test_every_shape_matches_independent_sums(tmp_path: Path, shape: str) -> None:
    # Every dimension of every shape: the archive has usage rows (and tasks) whatever
    # the source kept.
    db = archived(ALL_SHAPES[shape], tmp_path)
    for period, first in (
        ("month", date(2026, 1, 1)),
        ("week", date(2026, 6, 29)),
        ("day", date(2026, 7, 15)),
    ):
        for by in ("provider", "model", "source", "task"):
            _check(db, period, by, first, date(2027, 1, 1))


def test_unknown_included_and_null_estimates(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "state.db") as store:
        at = datetime(2026, 11, 10, 12, tzinfo=ZoneInfo(TZ)).timestamp()
        sid = store.create_session("cli", started_at=at)
        store.record_usage(
            sid,
            Usage(
                model="local",
                billing_provider="custom",
                cost_status="unknown",
                input_tokens=50,
                at=at,
            ),
        )
        store.record_usage(
            sid,
            Usage(
                model="hermes",
                billing_provider="nous",
                actual_cost_usd=0.0,
                cost_status="included",
                at=at,
            ),
        )
        store.record_usage(
            sid,
            Usage(
                model="claude",
                billing_provider="openrouter",
                actual_cost_usd=0.30,
                cost_status="actual",
                at=at,
            ),
        )
        store.record_usage(
            sid,
            Usage(
                model="gpt",
                billing_provider="openrouter",
                task="vision",
                estimated_cost_usd=0.10,
                actual_cost_usd=0.25,
                cost_status="actual",
                at=at,
            ),
        )
        # Hermes's usage table writes 0 where no estimate was made (NOT NULL DEFAULT 0).
        store.record_usage(
            sid,
            Usage(
                model="opus",
                billing_provider="anthropic",
                estimated_cost_usd=0.0,
                actual_cost_usd=0.40,
                cost_status="actual",
                at=at,
            ),
        )
    conn = open_readonly(tmp_path / "state.db")
    try:
        by_provider = spend(
            conn, by="provider", start=date(2026, 11, 1), end=date(2026, 12, 1), timezone=TZ
        )
        with pytest.raises(ValidationError):
            spend(conn, by="colour", start=date(2026, 1, 1), end=date(2026, 2, 1))
        with pytest.raises(ValidationError):
            spend(conn, start=date(2026, 2, 1), end=date(2026, 1, 1))
    finally:
        conn.close()
    cells = {c.key: c for c in by_provider.rows}
    assert cells["custom"].effective_usd is None and cells["custom"].status_mix["unknown"] == 1
    assert cells["nous"].actual_usd == 0.0 and cells["nous"].status_mix["included"] == 1
    router = cells["openrouter"]
    # Only the vision row has both figures: drift is 0.25 / 0.10, not 0.55 / 0.10.
    assert router.estimated_usd == pytest.approx(0.10)
    assert router.actual_usd == pytest.approx(0.55)
    assert router.drift == pytest.approx(2.5) and router.drift_flagged
    assert router.actual_share == pytest.approx(1.0)
    billed_only = cells["anthropic"]
    assert billed_only.estimated_usd is None and billed_only.drift is None  # not "$0 estimated"
    assert billed_only.effective_usd == pytest.approx(0.40)
    assert by_provider.totals.effective_usd == pytest.approx(0.95)


def test_months_follow_the_timezone(tmp_path: Path) -> None:
    # 23:30 on Oct 31 in Stockholm is already November in Tokyo.
    at = datetime(2026, 10, 31, 23, 30, tzinfo=ZoneInfo(TZ)).timestamp()
    with SessionStore(tmp_path / "state.db") as store:
        sid = store.create_session("cli", started_at=at)
        store.record_usage(
            sid,
            Usage(
                model="m",
                billing_provider="p",
                estimated_cost_usd=1.0,
                cost_status="estimated",
                at=at,
            ),
        )
    conn = open_readonly(tmp_path / "state.db")
    try:
        here = spend(conn, start=date(2026, 10, 1), end=date(2026, 12, 1), timezone=TZ)
        tokyo = spend(conn, start=date(2026, 10, 1), end=date(2026, 12, 1), timezone="Asia/Tokyo")
    finally:
        conn.close()
    assert [c.period for c in here.rows] == ["2026-10"]
    assert [c.period for c in tokyo.rows] == ["2026-11"]


def test_reader_cache_follows_new_spend(tmp_path: Path) -> None:

    at = datetime(2026, 11, 10, tzinfo=ZoneInfo(TZ)).timestamp()
    with SessionStore(tmp_path / "state.db") as store:
        sid = store.create_session("cli", started_at=at)
        store.record_usage(
            sid,
            Usage(
                model="m",
                billing_provider="p",
                estimated_cost_usd=1.0,
                cost_status="estimated",
                at=at,
            ),
        )
    reader = StateReader(HermesHome(tmp_path))
    ask = {"start": date(2026, 11, 1), "end": date(2026, 12, 1), "timezone": TZ}
    first = reader.spend(**ask)
    assert reader.spend(**ask) is first  # unchanged file: the same answer, not recomputed
    with SessionStore(tmp_path / "state.db") as store:
        store.record_usage(
            sid,
            Usage(
                model="m",
                billing_provider="p",
                estimated_cost_usd=2.0,
                cost_status="estimated",
                at=at + 60,
            ),
        )
    again = reader.spend(**ask)
    assert again is not first and again.totals.estimated_usd == pytest.approx(3.0)


def test_usage_rows_whose_session_is_gone_still_count(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    at = datetime(2026, 11, 10, 12, tzinfo=ZoneInfo(TZ)).timestamp()
    with SessionStore(db) as store:
        sid = store.create_session("cli", started_at=at)
        store.record_usage(
            sid,
            Usage(
                model="m",
                billing_provider="p",
                estimated_cost_usd=1.0,
                cost_status="estimated",
                at=at,
            ),
        )
    # Hermes does not enforce foreign keys: a usage row can outlive its session row.
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(
            "INSERT INTO session_model_usage (session_id, model, billing_provider, "
            "estimated_cost_usd, cost_status, first_seen, last_seen) "
            "VALUES ('gone', 'm', 'p', 2.0, 'estimated', ?, ?)",
            (at, at),
        )
    for by in ("provider", "source"):
        _check(db, "month", by, date(2026, 11, 1), date(2026, 12, 1))
    conn = open_readonly(db)
    try:
        by_source = spend(
            conn, by="source", start=date(2026, 11, 1), end=date(2026, 12, 1), timezone=TZ
        )
    finally:
        conn.close()
    assert {c.key: c.estimated_usd for c in by_source.rows} == {"cli": 1.0, "unknown": 2.0}


# --- The cost facts of today's Hermes (issue 13, items 1, 4, 5, 8) -------------------------


def facts_spend(tmp_path: Path, builder=shapes.build_cost_facts, **options: object):
    """Spend over the archive of a cost-facts home (imported first, as the pages read it)."""
    db = archived(builder, tmp_path)
    conn = open_readonly(db)
    try:
        ask = {"start": date(2026, 11, 1), "end": date(2026, 12, 1), "timezone": "UTC"}
        return spend(conn, **{**ask, **options})
    finally:
        conn.close()


def test_null_status_auxiliary_rows_are_estimates(tmp_path: Path) -> None:
    # Item 1: Hermes writes compression/title calls with a real estimate and status NULL.
    found = {c.key: c for c in facts_spend(tmp_path, by="task").rows}
    compression = found["compression"]
    assert compression.estimated_usd == pytest.approx(0.03)
    assert compression.effective_usd == pytest.approx(0.03)
    assert compression.status_mix["estimated"] == 2 and compression.status_mix["unknown"] == 0


def test_a_merged_row_with_a_partial_bill_is_partly_billed(tmp_path: Path) -> None:
    # Item 5: status 'estimated' with actual $0.05: the bill covers some calls, not the row.
    found = {c.key: c for c in facts_spend(tmp_path, by="model").rows}
    main = found["anthropic/claude-sonnet-4.5"]
    assert main.actual_usd == pytest.approx(0.05)
    assert main.estimated_usd == pytest.approx(0.80)
    assert main.effective_usd == pytest.approx(0.85)  # not $0.05 "billed" for the whole row
    assert main.actual_share == pytest.approx(0.05 / 0.85)
    assert main.status_mix["partial"] == 10 and main.status_mix["actual"] == 0


def test_a_row_is_spread_over_the_days_of_its_calls(tmp_path: Path) -> None:
    # Item 8: replies on Nov 2, 3, 5, 6 weigh 100, 300, 600, 1000 tokens.
    found = facts_spend(tmp_path, period="day", by="model")
    main = {c.period: c for c in found.rows if c.key == "anthropic/claude-sonnet-4.5"}
    assert sorted(main) == ["2026-11-02", "2026-11-03", "2026-11-05", "2026-11-06"]
    for day, weight in (("02", 100), ("03", 300), ("05", 600), ("06", 1000)):
        cell = main[f"2026-11-{day}"]
        assert cell.effective_usd == pytest.approx(0.85 * weight / 2000), day
        assert cell.tokens["input"] == 45000 * weight // 2000, day
        assert cell.sessions == 1
    assert sum(c.api_calls for c in main.values()) == 10
    # Replies without a token_count weigh one each: half on Nov 30, half on Dec 1.
    nous = facts_spend(tmp_path, period="month", by="provider", end=date(2027, 1, 1))
    halves = {c.period: c.effective_usd for c in nous.rows if c.key == "nous"}
    assert halves == {"2026-11": pytest.approx(0.006), "2026-12": pytest.approx(0.006)}


def test_a_session_row_is_spread_too(tmp_path: Path) -> None:
    found = facts_spend(
        tmp_path, shapes.build_cost_facts_sessions_only, period="day", by="provider"
    )
    week = {c.period: c for c in found.rows if c.key == "openrouter"}
    assert week["2026-11-06"].effective_usd == pytest.approx((0.83 + 0.05) * 1000 / 2000)
    # The seed form has no api_call_count: the session stands for one call, partly billed.
    assert sum(c.status_mix["partial"] for c in week.values()) == 1


def test_the_total_counts_each_session_once(tmp_path: Path) -> None:
    # Item 4: a session on four days (and in two models) is one session in the total.
    found = facts_spend(tmp_path, period="day", by="model", end=date(2026, 11, 30))
    assert sum(c.sessions for c in found.rows) > found.totals.sessions == 1


def test_a_row_derived_from_a_session_is_read_as_that_session(tmp_path: Path) -> None:
    # The importer derives one usage row per session for a source without usage rows;
    # it sums every call of the session, so a bill beside an estimate there is partly
    # billed (bill + estimate), never a pair for drift. A real usage row pairs them.
    db = tmp_path / "state.db"
    at = datetime(2026, 11, 10, 12, tzinfo=ZoneInfo(TZ)).timestamp()
    with SessionStore(db) as store:
        ids = {name: store.create_session("cli", started_at=at) for name in ("derived", "usage")}
    with closing(sqlite3.connect(db)) as conn, conn:
        for name, sid in ids.items():
            src = f"{DERIVED_USAGE_PREFIX}{sid}" if name == "derived" else f"{sid}/m"
            conn.execute(
                "INSERT INTO session_model_usage (session_id, model, billing_provider, "
                "estimated_cost_usd, actual_cost_usd, cost_status, first_seen, last_seen, "
                "src_id) VALUES (?, 'm', ?, 0.2, 0.5, 'actual', ?, ?, ?)",
                (sid, name, at, at, src),
            )
    _check(db, "month", "provider", date(2026, 11, 1), date(2026, 12, 1))
    with closing(open_readonly(db)) as conn:
        found = spend(
            conn, by="provider", start=date(2026, 11, 1), end=date(2026, 12, 1), timezone=TZ
        )
    cells = {c.key: c for c in found.rows}
    derived, usage = cells["derived"], cells["usage"]
    assert derived.status_mix["partial"] == 1 and derived.drift is None
    assert derived.effective_usd == pytest.approx(0.7)
    assert usage.status_mix["actual"] == 1 and usage.drift == pytest.approx(2.5)
    assert usage.effective_usd == pytest.approx(0.5)


# --- Profiles (issue 17): spend by profile is each profile's own, and adds up ----------------


def test_spend_by_profile_is_each_profiles_own_and_adds_up(tmp_path: Path) -> None:
    reader = profiles_reader(tmp_path)
    names = [p.name for p in reader.profiles]
    assert names == ["default", "empty", "legacy"]
    _check(reader.path, "month", "profile", PROFILES_ASK["start"], PROFILES_ASK["end"])
    with closing(open_readonly(reader.path)) as conn:
        by_profile = spend(conn, by="profile", **PROFILES_ASK)
        by_provider = spend(conn, by="provider", **PROFILES_ASK)
        # The profiles filter on the whole archive answers what a scoped reader does.
        filtered = {
            (name, by): spend(conn, by=by, profiles=(name,), **PROFILES_ASK)
            for name in names
            for by in DIMENSIONS
        }
    assert {c.key for c in by_profile.rows} == {"default", "legacy"}  # empty spent nothing
    for name in names:
        own = reader.scoped(name).spend(by="profile", **PROFILES_ASK)  # its own rows only
        mine = [c for c in by_profile.rows if c.key == name]
        assert [c.to_json() for c in own.rows] == [c.to_json() for c in mine], name
        for by in DIMENSIONS:
            scoped = reader.scoped(name).spend(by=by, **PROFILES_ASK)
            assert filtered[(name, by)].to_json() == scoped.to_json(), (name, by)
    default, legacy = ({c.key: c for c in by_profile.rows}[n] for n in ("default", "legacy"))
    assert default.effective_usd != legacy.effective_usd  # the test tells them apart
    total = by_profile.totals
    assert total.effective_usd == pytest.approx(default.effective_usd + legacy.effective_usd)
    assert total.sessions == default.sessions + legacy.sessions  # shared ids stay distinct
    assert total.tokens == {k: default.tokens[k] + legacy.tokens[k] for k in total.tokens}
    assert total.to_json() == by_provider.totals.to_json()  # the same money, cut otherwise
