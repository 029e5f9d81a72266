"""One rule for whole numbers and dates typed into URLs, forms and config files."""

from __future__ import annotations

import time

import pytest

from dashboard.errors import ValidationError
from dashboard.params import date_bound, table_sort, whole_number


@pytest.mark.parametrize("text", ["²", "٣", "３", "1.5", "-3", "+3", "1e3", "0x10", "1_000", "x"])
def test_only_ascii_digits_make_a_whole_number(text: str) -> None:
    # str.isdigit() says yes to "²", "٣" and "３"; int() refuses the first and reads the others.
    with pytest.raises(ValidationError, match="limit must be a whole number"):
        whole_number(text, "limit", 1, 20)


def test_a_number_of_thousands_of_digits_is_out_of_range_not_a_crash() -> None:
    # int() refuses strings over 4,300 digits with a ValueError of its own.
    with pytest.raises(ValidationError, match="between 1 and 20"):
        whole_number("9" * 5000, "limit", 1, 20)


def test_leading_zeros_spaces_and_blanks() -> None:
    assert whole_number(" 007 ", "page", 1, 10) == 7
    assert whole_number("", "page", 1, 10) is None
    assert whole_number(None, "page", 1, 10) is None
    assert whole_number("0" * 5000 + "5", "page", 1, 10) == 5
    with pytest.raises(ValidationError, match="between 1 and 10"):
        whole_number("11", "page", 1, 10)


@pytest.mark.parametrize(
    "text",
    ["0001-01-01", "1969-12-31", "9999-12-31", "9999-12-31T23:59:59", "0001-01-01T00:00+14:00"],
)
@pytest.mark.parametrize("zone", ["Asia/Tokyo", "America/New_York", "UTC"])
def test_dates_outside_the_searchable_calendar_are_a_message(
    text: str, zone: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The local-time conversion of year 1 or 9999 fails differently in every zone.
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        for end_of_day in (False, True):
            with pytest.raises(ValidationError, match=r"after must be a date from 1970 to 9998"):
                date_bound(text, "after", end_of_day=end_of_day)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_dates_are_read_in_local_time_and_before_covers_its_whole_day() -> None:
    start = date_bound("2026-11-30", "after")
    end = date_bound("2026-11-30", "before", end_of_day=True)
    assert start is not None and end is not None and end - start == 86_400
    assert date_bound(" ", "after") is None
    with pytest.raises(ValidationError, match="after must be a date like 2026-11-30"):
        date_bound("yesterday", "after")


def test_table_sort_reads_sort_and_dir_links() -> None:
    choices = ("cost", "tokens")
    assert table_sort(None, None, choices, "cost") == ("cost", True)
    assert table_sort("tokens", "asc", choices, "cost") == ("tokens", False)
    with pytest.raises(ValidationError, match="sort must be one of cost, tokens"):
        table_sort("price", None, choices, "cost")
    with pytest.raises(ValidationError, match="dir must be asc or desc"):
        table_sort("cost", "up", choices, "cost")
