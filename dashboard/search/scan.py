"""Reads with no ranking, newest (or oldest) first: the scan, and two-character terms.

* :func:`scan_rows`: ``instr`` over the newest :data:`SCAN_ROWS` messages, for what no
  index can find (one CJK character, a term while the trigram index is being built).
* :func:`pair_rows`: a two-character CJK term (``部署``), which the trigram index holds
  only as the start of its three-character pieces (``部署在``, ``部署了``, …): the
  pieces starting with it, read from the index's vocabulary, find every row holding it
  but three kinds, read apart from small partial indexes (store/schema.py): a text
  ending with it (no piece starts there), a structured content (the tokenizer stops at
  its NUL) and, when the term's first character is ASCII, either case at a text's end.
  Exact and complete, bounded by hits (:data:`SCAN_WINDOW`), not by rows read.

Both keep the scan's definition of a match (``ParsedQuery.scan_sql`` over
:data:`SCAN_COLUMNS`); a pair's read skips the text test only where the pieces
already are that test: one all-CJK term, nothing else asked.
"""

from __future__ import annotations

import sqlite3
from operator import itemgetter

from dashboard.search.filters import Filters
from dashboard.search.query import CJK, ParsedQuery
from dashboard.search.request import SearchRequest
from dashboard.search.row_map import RowMap
from dashboard.search.rows import ARCHIVED_M, Row, Rows, continuation_sql, rows_of
from dashboard.store.schema import CJK_TAIL_ROWS, PAIR_TAIL, STRUCTURED_ROWS
from dashboard.store.state import TRIGRAM_INDEX, trigram_vocab

SCAN_WINDOW = 5_000  # hits a scan collects (newest first) before stopping
SCAN_ROWS = 60_000  # messages one scan reads at most (~30 ms here); then "search older"
# What a scan searches: the columns both FTS indexes cover.
SCAN_COLUMNS = ("m.content", "m.tool_name", "m.tool_calls")


def scan_rows(
    conn: sqlite3.Connection,
    parsed: ParsedQuery,
    request: SearchRequest,
    filters: Filters,
    scoped: bool = False,
    row_map: RowMap | None = None,
) -> Rows:
    """Rows found by instr() over the newest SCAN_ROWS messages, newest first.

    No index can answer these queries, so the work is bounded by rows read, not
    by hits: the result offers to continue below the window ("search older").
    """
    where, params = parsed.scan_sql(SCAN_COLUMNS)
    low_id, high_id = id_bounds(conn, scoped, row_map)
    if low_id is None:
        return Rows([], 0, False, None)
    upper = min(request.older_than, high_id + 1) if request.older_than else high_id + 1
    lower = max(low_id, upper - SCAN_ROWS)
    if request.sort == "oldest":
        lower = max(low_id, (request.newer_than or 0) + 1)
        upper = min(upper, lower + SCAN_ROWS)
    direction = "ASC" if request.sort == "oldest" else "DESC"
    # ``main.messages``: the join to ``sessions`` (a scoped connection's view of its
    # profiles) keeps the scope, tested on the rows the text test lets through only, not
    # the scoped ``messages`` view's test of every row read (~10 % of a scan).
    rows = conn.execute(
        f"SELECT m.id, m.session_id, 0, coalesce(m.timestamp, 0), {ARCHIVED_M} "
        f"FROM main.messages m JOIN sessions s ON s.id = m.session_id "
        f"WHERE m.id >= ? AND m.id < ? AND ({where}){filters.sql} ORDER BY m.id {direction} "
        f"LIMIT ?",
        (lower, upper, *params, *filters.params, SCAN_WINDOW + 1),
    ).fetchall()
    full = len(rows) > SCAN_WINDOW
    rows = rows[:SCAN_WINDOW]
    if full:
        cutoff: int | None = rows[-1][0]
    elif direction == "DESC" and lower > low_id:
        cutoff = lower  # older rows were not read
    elif direction == "ASC" and upper <= high_id:
        cutoff = upper - 1  # newer rows were not read
    else:
        cutoff = None
    return Rows([tuple(r) for r in rows], len(rows), cutoff is not None, cutoff, scanned=True)


def id_bounds(
    conn: sqlite3.Connection, scoped: bool, row_map: RowMap | None
) -> tuple[int | None, int | None]:
    """The oldest and newest message ids ``conn`` sees.

    Every profile's: two seeks (min() and max() together defeat SQLite's one-seek
    optimisation). A scope's ``messages`` is a view, where either is a walk of every row
    through the scope's filter (~250 ms at 1M): its map's oldest and newest, when both
    rows are still there (a deletion may have left them behind), else its sessions' rows.
    """
    if not scoped:
        low = conn.execute("SELECT min(id) FROM messages").fetchone()[0]
        return low, conn.execute("SELECT max(id) FROM messages").fetchone()[0]
    if row_map is not None and row_map.owners.newest:
        bounds = (row_map.owners.oldest, row_map.owners.newest)
        there = conn.execute("SELECT count(*) FROM messages WHERE id IN (?, ?)", bounds)
        if there.fetchone()[0] == len(set(bounds)):
            return bounds
    row = conn.execute(
        "SELECT min(id), max(id) FROM main.messages WHERE session_id IN (SELECT id FROM sessions)"
    ).fetchone()
    return row[0], row[1]


#: Pieces of the trigram index read as one OR at most: FTS5 steps every piece of an OR
#: for each row it yields, so a pair followed by thousands of characters costs more
#: than the scan it replaces; more than this many, and the pair is scanned for.
PAIR_PIECES = 500
CHUNK = 1_000  # candidates checked in one statement


def pair_anchor(parsed: ParsedQuery) -> str | None:
    """The two-character term every match holds that :func:`pair_rows` can look up: its
    last character CJK, its first CJK or ASCII (folded as the index folds it). None
    when no such term is required (``部 署``, ``部署 OR 回滚``): those are scanned for."""
    for term in parsed.required_terms():
        first, last = term.text[:1], term.text[1:]
        if len(term.text) == 2 and CJK.match(last) and (first.isascii() or CJK.match(first)):
            return term.text
    return None


def pair_pieces(conn: sqlite3.Connection, pair: str) -> list[str] | None:
    """The trigram index's pieces that start with ``pair`` (its vocabulary read by range,
    one seek); None when there are more than :data:`PAIR_PIECES`."""
    vocab = trigram_vocab(conn)
    key = pair.lower()  # the index folds ASCII case as lower() does
    rows = conn.execute(
        f"SELECT term FROM {vocab} WHERE term >= ? AND term <= ? LIMIT ?",
        (key, key + chr(0x10FFFF), PAIR_PIECES + 1),
    ).fetchall()
    return None if len(rows) > PAIR_PIECES else [r[0] for r in rows]


def pair_rows(
    conn: sqlite3.Connection,
    parsed: ParsedQuery,
    request: SearchRequest,
    filters: Filters,
    scoped: bool = False,
    row_map: RowMap | None = None,
) -> Rows:
    """Rows holding :func:`pair_anchor`'s term and matching ``parsed`` (the scan's
    definition), newest first (oldest for that order), up to :data:`SCAN_WINDOW`."""
    pair = pair_anchor(parsed)
    pieces = pair_pieces(conn, pair) if pair is not None else None
    if pieces is None:
        return scan_rows(conn, parsed, request, filters, scoped, row_map)
    where, params = parsed.scan_sql(SCAN_COLUMNS)
    only_pair = (
        [t.text for t in parsed.positive] == [pair]
        and not parsed.negative
        and bool(CJK.match(pair[0]))
    )

    def check(ids: list[int], text: bool) -> list[Row]:
        """Those of ``ids`` the filters (and, with ``text``, the query's text) let through."""
        condition = f" AND ({where})" if text else ""
        scored = [(i, 0.0) for i in ids]
        return rows_of(conn, scored, request, filters, row_map, condition, params if text else ())

    newest = request.sort != "oldest"
    direction = "DESC" if newest else "ASC"
    older = continuation_sql(request, "rowid")
    hits: list[Row] = []
    if pieces:
        match = " OR ".join('"' + p.replace('"', '""') + '"' for p in pieces)
        walk = conn.execute(
            f"SELECT rowid FROM {TRIGRAM_INDEX} WHERE {TRIGRAM_INDEX} MATCH ?{older} "
            f"ORDER BY rowid {direction}",
            (match,),
        )
        while len(hits) <= SCAN_WINDOW:
            chunk = walk.fetchmany(CHUNK)
            if not chunk:
                break
            hits.extend(check([r[0] for r in chunk], text=not only_pair))
        walk.close()
    hits.sort(key=itemgetter(0), reverse=newest)
    # A text ending with the pair (either ASCII case of its first character), and the
    # structured rows: each one read of its partial index, and only those the window
    # can still take when the walk filled it (past its edge, they are beyond the cut).
    edge = hits[SCAN_WINDOW][0] if len(hits) > SCAN_WINDOW else None
    cases = sorted({pair, pair[0].upper() + pair[1], pair[0].lower() + pair[1]})
    extra = conn.execute(ends_sql(len(cases), request, edge), cases).fetchall()
    seen = {r[0] for r in hits}
    more = check([r[0] for r in extra if r[0] not in seen], text=True)
    if more:
        hits.extend(more)
        hits.sort(key=itemgetter(0), reverse=newest)
    full = len(hits) > SCAN_WINDOW
    if full:
        del hits[SCAN_WINDOW:]
    return Rows(
        [tuple(r) for r in hits],
        SCAN_WINDOW + 1 if full else len(hits),
        full,
        hits[-1][0] if full else None,
    )


def ends_sql(cases: int, request: SearchRequest, edge: int | None) -> str:
    """The ids of rows ending with one of ``cases`` spellings of a pair, and of the
    structured rows, within the request's continuation and, once a walk filled the
    window, on its side of ``edge`` (the first row past it).

    Each arm reads its partial index alone: the structured arm's bound is ``+id``, which
    keeps SQLite from walking the table's id range instead (it did, reading ~20,000
    rows' text, 100–230 ms, for a window's span at 1M messages).
    """
    marks = ", ".join("?" * cases)

    def bounds(column: str) -> str:
        sql = continuation_sql(request, column)
        if edge is not None:
            sql += f" AND {column} {'<=' if request.sort == 'oldest' else '>='} {int(edge)}"
        return sql

    return (
        f"SELECT id FROM main.messages WHERE {PAIR_TAIL} IN ({marks}) AND {CJK_TAIL_ROWS}"
        f"{bounds('id')} UNION SELECT id FROM main.messages WHERE {STRUCTURED_ROWS}"
        f"{bounds('+id')}"
    )
