"""Compaction chains: a session's lineage, each edge classified, per-segment figures.

When a conversation outgrows the context window Hermes ends the session with
``end_reason='compression'`` and continues in a child whose ``parent_session_id``
points back; branches, delegations (subagents) and resets hang off the same
links (HERMES_FACTS, "Lineage"). :func:`load_chain` returns the whole family of
any session — up to its root, down to every descendant — in two recursive
queries that are safe against cycles and missing parents (a corrupt file must not
hang the page) and bounded in depth.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dashboard.costs.rules import NO_COST, CostSummary, RowCost, combine, coverage
from dashboard.costs.usage import session_costs, usage_spans
from dashboard.errors import NotFoundError
from dashboard.hermes.content import decode_content
from dashboard.hermes.conventions import TOKEN_KINDS, is_summary, summary_text
from dashboard.lineage import links
from dashboard.lineage.epochs import Epochs, compacted_epochs, usage_epoch
from dashboard.store.names import session_names
from dashboard.store.presence import gone_sql

MAX_DEPTH = 500  # deepest lineage walked; real chains reach 10-20 segments
MAX_SEGMENTS = 2_000  # a family larger than this is cut (and the page says so)
SUMMARY_PREVIEW_CHARS = 280
#: A session's first rows (by id) looked through for its opening summary: a rotation
#: child re-inserts the protected head (Hermes protects 3 rows by default) before it.
OPENING_ROWS = 8


@dataclass(frozen=True)
class Segment:
    """One session of a lineage, with the kind of link to its parent."""

    session_id: str
    parent_session_id: str | None
    kind: str  # a link kind (links.classify); "root" for the top of the family
    depth: int
    title: str | None = None
    source: str | None = None
    model: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    last_activity: float | None = None
    end_reason: str | None = None
    message_count: int = 0
    tool_call_count: int = 0
    tokens: dict[str, int] = field(default_factory=dict)
    cost: CostSummary = NO_COST  # by the cost rules (usage rows where the file has them)
    summary_preview: str | None = None  # opening of the compaction summary (continuations)
    is_tip: bool = False
    gone_at: float | None = None  # when the session left Hermes (store/presence.py), else None
    profile: str | None = None  # its profile (a family never leaves its profile)
    # Its in-place epochs (epochs.py), read only when asked for (load_chain(epochs=True));
    # None: not read; no epochs (Epochs()) when it never compacted in place.
    epochs: Epochs | None = None
    # Per epoch (same order), the cost of the usage rows that lie inside it
    # (epochs.usage_epoch); NO_COST where none does.
    epoch_costs: tuple[CostSummary, ...] = ()
    unattributed_usage: int = 0  # usage rows spanning a compaction: no epoch's alone
    name: str = ""  # what a person calls it (store/names.py); "" when not read

    @property
    def estimated_cost_usd(self) -> float | None:
        return self.cost.estimated

    @property
    def actual_cost_usd(self) -> float | None:
        """The billed part (of some calls only, when :attr:`cost` is partial)."""
        return self.cost.billed

    @property
    def cost_status(self) -> str:
        return self.cost.status

    @property
    def end(self) -> float | None:
        """When the segment stopped (or its last activity, while open)."""
        return self.ended_at or self.last_activity or self.started_at

    @property
    def span_s(self) -> float:
        if self.started_at is None or self.end is None:
            return 0.0
        return max(0.0, self.end - self.started_at)

    @property
    def label(self) -> str:
        """Its name: its title, else its first words, else its id (store/names.py)."""
        return self.name or self.title or self.session_id

    @property
    def compactions(self) -> int:
        """How many times it compacted in place (0 when its epochs were not read)."""
        return self.epochs.compactions if self.epochs is not None else 0


@dataclass(frozen=True)
class Chain:
    """A session's family: every segment, the continuation line through the focus."""

    root: str
    focus: str
    tip: str
    segments: tuple[Segment, ...]
    line: tuple[str, ...]  # continuation line through the focus: first segment … tip
    warnings: tuple[str, ...] = ()

    def segment(self, session_id: str) -> Segment | None:
        return next((s for s in self.segments if s.session_id == session_id), None)

    def part_of(self, session_id: str) -> tuple[int, int] | None:
        """``(n, m)``: the session's place in the continuation line (for the drawing)."""
        if session_id not in self.line:
            return None
        return self.line.index(session_id) + 1, len(self.line)

    def shown_part(self, session_id: str) -> tuple[int, int] | None:
        """ "Part n of m" as a person is told it: None off a line of 2+ (links.line_part)."""
        return links.line_part(self.line, session_id)

    @property
    def profile(self) -> str | None:
        """The profile the family belongs to: its segments' (parent links never cross)."""
        focus = self.segment(self.focus) or (self.segments[0] if self.segments else None)
        return focus.profile if focus is not None else None

    @property
    def compactions_in_place(self) -> int:
        """In-place compactions of the line's segments (0 when epochs were not read)."""
        return sum(s.compactions for s in self.segments if s.session_id in self.line)

    @property
    def is_in_place(self) -> bool:
        """A conversation that only ever compacted in place: one segment, 2+ epochs."""
        return len(self.line) == 1 and self.compactions_in_place > 0

    @property
    def title(self) -> str | None:
        """The conversation's title: the first titled segment of the line (root first),
        without the `` #n`` Hermes adds to later parts; else the family root's title."""
        by_id = {s.session_id: s for s in self.segments}
        for sid in (*self.line, self.root):
            segment = by_id.get(sid)
            if segment is not None and segment.title:
                return conversation_title(segment.title)
        return None

    @property
    def heading(self) -> str:
        """What the chain page calls the conversation: its title, else its first
        segment's name (store/names.py)."""
        first = self.line[0] if self.line else self.root
        segment = self.segment(first)
        return self.title or (segment.label if segment is not None else first)

    @property
    def totals(self) -> dict[str, Any]:
        """Figures of the continuation line (what one conversation cost)."""
        return totals([s for s in self.segments if s.session_id in self.line])


_PART_SUFFIX = re.compile(r"\s+#\d+$")  # "Fix the build #3": Hermes's title of part 3


def conversation_title(title: str) -> str:
    """A segment's title as the whole conversation's: without a trailing `` #n``."""
    return _PART_SUFFIX.sub("", title) or title


def totals(segments: list[Segment]) -> dict[str, Any]:
    """Sums over segments; a cost total is None when no segment has a figure.

    Cost is effective spend by the cost rules, with its coverage in segments: how many
    are billed throughout, partly, or have no price at all.
    """
    starts = [s.started_at for s in segments if s.started_at is not None]
    ends = [s.end for s in segments if s.end is not None]
    cost = combine(s.cost for s in segments)
    return {
        "segments": len(segments),
        "compressions": sum(1 for s in segments if s.end_reason == "compression"),
        "compactions_in_place": sum(s.compactions for s in segments),  # 0: epochs not read
        "duration_s": (max(ends) - min(starts)) if starts and ends else 0.0,
        "started_at": min(starts) if starts else None,
        "ended_at": max(ends) if ends else None,
        "messages": sum(s.message_count for s in segments),
        "tool_calls": sum(s.tool_call_count for s in segments),
        "tokens": {k: sum(s.tokens.get(k, 0) for s in segments) for k in TOKEN_KINDS},
        "effective_cost_usd": cost.effective,
        "estimated_cost_usd": cost.estimated,
        "actual_cost_usd": cost.billed,
        "billed_share": cost.billed_share,
        "billed_segments": cost.counts["actual"],
        "partly_billed_segments": cost.counts["partial"],
        "unknown_cost_segments": cost.counts["unknown"],
        "cost_coverage": coverage(cost.counts),
    }


# -- loading ------------------------------------------------------------------------------


def load_chain(conn: sqlite3.Connection, session_id: str, *, epochs: bool = False) -> Chain:
    """The lineage of ``session_id``; NotFoundError when the session does not exist.

    ``epochs=True`` also reads each segment's in-place epochs and what each cost (the
    chain page, its JSON): every row of the family's sessions that compacted in place,
    so pages that only need the segments (the session page's neighbours) leave it off.
    """
    warnings: list[str] = []
    root = _find_root(conn, session_id, warnings)
    family = _descendants(conn, root, warnings)  # [(id, parent, depth)] in walk order
    if session_id not in {sid for sid, _, _ in family}:
        # The focus sits in a cycle the downward walk could not enter from the root.
        family.append((session_id, None, 0))
    rows = _session_rows(conn, [sid for sid, _, _ in family])
    if session_id not in rows:
        raise NotFoundError(f"session {session_id!r} does not exist")
    summaries = _first_messages(conn, [sid for sid, parent, _ in family if parent])
    names = session_names(conn, {sid: row["title"] for sid, row in rows.items()})
    costs = session_costs(conn, rows)
    segments = []
    for sid, parent, depth in family:
        row = rows.get(sid)
        if row is None:
            continue
        parent_row = rows.get(parent) if parent else None
        kind = "root" if parent is None or parent_row is None else links.classify(row, parent_row)
        summary = summaries.get(sid) if kind == "continuation" else None
        segments.append(
            _segment(
                row,
                parent if parent_row else None,
                kind,
                depth,
                summary,
                costs.get(sid, NO_COST),
                names[sid],
            )
        )
    if epochs:
        segments = _with_epochs(conn, segments)
    line = _line_through(segments, session_id)
    tip = line[-1]
    segments = [_with_tip(s, s.session_id == tip) for s in _ordered(segments)]
    return Chain(root, session_id, tip, tuple(segments), tuple(line), tuple(warnings))


def _find_root(conn: sqlite3.Connection, session_id: str, warnings: list[str]) -> str:
    """Walk parent links upwards in one recursive query, stopping at a cycle or the bound."""
    rows = conn.execute(
        """
        WITH RECURSIVE up(id, parent, depth, path) AS (
            SELECT id, parent_session_id, 0, '/' || id || '/' FROM sessions WHERE id = ?
            UNION ALL
            SELECT s.id, s.parent_session_id, up.depth + 1, up.path || s.id || '/'
            FROM up JOIN sessions s ON s.id = up.parent
            WHERE up.depth < ? AND instr(up.path, '/' || s.id || '/') = 0
        )
        SELECT id, parent, depth, path FROM up ORDER BY depth
        """,
        (session_id, MAX_DEPTH),
    ).fetchall()
    if not rows:
        raise NotFoundError(f"session {session_id!r} does not exist")
    top_id, top_parent, depth, path = rows[-1]
    if top_parent is None:
        return top_id
    if f"/{top_parent}/" in path:
        warnings.append(
            f"The parent links form a cycle ({top_id} → {top_parent}); the family is shown "
            f"from {top_id}."
        )
    elif depth >= MAX_DEPTH:
        warnings.append(f"The lineage is deeper than {MAX_DEPTH} sessions; it is cut there.")
    else:
        warnings.append(f"{top_id}'s parent {top_parent} is missing from this file.")
    return top_id


def _descendants(
    conn: sqlite3.Connection, root: str, warnings: list[str]
) -> list[tuple[str, str | None, int]]:
    rows = conn.execute(
        """
        WITH RECURSIVE down(id, parent, depth, path) AS (
            SELECT id, NULL, 0, '/' || id || '/' FROM sessions WHERE id = ?
            UNION ALL
            SELECT s.id, s.parent_session_id, down.depth + 1, down.path || s.id || '/'
            FROM down JOIN sessions s ON s.parent_session_id = down.id
            WHERE down.depth < ? AND instr(down.path, '/' || s.id || '/') = 0
        )
        SELECT id, parent, depth FROM down LIMIT ?
        """,
        (root, MAX_DEPTH, MAX_SEGMENTS + 1),
    ).fetchall()
    seen: set[str] = set()
    out = []
    for sid, parent, depth in rows:
        if sid not in seen:  # a session reachable twice (corrupt links) is listed once
            seen.add(sid)
            out.append((sid, parent, depth))
    if len(rows) > MAX_SEGMENTS:
        warnings.append(
            f"This family has more than {MAX_SEGMENTS:,} sessions; the rest are not shown."
        )
        out = out[:MAX_SEGMENTS]
    return out


_SESSION_COLUMNS = (
    "title",
    "source",
    "model",
    "model_config",
    "started_at",
    "ended_at",
    "last_activity_at",
    "end_reason",
    "message_count",
    "tool_call_count",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "profile",
)


def _session_rows(conn: sqlite3.Connection, ids: list[str]) -> dict[str, dict]:
    if not ids:
        return {}
    cols = ["s.id", *(f"s.{c}" for c in _SESSION_COLUMNS), gone_sql("s")]
    rows = conn.execute(
        f"SELECT {', '.join(cols)} FROM sessions s JOIN json_each(?) j ON s.id = j.value",
        (json.dumps(ids),),
    ).fetchall()
    names = ["id", *_SESSION_COLUMNS, "gone_at"]
    return {r[0]: dict(zip(names, r, strict=True)) for r in rows}


def _first_messages(conn: sqlite3.Connection, ids: list[str]) -> dict[str, str]:
    """Each session's opening, for its segment line: a continuation's compaction summary
    (its own text), else its first message.

    A rotation child opens with the re-inserted head, *then* the summary (HERMES_FACTS,
    "Hermes v31"), so the summary is looked for among a session's first rows by id.
    """
    if not ids:
        return {}
    rows = conn.execute(
        "SELECT j.value, m.id, substr(m.content, 1, 4000), m.compressed_summary"
        " FROM json_each(?) j JOIN messages m ON m.id IN ("
        "  SELECT x.id FROM messages x WHERE x.session_id = j.value"
        f"  ORDER BY x.id LIMIT {OPENING_ROWS}) ORDER BY j.value, m.id",
        (json.dumps(ids),),
    ).fetchall()
    firsts: dict[str, str] = {}
    summaries: dict[str, str] = {}
    for sid, _id, content, compressed in rows:
        text = decode_content(content)
        firsts.setdefault(sid, text)
        if is_summary(text, compressed):
            summaries.setdefault(sid, summary_text(text))
    out = {}
    for sid, first in firsts.items():
        text = " ".join(summaries.get(sid, first).split())
        out[sid] = (
            text if len(text) <= SUMMARY_PREVIEW_CHARS else text[:SUMMARY_PREVIEW_CHARS] + "…"
        )
    return out


def _segment(
    row: dict[str, Any],
    parent: str | None,
    kind: str,
    depth: int,
    summary: str | None,
    cost: CostSummary,
    name: str,
) -> Segment:
    return Segment(
        session_id=row["id"],
        parent_session_id=parent,
        kind=kind,
        depth=depth,
        title=row["title"],
        source=row["source"],
        model=row["model"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        last_activity=row["last_activity_at"],
        end_reason=row["end_reason"],
        message_count=row["message_count"] or 0,
        tool_call_count=row["tool_call_count"] or 0,
        tokens={k: row[f"{k}_tokens"] or 0 for k in TOKEN_KINDS},
        cost=cost,
        summary_preview=summary,
        gone_at=row["gone_at"],
        profile=row["profile"],
        name=name,
    )


def _line_through(segments: list[Segment], focus: str) -> list[str]:
    """The continuation line containing ``focus``: back to its first segment, on to the tip."""
    continued = {
        s.session_id: s.parent_session_id
        for s in segments
        if s.kind == "continuation" and s.parent_session_id
    }
    starts = {s.session_id: s.started_at or 0.0 for s in segments}
    return links.line(focus, continued, links.successors(continued, starts))


def _ordered(segments: list[Segment]) -> list[Segment]:
    """Depth-first from the root, children by start time: the order the picture draws."""
    children: dict[str | None, list[Segment]] = {}
    for s in segments:
        children.setdefault(s.parent_session_id, []).append(s)
    for kids in children.values():
        kids.sort(key=lambda s: (s.kind != "continuation", s.started_at or 0, s.session_id))
    out: list[Segment] = []
    seen: set[str] = set()
    stack = sorted(children.get(None, []), key=lambda s: s.started_at or 0, reverse=True)
    while stack:
        s = stack.pop()
        if s.session_id in seen:
            continue
        seen.add(s.session_id)
        out.append(s)
        stack.extend(reversed(children.get(s.session_id, [])))
    out.extend(s for s in segments if s.session_id not in seen)
    return out


def _with_epochs(conn: sqlite3.Connection, segments: list[Segment]) -> list[Segment]:
    """The segments with their epochs (one read for the family's sessions that compacted
    in place) and each epoch's cost."""
    found = compacted_epochs(conn, [s.session_id for s in segments])
    compacted = [sid for sid, e in found.items() if e.compactions]
    spans = usage_spans(conn, compacted) if compacted else {}
    out = []
    for s in segments:
        epochs = found.get(s.session_id, Epochs())
        costs, unattributed = epoch_costs(epochs, spans.get(s.session_id, []))
        out.append(replace(s, epochs=epochs, epoch_costs=costs, unattributed_usage=unattributed))
    return out


def epoch_costs(
    epochs: Epochs, spans: Sequence[tuple[float | None, float | None, RowCost]]
) -> tuple[tuple[CostSummary, ...], int]:
    """Per epoch, the cost of the usage rows inside it; and how many rows fit none."""
    placed: dict[int, list[RowCost]] = {}
    unattributed = 0
    for first, last, cost in spans:
        number = usage_epoch(epochs, first, last)
        if number is None:
            unattributed += 1
        else:
            placed.setdefault(number, []).append(cost)
    costs = tuple(combine(placed.get(e.number, ())) for e in epochs.epochs)
    return costs, unattributed


def _with_tip(segment: Segment, is_tip: bool) -> Segment:
    if segment.is_tip == is_tip:
        return segment
    return replace(segment, is_tip=is_tip)
