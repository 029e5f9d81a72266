"""Overview: what Recall opened and what it holds."""

from __future__ import annotations

from flask import Blueprint

from dashboard.web.htmx import render_page
from dashboard.web.reader import get_reader

bp = Blueprint("overview", __name__)


@bp.get("/overview")
def index():
    """Show the opened home: path, detected layout, counts, date range, size."""
    info = get_reader().overview()
    return render_page("overview.html", "_overview.html", "overview", info=info)
