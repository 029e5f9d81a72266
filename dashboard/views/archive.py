"""Archive: the prune radar, the sessions only Recall's archive holds, deleting one."""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, redirect, render_template, request, url_for

from dashboard.archive.listing import delete_from_archive, deletion_preview
from dashboard.params import whole_number
from dashboard.store.presence import parse_presence
from dashboard.web.reader import get_reader

bp = Blueprint("archive", __name__)


def _archive() -> Path:
    """The archive of the home shown: what every page reads (``archive.read_choice``)."""
    return get_reader().path


@bp.get("/archive")
def index():
    """The radar of Hermes's next prune, then the archive's sessions (``presence``, ``page``)."""
    # This page is about what only the archive holds: that is what it lists unless asked.
    presence = parse_presence(request.args.get("presence") or "archive")
    page = whole_number(request.args.get("page"), "page", 1, 100_000) or 1
    # Reading every profile: each one's radar; else the profile's (or the home's) own.
    shown = get_reader().archive_page(presence, page)
    return render_template(
        "archive.html",
        shown=shown,
        radars=shown.radars,
        listing=shown.listing,
        deleted=request.args.get("deleted"),
    )


@bp.get("/archive/sessions/<session_id>/delete")
def confirm_delete(session_id: str):
    """Name the session and what deleting it removes; the form posts the delete."""
    preview = deletion_preview(_archive(), session_id, get_reader().scope)
    return render_template("archive_delete.html", preview=preview)


@bp.post("/archive/sessions/<session_id>/delete")
def delete(session_id: str):
    """Delete a session gone from Hermes from the archive (CSRF and origin checked before)."""
    report = delete_from_archive(_archive(), session_id, get_reader().scope)
    return redirect(url_for("archive.index", deleted=report.session_id), code=303)
