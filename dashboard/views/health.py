"""Liveness for scripts and tests."""

from __future__ import annotations

from flask import Blueprint, jsonify

from dashboard.web.reader import get_reader

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    """Report whether the store can be read (200) or why not (503)."""
    state = get_reader().health()
    return jsonify(state), 200 if state["status"] == "ok" else 503
