"""Session: one transcript, reached from search results and chain links."""

from __future__ import annotations

from flask import Blueprint, request

from dashboard.errors import QuerySyntaxError
from dashboard.search.query import parse_query
from dashboard.sessions.transcript import TranscriptRequest
from dashboard.web.htmx import render_page
from dashboard.web.reader import get_reader

bp = Blueprint("sessions", __name__)


@bp.get("/sessions/<session_id>")
def show(session_id: str):
    """Show a page of a session's transcript (the one holding ``at``), ``q``'s matches marked."""
    wanted = TranscriptRequest.from_params(request.args.get)
    reader = get_reader()
    shown = reader.session_page(session_id, wanted)
    chain = reader.chain(session_id)
    return render_page(
        "session.html",
        "_transcript.html",
        "transcript",
        transcript=shown.transcript,
        session=shown.transcript.session,
        q=wanted.query,
        terms=shown.terms,
        matches=shown.matches,
        match_count=shown.match_count,
        paging=shown.transcript.paging,
        include_inactive=wanted.include_inactive,
        view=wanted.view,
        at=wanted.at,
        chain_part=chain.shown_part(session_id),
        # Branches, delegations or damaged links still make a family worth a look.
        related=len(chain.segments) - 1,
        chain_damaged=bool(chain.warnings),
        cost=chain.segment(session_id).cost,  # the chain table's figure, by the same rules
    )


def highlight_terms(q: str) -> list[str]:
    """The terms search matched for ``q`` (NOT terms excluded); none if ``q`` is unusable."""
    try:
        return parse_query(q).highlight_terms()
    except QuerySyntaxError:
        return []
