"""The app's read-only memory manager: the agent's own code, used to preview its prompt."""

from __future__ import annotations

import time

from flask import Flask

from dashboard.agent import MemoryManager, RecallMemoryProvider, VolatileBlock
from dashboard.errors import NotFoundError, ValidationError
from dashboard.web.reader import get_reader, one_profile_home
from dashboard.web.resources import app_resource
from dashboard.web.summaries import data_dir

MAX_MESSAGE_CHARS = 20_000  # longer than any chat message; keeps the page's work bounded


def get_preview_manager() -> MemoryManager:
    """A MemoryManager with Recall's provider in read-only mode over the shown profile.

    The same classes an agent embeds build the preview, so the page shows what the
    agent would get; read-only, so previewing never writes a session or a turn. One
    per profile: each has its own memory files, limits and history.
    """
    reader = get_reader()

    def build(app: Flask) -> MemoryManager:
        provider = RecallMemoryProvider(
            reader.home, reader=reader, readonly=True, data_dir=data_dir(app)
        )
        manager = MemoryManager()
        # A missing or broken store is explained by the page, request by request.
        manager.add_provider(provider, check_available=False)
        return manager

    return app_resource(
        f"recall.preview_manager:{reader.scope.label}", build, MemoryManager.shutdown_all
    )


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
