"""What the agent sees: the volatile end of its system prompt for a message."""

from __future__ import annotations

from flask import Blueprint, request

from dashboard.errors import ValidationError
from dashboard.web.agent_memory import preview_block
from dashboard.web.htmx import render_page
from dashboard.web.profiles import served_profiles
from dashboard.web.reader import profile_home

bp = Blueprint("preview", __name__)


@bp.get("/preview")
def index():
    """Type a message; see USER.md, MEMORY.md, recalled memories and the context line."""
    message = request.args.get("message", "")
    session_id = request.args.get("session", "").strip() or None
    model = request.args.get("model", "").strip() or None
    context: dict[str, object] = {
        "message": message,
        "session_id": session_id or "",
        "model": model or "",
        "error": None,
        "block": None,
        "choose_profile": [],
    }
    if profile_home() is None:  # all profiles: whose agent? The page asks.
        context["choose_profile"] = [p.name for p in served_profiles()]
    else:
        try:
            context["block"] = preview_block(message, session_id, model)
        except ValidationError as exc:
            context["error"] = str(exc)
    response = render_page("preview.html", "_preview.html", "preview", **context)
    if context["error"]:
        response.status_code = 400
    return response
