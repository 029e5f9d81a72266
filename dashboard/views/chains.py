"""Chains: a session's compaction lineage drawn as a timeline, and stitched into one transcript."""

from __future__ import annotations

from flask import Blueprint, request

from dashboard.lineage.index import check_chain_sort
from dashboard.web.asked import transcript_request
from dashboard.web.htmx import render_page
from dashboard.web.reader import get_reader

bp = Blueprint("chains", __name__)


@bp.get("/chains")
def index():
    """List the chains, sorted by the column asked for (``?sort=cost&dir=desc``)."""
    sort, descending = check_chain_sort(request.args.get("sort"), request.args.get("dir"))
    index = get_reader().chains_index(sort, descending)
    return render_page("chains.html", "_chains_index.html", "chains-index", index=index)


@bp.get("/chains/<session_id>")
def show(session_id: str):
    """Show a session's chain: the timeline picture, every segment's figures, totals."""
    shown = get_reader().chain_page(session_id)
    return render_page(
        "chain.html",
        "_chain.html",
        "chain",
        chain=shown.chain,
        family_totals=shown.family_totals,
    )


@bp.get("/chains/<session_id>/transcript")
def transcript(session_id: str):
    """Show a page of the chain's line as one conversation (``all=1``: inactive rows too)."""
    wanted = transcript_request()
    shown = get_reader().stitched_page(session_id, wanted)
    return render_page(
        "chain_transcript.html",
        "_stitched.html",
        "stitched",
        chain=shown.chain,
        stitched=shown.page,
        parts=shown.page.parts,
        paging=shown.page.paging,
        include_inactive=wanted.include_inactive,
        view=wanted.view,
        at=wanted.at,
        q=wanted.query,
        terms=shown.terms,
    )
