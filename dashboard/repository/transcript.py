"""One session's transcript as a person reads it, and its compaction-chain neighbours.

Every ``state.db`` shape is read through the columns it actually has: SELECT lists
are built from :class:`Layout`, so a file last written by old code (no cost
columns, no ``active``/``compacted``) reads as well as a current one.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any

from dashboard.repository.chains import Chain, Segment
from dashboard.repository.content import decode_content, is_structured
from dashboard.repository.errors import NotFoundError
from dashboard.repository.layout import Layout

SUMMARY_PREFIXES = ("[CONTEXT COMPACTION", "[CONTEXT SUMMARY]:")
# Children carrying one of these markers are branches, delegations or resets:
# they hang off a session without continuing it.
LINEAGE_MARKERS = ("_branched_from", "_delegate_from", "_reset_from")
TITLE_PREVIEW_CHARS = 80
# Tool output fields shown as the body of a result; the rest become short facts.
_OUTPUT_KEYS = ("output", "content", "result", "stdout", "text", "error", "stderr")

_SESSION_COLUMNS = (
    "id", "title", "source", "model", "started_at", "ended_at", "end_reason",
    "parent_session_id", "message_count", "tool_call_count", "input_tokens",
    "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
    "estimated_cost_usd", "actual_cost_usd", "cost_status", "cost_source",
    "billing_provider", "archived",
)  # fmt: skip
_MESSAGE_COLUMNS = (
    "id", "role", "content", "tool_calls", "tool_call_id", "tool_name", "reasoning",
    "reasoning_content", "timestamp", "finish_reason", "token_count", "active", "compacted",
    "display_kind",
)  # fmt: skip


@dataclass(frozen=True)
class SessionInfo:
    """A ``sessions`` row; fields the file has no column for are None."""

    id: str
    source: str | None = None
    title: str | None = None
    model: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    end_reason: str | None = None
    parent_session_id: str | None = None
    message_count: int | None = None
    tool_call_count: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    estimated_cost_usd: float | None = None
    actual_cost_usd: float | None = None
    cost_status: str | None = None
    cost_source: str | None = None
    billing_provider: str | None = None
    archived: bool = False

    @property
    def tokens(self) -> dict[str, int]:
        """Token counts by kind, only the kinds this file records and that are non-zero."""
        kinds = {
            "input": self.input_tokens,
            "output": self.output_tokens,
            "cache read": self.cache_read_tokens,
            "cache write": self.cache_write_tokens,
            "reasoning": self.reasoning_tokens,
        }
        return {k: v for k, v in kinds.items() if v}


@dataclass(frozen=True)
class ToolCall:
    """One OpenAI-format function call; ``malformed`` when the stored JSON was not."""

    id: str | None
    name: str
    arguments: str  # pretty-printed JSON, or the stored text when it is not JSON
    preview: str = ""  # one line, for the collapsed view
    malformed: bool = False


@dataclass(frozen=True)
class ToolOutput:
    """A tool result split into its readable body and a few short facts (exit code...)."""

    body: str
    facts: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class TranscriptMessage:
    """One message as shown: decoded text, parsed tool calls, visibility flags."""

    id: int
    role: str
    text: str
    structured: bool = False
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    reasoning: str | None = None
    timestamp: float | None = None
    finish_reason: str | None = None
    token_count: int | None = None
    is_compaction_summary: bool = False
    inactive: bool = False  # active=0: compacted in place, or rewound
    compacted: bool = False  # kept as history by in-place compaction (still visible)
    hidden: bool = False  # display_kind='hidden': never shown unless all rows are asked for

    @property
    def search_text(self) -> str:
        """Everything a query could match in this message (text, calls, reasoning)."""
        parts = [self.text, self.tool_name or "", self.reasoning or ""]
        parts += [f"{c.name} {c.arguments}" for c in self.tool_calls]
        return "\n".join(p for p in parts if p)

    @property
    def tool_output(self) -> ToolOutput:
        """The result of a tool message, readable: JSON unwrapped, multi-line text kept."""
        return format_tool_output(self.text)


@dataclass(frozen=True)
class Transcript:
    """A session and its messages in conversation order."""

    session: SessionInfo
    messages: tuple[TranscriptMessage, ...]
    include_inactive: bool = False
    # Rows left out by the visibility filter (rewound, hidden); None when the file
    # has no visibility columns, so every row is always shown.
    left_out: int | None = None
    neighbours: dict[str, Any] = field(default_factory=dict)

    @property
    def display_title(self) -> str:
        """The title, else a preview of the first user message, else the id."""
        if self.session.title:
            return self.session.title
        for m in self.messages:
            if m.role == "user" and not m.is_compaction_summary and m.text.strip():
                return preview(m.text, TITLE_PREVIEW_CHARS)
        return self.session.id

    @property
    def callers(self) -> dict[str, int]:
        """tool_call_id → id of the assistant message that made the call."""
        return {c.id: m.id for m in self.messages for c in m.tool_calls if c.id}

    def to_json(self) -> dict[str, Any]:
        """The ``/api/sessions/<id>/messages`` shape."""
        return {
            "session": asdict(self.session),
            "neighbours": self.neighbours,
            "include_inactive": self.include_inactive,
            "left_out": self.left_out,
            "messages": [
                {
                    "id": m.id,
                    "role": m.role,
                    "content": m.text,
                    "structured": m.structured,
                    "tool_calls": [
                        {"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls
                    ],
                    "tool_call_id": m.tool_call_id,
                    "tool_name": m.tool_name,
                    "reasoning": m.reasoning,
                    "timestamp": m.timestamp,
                    "finish_reason": m.finish_reason,
                    "is_compaction_summary": m.is_compaction_summary,
                    "inactive": m.inactive,
                }
                for m in self.messages
            ],
        }


def load_transcript(
    conn: sqlite3.Connection, layout: Layout, session_id: str, *, include_inactive: bool = False
) -> Transcript:
    """Read one session and its messages.

    Args:
        conn: a connection to the state.db (read-only is enough).
        layout: what the file holds (decides the SELECT lists and visibility filter).
        session_id: the session to read.
        include_inactive: also return rows a person normally does not see (rewound,
            hidden), each flagged.

    Raises:
        NotFoundError: no such session.
    """
    session = _session(conn, layout, session_id)
    if session is None:
        raise NotFoundError(f"There is no session {session_id!r} in this home.")
    if "messages" not in layout.tables:
        return Transcript(session, (), include_inactive)
    cols = [c for c in _MESSAGE_COLUMNS if c in layout.message_columns]
    where = "m.session_id = ?"
    if not include_inactive:
        where += f" AND {layout.visible_messages_sql('m')}"
    order = (
        "coalesce(m.display_order, m.id), m.id"
        if "display_order" in layout.message_columns
        else "m.timestamp, m.id"
    )
    cur = conn.execute(
        f"SELECT {', '.join('m.' + c for c in cols)} FROM messages m "
        f"WHERE {where} ORDER BY {order}",
        (session_id,),
    )
    messages = tuple(_message(row) for row in _dicts(cur))
    left_out = None
    visible = layout.visible_messages_sql("m")
    if visible != "1":
        left_out = 0
        if not include_inactive:
            left_out = conn.execute(
                f"SELECT count(*) FROM messages m WHERE m.session_id = ? AND NOT ({visible})",
                (session_id,),
            ).fetchone()[0]
    return Transcript(session, messages, include_inactive, left_out)


@dataclass(frozen=True)
class StitchedPart:
    """One segment of a stitched conversation: the summary that opens it, then its messages."""

    part: int  # 1-based position on the continuation line
    segment: Segment
    transcript: Transcript  # the segment's messages, without the divider
    divider: TranscriptMessage | None = None  # the compaction summary the segment starts with


def load_stitched(
    conn: sqlite3.Connection, layout: Layout, chain: Chain, *, include_inactive: bool = False
) -> list[StitchedPart]:
    """The continuation line of ``chain`` as one conversation, segment after segment.

    Each continuation's opening compaction summary becomes its part's ``divider``
    (it restates what came before, so it is not read as a message). A message is
    listed once even if corrupt links put a session on the line twice; rows an
    in-place compaction replaced or a rewind removed appear only with
    ``include_inactive`` (flagged), as on the session page.

    Args:
        conn: a connection to the state.db (read-only is enough).
        layout: what the file holds.
        chain: the lineage (from :func:`~dashboard.repository.chains.load_chain`).
        include_inactive: also return rewound and hidden rows, flagged.
    """
    parts: list[StitchedPart] = []
    seen: set[int] = set()
    for n, session_id in enumerate(chain.line, start=1):
        segment = chain.segment(session_id)
        if segment is None:
            continue
        found = load_transcript(conn, layout, session_id, include_inactive=include_inactive)
        messages = [m for m in found.messages if m.id not in seen]
        seen.update(m.id for m in messages)
        divider = None
        first = next((m for m in messages if not m.hidden), None)
        if first is not None and first.is_compaction_summary:
            divider = first
            messages.remove(first)
        body = Transcript(found.session, tuple(messages), include_inactive, found.left_out)
        parts.append(StitchedPart(n, segment, body, divider))
    return parts


def chain_neighbours(conn: sqlite3.Connection, layout: Layout, session_id: str) -> dict[str, Any]:
    """The compaction-chain segments around a session.

    Returns ``{"previous": {...} | None, "next": [{...}, ...]}``, each segment as
    ``{"id", "title", "started_at"}``. ``previous`` is the parent when this session
    continues it (the parent ended by compression); ``next`` lists the children that
    continue this session, earliest first. Branches, delegations and resets are not
    neighbours; a parent id pointing nowhere gives no ``previous``.
    """
    out: dict[str, Any] = {"previous": None, "next": []}
    if "sessions" not in layout.tables or "parent_session_id" not in layout.session_columns:
        return out
    cols = [c for c in ("id", "title", "started_at", "ended_at", "end_reason", "model_config",
                        "source", "parent_session_id") if c in layout.session_columns]  # fmt: skip
    select = f"SELECT {', '.join(cols)} FROM sessions"
    this = _one(conn, f"{select} WHERE id = ?", (session_id,))
    if this is None:
        return out
    parent_id = this.get("parent_session_id")
    parent = _one(conn, f"{select} WHERE id = ?", (parent_id,)) if parent_id else None
    if parent is not None and _continues(parent, this):
        out["previous"] = _segment(parent)
    if this.get("end_reason") == "compression":
        order = "started_at, id" if "started_at" in cols else "id"
        children = _dicts(
            conn.execute(f"{select} WHERE parent_session_id = ? ORDER BY {order}", (session_id,))
        )
        out["next"] = [_segment(c) for c in children if _continues(this, c)]
    return out


def format_tool_output(text: str) -> ToolOutput:
    """Unwrap a JSON tool result (``{"output": ..., "exit_code": 0}``) for reading."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return ToolOutput(text.rstrip("\n"))
    try:
        value = json.loads(stripped)
    except ValueError:
        return ToolOutput(text.rstrip("\n"))
    if isinstance(value, dict):
        key = next((k for k in _OUTPUT_KEYS if isinstance(value.get(k), str)), None)
        rest = {k: v for k, v in value.items() if k != key}
        if key is not None and all(_is_scalar(v) for v in rest.values()):
            facts = tuple((k, v if isinstance(v, str) else json.dumps(v)) for k, v in rest.items())
            return ToolOutput(value[key].rstrip("\n"), facts)
        if all(_is_scalar(v) for v in value.values()) and len(value) <= 6:
            facts = tuple((k, v if isinstance(v, str) else json.dumps(v)) for k, v in value.items())
            return ToolOutput("", facts)
    return ToolOutput(json.dumps(value, indent=2, ensure_ascii=False))


def parse_tool_calls(raw: str | None) -> tuple[ToolCall, ...]:
    """OpenAI-format ``tool_calls`` JSON as :class:`ToolCall` s; malformed text is kept."""
    if not raw or not raw.strip():
        return ()
    try:
        value = json.loads(raw)
    except ValueError:
        return (ToolCall(None, "", raw, preview(raw, 80), malformed=True),)
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return (ToolCall(None, "", raw, preview(raw, 80), malformed=True),)
    return tuple(_tool_call(item) for item in value)


def preview(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def is_compaction_summary(text: str) -> bool:
    return text.lstrip().startswith(SUMMARY_PREFIXES)


# -- rows ---------------------------------------------------------------------------


def _dicts(cur: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _one(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> dict[str, Any] | None:
    rows = _dicts(conn.execute(sql, params))
    return rows[0] if rows else None


def _session(conn: sqlite3.Connection, layout: Layout, session_id: str) -> SessionInfo | None:
    if "sessions" not in layout.tables:
        return None
    cols = [c for c in _SESSION_COLUMNS if c in layout.session_columns]
    row = _one(conn, f"SELECT {', '.join(cols)} FROM sessions WHERE id = ?", (session_id,))
    if row is None:
        return None
    row["archived"] = bool(row.get("archived"))
    return SessionInfo(**row)


def _message(row: dict[str, Any]) -> TranscriptMessage:
    raw = row.get("content")
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    text = decode_content(raw)
    active = row.get("active")
    return TranscriptMessage(
        id=int(row["id"]),
        role=str(row.get("role") or "unknown"),
        text=text,
        structured=is_structured(raw),
        tool_calls=parse_tool_calls(row.get("tool_calls")),
        tool_call_id=row.get("tool_call_id"),
        tool_name=row.get("tool_name"),
        reasoning=row.get("reasoning") or row.get("reasoning_content") or None,
        timestamp=row.get("timestamp"),
        finish_reason=row.get("finish_reason"),
        token_count=row.get("token_count"),
        is_compaction_summary=is_compaction_summary(text),
        inactive=active is not None and not active,
        compacted=bool(row.get("compacted")),
        hidden=row.get("display_kind") == "hidden",
    )


def _tool_call(item: Any) -> ToolCall:
    if not isinstance(item, dict):
        text = json.dumps(item, ensure_ascii=False)
        return ToolCall(None, "", text, preview(text, 80), malformed=True)
    function = item.get("function") if isinstance(item.get("function"), dict) else {}
    name = function.get("name") or item.get("name") or ""
    arguments = function.get("arguments", item.get("arguments", item.get("input")))
    pretty, one_line = _arguments(arguments)
    call_id = item.get("id")
    return ToolCall(str(call_id) if call_id else None, str(name), pretty, one_line)


def _arguments(arguments: Any) -> tuple[str, str]:
    """Pretty-printed and one-line forms of a call's arguments (a JSON string, usually)."""
    if arguments is None:
        return "", ""
    value = arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            return arguments, preview(arguments, 100)
    if isinstance(value, dict):
        one_line = ", ".join(
            f"{k}={v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
            for k, v in value.items()
        )
    else:
        one_line = json.dumps(value, ensure_ascii=False)
    return json.dumps(value, indent=2, ensure_ascii=False), preview(one_line, 100)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _continues(parent: dict[str, Any], child: dict[str, Any]) -> bool:
    """Whether ``child`` continues ``parent`` after a context compression."""
    if parent.get("end_reason") != "compression":
        return False
    if child.get("source") == "subagent" and parent.get("source") != "subagent":
        return False
    try:
        config = json.loads(child.get("model_config") or "{}")
    except ValueError:
        config = {}
    if isinstance(config, dict) and any(config.get(k) for k in LINEAGE_MARKERS):
        return False
    ended, started = parent.get("ended_at"), child.get("started_at")
    # A continuation starts when its parent ends; a child started earlier was spawned
    # while the parent was still running (a delegation without markers).
    return ended is None or started is None or started >= ended


def _segment(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "title": row.get("title"), "started_at": row.get("started_at")}


def last_message_id(conn: sqlite3.Connection, session_id: str) -> int:
    """The newest message id of a session (0 when it has none); NotFoundError if unknown."""
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
        raise NotFoundError(f"session {session_id!r} does not exist")
    row = conn.execute(
        "SELECT max(id) FROM messages WHERE session_id = ?", (session_id,)
    ).fetchone()
    return int(row[0] or 0)
