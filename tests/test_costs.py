"""Spend figures checked against an independent computation over the raw rows."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from contextlib import closing
from datetime import date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from dashboard.demo.build import build_demo_home
from dashboard.repository.costs import period_label, period_starts, spend
from dashboard.repository.errors import ValidationError
from dashboard.repository.layout import detect_layout
from dashboard.repository.readonly import open_readonly
from dashboard.repository.store import SessionStore, Usage
from tests import hermes_shapes as shapes

TZ = "Europe/Stockholm"


def _figures(status: str | None, est: float | None, act: float | None):
    """The rules, written out plainly: a 0 in Hermes's usage table means "none"."""
    status = status or "unknown"
    if status == "unknown":
        return None, None
    e = None if (est is None or (status != "estimated" and est == 0)) else est
    if status in ("actual", "included"):
        a = act
    else:
        a = act if act and act > 0 else None
    return e, a


def independent(db: Path, period: str, by: str, start: date, end: date, tz: str) -> dict:
    """Sums per (period, key) computed row by row in Python."""
    zone = ZoneInfo(tz)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        usage = conn.execute(
            "SELECT name FROM sqlite_master WHERE name='session_model_usage'"
        ).fetchone()
        if usage:
            rows = conn.execute(
                "SELECT coalesce(u.last_seen, u.first_seen), u.billing_provider,"
                " u.model, s.source, u.task, u.cost_status, u.estimated_cost_usd,"
                " u.actual_cost_usd, u.input_tokens, u.session_id FROM session_model_usage u"
                " LEFT JOIN sessions s ON s.id = u.session_id"
            ).fetchall()
        else:
            rows = conn.execute(
                "SELECT started_at, billing_provider, model, source, NULL, cost_status,"
                " estimated_cost_usd, actual_cost_usd, input_tokens, id FROM sessions"
            ).fetchall()
    finally:
        conn.close()
    starts = period_starts(period, start, end)
    edges = [datetime(d.year, d.month, d.day, tzinfo=zone).timestamp() for d in starts]
    edges.append(datetime(end.year, end.month, end.day, tzinfo=zone).timestamp())
    out: dict = defaultdict(lambda: {"est": [], "act": [], "eff": [], "tokens": 0, "ids": set()})
    for ts, provider, model, source, task, status, est, act, tokens, sid in rows:
        if ts is None or not edges[0] <= ts < edges[-1]:
            continue
        index = max(i for i, edge in enumerate(edges[:-1]) if ts >= edge)
        key = {"provider": provider or None, "model": model or None, "source": source,
               "task": (task or "main")}[by] or "unknown"  # fmt: skip
        cell = out[(period_label(period, starts[index]), key)]
        e, a = _figures(status, est, act)
        if e is not None:
            cell["est"].append(e)
        if a is not None:
            cell["act"].append(a)
        if a is not None or e is not None:
            cell["eff"].append(a if a is not None else e)
        cell["tokens"] += tokens or 0
        cell["ids"].add(sid)
    return out


def _check(db: Path, period: str, by: str, start: date, end: date) -> None:
    conn = open_readonly(db)
    try:
        result = spend(conn, detect_layout(conn, db), period=period, by=by, start=start,
                       end=end, timezone=TZ)  # fmt: skip
    finally:
        conn.close()
    expected = independent(db, period, by, start, end, TZ)
    got = {(c.period, c.key): c for c in result.rows}
    assert set(got) == set(expected)
    for key, want in expected.items():
        cell = got[key]
        for name, values in (("estimated_usd", want["est"]), ("actual_usd", want["act"]),
                             ("effective_usd", want["eff"])):  # fmt: skip
            value = getattr(cell, name)
            if values:
                assert value == pytest.approx(sum(values)), (key, name)
            else:
                assert value is None, (key, name)  # unknown is never $0
        assert cell.tokens["input"] == want["tokens"]
        assert cell.sessions == len(want["ids"])


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("costs") / "home"
    build_demo_home(home, sessions=300, messages=6000, anchor_day="2026-11-30")
    return home / "state.db"


@pytest.mark.parametrize("by", ["provider", "model", "source", "task"])
@pytest.mark.parametrize("period", ["month", "week", "day"])
def test_demo_home_matches_independent_sums(demo: Path, period: str, by: str) -> None:
    start = {"month": date(2025, 12, 1), "week": date(2026, 9, 7), "day": date(2026, 11, 1)}
    _check(demo, period, by, start[period], date(2026, 12, 1))


@pytest.mark.parametrize("shape", sorted(shapes.SHAPES))
def test_every_shape_matches_independent_sums(tmp_path: Path, shape: str) -> None:
    db = shapes.SHAPES[shape](tmp_path / "state.db")
    for by in ("provider", "model", "source"):
        _check(db, "month", by, date(2026, 1, 1), date(2027, 1, 1))


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
        store.record_usage(sid, Usage(model="gpt", billing_provider="openrouter", task="vision",
                                      estimated_cost_usd=0.10, actual_cost_usd=0.25,
                                      cost_status="actual", at=at))  # fmt: skip
        # Hermes's usage table writes 0 where no estimate was made (NOT NULL DEFAULT 0).
        store.record_usage(sid, Usage(model="opus", billing_provider="anthropic",
                                      estimated_cost_usd=0.0, actual_cost_usd=0.40,
                                      cost_status="actual", at=at))  # fmt: skip
    conn = open_readonly(tmp_path / "state.db")
    try:
        layout = detect_layout(conn, tmp_path / "state.db")
        by_provider = spend(conn, layout, by="provider", start=date(2026, 11, 1),
                            end=date(2026, 12, 1), timezone=TZ)  # fmt: skip
        with pytest.raises(ValidationError):
            spend(conn, layout, by="colour", start=date(2026, 1, 1), end=date(2026, 2, 1))
        with pytest.raises(ValidationError):
            spend(conn, layout, start=date(2026, 2, 1), end=date(2026, 1, 1))
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
        store.record_usage(sid, Usage(model="m", billing_provider="p", estimated_cost_usd=1.0,
                                      cost_status="estimated", at=at))  # fmt: skip
    conn = open_readonly(tmp_path / "state.db")
    try:
        layout = detect_layout(conn, tmp_path / "state.db")
        here = spend(conn, layout, start=date(2026, 10, 1), end=date(2026, 12, 1), timezone=TZ)
        tokyo = spend(conn, layout, start=date(2026, 10, 1), end=date(2026, 12, 1),
                      timezone="Asia/Tokyo")  # fmt: skip
    finally:
        conn.close()
    assert [c.period for c in here.rows] == ["2026-10"]
    assert [c.period for c in tokyo.rows] == ["2026-11"]


def test_reader_cache_follows_new_spend(tmp_path: Path) -> None:
    from dashboard.repository.home import HermesHome
    from dashboard.repository.reader import StateReader

    at = datetime(2026, 11, 10, tzinfo=ZoneInfo(TZ)).timestamp()
    with SessionStore(tmp_path / "state.db") as store:
        sid = store.create_session("cli", started_at=at)
        store.record_usage(sid, Usage(model="m", billing_provider="p", estimated_cost_usd=1.0,
                                      cost_status="estimated", at=at))  # fmt: skip
    reader = StateReader(HermesHome(tmp_path))
    ask = {"start": date(2026, 11, 1), "end": date(2026, 12, 1), "timezone": TZ}
    first = reader.spend(**ask)
    assert reader.spend(**ask) is first  # unchanged file: the same answer, not recomputed
    with SessionStore(tmp_path / "state.db") as store:
        store.record_usage(sid, Usage(model="m", billing_provider="p", estimated_cost_usd=2.0,
                                      cost_status="estimated", at=at + 60))  # fmt: skip
    again = reader.spend(**ask)
    assert again is not first and again.totals.estimated_usd == pytest.approx(3.0)


def test_usage_rows_whose_session_is_gone_still_count(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    at = datetime(2026, 11, 10, 12, tzinfo=ZoneInfo(TZ)).timestamp()
    with SessionStore(db) as store:
        sid = store.create_session("cli", started_at=at)
        store.record_usage(sid, Usage(model="m", billing_provider="p", estimated_cost_usd=1.0,
                                      cost_status="estimated", at=at))  # fmt: skip
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
        by_source = spend(conn, detect_layout(conn, db), by="source", start=date(2026, 11, 1),
                          end=date(2026, 12, 1), timezone=TZ)  # fmt: skip
    finally:
        conn.close()
    assert {c.key: c.estimated_usd for c in by_source.rows} == {"cli": 1.0, "unknown": 2.0}
