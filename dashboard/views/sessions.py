"""Session: one transcript, reached from search results and chain links."""

from __future__ import annotations

from flask import Blueprint, render_template

from dashboard.web.asked import transcript_request
from dashboard.web.htmx import render_page
from dashboard.web.reader import get_reader

bp = Blueprint("sessions", __name__)


@bp.get("/sessions/<session_id>")
def show(session_id: str):
    """Show a page of a session's transcript (the one holding ``at``), ``q``'s matches marked."""
    wanted = transcript_request()
    shown = get_reader().session_page(session_id, wanted)
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
        chain_part=shown.chain_part,
        related=shown.related,
        chain_damaged=shown.chain_damaged,
        cost=shown.cost,
    )


@bp.get("/sessions/<session_id>/similar")
def similar(session_id: str):
    """The session page's "Similar conversations" (loaded after the page: the meaning
    index is read, not the transcript)."""
    found = get_reader().similar_sessions(session_id)
    return render_template("_similar.html", similar=found, session_id=session_id)
