"""The app's summary service, created on first use (most requests never need it)."""

from __future__ import annotations

from pathlib import Path

from flask import Flask, current_app

from dashboard.store.recalldb import RecallData
from dashboard.summaries.judge import JudgementCache
from dashboard.summaries.llm import LLMConfig, Summarizer
from dashboard.summaries.service import SummaryService
from dashboard.web.reader import base_reader
from dashboard.web.resources import app_resource

MODES = ("auto", "button", "off")


def init_app(app: Flask) -> None:
    app.config.setdefault("SUMMARIES", "auto")

    @app.context_processor
    def inject_mode() -> dict[str, object]:
        return {"llm_model": LLMConfig.from_mapping(app.config).model}


def data_dir(app: Flask) -> Path:
    configured = app.config.get("DATA_DIR")
    return Path(configured) if configured else base_reader().home.root / "recall"


def get_recall_data() -> RecallData:
    """The app's one RecallData (Recall's own file): one writer for summaries and memory."""

    def build(app: Flask) -> RecallData:
        folder = data_dir(app)
        folder.mkdir(parents=True, exist_ok=True)
        return RecallData(folder / "recall.db")

    return app_resource("recall.data", build, RecallData.close)


def get_summaries() -> SummaryService:
    """The app's SummaryService (one summarizer, one semaphore, one pool per app)."""

    def build(app: Flask) -> SummaryService:
        summarizer = Summarizer(LLMConfig.from_mapping(app.config))
        return SummaryService(base_reader(), get_recall_data(), summarizer)

    return app_resource("recall.summaries", build, SummaryService.close)


def get_judgements() -> JudgementCache:
    """The app's kept judgements of memory entries (summaries/judge.py)."""
    return app_resource("recall.judgements", lambda app: JudgementCache())


def summaries_mode(requested: str | None) -> str:
    """``auto`` (load as cards scroll into view), ``button`` or ``off``; the URL may override."""
    if requested in MODES:
        return requested
    configured = current_app.config.get("SUMMARIES")
    return configured if configured in MODES else "auto"
