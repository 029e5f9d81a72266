"""Session: one transcript, reached from search results and chain links."""

from __future__ import annotations

from flask import Blueprint, request

from dashboard.repository.errors import QuerySyntaxError
from dashboard.repository.query import parse_query
from dashboard.web.htmx import render_page
from dashboard.web.markdown import mentions
from dashboard.web.reader import get_reader

bp = Blueprint("sessions", __name__)


@bp.get("/sessions/<session_id>")
def show(session_id: str):
    """Show a session's transcript, with the terms of ``q`` marked."""
    q = request.args.get("q", "").strip()
    include_inactive = request.args.get("all") == "1"
    reader = get_reader()
    transcript = reader.transcript(session_id, include_inactive=include_inactive)
    chain = reader.chain(session_id)
    terms = highlight_terms(q)
    matches = [m for m in transcript.messages if mentions(m.search_text, terms)] if terms else []
    return render_page(
        "session.html", "_transcript.html", "transcript",
        transcript=transcript, session=transcript.session, q=q, terms=terms, matches=matches,
        include_inactive=include_inactive, chain_part=chain.part_of(session_id),
        cost=chain.segment(session_id).cost,  # the chain table's figure, by the same rules
    )  # fmt: skip


def highlight_terms(q: str) -> list[str]:
    """The terms search matched for ``q`` (NOT terms excluded); none if ``q`` is unusable."""
    try:
        return parse_query(q).highlight_terms()
    except QuerySyntaxError:
        return []
