"""What continues what: the one rule for a link's kind, a session's line and its neighbours.

Hermes links a child to its parent through ``parent_session_id``; a compaction, a
branch, a delegation (subagent) and a reset all use that link (HERMES_FACTS,
"Lineage"). :func:`classify` names the kind of each link, :func:`line` walks the
continuation line through a session and :func:`neighbours` lists the segments around
one. The chain page, the chains index, search cards and the session page all ask here,
so no page says "part 2 of 2" without a link back to part 1.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from dashboard.hermes.conventions import BRANCHED_FROM, DELEGATE_FROM, RESET_FROM, lineage_markers
from dashboard.store.names import session_names

# A child may start a moment before its parent's end is recorded (clock skew,
# rounding): within this many seconds it still counts as "after".
TIMING_SLACK_S = 5.0
RESET_REASONS = ("session_reset", "new_session", "reset")
LINE_LIMIT = 1_000  # a corrupt file may hold a cycle or an absurd chain: stop walking


def classify(child: Mapping[str, Any], parent: Mapping[str, Any]) -> str:
    """The kind of the link from ``parent`` to ``child`` (HERMES_FACTS, "Lineage"):
    ``continuation``, ``branch``, ``delegation``, ``reset`` or ``unknown``."""
    markers = lineage_markers(child.get("model_config"))
    if BRANCHED_FROM in markers:
        return "branch"
    if DELEGATE_FROM in markers or (
        child.get("source") == "subagent" and parent.get("source") != "subagent"
    ):
        return "delegation"
    if RESET_FROM in markers or parent.get("end_reason") in RESET_REASONS:
        return "reset"
    reason = parent.get("end_reason")
    if reason == "compression":
        ended, started = parent.get("ended_at"), child.get("started_at")
        if ended is None or started is None or started >= ended - TIMING_SLACK_S:
            return "continuation"
        return "unknown"  # "continues" a session that had not ended yet
    if reason == "branched":
        return "branch"
    return "unknown"


def continues(child: Mapping[str, Any], parent: Mapping[str, Any]) -> bool:
    """Whether ``child`` continues ``parent`` (:func:`classify` says ``continuation``)."""
    return classify(child, parent) == "continuation"


def successors(continued: Mapping[str, str], starts: Mapping[str, float]) -> dict[str, str]:
    """parent → the child that continues it: the earliest by start, then by id.

    ``continued`` maps each continuing child to its parent; ``starts`` the children's
    start times (a missing one counts as 0).
    """
    best: dict[str, str] = {}
    for child, parent in continued.items():
        current = best.get(parent)
        if current is None or (starts.get(child, 0.0), child) < (
            starts.get(current, 0.0),
            current,
        ):
            best[parent] = child
    return best


def line(session_id: str, continued: Mapping[str, str], following: Mapping[str, str]) -> list[str]:
    """The continuation line through a session: its first segment … the tip.

    ``continued``: each continuing child → its parent; ``following``: each parent → the
    child that continues it (:func:`successors`). Safe against cycles, bounded in length.
    """
    out = [session_id]
    current = session_id
    while current in continued and len(out) < LINE_LIMIT:
        parent = continued[current]
        if parent in out:
            break
        out.insert(0, parent)
        current = parent
    seen = set(out)
    current = session_id
    while len(out) < LINE_LIMIT:
        current = following.get(current)
        if current is None or current in seen:
            break
        seen.add(current)
        out.append(current)
    return out


def line_part(line: Sequence[str], session_id: str) -> tuple[int, int] | None:
    """``(n, m)``: ``session_id`` is part n of the m-segment continuation ``line``.

    None when it is not in the line or the line is one session: "part 1 of 1" says
    nothing. Search cards (through :class:`graph.Lineage`), the session page and the
    chain page all ask this.
    """
    if len(line) < 2 or session_id not in line:
        return None
    return line.index(session_id) + 1, len(line)


_NEIGHBOUR_SELECT = (
    "SELECT id, title, started_at, ended_at, end_reason, model_config, source,"
    " parent_session_id FROM sessions"
)


def neighbours(conn: sqlite3.Connection, session_id: str) -> dict[str, Any]:
    """The continuation segments around a session.

    Returns ``{"previous": {...} | None, "next": [{...}, ...]}``, each segment as
    ``{"id", "title", "name", "started_at"}`` (``name``: store/names.py). ``previous`` is
    the parent when this session
    continues it; ``next`` lists the children that continue this session, earliest
    first. Branches, delegations and resets are not neighbours; a parent id pointing
    nowhere gives no ``previous``.
    """
    out: dict[str, Any] = {"previous": None, "next": []}
    this = _one(conn, f"{_NEIGHBOUR_SELECT} WHERE id = ?", (session_id,))
    if this is None:
        return out
    parent_id = this.get("parent_session_id")
    parent = _one(conn, f"{_NEIGHBOUR_SELECT} WHERE id = ?", (parent_id,)) if parent_id else None
    if parent is not None and continues(this, parent):
        out["previous"] = _brief(parent)
    if this.get("end_reason") == "compression":
        children = _dicts(
            conn.execute(
                f"{_NEIGHBOUR_SELECT} WHERE parent_session_id = ? ORDER BY started_at, id",
                (session_id,),
            )
        )
        out["next"] = [_brief(c) for c in children if continues(c, this)]
    shown = [out["previous"], *out["next"]] if out["previous"] else out["next"]
    names = session_names(conn, {n["id"]: n["title"] for n in shown})
    for n in shown:
        n["name"] = names[n["id"]]
    return out


def _dicts(cur: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _one(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> dict[str, Any] | None:
    rows = _dicts(conn.execute(sql, params))
    return rows[0] if rows else None


def _brief(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "title": row.get("title"), "started_at": row.get("started_at")}
