"""The app's read-only memory manager: the agent's own code, used to preview its prompt."""

from __future__ import annotations

from flask import Flask

from dashboard.agent import MemoryManager, RecallMemoryProvider
from dashboard.web.reader import get_reader
from dashboard.web.resources import app_resource
from dashboard.web.summaries import data_dir


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
