"""The app's summary service, created on first use (most requests never need it)."""

from __future__ import annotations

import atexit
import threading
from pathlib import Path

from flask import Flask, current_app

from dashboard.repository.recalldb import RecallData
from dashboard.summaries import SummaryService
from dashboard.summarizer import LLMConfig, Summarizer
from dashboard.web.reader import get_reader

MODES = ("auto", "button", "off")


def init_app(app: Flask) -> None:
    app.config.setdefault("SUMMARIES", "auto")
    app.extensions["recall.summaries.lock"] = threading.Lock()

    @app.context_processor
    def inject_mode() -> dict[str, object]:
        return {"llm_model": LLMConfig.from_mapping(app.config).model}


def data_dir(app: Flask) -> Path:
    configured = app.config.get("DATA_DIR")
    return Path(configured) if configured else get_reader().home.root / "recall"


def get_recall_data() -> RecallData:
    """The app's one RecallData (Recall's own file): one writer for summaries and memory."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    data = app.extensions.get("recall.data")
    if data is not None:
        return data
    with app.extensions["recall.summaries.lock"]:
        data = app.extensions.get("recall.data")
        if data is None:
            folder = data_dir(app)
            folder.mkdir(parents=True, exist_ok=True)
            data = RecallData(folder / "recall.db")
            app.extensions["recall.data"] = data
            atexit.register(data.close)
    return data


def get_summaries() -> SummaryService:
    """The app's SummaryService (one summarizer, one semaphore, one pool per app)."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    service = app.extensions.get("recall.summaries")
    if service is not None:
        return service
    data = get_recall_data()
    with app.extensions["recall.summaries.lock"]:
        service = app.extensions.get("recall.summaries")
        if service is None:
            service = SummaryService(
                get_reader(), data, Summarizer(LLMConfig.from_mapping(app.config))
            )
            app.extensions["recall.summaries"] = service
            atexit.register(service.close)
    return service


def summaries_mode(requested: str | None) -> str:
    """``auto`` (load as cards scroll into view), ``button`` or ``off``; the URL may override."""
    if requested in MODES:
        return requested
    configured = current_app.config.get("SUMMARIES")
    return configured if configured in MODES else "auto"
