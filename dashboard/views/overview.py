"""Overview: the last 30 days of activity first, then what Recall opened and what it holds."""

from __future__ import annotations

from flask import Blueprint

from dashboard.errors import ValidationError
from dashboard.reader.activity import recent_activity
from dashboard.views.costs import current_time, current_timezone
from dashboard.web.htmx import render_page
from dashboard.web.profiles import current_profile
from dashboard.web.reader import get_reader, profile_sync_states
from dashboard.web.rollup import get_cost_rollup

bp = Blueprint("overview", __name__)


@bp.get("/overview")
def index():
    """Show activity per day, top models and tools, then the home's layout and counts
    (reading every profile: each profile's figures, source and last sync, and the total)."""
    reader = get_reader()
    info = reader.overview()
    activity, problem = None, None
    try:
        activity = recent_activity(
            reader, get_cost_rollup(), today=current_time().date(), timezone=current_timezone()
        )
    except ValidationError as exc:  # a bad RECALL_TIMEZONE: the diagnostics still help
        problem = str(exc)
    # Every profile's last sync in its row; one profile's page says its own.
    syncs = profile_sync_states()
    return render_page(
        "overview.html",
        "_overview.html",
        "overview",
        info=info,
        activity=activity,
        activity_problem=problem,
        profile_syncs=syncs,
        own_sync=syncs.get(current_profile()),
    )
