"""CostsRequest.from_params: the one parser of the costs page, its CSV and its JSON."""

from __future__ import annotations

from datetime import date

import pytest
from werkzeug.datastructures import MultiDict

from dashboard.costs.request import DEPRECATED_BEFORE, CostsRequest, range_shortcuts
from dashboard.errors import ValidationError

TODAY = date(2026, 11, 30)


def parse(**params: object) -> CostsRequest:
    return CostsRequest.from_params(MultiDict(params), today=TODAY, timezone="UTC")


def test_defaults_fill_the_range_ending_with_the_current_period() -> None:
    asked = parse()
    assert (asked.period, asked.by, asked.sort, asked.descending) == (
        "month",
        "provider",
        "cost",
        True,
    )
    assert (asked.start, asked.end, asked.last_day) == (
        date(2025, 11, 1),
        date(2026, 12, 1),
        date(2026, 11, 30),
    )
    assert asked.options()["timezone"] == "UTC" and asked.notices == ()
    week = parse(period="week")
    assert (week.start, week.end) == (date(2026, 9, 14), date(2026, 12, 7))


def test_sources_are_sorted_once_and_before_is_read_as_to() -> None:
    asked = CostsRequest.from_params(
        MultiDict([("source", "tui"), ("source", "cli"), ("source", "tui"), ("source", "")]),
        today=TODAY,
    )
    assert asked.sources == ("cli", "tui")
    old = parse(before="2026-06-01")
    assert old.end == date(2026, 6, 1) and old.notices == (DEPRECATED_BEFORE,)
    assert parse(to="2026-06-01", before="2026-06-01").end == date(2026, 6, 1)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"period": "fortnight"}, "period must be one of"),
        ({"by": "profile"}, "by must be one of provider, model, source, task"),
        ({"from": "30/11/2026"}, "from must be a date"),
        ({"to": "2026-06-01", "before": "2026-07-01"}, "not both"),
        ({"sort": "name"}, "sort"),
    ],
)
def test_a_malformed_request_names_what_is_wrong(params: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        CostsRequest.from_params(
            MultiDict(params), today=TODAY, dimensions=("provider", "model", "source", "task")
        )


def test_all_time_starts_with_the_first_session_and_at_most_ten_years_back() -> None:
    labels = {s.label: (s.start, s.end) for s in range_shortcuts(TODAY, date(2024, 3, 9))}
    assert labels["All time"] == (date(2024, 3, 1), date(2026, 12, 1))
    assert labels["Last month"] == (date(2026, 10, 1), date(2026, 11, 1))
    ancient = {s.label: s.start for s in range_shortcuts(TODAY, date(1990, 1, 1))}
    assert ancient["All time"] >= date(2016, 12, 1)


def test_the_default_range_begins_with_the_first_session_s_period() -> None:
    """A home three months old shows three months by default, not ten empty ones first."""
    first = date(2026, 9, 17)
    assert parse().from_first(first).start == date(2026, 9, 1)
    assert parse(period="week").from_first(first).start == date(2026, 9, 14)  # its Monday
    assert parse(period="day").from_first(date(2026, 11, 20)).start == date(2026, 11, 20)
    # Older than the default range, none yet, or a from= the query gave: unchanged.
    assert parse().from_first(date(2024, 1, 5)).start == date(2025, 11, 1)
    assert parse().from_first(None).start == date(2025, 11, 1)
    given = parse(**{"from": "2026-01-01"})
    assert given.from_first(first).start == date(2026, 1, 1)
    # A first session after the range (a clock set wrong) leaves the range whole.
    assert parse().from_first(date(2027, 3, 1)).start == date(2025, 11, 1)
