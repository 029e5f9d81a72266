"""Summaries of matched sessions: cached, computed in the background, never blocking search.

A card asks for its summary on its own request. :meth:`SummaryService.poll`
answers at once: the cached summary, or "pending" while a background job (one
of a small pool, each waiting for one of the summarizer's slots) works on it.
Web threads never wait for a model, so search keeps answering while summaries
are in flight. API and CLI callers use :meth:`summarize_many`, which waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from dashboard.errors import NotWritableError, QuerySyntaxError
from dashboard.reader.reader import StateReader
from dashboard.search.query import parse_query
from dashboard.search.sessions import SearchRequest
from dashboard.store.recalldb import RecallData, SummaryKey
from dashboard.summaries.llm import Summarizer, SummaryFailed
from dashboard.summaries.recap import (
    extractive_preview,
    format_transcript,
    truncate_around_matches,
)
from dashboard.text import plain

RAW_PREVIEW_LABEL = "[Raw preview — summarization unavailable]"
DONE_KEEP_S = 300  # finished jobs are kept this long for the card that polls them
FAILED_KEEP_S = 60


@dataclass(frozen=True)
class Summary:
    """A summary to show: from a model, or an extractive preview with the reason."""

    session_id: str
    kind: str  # "model" or "preview"
    text: str  # model text (plain) or preview (safe HTML)
    model: str | None = None
    created_at: float | None = None
    reason: str | None = None
    cached: bool = False

    def plain_text(self) -> str:
        """The summary as plain text (the preview's marks and escapes removed)."""
        if self.kind == "model":
            return self.text
        body = plain(self.text)
        return f"{RAW_PREVIEW_LABEL}\n({self.reason})\n{body}"


def normalise_query(query: str) -> str:
    """The cache's view of a query: its canonical form, case-folded."""
    try:
        return parse_query(query).display.casefold()
    except QuerySyntaxError:
        return " ".join(query.split()).casefold()


class SummaryService:
    """Summaries for one home, cached in Recall's own database."""

    def __init__(self, reader: StateReader, data: RecallData, summarizer: Summarizer) -> None:
        self.reader = reader
        self.data = data
        self.summarizer = summarizer
        # More workers than model slots: jobs queue on the semaphore, and a job that
        # only reads the cache or builds a preview never waits behind a slow model.
        self._pool = ThreadPoolExecutor(
            max_workers=summarizer.config.concurrency * 2, thread_name_prefix="recall-summary"
        )
        self._jobs: dict[SummaryKey, tuple[Future[Summary], float]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.summarizer.close()
        self.data.close()

    @property
    def enabled(self) -> bool:
        return self.summarizer.config.enabled

    # -- the web's path: never waits ---------------------------------------------------

    def poll(
        self, session_id: str, query: str, reader: StateReader | None = None
    ) -> Summary | None:
        """The summary if known now; else start (or keep) a background job and return None.

        ``reader``: the asking request's (its profile's scope); a session it cannot read
        is a NotFoundError, as an unknown one is.
        """
        key = self._key(session_id, query, reader)
        with self._lock:
            self._forget_old()
            job = self._jobs.get(key)
        if job is not None:  # asked for before: this view is its first showing
            return job[0].result() if job[0].done() else None
        cached = self._cached(key)
        if cached is not None:
            return cached
        if not self.enabled:
            return self._preview(session_id, query, "no summarization endpoint is configured")
        with self._lock:
            if key not in self._jobs:
                self._jobs[key] = (self._pool.submit(self._compute, key, query), time.monotonic())
        return None

    # -- API and CLI: wait for every summary, bounded by the model slots -----------------

    def summarize_many(
        self, session_ids: Sequence[str], query: str, reader: StateReader | None = None
    ) -> list[Summary]:
        """Summaries of several sessions, computed concurrently (at most N model calls);
        ``reader`` as in :meth:`poll`."""
        futures = []
        for sid in session_ids:
            key = self._key(sid, query, reader)
            cached = self._cached(key)
            if cached is not None:
                done: Future[Summary] = Future()
                done.set_result(cached)
                futures.append(done)
            else:
                futures.append(self._pool.submit(self._compute, key, query))
        return [f.result() for f in futures]

    # -- the work -------------------------------------------------------------------------

    def _key(self, session_id: str, query: str, reader: StateReader | None = None) -> SummaryKey:
        # NotFoundError for an unknown id, or one the asking scope may not read. The
        # service's own reader sees every profile served: the key and the work are the
        # same whichever scope asked.
        last_id = (reader or self.reader).last_message_id(session_id)
        return SummaryKey(
            home=str(self.reader.path),
            session_id=session_id,
            query=normalise_query(query),
            last_message_id=last_id,
            model=self.summarizer.config.model,
        )

    def _cached(self, key: SummaryKey) -> Summary | None:
        hit = self.data.cached_summary(key)
        if hit is None:
            return None
        return Summary(key.session_id, "model", hit.text, hit.model, hit.created_at, cached=True)

    def _compute(self, key: SummaryKey, query: str) -> Summary:
        transcript = self.reader.transcript(key.session_id)
        full = format_transcript(transcript.messages)
        window = truncate_around_matches(full, query)
        started = transcript.session.started_at
        when = (
            datetime.fromtimestamp(started).strftime("%B %d, %Y at %I:%M %p")
            if started
            else "unknown"
        )
        try:
            text = self.summarizer.summarize(
                window, query, source=transcript.session.source or "unknown", when=when
            )
        except SummaryFailed as exc:
            return Summary(
                key.session_id, "preview", extractive_preview(full, query), reason=str(exc)
            )
        now = time.time()
        try:
            self.data.store_summary(key, text, at=now)
        except NotWritableError:
            pass  # Recall's folder is read-only or full: the summary is shown, not kept
        return Summary(key.session_id, "model", text, key.model, now)

    def _preview(self, session_id: str, query: str, reason: str) -> Summary:
        transcript = self.reader.transcript(session_id)
        full = format_transcript(transcript.messages)
        return Summary(session_id, "preview", extractive_preview(full, query), reason=reason)

    def _forget_old(self) -> None:
        now = time.monotonic()
        for key, (future, started) in list(self._jobs.items()):
            if not future.done():
                continue
            # A failure is retried sooner than a success is forgotten (successes are
            # in the cache anyway); retrying at once would hammer a failing endpoint.
            keep = FAILED_KEEP_S if future.result().kind == "preview" else DONE_KEEP_S
            if now - started > keep:
                del self._jobs[key]


DEFAULT_TOOL_LIMIT = 3  # the seed tool's default number of sessions


def when(ts: float | None) -> str:
    """The seed tool's date style: ``November 30, 2026 at 02:15 PM``."""
    return datetime.fromtimestamp(ts).strftime("%B %d, %Y at %I:%M %p") if ts else "unknown"


def session_search_result(
    reader: StateReader,
    service: SummaryService,
    query: str,
    limit: int = DEFAULT_TOOL_LIMIT,
    exclude: Sequence[str] = (),
) -> dict[str, object]:
    """The seed's ``session_search`` answer; an empty query lists recent sessions (no model).

    ``exclude``: session ids left out (an agent's own current conversation).
    """
    request = SearchRequest(query=query.strip(), per_page=limit, exclude=tuple(exclude))
    found = reader.search(request)
    if found.route == "recent":
        results = [
            {
                "session_id": r.session_id,
                "when": when(r.started_at),
                "source": r.source,
                "model": r.model,
                "title": r.title,
                "preview": r.preview,
            }
            for r in found.results
        ]
        return {
            "success": True,
            "mode": "recent",
            "query": "",
            "results": results,
            "count": len(results),
            "sessions_searched": found.total_sessions,
        }
    summaries = service.summarize_many([r.session_id for r in found.results], query, reader)
    results = [
        {
            "session_id": r.session_id,
            "when": when(r.started_at),
            "source": r.source,
            "model": r.model,
            "summary": s.plain_text(),
        }
        for r, s in zip(found.results, summaries, strict=True)
    ]
    return {
        "success": True,
        "query": query,
        "results": results,
        "count": len(results),
        "sessions_searched": found.total_sessions,
    }
