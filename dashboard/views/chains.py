"""Chains: a session's compaction lineage drawn as a timeline, and stitched into one transcript."""

from __future__ import annotations

from flask import Blueprint, request

from dashboard.lineage.chains import totals
from dashboard.lineage.index import check_chain_sort
from dashboard.sessions.transcript import TranscriptRequest
from dashboard.views.sessions import highlight_terms
from dashboard.web.htmx import render_page
from dashboard.web.reader import get_reader

bp = Blueprint("chains", __name__)


@bp.get("/chains")
def index():
    """List the chains, sorted by the column asked for (``?sort=cost&dir=desc``)."""
    sort, descending = check_chain_sort(request.args.get("sort"), request.args.get("dir"))
    index = get_reader().chain_index(sort, descending)
    return render_page("chains.html", "_chains_index.html", "chains-index", index=index)


@bp.get("/chains/<session_id>")
def show(session_id: str):
    """Show a session's chain: the timeline picture, every segment's figures, totals."""
    chain = get_reader().chain(session_id, epochs=True)
    return render_page(
        "chain.html",
        "_chain.html",
        "chain",
        chain=chain,
        family_totals=totals(list(chain.segments)),
    )


@bp.get("/chains/<session_id>/transcript")
def transcript(session_id: str):
    """Show a page of the chain's line as one conversation (``all=1``: inactive rows too)."""
    wanted = TranscriptRequest.from_params(request.args.get)
    chain, stitched = get_reader().stitched_page(session_id, wanted)
    return render_page(
        "chain_transcript.html",
        "_stitched.html",
        "stitched",
        chain=chain,
        stitched=stitched,
        parts=stitched.parts,
        paging=stitched.paging,
        include_inactive=wanted.include_inactive,
        view=wanted.view,
        at=wanted.at,
        q=wanted.query,
        terms=highlight_terms(wanted.query),
    )
