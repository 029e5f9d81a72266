"""What a route's read gives back: matching rows, and where its window stopped; and the
rows of a list of message ids that a request's filters let through (:func:`rows_of`).

Shared by the ranked reads (routes.py), the unranked ones (scan.py) and meaning's
(hybrid.py), and read by the grouping and the cards (sessions.py, cards.py).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from dashboard.search.filters import Filters, session_level
from dashboard.search.request import SearchRequest
from dashboard.search.row_map import RowMap

# message id, session id, score, timestamp, archived (a shown row with compacted = 1 or
# active = 0: an in-place compaction kept it as history or re-inserted it, so its session
# may hold copies and its hits an epoch label: epochs.py; row_map.Flags.archived reads
# the same rule from partial indexes)
Row = tuple[int, str, float, float, int]
ARCHIVED_M = "(m.compacted = 1 OR m.active = 0)"


@dataclass(frozen=True)
class Rows:
    """What one route found: matching rows in the request's order, within its window."""

    rows: list[Row]
    total: int  # rows found; just past the window when it was cut (an exact count costs more)
    bounded: bool  # the window cut the matches
    cutoff: int | None  # the message id the window stops at (continue from there)
    # Whether the route's index holds a match in the reader's scope, filters aside (a
    # probe's answer, learnt on the way; None: not learnt).
    indexed: bool | None = None
    # Read message by message over a window of ids (scan.scan_rows), not from an index:
    # a bound then says how many messages were read, not how many matches.
    scanned: bool = False


def continuation_sql(request: SearchRequest, column: str) -> str:
    """The bound a "search older/newer" page puts on message ids (trusted integers)."""
    sql = ""
    if request.older_than is not None:
        sql += f" AND {column} < {int(request.older_than)}"
    if request.newer_than is not None:
        sql += f" AND {column} > {int(request.newer_than)}"
    return sql


def rows_of(
    conn: sqlite3.Connection,
    scored: list[tuple[int, float]],
    request: SearchRequest,
    filters: Filters,
    row_map: RowMap | None,
    condition: str = "",
    params: Sequence[object] = (),
) -> list[Row]:
    """The rows of ``scored`` (message id, score) that the filters and the reader's scope
    let through, and ``condition`` (an ``AND`` over alias ``m``) when given: from the
    row map when it can say (every filter the session's, no condition), else one join."""
    if not scored:
        return []
    if not condition and row_map is not None and session_level(request):
        return row_map.rows(scored, row_map.allowed(filters.session_sql, filters.session_params))
    score = dict(scored)
    cur = conn.cursor()
    cur.row_factory = None
    found = cur.execute(
        f"SELECT m.id, m.session_id, coalesce(m.timestamp, 0), {ARCHIVED_M} "
        f"FROM main.messages m JOIN sessions s ON s.id = m.session_id "
        f"WHERE m.id IN (SELECT value FROM json_each(?)){condition}{filters.sql}",
        (json.dumps(list(score)), *params, *filters.params),
    ).fetchall()
    return [(i, sid, score[i], ts, archived) for i, sid, ts, archived in found]
