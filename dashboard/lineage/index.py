"""The list of compaction chains, one table sorted by any of its columns.

A chain is a continuation line of 2+ segments (rotation) or a session that compacted
in place (its epochs). Built from the cached :class:`Lineage` (which already
classifies every link) and the cached in-place counts (:func:`epochs.in_place_counts`)
plus one pass over the chain members' figures, so it stays fast with 10k chains.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dashboard.costs.rules import NO_COST, CostSummary, combine
from dashboard.costs.usage import session_costs
from dashboard.lineage.chains import conversation_title
from dashboard.lineage.graph import Lineage
from dashboard.params import table_sort
from dashboard.store.names import session_names
from dashboard.store.presence import gone_sql


@dataclass(frozen=True)
class ChainSummary:
    """One continuation line of 2+ segments, summed."""

    root: str
    tip: str
    title: str | None
    source: str | None
    model: str | None
    segments: int
    epochs: int  # its segments' epochs: one each, plus one per in-place compaction
    started_at: float | None
    last_activity: float | None
    messages: int
    cost: CostSummary  # its segments' costs by the cost rules, counted per segment
    # When its latest segment left Hermes (store/presence.py): the conversation is then only in
    # Recall's archive (Hermes deletes older segments first). None while Hermes has it.
    gone_at: float | None = None
    profile: str | None = None  # its segments' profile (parent links never cross one)
    # What a person calls it: its title, else its first segment's name (store/names.py).
    name: str = ""

    @property
    def label(self) -> str:
        return self.name or self.title or self.root

    @property
    def in_place(self) -> bool:
        """One session that compacted in place (no rotation)."""
        return self.segments == 1


CHAIN_SORTS = ("last", "started", "segments", "epochs", "messages", "cost", "profile")
INDEX_LIMIT = 50  # rows of the /chains table


@dataclass(frozen=True)
class ChainIndex:
    total: int  # chains in the home: lines of 2+ segments and in-place-only sessions
    sort: str  # one of CHAIN_SORTS
    descending: bool
    chains: list[ChainSummary]  # the first ``limit`` by ``sort``


def check_chain_sort(sort: str | None, direction: str | None) -> tuple[str, bool]:
    """``(sort, descending)`` from the query string; :class:`ValidationError` if unknown."""
    return table_sort(sort, direction, CHAIN_SORTS, "last")


def chain_lines(lineage: Lineage) -> list[list[str]]:
    """Every continuation line of two or more segments, each from its first segment."""
    starts = set(lineage.continued.values()) - set(lineage.continued)
    return [line for line in (lineage.line(s) for s in sorted(starts)) if len(line) > 1]


def chain_index(
    conn: sqlite3.Connection,
    lineage: Lineage,
    *,
    sort: str = "last",
    descending: bool = True,
    limit: int = INDEX_LIMIT,
    in_place: Mapping[str, int] | None = None,
) -> ChainIndex:
    """The first ``limit`` chains by ``sort`` (CHAIN_SORTS): last activity, start, segments,
    epochs, messages, effective spend or profile name. A chain with no price sorts after
    every priced one, and a tie goes to the first segment's id.

    ``in_place``: how many times each session compacted in place
    (:func:`epochs.in_place_counts`); one of those outside every line is a chain alone.
    """
    compacted = in_place or {}
    lines = chain_lines(lineage)
    lined = {sid for line in lines for sid in line}
    lines += [[sid] for sid in sorted(compacted) if sid not in lined]
    epochs = [len(line) + sum(compacted.get(sid, 0) for sid in line) for line in lines]
    membership = {sid: n for n, line in enumerate(lines) for sid in line}
    # One pass in SQL sums every line: json_each maps each member to its line. Its
    # members share one profile (the archive's parent links stay inside a profile).
    sums = conn.execute(
        "SELECT j.value, min(s.started_at),"
        " max(coalesce(s.last_activity_at, s.ended_at, s.started_at)),"
        " sum(coalesce(s.message_count, 0)), min(s.profile) FROM sessions s"
        " JOIN json_each(?) j ON s.id = j.key GROUP BY j.value",
        (json.dumps(membership),),
    ).fetchall()
    found = {row[0]: tuple(row[1:]) for row in sums}  # line -> (started, last, messages, profile)
    # Pricing a chain combines every usage row of every segment: at 10k chains that is
    # most of the page (bench/chains.py), so only the cost sort prices them all.
    priced = line_costs(conn, lines, found) if sort == "cost" else {}
    sign = -1 if descending else 1

    def order(n: int) -> tuple:
        started, last, messages, _ = found[n]
        value: float | None = {
            "last": last,
            "started": started,
            "segments": len(lines[n]),
            "epochs": epochs[n],
            "messages": messages,
            "cost": priced[n].effective if sort == "cost" else None,
        }[sort]
        return (value is None, sign * (value or 0), lines[n][0])

    if sort == "profile":  # by name, a tie to the first segment's id whichever way
        by_root = sorted(found, key=lambda n: lines[n][0])
        picked = sorted(by_root, key=lambda n: found[n][3] or "", reverse=descending)[:limit]
    else:
        picked = sorted(found, key=order)[:limit]
    costs = priced if sort == "cost" else line_costs(conn, lines, picked)
    items = [(lines[n], (*found[n], costs[n]), epochs[n]) for n in picked]
    details = _details(conn, items)
    return ChainIndex(len(found), sort, descending, [_summary(i, details) for i in items])


def line_costs(
    conn: sqlite3.Connection, lines: list[list[str]], wanted: Iterable[int]
) -> dict[int, CostSummary]:
    """What each of the ``wanted`` lines cost: its segments' costs by the cost rules."""
    wanted = list(wanted)
    costs = session_costs(conn, (sid for n in wanted for sid in lines[n]))
    return {n: combine(costs.get(sid, NO_COST) for sid in lines[n]) for n in wanted}


def _details(conn: sqlite3.Connection, items: list[tuple]) -> dict[str, tuple]:
    """``(title, source, model, gone_at, name)`` per line's first segment; the title is
    the conversation's (the first titled segment of the line, as on the chain page), the
    name that title, else the first segment's name (store/names.py)."""
    pick = f"s.title, s.source, s.model, {gone_sql('s')}"
    ids = sorted({sid for line, *_ in items for sid in line})
    rows = {
        r[0]: r[1:]
        for r in conn.execute(
            f"SELECT s.id, {pick} FROM sessions s JOIN json_each(?) j ON s.id = j.value",
            (json.dumps(ids),),
        )
    }
    titles: dict[str, str | None] = {}
    for line, *_ in items:
        title = next((rows[sid][0] for sid in line if sid in rows and rows[sid][0]), None)
        titles[line[0]] = title and conversation_title(title)
    names = session_names(conn, titles)
    out: dict[str, tuple] = {}
    for line, *_ in items:
        _, source, model, _ = rows.get(line[0], (None,) * 4)
        gone = rows.get(line[-1], (None,) * 4)[3]
        out[line[0]] = (titles[line[0]], source, model, gone, names[line[0]])
    return out


def _summary(item: tuple, details: dict[str, tuple]) -> ChainSummary:
    line, (started, last, messages, profile, cost), epochs = item
    title, source, model, gone, name = details.get(line[0], (None,) * 4 + (line[0],))
    return ChainSummary(
        root=line[0],
        tip=line[-1],
        title=title,
        source=source,
        model=model,
        segments=len(line),
        epochs=epochs,
        started_at=started,
        last_activity=last or None,
        messages=int(messages or 0),
        cost=cost,
        gone_at=gone,
        profile=profile,
        name=name,
    )
