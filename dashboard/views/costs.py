"""Costs: estimated against billed spend per period, tokens by kind, headline cards, CSV."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from flask import Blueprint, Response, current_app, request

from dashboard.costs.costly import check_sort
from dashboard.costs.headlines import headlines
from dashboard.costs.spend import DIMENSIONS, DRIFT_FLAG, PERIODS, Spend
from dashboard.errors import ValidationError
from dashboard.hermes.profiles import ALL, EVERY_PROFILE
from dashboard.web.costs_table import DIMENSION_LABELS, chart_data, cost_table
from dashboard.web.filters import url_with
from dashboard.web.htmx import render_page
from dashboard.web.profiles import current_profile, served_profiles
from dashboard.web.reader import get_reader
from dashboard.web.rollup import get_cost_rollup, spend_function

bp = Blueprint("costs", __name__)


@dataclass(frozen=True)
class CostsRequest:
    """The costs filters of a query string, with the default range filled in."""

    period: str
    by: str
    start: date
    end: date  # exclusive: the first day not included (``to``)
    sources: tuple[str, ...]
    notices: tuple[str, ...] = ()  # what the page and the JSON say about the query

    @property
    def last_day(self) -> date:
        """The last day the range includes (``to`` is exclusive)."""
        return self.end - timedelta(days=1)

    def options(self) -> dict[str, Any]:
        """Keyword arguments for ``StateReader.spend``."""
        return {
            "period": self.period,
            "by": self.by,
            "start": self.start,
            "end": self.end,
            "timezone": current_timezone(),
            "sources": self.sources,
        }


@dataclass(frozen=True)
class Shortcut:
    """A range one click away: ``from`` and ``to`` (exclusive) for the URL."""

    label: str
    start: date
    end: date


def current_timezone() -> str | None:
    """The user's timezone: ``TIMEZONE`` from the config, else the machine's."""
    return current_app.config.get("TIMEZONE") or None


def current_time() -> datetime:
    """Now, in the user's timezone (``COSTS_NOW``, epoch seconds, pins it for tests)."""
    stamp = float(current_app.config.get("COSTS_NOW") or time.time())
    zone = current_timezone()
    if zone:
        return datetime.fromtimestamp(stamp, ZoneInfo(zone))
    return datetime.fromtimestamp(stamp).astimezone()


def add_months(first: date, months: int) -> date:
    """The first day of the month ``months`` after (or before) ``first``'s month."""
    index = first.year * 12 + first.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


DEFAULT_MONTHS = 13  # a year back and the current month: last December is always shown


def default_range(period: str, today: date) -> tuple[date, date]:
    """Thirteen months or twelve weeks ending with the current one, or the last thirty days."""
    if period == "month":
        first = today.replace(day=1)
        return add_months(first, 1 - DEFAULT_MONTHS), add_months(first, 1)
    if period == "week":
        monday = today - timedelta(days=today.weekday())
        return monday - timedelta(weeks=11), monday + timedelta(weeks=1)
    return today - timedelta(days=29), today + timedelta(days=1)


MAX_RANGE_DAYS = 3650  # costs.plan refuses ranges over ten years


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


def offered_dimensions() -> dict[str, str]:
    """The dimensions of the page, its CSV and JSON, with their labels: ``profile`` only
    when this Recall serves 2+ profiles (with one, everything stays as it always was)."""
    several = EVERY_PROFILE.spans(served_profiles())
    return {d: DIMENSION_LABELS[d] for d in DIMENSIONS if d != "profile" or several}


def card_profiles() -> tuple[str, ...]:
    """The profiles given a headline card of their own: every one served, when the page
    shows all of them together (a chosen profile's cards are its own)."""
    served = served_profiles()
    if not EVERY_PROFILE.spans(served) or current_profile() != ALL:
        return ()
    return tuple(p.name for p in served)


DEPRECATED_BEFORE = "before= is the old name of to= (the first day not included): read as to="


def parse_costs_request(today: date) -> CostsRequest:
    """The CostsRequest of this request's query string (ValidationError if malformed).

    ``before=`` (the form's old field name) is read as ``to=`` and said so; given
    beside a different ``to=`` it is an error rather than a silent choice.
    """
    args = request.args
    period = args.get("period") or "month"
    by = args.get("by") or "provider"
    if period not in PERIODS:
        raise ValidationError(f"period must be one of {', '.join(PERIODS)}")
    offered = offered_dimensions()
    if by not in offered:
        raise ValidationError(f"by must be one of {', '.join(offered)}")
    default_start, default_end = default_range(period, today)
    start = _day(args.get("from"), "from") or default_start
    end = _day(args.get("to"), "to")
    notices: list[str] = []
    before = _day(args.get("before"), "before")
    if before is not None:
        if end is not None and end != before:
            raise ValidationError("give to= or before= (its old name), not both")
        end = before
        notices.append(DEPRECATED_BEFORE)
    sources = tuple(sorted({s for s in args.getlist("source") if s}))
    return CostsRequest(period, by, start, end or default_end, sources, tuple(notices))


def _day(raw: str | None, name: str) -> date | None:
    if not raw or not raw.strip():
        return None
    try:
        return date.fromisoformat(raw.strip())
    except ValueError as exc:
        raise ValidationError(f"{name} must be a date like 2026-11-30") from exc


def monthly_budget() -> float | None:
    """``MONTHLY_BUDGET_USD`` (or ``RECALL_MONTHLY_BUDGET_USD``) as dollars; None when unset."""
    raw = current_app.config.get("MONTHLY_BUDGET_USD")
    if raw in (None, ""):
        return None
    try:
        budget = float(raw)
    except (TypeError, ValueError):
        return None
    return budget if budget > 0 else None


DRILL_PERIOD = {"month": "day", "week": "day", "day": "day"}  # a bar opens its days


def drill_links(found: Spend) -> list[dict[str, Any]]:
    """One link per chart column: that period's days and the sessions that cost most in it."""
    period = DRILL_PERIOD[found.period]
    totals: dict[str, float | None] = {}
    for cell in found.rows:
        if cell.effective_usd is not None:
            totals[cell.period] = (totals.get(cell.period) or 0.0) + cell.effective_usd
    return [
        {
            "label": label,
            "effective_usd": totals.get(label),
            "href": url_with(
                **{
                    "from": start.isoformat(),
                    "to": end.isoformat(),
                    "period": period,
                    "before": None,
                }
            ),
        }
        for label, start, end in found.period_ranges()
    ]


@bp.get("/costs")
def index():
    """Show spend per period (estimated against billed), tokens, this month's headlines."""
    reader = get_reader()
    now = current_time()
    first = reader.first_activity()
    context: dict[str, Any] = {
        "shortcuts": range_shortcuts(
            now.date(), None if first is None else datetime.fromtimestamp(first, now.tzinfo).date()
        ),
        "args": request.args,
        "sources": reader.search_facets().get("sources", []),
        "dimension_labels": offered_dimensions(),
        "periods": PERIODS,
        "drift_flag": DRIFT_FLAG,
        "budget": monthly_budget(),
        "error": None,
    }
    try:
        costs = parse_costs_request(now.date())
        spend = spend_function()
        found = spend(**costs.options())
        sort, descending = check_sort(request.args.get("sort"), request.args.get("dir"))
        sessions = reader.costly_sessions(
            get_cost_rollup(), sort=sort, descending=descending, **costs.options()
        )
    except ValidationError as exc:
        context["error"] = str(exc)
    else:
        top = headlines(
            spend,
            now=now,
            timezone=current_timezone(),
            sources=costs.sources,
            profiles=card_profiles(),
        )
        context.update(
            costs=costs,
            spend=found,
            table=cost_table(found),
            chart=chart_data(found),
            headlines=top,
            last_day=costs.last_day,
            sessions=sessions,
            drill=drill_links(found),
            drill_period=DRILL_PERIOD[costs.period],
            over_budget=context["budget"] is not None
            and top.projection is not None
            and top.projection > context["budget"],
        )
    response = render_page("costs.html", "_costs.html", "costs", **context)
    if context["error"]:
        response.status_code = 400
    return response


@bp.get("/costs.csv")
def export():
    """Download exactly the rows and columns of the costs tables as CSV."""
    costs = parse_costs_request(current_time().date())
    table = cost_table(spend_function()(**costs.options()))
    filename = f"recall-costs-{costs.period}-{costs.by}.csv"
    return Response(
        table.csv_text(costs.by),
        mimetype="text/csv",
        headers={"Content-Disposition": f"attachment; filename={filename}"},
    )
