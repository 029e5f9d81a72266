"""This month's headline figures, from spend() results over the right days."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from dashboard.costs.headlines import Leader, ProfileSpend, headlines
from dashboard.costs.spend import Spend, spend
from dashboard.hermes.home import HermesHome
from dashboard.reader.reader import StateReader
from tests.support import hermes_shapes as shapes
from tests.support.archived import archived_reader
from tests.support.cost_homes import profiles_reader

PARIS = ZoneInfo("Europe/Paris")


class Recorder:
    """A spend() stand-in over a real file that remembers each call's range."""

    def __init__(self, reader: StateReader) -> None:
        self.reader = reader
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **options: Any) -> Spend:
        self.calls.append(options)
        return self.reader.spend(**options)


@pytest.fixture
def reader(tmp_path: Path) -> StateReader:
    """The seed form (no usage table), read through its archive as every page reads it."""
    shapes.build_seed_inline(tmp_path / "home" / "state.db")
    return archived_reader(tmp_path / "home")


def test_ranges_follow_the_calendar(reader: StateReader) -> None:
    record = Recorder(reader)
    # March 31st: last month (February 2026) has 28 days, so it is cut at its end.
    headlines(record, now=datetime(2026, 3, 31, 18, tzinfo=PARIS), timezone="Europe/Paris")
    ranges = [(c["by"], c["start"], c["end"]) for c in record.calls]
    assert ranges == [
        ("provider", date(2026, 3, 1), date(2026, 4, 1)),
        ("model", date(2026, 3, 1), date(2026, 4, 1)),
        ("provider", date(2026, 2, 1), date(2026, 3, 1)),
    ]
    assert {c["timezone"] for c in record.calls} == {"Europe/Paris"}


def test_figures_of_a_month_with_spend(reader: StateReader) -> None:
    now = datetime(2026, 7, 25, 12, tzinfo=PARIS)
    found = headlines(reader.spend, now=now, timezone="Europe/Paris")
    with reader.snapshot() as snap:
        month = spend(
            snap.conn,
            by="provider",
            start=date(2026, 7, 1),
            end=date(2026, 7, 26),
            timezone="Europe/Paris",
        )
    assert found.month == "2026-07" and found.day == 25
    # July has 31 days; noon on the 25th is 24.5 days in (no DST change in July).
    assert found.elapsed_fraction == pytest.approx(24.5 / 31)
    assert found.spend_so_far == month.totals.effective_usd
    assert found.projection == pytest.approx((month.totals.effective_usd or 0) / (24.5 / 31))
    assert found.last_month_same_point == 0.0  # no calls in June: $0.00, not "unknown"
    assert found.top_provider == Leader("openrouter", month.rows[0].effective_usd or 0.0)
    assert found.top_model is not None and found.top_model.key == "anthropic/claude-sonnet-4.5"
    assert found.actual_share == month.totals.actual_share
    assert found.to_json()["top_provider"] == {
        "key": "openrouter",
        "effective_usd": found.top_provider.effective_usd,
    }


def test_a_month_without_spend_is_zero_with_no_leader(reader: StateReader) -> None:
    found = headlines(
        reader.spend, now=datetime(2026, 1, 10, tzinfo=PARIS), timezone="Europe/Paris"
    )
    assert found.spend_so_far == 0.0 and found.projection == 0.0  # no calls: nothing spent
    assert found.top_provider is None and found.top_model is None and found.actual_share is None


def _home_with_unknown_calls(tmp_path: Path) -> StateReader:
    """November 2026: $2.10 estimated and three calls of a local model with no price."""
    from dashboard.store.records import Usage
    from dashboard.store.session_store import SessionStore

    at = datetime(2026, 11, 10, 12, tzinfo=PARIS).timestamp()
    with SessionStore(tmp_path / "state.db") as store:
        sid = store.create_session("cli", started_at=at)
        store.record_usage(
            sid,
            Usage(
                model="m",
                billing_provider="p",
                estimated_cost_usd=2.10,
                cost_status="estimated",
                at=at,
            ),
        )
        store.record_usage(
            sid,
            Usage(
                model="local", billing_provider="custom", api_calls=3, cost_status="unknown", at=at
            ),
        )
    return StateReader(HermesHome(tmp_path))


def test_a_month_partly_of_unknown_price_says_how_much_is_known(tmp_path: Path) -> None:
    # Item 2: "$2.10 + 3 calls of unknown price", not "$2.10" (nor "$0.0000").
    reader = _home_with_unknown_calls(tmp_path)
    found = headlines(
        reader.spend, now=datetime(2026, 11, 20, 12, tzinfo=PARIS), timezone="Europe/Paris"
    )
    assert found.spend_so_far == pytest.approx(2.10)
    assert found.unknown_calls == 3
    assert found.to_json()["unknown_calls"] == 3


def test_a_month_without_calls_is_zero(tmp_path: Path) -> None:
    # Item 2: no calls at all (the 1st of a month, an empty home) is $0.00, not unknown.
    reader = _home_with_unknown_calls(tmp_path)
    found = headlines(
        reader.spend, now=datetime(2026, 12, 15, 8, tzinfo=PARIS), timezone="Europe/Paris"
    )
    assert found.spend_so_far == 0.0 and found.projection == 0.0 and found.unknown_calls == 0
    assert found.last_month_same_point == pytest.approx(2.10)
    assert found.last_month_unknown_calls == 3


def test_all_profiles_show_each_profiles_month_beside_the_total(tmp_path: Path) -> None:
    reader = profiles_reader(tmp_path)
    names = tuple(p.name for p in reader.profiles)
    now = datetime(2026, 7, 25, 12, tzinfo=PARIS)
    record = Recorder(reader)
    found = headlines(record, now=now, timezone="Europe/Paris", profiles=names)
    assert ("profile", date(2026, 7, 1), date(2026, 7, 26)) in [
        (c["by"], c["start"], c["end"]) for c in record.calls
    ]
    assert [p.name for p in found.by_profile] == list(names)
    for mine in found.by_profile:
        own = headlines(reader.scoped(mine.name).spend, now=now, timezone="Europe/Paris")
        assert mine == ProfileSpend(mine.name, own.spend_so_far, own.unknown_calls)
        assert own.by_profile == ()  # one profile's page: the total is its own
    figures = {p.name: p.spend_so_far for p in found.by_profile}
    assert figures["empty"] == 0.0 and figures["default"] != figures["legacy"]
    assert sum(figures.values()) == pytest.approx(found.spend_so_far)
    assert sum(p.unknown_calls for p in found.by_profile) == found.unknown_calls
    assert found.to_json()["by_profile"][0] == {
        "profile": "default",
        "spend_so_far": figures["default"],
        "unknown_calls": found.by_profile[0].unknown_calls,
    }
