"""What a route's read gives back: matching rows, and where its window stopped.

Shared by the ranked reads (routes.py) and the unranked ones (scan.py), and read by
the grouping and the cards (sessions.py, cards.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.search.request import SearchRequest

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
