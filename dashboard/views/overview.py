"""Overview: the last 30 days of activity first, then what Recall opened and what it holds."""

from __future__ import annotations

from flask import Blueprint

from dashboard.errors import NotWritableError
from dashboard.store.recalldb import RecallData
from dashboard.web.asked import current_time, current_timezone
from dashboard.web.htmx import render_page
from dashboard.web.profiles import current_profile
from dashboard.web.reader import get_reader, profile_sync_states
from dashboard.web.rollup import get_cost_rollup
from dashboard.web.summaries import get_recall_data

bp = Blueprint("overview", __name__)


@bp.get("/overview")
def index():
    """Show activity per day, top models and tools, then the home's layout and counts
    (reading every profile: each profile's figures, source and last sync, and the total)."""
    shown = get_reader().overview_page(
        today=current_time().date(),
        timezone=current_timezone(),
        rollup=get_cost_rollup(),
        shelf=_shelf(),
    )
    # Every profile's last sync in its row; one profile's page says its own.
    syncs = profile_sync_states()
    return render_page(
        "overview.html",
        "_overview.html",
        "overview",
        info=shown.info,
        activity=shown.activity,
        activity_problem=shown.activity_problem,
        profile_syncs=syncs,
        own_sync=syncs.get(current_profile()),
    )


def _shelf() -> RecallData | None:
    """Recall's own file, where the sources' figures are kept across restarts; None while
    its folder refuses it (the figures are then kept in memory only)."""
    try:
        return get_recall_data()
    except NotWritableError:
        return None
