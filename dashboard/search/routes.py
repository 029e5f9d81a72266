"""The query router: which index answers a query, and the bounded reads of each route.

The router decides from the query and the archive's state only (every page reads one
schema: store/state.py). Routes, tried in order until one finds something:

* ``unicode61`` (:data:`WORD_INDEX`) for words, phrases, prefixes in any language but
  runs of Chinese, Japanese and Korean;
* ``trigram`` (:data:`TRIGRAM_INDEX`) for CJK runs of 3+ characters, for terms whose
  symbols the word index drops (``C++``), and as the retry when the word index finds
  nothing (a part of a word: ``config.ts`` inside ``app-config.ts``);
* ``pairs`` (scan.py) for a two-character CJK term (``部署``), through the trigram
  index's pieces that start with it;
* ``scan`` (``instr`` over ``messages``, scan.py) for one-character CJK terms, which no
  index can find, and in place of the trigram index while a first import has not built
  it yet (``StoreState.trigram_ready`` False).

Ranking work is bounded (PERF_NOTES: bm25 costs ~1 µs per *matching* row, so ``the``
over 1M messages takes ~1 s): one walk in rowid order finds how far a window of
:data:`RANK_WINDOW` matches reaches, and only those are scored; a scan reads at most
:data:`SCAN_ROWS` messages. Either way the caller gets the id to continue from.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter

from dashboard.hermes.conventions import visible_sql
from dashboard.search.filters import Filters, session_level
from dashboard.search.query import ParsedQuery
from dashboard.search.request import SearchRequest
from dashboard.search.row_map import RowMap
from dashboard.search.rows import ARCHIVED_M, Rows, continuation_sql
from dashboard.search.scan import SCAN_COLUMNS, pair_anchor, pair_rows, scan_rows
from dashboard.store.state import TRIGRAM_INDEX, WORD_INDEX, StoreState

RANK_WINDOW = 6_000  # matches ranked by bm25 before the work is bounded (~20 ms here)
PREFIX_RANK_WINDOW = 2_000  # bm25 over prefix expansions costs ~3x more per row
# Matches read for newest/oldest. Reading RANK_WINDOW there too (so the session count
# never changed with the order) took newest-first from 16 to 35-70 ms at 1M messages;
# instead a bounded sort says so and offers the next matches in its direction.
SORT_WINDOW = 1_000


@dataclass(frozen=True)
class Route:
    name: str  # "unicode61", "trigram" or "scan"
    table: str | None  # the FTS table, None for a scan
    match: str | None
    literal: bool = False  # also check the terms as literal text (their symbols count)
    # The trigram MATCH that checks the literal text without reading it (every term ASCII
    # and 3+ characters: the trigram index folds ASCII case as lower() does); None: read it.
    literal_match: str | None = None


def plan_routes(parsed: ParsedQuery, trigram_ready: bool = True) -> tuple[list[Route], list[str]]:
    """The routes to try in order, and notes explaining the choice.

    ``trigram_ready``: the archive's trigram index answers (StoreState.trigram_ready);
    while a first import has not built it, a scan stands in for it.
    """
    notes: list[str] = []
    terms = [*parsed.positive, *parsed.negative]
    scan = Route("scan", None, None)
    if any(t.short_cjk for t in terms):
        if trigram_ready and pair_anchor(parsed) is not None:
            return [Route("pairs", None, None)], notes
        notes.append(
            "Chinese, Japanese and Korean terms this short are found by reading every message."
        )
        return [scan], notes
    tri_match = parsed.fts_match("trigram") if trigram_ready else None
    tri = Route("trigram", TRIGRAM_INDEX, tri_match) if tri_match else None
    if any(t.cjk for t in terms):
        if tri:
            return [tri], notes
        notes.append(
            (
                "A term of 1–2 characters is too short for the index of word parts"
                if trigram_ready
                else "The index of word parts is still being built (the import is finishing)"
            )
            + ", so Chinese, Japanese and Korean terms were found by searching every message."
        )
        return [scan], notes
    symbolic = [t.text for t in terms if t.has_symbols]
    shown = ", ".join(symbolic[:3]) + (", …" if len(symbolic) > 3 else "")
    if any(t.symbols_at_edge for t in terms):
        # The word index keeps letters and digits only: "C++" there is the word "c".
        how = "searching for parts of words" if tri else "searching every message"
        notes.append(f"Matched {shown} with their symbols, by {how}.")
        return ([tri, scan] if tri else [scan]), notes
    if symbolic:
        notes.append(f"Matched {shown} with their symbols, not just their words.")
    # Only where the trigram index's answer can only be a subset of the text check's:
    # no NOT (the index stops at a NUL, so a JSON content's text, after its marker, is not
    # seen there, and a NOT could then pass a row the text check refuses).
    plain = not parsed.negative and all(t.text.isascii() for t in terms)
    by_trigram = tri_match if symbolic and plain else None
    word = Route(
        "unicode61",
        WORD_INDEX,
        parsed.fts_match("unicode61"),
        literal=bool(symbolic),
        literal_match=by_trigram,
    )
    if tri:
        return [word, tri], notes
    if not trigram_ready:
        # Until the index of word parts is built, a part of a word is found by scanning,
        # as it will be by that index once built.
        return [word, scan], notes
    return [word], notes


def find_rows(
    conn: sqlite3.Connection,
    route: Route,
    parsed: ParsedQuery,
    request: SearchRequest,
    filters: Filters,
    scoped: bool = False,
    probed: Mapping[str, bool] | None = None,
    row_map: RowMap | None = None,
) -> Rows:
    """The rows ``route`` finds for the request, best (or newest/oldest) first.

    ``scoped``: ``conn`` sees some profiles only (reader.apply_scope); see :func:`window_walk`.
    ``probed``: :func:`probe_routes` of this request, when already asked. ``row_map``:
    the archive's message-to-session map (row_map.py), which spares the ranked read its
    joins where :func:`mapped` says it can; the rows are the same either way.
    """
    if route.table is None:
        return _unranked(conn, route, parsed, request, filters, scoped, row_map)
    if missing_trigram(conn, route, parsed):
        return Rows([], 0, False, None, indexed=False)
    if row_map is not None and mapped(route, request):
        # Newest first, a trigram phrase costs about twice its read oldest first (FTS5
        # steps each piece's position lists backwards): a query matching nothing
        # (ECONNRESET at 1M: ~4 ms against ~8) learns it from the probe, which stops at
        # the first match, so a query that matches pays almost nothing for it.
        if route.table == TRIGRAM_INDEX and not (
            probed[route.name] if probed is not None else index_matches(conn, route)
        ):
            return Rows([], 0, False, None, indexed=False)
        return _fts_mapped(conn, route, parsed, request, filters, scoped, row_map)
    known = probed.get(route.name) if probed is not None else None
    if not (index_matches(conn, route) if known is None else known):
        return Rows([], 0, False, None)  # nothing to rank, count or explain
    return _fts(conn, route, parsed, request, filters, scoped)


def _unranked(
    conn: sqlite3.Connection,
    route: Route,
    parsed: ParsedQuery,
    request: SearchRequest,
    filters: Filters,
    scoped: bool,
    row_map: RowMap | None = None,
) -> Rows:
    """The rows of a route with no FTS table: a pair's lookup or the scan (scan.py)."""
    read = pair_rows if route.name == "pairs" else scan_rows
    return read(conn, parsed, request, filters, scoped, row_map)


def mapped(route: Route, request: SearchRequest) -> bool:
    """Whether :func:`_fts_mapped` answers ``request`` on ``route``: a ranked read whose
    filters are all the session's (and visibility), with no literal text to read."""
    literal = route.literal and route.literal_match is None
    return route.table is not None and not literal and session_level(request)


class Probes(Mapping[str, bool]):
    """:func:`index_matches` of each route, asked at most once for a request and its
    explanation, and only when read: a mapped read of the word index needs no probe (it
    is as cheap as one when nothing matches), so a query that finds rows there never
    pays for it; a trigram one is probed first (see find_rows)."""

    def __init__(
        self, conn: sqlite3.Connection, routes: Sequence[Route], parsed: ParsedQuery
    ) -> None:
        self._conn = conn
        self._routes = {route.name: route for route in routes}
        self._parsed = parsed
        self._known: dict[str, bool] = {}

    def learn(self, name: str, matches: bool) -> None:
        """Record what a read of route ``name`` found out (no probe needed then)."""
        self._known.setdefault(name, matches)

    def __getitem__(self, name: str) -> bool:
        if name not in self._known:
            self._known[name] = route_matches(self._conn, self._routes[name], self._parsed)
        return self._known[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._routes)

    def __len__(self) -> int:
        return len(self._routes)


def probe_routes(conn: sqlite3.Connection, routes: Sequence[Route], parsed: ParsedQuery) -> Probes:
    """The probes of ``routes`` for ``parsed`` (each asked when first read)."""
    return Probes(conn, routes, parsed)


def index_matches(conn: sqlite3.Connection, route: Route) -> bool:
    """Whether ``route``'s index holds any match at all, filters aside (a scan: unknown,
    so True). One probe that stops at the first match: a query matching nothing answers
    in the time it takes, not in the time of a ranked, joined, filtered read."""
    if route.table is None:
        return True
    t = route.table
    return (
        conn.execute(f"SELECT 1 FROM {t} WHERE {t} MATCH ? LIMIT 1", (route.match,)).fetchone()
        is not None
    )


def route_matches(conn: sqlite3.Connection, route: Route, parsed: ParsedQuery) -> bool:
    """Whether ``route`` can find anything for ``parsed``, filters aside: no missing
    piece (:func:`missing_trigram`), then :func:`index_matches`."""
    return not missing_trigram(conn, route, parsed) and index_matches(conn, route)


def missing_trigram(conn: sqlite3.Connection, route: Route, parsed: ParsedQuery) -> bool:
    """Whether ``route`` is the index of word parts and a three-character piece of a term
    every match needs is in no message (False for any other route).

    A word the word index lacks is retried as parts of words, and the trigram index
    answers such a query by intersecting its pieces' lists: for ``zstd`` the list of
    ``std`` (in ``stdout``, ``stderr``, … a tenth of the archive) costs tens of
    milliseconds to find nothing. Each piece alone is one lookup that stops at its
    first row, so a piece no message holds ends the search at once.
    """
    if route.name != "trigram":
        return False
    t = route.table
    pieces = {
        term.text[i : i + 3].lower()
        for term in parsed.required_terms()
        for i in range(len(term.text) - 2)
    }
    for piece in sorted(pieces):
        quoted = '"' + piece.replace('"', '""') + '"'
        if (
            conn.execute(f"SELECT 1 FROM {t} WHERE {t} MATCH ? LIMIT 1", (quoted,)).fetchone()
            is None
        ):
            return True
    return False


def window_walk(route: Route, request: SearchRequest, scoped: bool) -> str:
    """The statement walking ``route``'s matches in rowid order, the request's way
    (no bm25 scoring, no LIMIT): what a window counts.

    The FTS tables are not scoped (reader.apply_scope): they index every profile's
    messages. A window counted there would let a scoped search say that another
    profile has the word (a bound, "search older", a match count with no result),
    and fill with that profile's rows. A scoped walk goes through ``messages``, the
    scope's rows; every profile's walk needs no join (~1 µs a row at 6k rows).
    """
    t = route.table
    join = " JOIN messages m ON m.id = r.rowid" if scoped else ""
    direction = "ASC" if request.sort == "oldest" else "DESC"
    return (
        f"SELECT r.rowid AS rowid FROM {t} r{join} WHERE {t} MATCH ?"
        f"{continuation_sql(request, 'r.rowid')} ORDER BY r.rowid {direction}"
    )


def _fts(
    conn: sqlite3.Connection,
    route: Route,
    parsed: ParsedQuery,
    request: SearchRequest,
    filters: Filters,
    scoped: bool,
) -> Rows:
    """Matching rows (:data:`Row`), best first, within a bounded window.

    The count is capped just above the window: an exact count of a word in most
    messages costs more than the search; below it, it is the rows that pass the filters.
    """
    t = route.table
    older = continuation_sql(request, "rowid")
    window = rank_window(request, route)
    direction = "ASC" if request.sort == "oldest" else "DESC"
    # One walk in rowid order (no bm25 scoring) finds the window's far edge and
    # whether anything lies beyond it.
    edge = conn.execute(
        f"{window_walk(route, request, scoped)} LIMIT 2 OFFSET ?", (route.match, window - 1)
    ).fetchall()
    bounded = len(edge) == 2
    cutoff = edge[0][0] if bounded else None
    bound = "" if cutoff is None else f" AND rowid {'<=' if direction == 'ASC' else '>='} {cutoff}"
    score = "rank" if request.sort == "relevance" else "0"
    literal, literal_params = literal_sql(parsed, route)
    # Score inside the FTS table alone, then join, then sort here: ordering the
    # joined rows by rank made SQLite twice as slow, and ~10k floats sort in a blink.
    # Plain tuples (no row factory): thousands of rows, each wrapped and unwrapped
    # again, were a tenth of a mid-frequency word's search.
    cur = conn.cursor()
    cur.row_factory = None
    rows = cur.execute(
        f"SELECT m.id, m.session_id, r.score, coalesce(m.timestamp, 0), {ARCHIVED_M} FROM "
        f"(SELECT rowid, {score} AS score FROM {t} WHERE {t} MATCH ?{older}{bound}) r "
        f"JOIN messages m ON m.id = r.rowid JOIN sessions s ON s.id = m.session_id "
        f"WHERE 1{filters.sql}{literal}",
        (route.match, *filters.params, *literal_params),
    ).fetchall()
    # Two sorts in C (stable), not one by a tuple built per row: by id, newest first,
    # then by score, so equal scores keep the newest first.
    rows.sort(key=itemgetter(0), reverse=direction == "DESC" or request.sort == "relevance")
    if request.sort == "relevance":
        rows.sort(key=itemgetter(2))
    total = window + 1 if bounded else len(rows)
    return Rows(rows, total, bounded, cutoff)


def _fts_mapped(
    conn: sqlite3.Connection,
    route: Route,
    parsed: ParsedQuery,
    request: SearchRequest,
    filters: Filters,
    scoped: bool,
    row_map: RowMap,
) -> Rows:
    """:func:`_fts`'s rows with no join: bm25 inside the FTS table alone, each row's
    session, visibility and session filters from ``row_map``.

    Every profile's window is the newest matches, scored in the same statement that
    finds them. A scoped one walks rowids (no scoring) until the scope's window is
    found, as :func:`window_walk` counts it, then scores from its edge.
    """
    t = route.table
    older = continuation_sql(request, "rowid")
    window = rank_window(request, route)
    cur = conn.cursor()
    cur.row_factory = None
    cutoff: int | None = None
    if scoped:
        # Scored between the scope's first and its window's last match (row_map walks
        # them): another profile's rows outside are neither walked nor scored.
        walk = f"SELECT rowid FROM {t} WHERE {t} MATCH ?{older}"
        owned, others = row_map.scope_matches(cur, walk, route.match, window)
        seen = len(owned)
        first = owned[0] if owned else None
        cutoff = owned[window - 1] if seen > window else None
        if first is None:
            return Rows([], 0, False, None, indexed=False)
        bounded = seen > window
        low = cutoff if bounded else row_map.owners.oldest
        bound = f" AND rowid BETWEEN {low} AND {first}"
        params: tuple[object, ...] = (route.match,)
        if others > seen // 10:
            # Other profiles' matches lie between: only the scope's are scored. SQLite
            # tests the WHERE before it reads the rank column, so FTS5 never computes
            # bm25 for a row the list refuses (the ``+`` keeps the list off the rowid
            # lookup, which would run the MATCH once per id).
            bound += " AND +rowid IN (SELECT value FROM json_each(?))"
            params += (json.dumps(owned[:window]),)
        scored = cur.execute(
            f"SELECT rowid, rank FROM {t} WHERE {t} MATCH ?{older}{bound}", params
        ).fetchall()
    else:
        scored = cur.execute(
            f"SELECT rowid, rank FROM {t} WHERE {t} MATCH ?{older} ORDER BY rowid DESC LIMIT ?",
            (route.match, window + 1),
        ).fetchall()
        bounded = len(scored) > window
        if bounded:
            del scored[window:]
            cutoff = scored[-1][0]
    indexed = bool(scored)
    if route.literal_match is not None and scored:
        scored = _literal_rows(cur, parsed, route, scored)
    rows = row_map.rows(scored, row_map.allowed(filters.session_sql, filters.session_params))
    rows.sort(key=itemgetter(0), reverse=True)
    rows.sort(key=itemgetter(2))
    total = window + 1 if bounded else len(rows)
    return Rows(rows, total, bounded, cutoff, indexed=indexed)


def _literal_rows(
    cur: sqlite3.Cursor, parsed: ParsedQuery, route: Route, scored: list[tuple[int, float]]
) -> list[tuple[int, float]]:
    """The rows of ``scored`` holding the query as literal text (:func:`literal_sql`),
    most of them known from the trigram index (~9 ms for ``pg_stat_activity`` at 1M
    messages, against ~40 ms reading every candidate's text). The index misses text
    after a NUL (a JSON content, hermes/content.py), so the candidates it does not hold are
    checked by their text: the answer is exactly :func:`literal_sql`'s."""
    low, high = min(r[0] for r in scored), max(r[0] for r in scored)
    found = {
        r[0]
        for r in cur.execute(
            f"SELECT rowid FROM {TRIGRAM_INDEX} WHERE {TRIGRAM_INDEX} MATCH ? "
            f"AND rowid BETWEEN {low} AND {high}",
            (route.literal_match,),
        )
    }
    rest = [r[0] for r in scored if r[0] not in found]
    if rest:
        literal, params = literal_sql(parsed, route)
        found.update(
            r[0]
            for r in cur.execute(
                f"SELECT m.id FROM messages m WHERE m.id IN (SELECT value FROM json_each(?))"
                f"{literal}",
                (json.dumps(rest), *params),
            )
        )
    return [r for r in scored if r[0] in found]


def any_row(
    conn: sqlite3.Connection,
    routes: list[Route],
    parsed: ParsedQuery,
    request: SearchRequest,
    filters: Filters,
    scoped: bool = False,
    probed: Mapping[str, bool] | None = None,
) -> bool:
    """Whether any route finds a row within the same window the search reads."""
    for route in routes:
        if route.table is None:
            if _unranked(conn, route, parsed, request, filters, scoped).rows:
                return True
            continue
        known = probed.get(route.name) if probed is not None else None
        if not (route_matches(conn, route, parsed) if known is None else known):
            continue
        literal, literal_params = literal_sql(parsed, route)
        row = conn.execute(
            f"SELECT 1 FROM ({window_walk(route, request, scoped)} LIMIT ?) r "
            f"JOIN messages m ON m.id = r.rowid JOIN sessions s ON s.id = m.session_id "
            f"WHERE 1{filters.sql}{literal} LIMIT 1",
            (route.match, rank_window(request, route), *filters.params, *literal_params),
        ).fetchone()
        if row is not None:
            return True
    return False


def literal_sql(parsed: ParsedQuery, route: Route) -> tuple[str, list[str]]:
    """An ``AND`` condition: the query as literal text, for a route whose symbols count.

    The index finds the words (``node js``); this keeps only rows holding the text
    (``node.js``). Words without symbols pass it whenever the index matched them.
    """
    if not route.literal:
        return "", []
    where, params = parsed.scan_sql(SCAN_COLUMNS)
    return f" AND {where}", params


def rank_window(request: SearchRequest, route: Route) -> int:
    """How many matches one request reads: fewer when each costs more to score."""
    if request.sort != "relevance":
        return SORT_WINDOW
    if route.match and '"*' in route.match.replace(" ", ""):  # a prefix term: "deploy"*
        window = PREFIX_RANK_WINDOW
    else:
        window = RANK_WINDOW
    return min(window, request.rank_window) if request.rank_window else window


def session_matches(
    conn: sqlite3.Connection,
    state: StoreState,
    session_id: str,
    parsed: ParsedQuery,
    *,
    every_row: bool = False,
) -> list[int]:
    """Ids of the messages of one session that match ``parsed``, in id order.

    The same definition as a result card's hit count: the same router and index,
    visible rows only (``every_row``: rewound ones too), no other filter. The first
    route that finds anything in this session answers (the word index, then trigram,
    then a scan).
    """
    if parsed.empty:
        return []
    routes, _ = plan_routes(parsed, state.trigram_ready)
    visible = "1" if every_row else visible_sql("m")
    low, high = conn.execute(
        "SELECT min(id), max(id) FROM messages WHERE session_id = ?", (session_id,)
    ).fetchone()
    if low is None:
        return []
    for route in routes:
        if route.table is None:
            where, params = parsed.scan_sql(SCAN_COLUMNS)
            sql = f"SELECT m.id FROM messages m WHERE m.session_id = ? AND {visible} AND {where}"
            args: tuple[object, ...] = (session_id, *params)
        else:
            t = route.table
            # The session's id range bounds the index walk: a common word costs no more
            # than the session holds.
            literal, literal_params = literal_sql(parsed, route)
            sql = (
                f"SELECT m.id FROM {t} r JOIN messages m ON m.id = r.rowid WHERE {t} MATCH ? "
                f"AND r.rowid BETWEEN ? AND ? AND m.session_id = ? AND {visible}{literal}"
            )
            args = (route.match, low, high, session_id, *literal_params)
        ids = sorted(r[0] for r in conn.execute(sql, args))
        if ids:
            return ids
    return []
