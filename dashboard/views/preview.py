"""What the agent sees: the volatile end of its system prompt for a message."""

from __future__ import annotations

from flask import Blueprint, abort, request

from dashboard.errors import ValidationError
from dashboard.meaning.embedder import EmbedderChoice
from dashboard.web.agent_memory import preview_block
from dashboard.web.htmx import render_page
from dashboard.web.profiles import served_profiles
from dashboard.web.reader import profile_home
from dashboard.web.security import CROSS_SITE_REFUSED, from_this_site

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
    if EmbedderChoice.from_env().calls_a_model and not from_this_site():
        # The recall is by meaning too, and with an embeddings endpoint that is a model
        # call: refused to another site's request, as every GET that calls a model is.
        abort(403, description=CROSS_SITE_REFUSED)
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
