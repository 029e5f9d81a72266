"""The app's read-only memory manager: the agent's own code, used to preview its prompt."""

from __future__ import annotations

from flask import current_app

from dashboard.agent import MemoryManager, RecallMemoryProvider
from dashboard.web.reader import get_reader
from dashboard.web.summaries import data_dir


def get_preview_manager() -> MemoryManager:
    """A MemoryManager with Recall's provider in read-only mode over the shown home.

    The same classes an agent embeds build the preview, so the page shows what the
    agent would get; read-only, so previewing never writes a session or a turn.
    """
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    manager = app.extensions.get("recall.preview_manager")
    if manager is not None:
        return manager
    with app.extensions["recall.summaries.lock"]:
        manager = app.extensions.get("recall.preview_manager")
        if manager is None:
            reader = get_reader()
            provider = RecallMemoryProvider(reader.home, reader=reader, readonly=True,
                                            data_dir=data_dir(app))  # fmt: skip
            manager = MemoryManager()
            # A missing or broken store is explained by the page, request by request.
            manager.add_provider(provider, check_available=False)
            app.extensions["recall.preview_manager"] = manager
    return manager
