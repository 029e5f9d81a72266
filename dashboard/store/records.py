"""The rows a writer hands the store: messages, usage, whole sessions; a batch's bulk insert."""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dashboard.errors import ValidationError
from dashboard.hermes.conventions import COMPACTION_MARKER

TITLE_MAX_CHARS = 100

# Cost statuses from strongest to weakest evidence; a session mixing several
# reports the weakest, so a partly-unknown session is never shown as fully known.
COST_STATUS_ORDER = ("actual", "included", "estimated", "unknown")

WRITTEN_MESSAGE_COLUMNS = (
    "session_id",
    "role",
    "content",
    "tool_call_id",
    "tool_calls",
    "tool_name",
    "timestamp",
    "token_count",
    "finish_reason",
    "reasoning",
    "active",
    "compacted",
)


def carrier_text(summary: str) -> str:
    """A compaction summary as its carrier row holds it: led by the compressor's prefix."""
    if summary.lstrip().startswith(("[CONTEXT", COMPACTION_MARKER)):
        return summary
    return f"{COMPACTION_MARKER}\n{summary}"


@dataclass(slots=True)
class NewMessage:
    """One message to append. ``tool_calls`` may be a list (stored as JSON text)."""

    role: str
    content: str | None = None
    tool_calls: str | list[Any] | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    reasoning: str | None = None
    finish_reason: str | None = None
    token_count: int | None = None
    timestamp: float | None = None
    # In-place compaction's flags (conventions): 1/0 live; 0/1 archived by a
    # compaction (still shown and searched); 0/0 rewound.
    active: int = 1
    compacted: int = 0

    def row(self, session_id: str, now: float) -> tuple[Any, ...]:
        calls = self.tool_calls
        if isinstance(calls, list):
            calls = json.dumps(calls, ensure_ascii=False) if calls else None
        return (
            session_id,
            self.role,
            self.content,
            self.tool_call_id,
            calls,
            self.tool_name,
            self.timestamp if self.timestamp is not None else now,
            self.token_count,
            self.finish_reason,
            self.reasoning,
            self.active,
            self.compacted,
        )

    def call_count(self) -> int:
        if not self.tool_calls:
            return 0
        if isinstance(self.tool_calls, list):
            return len(self.tool_calls)
        try:
            parsed = json.loads(self.tool_calls)
        except ValueError:
            return 1
        return len(parsed) if isinstance(parsed, list) else 1


@dataclass(slots=True)
class Usage:
    """Tokens and cost of API calls for one (model, provider, task) of a session."""

    model: str = ""
    billing_provider: str = ""
    billing_base_url: str = ""
    billing_mode: str = ""
    task: str = ""
    api_calls: int = 1
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    estimated_cost_usd: float | None = None
    actual_cost_usd: float | None = None
    cost_status: str = "unknown"
    cost_source: str = "none"
    pricing_version: str | None = None
    at: float | None = None


@dataclass(slots=True)
class ImportSession:
    """A whole session for the bulk path: the row, its messages and usage."""

    id: str
    source: str
    started_at: float
    messages: list[NewMessage] = field(default_factory=list)
    usage: list[Usage] = field(default_factory=list)
    model: str | None = None
    parent_session_id: str | None = None
    ended_at: float | None = None
    end_reason: str | None = None
    title: str | None = None
    user_id: str | None = None
    model_config: str | None = None
    system_prompt: str | None = None
    billing_provider: str | None = None


def new_session_id(at: float | None = None) -> str:
    """A Hermes-style id: ``20260722_204335_d62c16``."""
    stamp = datetime.fromtimestamp(time.time() if at is None else at).strftime("%Y%m%d_%H%M%S")
    return f"{stamp}_{secrets.token_hex(3)}"


def weakest_status(statuses: Iterable[str | None]) -> str | None:
    """The least certain of several cost statuses (unknown beats estimated beats actual)."""
    ranked = [s for s in statuses if s in COST_STATUS_ORDER]
    return max(ranked, key=COST_STATUS_ORDER.index) if ranked else None


def batches(sessions: Iterable[ImportSession], size: int) -> Iterator[list[ImportSession]]:
    batch: list[ImportSession] = []
    count = 0
    for s in sessions:
        batch.append(s)
        count += len(s.messages)
        if count >= size:
            yield batch
            batch, count = [], 0
    if batch:
        yield batch


def insert_batch(conn: sqlite3.Connection, batch: list[ImportSession]) -> int:
    session_rows = []
    message_rows = []
    usage_rows = []
    for s in batch:
        rows = [m.row(s.id, s.started_at) for m in s.messages]
        message_rows.extend(rows)
        u = s.usage
        est = [x.estimated_cost_usd for x in u if x.estimated_cost_usd is not None]
        act = [x.actual_cost_usd for x in u if x.actual_cost_usd is not None]
        last = max((r[6] for r in rows), default=s.started_at)
        session_rows.append(
            (
                s.id,
                s.source,
                s.user_id,
                s.model,
                s.model_config,
                s.system_prompt,
                s.parent_session_id,
                s.started_at,
                s.ended_at,
                s.end_reason,
                len(rows),
                sum(m.call_count() for m in s.messages),
                sum(x.input_tokens for x in u),
                sum(x.output_tokens for x in u),
                sum(x.cache_read_tokens for x in u),
                sum(x.cache_write_tokens for x in u),
                sum(x.reasoning_tokens for x in u),
                s.billing_provider or (u[0].billing_provider if u else None),
                sum(est) if est else None,
                sum(act) if act else None,
                weakest_status(x.cost_status for x in u),
                u[-1].cost_source if u else None,
                next((x.pricing_version for x in reversed(u) if x.pricing_version), None),
                clean_title(s.title) if s.title else None,
                last,
                sum(x.api_calls for x in u),
            )
        )
        for x in u:
            at = x.at if x.at is not None else s.started_at
            usage_rows.append(
                (
                    s.id,
                    x.model,
                    x.billing_provider,
                    x.billing_base_url,
                    x.billing_mode,
                    x.task,
                    x.api_calls,
                    x.input_tokens,
                    x.output_tokens,
                    x.cache_read_tokens,
                    x.cache_write_tokens,
                    x.reasoning_tokens,
                    x.estimated_cost_usd,
                    x.actual_cost_usd,
                    x.cost_status,
                    x.cost_source,
                    x.pricing_version,
                    at,
                    at,
                )
            )
    conn.executemany(
        "INSERT INTO sessions (id, source, user_id, model, model_config, system_prompt,"
        " parent_session_id, started_at, ended_at, end_reason, message_count, tool_call_count,"
        " input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,"
        " reasoning_tokens, billing_provider, estimated_cost_usd, actual_cost_usd,"
        " cost_status, cost_source, pricing_version, title, last_activity_at, api_call_count)"
        " VALUES (" + ",".join("?" * 26) + ")",
        session_rows,
    )
    conn.executemany(
        f"INSERT INTO messages ({', '.join(WRITTEN_MESSAGE_COLUMNS)}) "
        f"VALUES ({', '.join('?' for _ in WRITTEN_MESSAGE_COLUMNS)})",
        message_rows,
    )
    conn.executemany(
        "INSERT INTO session_model_usage (session_id, model, billing_provider,"
        " billing_base_url, billing_mode, task, api_call_count, input_tokens, output_tokens,"
        " cache_read_tokens, cache_write_tokens, reasoning_tokens, estimated_cost_usd,"
        " actual_cost_usd, cost_status, cost_source, pricing_version, first_seen, last_seen)"
        " VALUES (" + ",".join("?" * 19) + ")",
        usage_rows,
    )
    return len(message_rows)


def clean_title(title: str) -> str:
    clean = " ".join(str(title).split())
    if not clean:
        raise ValidationError("a title cannot be blank")
    if len(clean) > TITLE_MAX_CHARS:
        raise ValidationError(
            f"a title is at most {TITLE_MAX_CHARS} characters ({len(clean)} given)"
        )
    return clean
