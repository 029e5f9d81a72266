"""The list of compaction chains: longest, most recent, most expensive.

Built from the cached :class:`Lineage` (which already classifies every link)
plus one pass over the chain members' figures, so it stays fast with 10k chains.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from dashboard.repository.cost_rules import NO_COST, CostSummary, combine
from dashboard.repository.costs import session_costs
from dashboard.repository.layout import Layout
from dashboard.repository.lineage import Lineage


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
    cost: CostSummary  # its segments' costs by the cost rules, counted per segment

    @property
    def cost_usd(self) -> float | None:
        """What the chain cost (effective spend); None when no segment has a price."""
        return self.cost.effective


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
    """Top ``limit`` chains by segments, by last activity, and by effective spend."""
    lines = chain_lines(lineage)
    membership = {sid: n for n, line in enumerate(lines) for sid in line}
    cols = layout.session_columns

    def col(name: str) -> str:
        return f"s.{name}" if name in cols else "NULL"

    activity = ", ".join(col(c) for c in ("last_activity_at", "ended_at", "started_at"))
    # One pass in SQL sums every line: json_each maps each member to its line.
    sums = conn.execute(
        f"SELECT j.value, min({col('started_at')}), max(coalesce({activity})), "
        f"sum(coalesce({col('message_count')}, 0)) FROM sessions s "
        "JOIN json_each(?) j ON s.id = j.key GROUP BY j.value",
        (json.dumps(membership),),
    ).fetchall()
    costs = session_costs(conn, layout, membership)
    found = [
        (lines[row[0]], (*row[1:], combine(costs.get(sid, NO_COST) for sid in lines[row[0]])))
        for row in sums
    ]

    def cost(item: tuple) -> float:
        effective = item[1][3].effective
        return effective if effective is not None else -1.0

    def top(key) -> list[tuple]:
        return sorted(found, key=key, reverse=True)[:limit]

    picks = {
        "longest": top(lambda i: (len(i[0]), i[1][2] or 0)),
        "recent": top(lambda i: i[1][1] or 0.0),
        "expensive": top(cost),
    }
    firsts = _first_segments(conn, layout, {i[0][0] for rows in picks.values() for i in rows})
    return ChainIndex(
        total=len(found), **{k: [_summary(i, firsts) for i in v] for k, v in picks.items()}
    )


def _first_segments(conn: sqlite3.Connection, layout: Layout, ids: set[str]) -> dict[str, tuple]:
    cols = layout.session_columns
    pick = ", ".join(f"s.{c}" if c in cols else "NULL" for c in ("title", "source", "model"))
    rows = conn.execute(
        f"SELECT s.id, {pick} FROM sessions s JOIN json_each(?) j ON s.id = j.value",
        (json.dumps(sorted(ids)),),
    ).fetchall()
    return {r[0]: r[1:] for r in rows}


def _summary(item: tuple, firsts: dict[str, tuple]) -> ChainSummary:
    line, (started, last, messages, cost) = item
    title, source, model = firsts.get(line[0], (None, None, None))
    return ChainSummary(
        root=line[0], tip=line[-1], title=title, source=source, model=model,
        segments=len(line), started_at=started, last_activity=last or None,
        messages=int(messages or 0), cost=cost,
    )  # fmt: skip
