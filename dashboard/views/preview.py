"""What the agent sees: the volatile end of its system prompt for a message."""

from __future__ import annotations

import time

from flask import Blueprint, request

from dashboard.agent import VolatileBlock
from dashboard.errors import NotFoundError, ValidationError
from dashboard.web.agent_memory import get_preview_manager
from dashboard.web.htmx import render_page
from dashboard.web.profiles import served_profiles
from dashboard.web.reader import one_profile_home, profile_home

bp = Blueprint("preview", __name__)

MAX_MESSAGE_CHARS = 20_000  # longer than any chat message; keeps the page's work bounded


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


def preview_block(message: str, session_id: str | None, model: str | None) -> VolatileBlock:
    """The block for a message; ValidationError for a message too long, an unknown session,
    or no one profile to preview (each profile's agent has its own memory and history)."""
    one_profile_home()
    if len(message) > MAX_MESSAGE_CHARS:
        raise ValidationError(
            f"The message is {len(message):,} characters; the preview takes at most "
            f"{MAX_MESSAGE_CHARS:,}."
        )
    return get_preview_manager().volatile_block(
        message, session_id=session_id, model=model or session_model(session_id), now=time.time()
    )


def session_model(session_id: str | None) -> str | None:
    """The model of the session being continued, else of the most recent session."""
    provider = get_preview_manager().builtin
    assert provider is not None
    try:
        return provider.latest_model(session_id)
    except NotFoundError as exc:
        raise ValidationError(f"No session with id {session_id!r} in this home.") from exc
