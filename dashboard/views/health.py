"""Liveness for scripts and tests, and the archive syncer's state for the banner."""

from __future__ import annotations

from flask import Blueprint, jsonify, render_template

from dashboard.web.reader import get_reader, sync_state

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    """Whether the store the pages read can be read (200) or why not (503), and the
    syncer's state: importing, last sync, what is wrong with the source or with Recall's
    own data folder. ``degraded`` (200): the pages answer from the archive, but
    Hermes's newest history is not reaching it (``problem`` says why)."""
    state = get_reader().health()
    syncing = sync_state()
    if syncing is not None:
        state["sync"] = syncing.to_json()
        state["source_ok"] = syncing.reason is None
        state["folder_ok"] = syncing.folder_reason is None  # Recall's own data folder
        if state["status"] == "ok" and (syncing.reason or syncing.folder_reason):
            state["status"] = "degraded"
            state["problem"] = syncing.folder_error or syncing.error
    return jsonify(state), 503 if state["status"] == "unavailable" else 200


@bp.get("/sync/banner")
def sync_banner():
    """The first import's banner alone (it polls this while importing, then stops)."""
    return render_template("_sync_banner.html")
