"""One session's transcript as a person reads it (its chain neighbours: lineage/links.py).

It reads Recall's archive (store/state.py): every column exists, so a session of a
source written by old Hermes code reads as its import left it (the importer gave its
rows the conventions' flags: live, not compacted, not hidden).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import Any

from dashboard.errors import NotFoundError
from dashboard.hermes.content import decode_content, is_structured
from dashboard.hermes.conventions import is_summary, summary_text
from dashboard.lineage.epochs import Epochs
from dashboard.params import whole_number
from dashboard.sessions.rows import (
    Divider,
    ShownRows,
    parse_view,
    shown_rows,
)
from dashboard.sessions.tools import (
    ToolCall,
    ToolOutput,
    format_tool_output,
    parse_tool_calls,
)
from dashboard.store.names import session_names
from dashboard.store.presence import gone_sql

# Messages per transcript page. A 52,000-message session rendered whole was a 25 MB
# page taking 6.5 s; a page of 500 is a few hundred KB (bench/long_transcript.py).
PAGE_SIZE = 500
MATCHES_LISTED = 200  # matches a session page lists (all are counted)
# Tool output fields shown as the body of a result; the rest become short facts.

_SESSION_COLUMNS = (
    "id",
    "title",
    "source",
    "model",
    "started_at",
    "ended_at",
    "end_reason",
    "parent_session_id",
    "message_count",
    "tool_call_count",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "estimated_cost_usd",
    "actual_cost_usd",
    "cost_status",
    "cost_source",
    "billing_provider",
    "archived",
    "profile",
)
_MESSAGE_COLUMNS = (
    "id",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "reasoning",
    "reasoning_content",
    "timestamp",
    "finish_reason",
    "token_count",
    "active",
    "compacted",
    "display_kind",
    "compressed_summary",
)
_MESSAGE_SELECT = ", ".join(f"m.{c}" for c in _MESSAGE_COLUMNS)


@dataclass(frozen=True)
class TranscriptRequest:
    """What a transcript page shows, as it appears in the URL."""

    query: str = ""  # terms to highlight and count (``q``)
    include_inactive: bool = False  # ``all=1``: rewound and hidden rows too
    page: int = 1
    at: int | None = None  # a message id: show the page that holds it (wins over page)
    view: str = "everything"  # or "live": what the agent sees now (sessions/rows.py)

    @classmethod
    def from_params(cls, get: Callable[[str], str | None]) -> TranscriptRequest:
        """Parse URL parameters; raise ValidationError naming a bad one."""
        return cls(
            query=(get("q") or "").strip(),
            include_inactive=get("all") == "1",
            page=whole_number(get("page"), "page", 1, 1_000_000) or 1,
            at=whole_number(get("at"), "at", 0, 2**62),
            view=parse_view(get("view")),
        )


@dataclass(frozen=True)
class Paging:
    """Where one page sits in a long transcript; ``order`` holds every id shown on any page."""

    page: int
    size: int
    order: tuple[int, ...]

    @property
    def total(self) -> int:
        return len(self.order)

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))

    @property
    def past_end(self) -> bool:
        """The page asked for lies beyond the last one."""
        return self.page > self.pages

    @property
    def first(self) -> int:
        """Index of the page's first message in ``order``."""
        return (self.page - 1) * self.size

    @property
    def ids(self) -> tuple[int, ...]:
        """The ids on this page."""
        return self.order[self.first : self.first + self.size]

    @cached_property
    def _positions(self) -> dict[int, int]:
        return {mid: i for i, mid in enumerate(self.order)}

    def index_of(self, message_id: int) -> int | None:
        """Position of ``message_id`` in ``order``; None when no page shows it."""
        return self._positions.get(message_id)

    def page_of(self, message_id: int) -> int | None:
        """The page holding ``message_id``; None when no page shows it."""
        index = self.index_of(message_id)
        return None if index is None else index // self.size + 1


def paging_for(order: Sequence[int], size: int, page: int = 1, at: int | None = None) -> Paging:
    """The page to show: the one holding message ``at`` when some page shows it, else ``page``."""
    paging = Paging(page, size, tuple(order))
    found = paging.page_of(at) if at is not None else None
    return Paging(found, size, paging.order) if found else paging


@dataclass(frozen=True)
class MatchEntry:
    """One message the query matches, for the list of matches, and the page it is on."""

    id: int
    role: str
    timestamp: float | None
    page: int


@dataclass(frozen=True)
class SessionInfo:
    """A ``sessions`` row of the archive (a figure the source never recorded is None)."""

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
    gone_at: float | None = None  # when the session left Hermes (store/presence.py), else None
    profile: str | None = None  # the profile it belongs to (profiles.py)

    @property
    def tokens(self) -> dict[str, int]:
        """Token counts by kind, only the non-zero ones."""
        kinds = {
            "input": self.input_tokens,
            "output": self.output_tokens,
            "cache read": self.cache_read_tokens,
            "cache write": self.cache_write_tokens,
            "reasoning": self.reasoning_tokens,
        }
        return {k: v for k, v in kinds.items() if v}


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
    inactive: bool = False  # active=0: compacted in place, superseded, or rewound
    #: a retained row's original: a compaction re-inserted it (its copy is live); history
    superseded: bool = False
    compacted: bool = False  # kept as history by in-place compaction (still visible)
    hidden: bool = False  # display_kind='hidden': never shown unless all rows are asked for

    @property
    def summary(self) -> str:
        """A carrier's summary in its own words: without its marker, Hermes's boilerplate
        and the prior row a merged summary carries (conventions.summary_text)."""
        return summary_text(self.text)

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
    left_out: int = 0  # rows the visibility filter left out (rewound, hidden)
    neighbours: dict[str, Any] = field(default_factory=dict)
    paging: Paging | None = None  # None: every message is in ``messages``
    name: str = ""  # what a person calls the session (store/names.py); "" when not read
    view: str = "everything"  # which rows (sessions.rows.VIEWS)
    compactions: int = 0  # how many times the session compacted in place
    dividers: dict[int, Divider] = field(default_factory=dict)  # carrier id -> compaction
    copy_of: dict[int, int] = field(default_factory=dict)  # a shown copy -> the row it repeats
    aliases: dict[int, tuple[int, ...]] = field(default_factory=dict)  # ids landing on a row

    @property
    def display_title(self) -> str:
        """The session's name (store/names.py: its title, else its first words, else its id)."""
        return self.name or self.session.title or self.session.id

    @property
    def callers(self) -> dict[str, int]:
        """tool_call_id → id of the assistant message that made the call."""
        return {c.id: m.id for m in self.messages for c in m.tool_calls if c.id}

    def to_json(self) -> dict[str, Any]:
        """The ``/api/sessions/<id>/messages`` shape."""
        return {
            "session": asdict(self.session),
            "neighbours": self.neighbours,
            "view": self.view,
            "include_inactive": self.include_inactive,
            "left_out": self.left_out,
            "compactions": self.compactions,
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
                    "compaction": self.dividers[m.id].compaction if m.id in self.dividers else None,
                    "inactive": m.inactive,
                    "superseded": m.superseded,
                    "copy_of": self.copy_of.get(m.id),
                    # everything: the re-inserted copies folded into this row
                    "copies": list(self.aliases.get(m.id, ())) if self.view == "everything" else [],
                }
                for m in self.messages
            ],
        }


def load_transcript(
    conn: sqlite3.Connection,
    session_id: str,
    *,
    include_inactive: bool = False,
    page: int = 1,
    at: int | None = None,
    page_size: int | None = None,
    view: str = "everything",
    epochs: Epochs | None = None,
) -> Transcript:
    """Read one session and its messages (one page of them when ``page_size`` is set).

    Args:
        conn: a connection to the archive (read-only is enough).
        session_id: the session to read.
        include_inactive: also return rows a person normally does not see (rewound,
            hidden), each flagged.
        page, at, page_size: with ``page_size``, only that many messages are read:
            page ``page``, or the page holding message ``at`` when some row stands
            for it (a re-inserted copy: the row it repeats).
        view: which rows (:data:`~dashboard.sessions.rows.VIEWS`).
        epochs: the session's epochs when already read (else they are read here).

    Raises:
        NotFoundError: no such session.
    """
    session = session_info(conn, session_id)
    if session is None:
        raise NotFoundError(f"There is no session {session_id!r} in this home.")
    rows = shown_rows(conn, session_id, view, include_inactive, epochs)
    paging = None
    if page_size:
        paging = paging_for(rows.order, page_size, page, rows.land(at))
        messages = messages_by_id(conn, paging.ids)
    else:
        messages = messages_by_id(conn, rows.order)
    return with_rows(
        Transcript(
            session,
            messages,
            include_inactive,
            rows.left_out,
            paging=paging,
            name=session_names(conn, {session_id: session.title})[session_id],
        ),
        rows,
    )


def with_rows(transcript: Transcript, rows: ShownRows) -> Transcript:
    """``transcript`` carrying how its view shows the rows (dividers, copies, aliases)."""
    messages = transcript.messages
    if rows.superseded:
        messages = tuple(
            replace(m, superseded=True) if m.id in rows.superseded else m for m in messages
        )
    return replace(
        transcript,
        messages=messages,
        view=rows.view,
        compactions=rows.compactions,
        dividers=rows.dividers,
        copy_of=rows.copy_of,
        aliases=rows.aliases,
    )


def messages_by_id(conn: sqlite3.Connection, ids: Sequence[int]) -> tuple[TranscriptMessage, ...]:
    """Full rows for ``ids``, in the order given."""
    if not ids:
        return ()
    cur = conn.execute(
        f"SELECT {_MESSAGE_SELECT} FROM messages m WHERE m.id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(ids)),),
    )
    found = {m.id: m for m in (_message(row) for row in _dicts(cur))}
    return tuple(found[i] for i in ids if i in found)


def match_entries(
    conn: sqlite3.Connection, paging: Paging, ids: Sequence[int], limit: int = MATCHES_LISTED
) -> list[MatchEntry]:
    """The first ``limit`` of ``ids`` that some page shows, in conversation order."""
    shown = sorted((i for i in ids if paging.index_of(i) is not None), key=paging.index_of)
    listed = shown[:limit]
    if not listed:
        return []
    rows = conn.execute(
        "SELECT id, role, timestamp FROM messages WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(listed),),
    ).fetchall()
    found = {r[0]: r for r in rows}
    return [
        MatchEntry(i, str(found[i][1] or "unknown"), found[i][2], paging.page_of(i) or 1)
        for i in listed
        if i in found
    ]


# -- rows ---------------------------------------------------------------------------


def _dicts(cur: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _one(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> dict[str, Any] | None:
    rows = _dicts(conn.execute(sql, params))
    return rows[0] if rows else None


def session_info(conn: sqlite3.Connection, session_id: str) -> SessionInfo | None:
    cols = [*_SESSION_COLUMNS, f"{gone_sql('sessions')} AS gone_at"]
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
        is_compaction_summary=is_summary(text, row.get("compressed_summary")),
        inactive=active is not None and not active,
        compacted=bool(row.get("compacted")),
        hidden=row.get("display_kind") == "hidden",
    )


def last_message_id(conn: sqlite3.Connection, session_id: str) -> int:
    """The newest message id of a session (0 when it has none); NotFoundError if unknown."""
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
        raise NotFoundError(f"session {session_id!r} does not exist")
    row = conn.execute(
        "SELECT max(id) FROM messages WHERE session_id = ?", (session_id,)
    ).fetchone()
    return int(row[0] or 0)
