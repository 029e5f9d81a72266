"""Costs: estimated against billed spend per period, tokens by kind, headline cards, CSV."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, request

from dashboard.costs.reconcile import recovered_sentence, verdicts
from dashboard.costs.spend import DRIFT_FLAG, PERIODS, Spend
from dashboard.errors import ValidationError
from dashboard.hermes.profiles import ALL, EVERY_PROFILE
from dashboard.web.asked import costs_request, current_time, offered_dimensions
from dashboard.web.costs_table import DIMENSION_LABELS, chart_data, cost_table
from dashboard.web.filters import url_with
from dashboard.web.htmx import render_page
from dashboard.web.profiles import current_profile, served_profiles
from dashboard.web.reader import get_reader
from dashboard.web.rollup import get_cost_rollup

bp = Blueprint("costs", __name__)


def card_profiles() -> tuple[str, ...]:
    """The profiles given a headline card of their own: every one served, when the page
    shows all of them together (a chosen profile's cards are its own)."""
    served = served_profiles()
    if not EVERY_PROFILE.spans(served) or current_profile() != ALL:
        return ()
    return tuple(p.name for p in served)


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
    now = current_time()
    try:
        asked, error = costs_request(now), None
    except ValidationError as exc:  # the page still shows the form, and says why
        asked, error = None, str(exc)
    profiles = card_profiles()
    report = get_reader().costs_report(
        asked, now=now, rollup=get_cost_rollup(), card_profiles=profiles
    )
    error = error or report.error
    context: dict[str, Any] = {
        "report": report,
        "shortcuts": report.shortcuts,
        "args": request.args,
        "sources": report.sources,
        "dimension_labels": {d: DIMENSION_LABELS[d] for d in offered_dimensions()},
        "periods": PERIODS,
        "drift_flag": DRIFT_FLAG,
        "budget": monthly_budget(),
        "error": error,
    }
    if error is None:
        assert report.request is not None and report.spend is not None
        assert report.headlines is not None
        top = report.headlines
        table = cost_table(report.spend)
        context.update(
            costs=report.request,
            spend=report.spend,
            table=table,
            chart=chart_data(report.spend),
            headlines=top,
            last_day=report.last_day,
            sessions=report.sessions,
            drill=drill_links(report.spend),
            drill_period=DRILL_PERIOD[report.request.period],
            # Days (what a column opens into): a row a day and key, dozens of them,
            # and the question was "what cost so much that month": the sessions first.
            sessions_first=report.request.period == "day",
            verdicts=verdicts(report.spend),
            recovered=recovered_sentence(report.spend.totals.recomputed),
            profile_column=bool(profiles),  # every profile shown: name each session's
            over_budget=context["budget"] is not None
            and top.projection is not None
            and top.projection > context["budget"],
        )
    response = render_page("costs.html", "_costs.html", "costs", **context)
    if error:
        response.status_code = 400
    return response


@bp.get("/costs.csv")
def export():
    """Download exactly the rows and columns of the costs tables as CSV."""
    now = current_time()
    asked = costs_request(now)
    report = get_reader().costs_report(asked, now=now, rollup=get_cost_rollup(), cards=False)
    report = report.checked()
    assert report.request is not None and report.spend is not None
    filename = f"recall-costs-{report.request.period}-{report.request.by}.csv"
    return Response(
        cost_table(report.spend).csv_text(report.request.by),
        mimetype="text/csv",
        headers={"Content-Disposition": f"attachment; filename={filename}"},
    )
