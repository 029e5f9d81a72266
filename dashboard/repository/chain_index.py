"""The list of compaction chains: longest, most recent, most expensive.

Built from the cached :class:`Lineage` (which already classifies every link)
plus one pass over the chain members' figures, so it stays fast with 10k chains.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from dashboard.repository.layout import Layout
from dashboard.repository.lineage import Lineage

_FIGURES = ("title", "source", "model", "started_at", "ended_at", "last_activity_at",
            "message_count", "estimated_cost_usd", "actual_cost_usd")  # fmt: skip


@dataclass(frozen=True)
class ChainSummary:
    """One continuation line of 2+ segments, summed."""

    root: str
    tip: str
    title: str | None
    source: str | None
    model: str | None
    segments: int
    started_at: float | None
    last_activity: float | None
    messages: int
    estimated_cost_usd: float | None
    actual_cost_usd: float | None

    @property
    def cost_usd(self) -> float | None:
        """What the chain cost: billed figures where known, else estimates; None if neither."""
        if self.actual_cost_usd is None and self.estimated_cost_usd is None:
            return None
        return self.actual_cost_usd if self.actual_cost_usd is not None else self.estimated_cost_usd


@dataclass(frozen=True)
class ChainIndex:
    total: int
    longest: list[ChainSummary]
    recent: list[ChainSummary]
    expensive: list[ChainSummary]


def chain_lines(lineage: Lineage) -> list[list[str]]:
    """Every continuation line of two or more segments, each from its first segment."""
    starts = {
        parent for child, parent in lineage.parents.items()
        if lineage.kinds.get(child) == "continuation"
    } - {c for c, k in lineage.kinds.items() if k == "continuation"}  # fmt: skip
    return [line for line in (lineage.line(s) for s in sorted(starts)) if len(line) > 1]


def chain_index(
    conn: sqlite3.Connection, layout: Layout, lineage: Lineage, limit: int = 20
) -> ChainIndex:
    """Top ``limit`` chains by segments, by last activity, and by cost."""
    lines = chain_lines(lineage)
    members = [sid for line in lines for sid in line]
    cols = layout.session_columns
    pick = ", ".join(f"s.{c}" if c in cols else "NULL" for c in _FIGURES)
    rows = {
        r[0]: dict(zip(_FIGURES, r[1:], strict=True))
        for r in conn.execute(
            f"SELECT s.id, {pick} FROM sessions s JOIN json_each(?) j ON s.id = j.value",
            (json.dumps(members),),
        )
    }
    summaries = [_summarise(line, rows) for line in lines]
    summaries = [s for s in summaries if s is not None]

    def top(key) -> list[ChainSummary]:
        return sorted(summaries, key=key, reverse=True)[:limit]

    return ChainIndex(
        total=len(summaries),
        longest=top(lambda c: (c.segments, c.messages)),
        recent=top(lambda c: c.last_activity or 0.0),
        expensive=top(lambda c: c.cost_usd if c.cost_usd is not None else -1.0),
    )


def _summarise(line: list[str], rows: dict[str, dict]) -> ChainSummary | None:
    present = [rows[s] for s in line if s in rows]
    if not present:
        return None
    first = present[0]
    est = [r["estimated_cost_usd"] for r in present if r["estimated_cost_usd"] is not None]
    act = [r["actual_cost_usd"] for r in present if r["actual_cost_usd"] is not None]
    ends = [r["last_activity_at"] or r["ended_at"] or r["started_at"] for r in present]
    return ChainSummary(
        root=line[0], tip=line[-1], title=first["title"], source=first["source"],
        model=first["model"], segments=len(line), started_at=first["started_at"],
        last_activity=max((e for e in ends if e), default=None),
        messages=sum(r["message_count"] or 0 for r in present),
        estimated_cost_usd=sum(est) if est else None, actual_cost_usd=sum(act) if act else None,
    )  # fmt: skip
