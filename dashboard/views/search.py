"""Search: the home page. Live FTS5 search with filters, results grouped by session."""

from __future__ import annotations

from flask import Blueprint, current_app, render_template, request

from dashboard.errors import ValidationError
from dashboard.summaries.llm import LLMConfig
from dashboard.web.asked import search_request
from dashboard.web.htmx import render_page
from dashboard.web.reader import get_reader
from dashboard.web.security import same_origin_only
from dashboard.web.summaries import get_summaries, summaries_mode

bp = Blueprint("search", __name__)


@bp.get("/")
def index():
    """Search every past conversation; an empty query lists recent sessions."""
    try:
        search, error = search_request(), None
    except ValidationError as exc:  # the page still shows the filters, and says why
        search, error = None, str(exc)
    shown = get_reader().search_page(search)
    error = error or shown.error
    # The partial carries a <title> beside the results, so the tab names the query.
    response = render_page(
        "search.html",
        "_search_update.html",
        "results",
        search=None if shown.error else shown.request,
        result=shown.result,
        error=error,
        facets=shown.facets,
        args=request.args,
        # The mode the search ran in (another site's request runs by words: asked.py).
        mode=search.mode if search is not None else request.args.get("mode", "hybrid"),
        summaries=summaries_mode(request.args.get("summaries")),
        llm_ready=LLMConfig.from_mapping(current_app.config).enabled,
        # Values a field has when left alone: left out of live-search URLs.
        defaults={
            "sort": "relevance",
            "mode": "hybrid",
            "summaries": summaries_mode(None),
            "presence": "all",
        },
    )
    if error:
        response.status_code = 400
    return response


@bp.get("/summaries/<session_id>")
@same_origin_only
def summary(session_id: str):
    """Show one session's recap around the query (HTMX polls until it is ready)."""
    q = request.args.get("q", "").strip()
    service, reader = get_summaries(), get_reader()  # the request's profile may read it
    if request.htmx:
        result = service.poll(session_id, q, reader)
        return render_template("_summary.html", session_id=session_id, q=q, summary=result)
    # Without JavaScript: wait for it (the same bounded slots), then show a page.
    (result,) = service.summarize_many([session_id], q, reader)
    return render_template("summary.html", session_id=session_id, q=q, summary=result)
