"""What the costs screen is asked (its query string), parsed in one place for the page,
its CSV and the JSON API; and the date ranges the page offers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Any, Protocol

from dashboard.costs.costly import check_sort
from dashboard.costs.spend import DIMENSIONS, PERIODS
from dashboard.errors import ValidationError

DEFAULT_MONTHS = 13  # a year back and the current month: last December is always shown
MAX_RANGE_DAYS = 3650  # costs.plan refuses ranges over ten years
DEPRECATED_BEFORE = "before= is the old name of to= (the first day not included): read as to="


class Params(Protocol):
    """A query string (werkzeug's ``MultiDict``): one value, or every value, of a name."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def getlist(self, key: str) -> list[str]: ...


@dataclass(frozen=True)
class CostsRequest:
    """The costs filters of a query string, with the default range filled in."""

    period: str
    by: str
    start: date
    end: date  # exclusive: the first day not included (``to``)
    sources: tuple[str, ...]
    notices: tuple[str, ...] = ()  # what the page and the JSON say about the query
    timezone: str | None = None  # the user's (None: the machine's)
    sort: str = "cost"  # the costliest sessions' order (costly.SORTS)
    descending: bool = True
    start_given: bool = True  # False: ``from`` was not in the query (the default range)

    @classmethod
    def from_params(
        cls,
        params: Params,
        *,
        today: date,
        timezone: str | None = None,
        dimensions: Iterable[str] = DIMENSIONS,
    ) -> CostsRequest:
        """The request a query string describes (:class:`ValidationError` if malformed).

        ``today``: the user's day, which the default range ends with; ``dimensions``: the
        ``by=`` values offered (``profile`` only when several profiles are served).
        ``before=`` (the form's old field name) is read as ``to=`` and said so; given
        beside a different ``to=`` it is an error rather than a silent choice.
        """
        period = params.get("period") or "month"
        by = params.get("by") or "provider"
        if period not in PERIODS:
            raise ValidationError(f"period must be one of {', '.join(PERIODS)}")
        offered = list(dimensions)
        if by not in offered:
            raise ValidationError(f"by must be one of {', '.join(offered)}")
        default_start, default_end = default_range(period, today)
        given_start = _day(params.get("from"), "from")
        end = _day(params.get("to"), "to")
        notices: list[str] = []
        before = _day(params.get("before"), "before")
        if before is not None:
            if end is not None and end != before:
                raise ValidationError("give to= or before= (its old name), not both")
            end = before
            notices.append(DEPRECATED_BEFORE)
        sources = tuple(sorted({s for s in params.getlist("source") if s}))
        sort, descending = check_sort(params.get("sort"), params.get("dir"))
        return cls(
            period,
            by,
            given_start or default_start,
            end or default_end,
            sources,
            tuple(notices),
            timezone,
            sort,
            descending,
            start_given=given_start is not None,
        )

    def from_first(self, first_activity: date | None) -> CostsRequest:
        """This request with a default range begun no earlier than the period of the
        first session (a home used for three months shows three columns, not ten empty
        ones before them); a ``from`` the query gave is kept as given."""
        if self.start_given or first_activity is None:
            return self
        first = period_start(self.period, first_activity)
        if first <= self.start or first >= self.end:
            return self
        return replace(self, start=first)

    @property
    def last_day(self) -> date:
        """The last day the range includes (``to`` is exclusive)."""
        return self.end - timedelta(days=1)

    def options(self) -> dict[str, Any]:
        """Keyword arguments for a spend question (:func:`dashboard.costs.spend.plan`)."""
        return {
            "period": self.period,
            "by": self.by,
            "start": self.start,
            "end": self.end,
            "timezone": self.timezone,
            "sources": self.sources,
        }


def _day(raw: str | None, name: str) -> date | None:
    if not raw or not raw.strip():
        return None
    try:
        return date.fromisoformat(raw.strip())
    except ValueError as exc:
        raise ValidationError(f"{name} must be a date like 2026-11-30") from exc


@dataclass(frozen=True)
class Shortcut:
    """A range one click away: ``from`` and ``to`` (exclusive) for the URL."""

    label: str
    start: date
    end: date


def add_months(first: date, months: int) -> date:
    """The first day of the month ``months`` after (or before) ``first``'s month."""
    index = first.year * 12 + first.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def period_start(period: str, day: date) -> date:
    """The first day of the month, week (Monday) or day ``day`` falls in."""
    if period == "month":
        return day.replace(day=1)
    if period == "week":
        return day - timedelta(days=day.weekday())
    return day


def default_range(period: str, today: date) -> tuple[date, date]:
    """Thirteen months or twelve weeks ending with the current one, or the last thirty days."""
    if period == "month":
        first = today.replace(day=1)
        return add_months(first, 1 - DEFAULT_MONTHS), add_months(first, 1)
    if period == "week":
        monday = today - timedelta(days=today.weekday())
        return monday - timedelta(weeks=11), monday + timedelta(weeks=1)
    return today - timedelta(days=29), today + timedelta(days=1)


def range_shortcuts(today: date, first_activity: date | None) -> list[Shortcut]:
    """This month, last month, the last 30 days, this year, and all time (from the first
    session through the current month)."""
    this_month = today.replace(day=1)
    next_month = add_months(this_month, 1)
    start = first_activity.replace(day=1) if first_activity else this_month
    start = max(min(start, this_month), next_month - timedelta(days=MAX_RANGE_DAYS))
    return [
        Shortcut("This month", this_month, next_month),
        Shortcut("Last month", add_months(this_month, -1), this_month),
        Shortcut("Last 30 days", today - timedelta(days=29), today + timedelta(days=1)),
        Shortcut("This year", date(today.year, 1, 1), date(today.year + 1, 1, 1)),
        Shortcut("All time", start, next_month),
    ]
