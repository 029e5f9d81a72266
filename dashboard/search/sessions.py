"""Stage 1 of session search: FTS5 hits grouped by session (or chain), in milliseconds.

One search is a few steps, each in its own module:

* routes.py picks the index (words, parts of words, or a scan) from the query
  and the archive's state, and reads a bounded window of matching rows;
* filters.py turns the request's filters into SQL (visible rows only);
* cards.py folds the rows into chains or sessions and builds the page's cards;
* facets.py lists the sources and models the filters offer, and the profiles
  a search of every profile found its sessions in.

Ranking work is bounded: matches are counted first (cheap), and above
:data:`~dashboard.search.routes.RANK_WINDOW` only the newest matches are ranked; the result says so
and carries the rowid to continue from ("search older"). Below it, sessions come in
exact bm25 order of their best message, with exact hit counts, and pagination covers
every matching session.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace

from dashboard.lineage.epochs import EpochsCache
from dashboard.lineage.graph import Lineage
from dashboard.meaning.reader import MeaningReader
from dashboard.search.cards import (
    Group,
    archived_sessions,
    build_cards,
    fold_copies,
    fold_family_copies,
    group_rows,
    page_of,
)
from dashboard.search.facets import (
    ModelFacet,
    model_spellings,
    profile_counts,
    session_facets,
)
from dashboard.search.filters import (
    HIDDEN_SOURCES,
    Filters,
    active_filters,
    request_filters,
)
from dashboard.search.hybrid import blend
from dashboard.search.query import ParsedQuery, parse_query
from dashboard.search.request import (
    MAX_PER_PAGE,
    ROLES,
    ROUTE_WORDS,
    SORTS,
    Hit,
    SearchRequest,
    SearchResult,
    SessionResult,
)
from dashboard.search.routes import (
    Route,
    any_row,
    find_rows,
    mapped,
    plan_routes,
    probe_routes,
    session_matches,
)
from dashboard.search.row_map import RowMap, RowMapCache
from dashboard.search.scan import SCAN_ROWS
from dashboard.store.state import StoreState

__all__ = [
    "HIDDEN_SOURCES",
    "MAX_PER_PAGE",
    "ROLES",
    "ROUTE_WORDS",
    "SORTS",
    "Hit",
    "ModelFacet",
    "SearchRequest",
    "SearchResult",
    "SessionResult",
    "plan_routes",
    "search_sessions",
    "session_facets",
    "session_matches",
]


def search_sessions(
    conn: sqlite3.Connection,
    state: StoreState,
    request: SearchRequest,
    lineage: Lineage,
    epochs: EpochsCache | None = None,
    *,
    scoped: bool = False,
    by_profile: bool = False,
    row_maps: RowMapCache | None = None,
    version: tuple[object, ...] | None = None,
    meaning: MeaningReader | None = None,
) -> SearchResult:
    """Run one search (or the recent-sessions browse for an empty query).

    ``state`` is the archive's (store.state.read_state): whether its trigram index
    answers yet. ``lineage`` is the session graph and ``epochs`` the in-place compaction
    epochs of sessions searched before (the reader keeps both cached). ``scoped``:
    ``conn`` sees some profiles only (reader.apply_scope), so windows are counted in
    them; ``by_profile``: count a query's results per profile (``SearchResult.by_profile``);
    ``row_maps``: the reader's message-to-session map (row_map.py), None to join instead;
    ``version``: the snapshot's graph.archive_version, when the caller read it already;
    ``meaning``: the archive's meaning index (None: words only, whatever the mode).
    """
    began = time.perf_counter()
    parsed = parse_query(request.query)
    if request.model:
        request = replace(request, model_spellings=model_spellings(conn, request.model))
    if parsed.empty:
        result = _recent(conn, request, lineage)
    else:
        result = _matching(
            conn,
            state,
            request,
            parsed,
            lineage,
            epochs or EpochsCache(),
            scoped,
            by_profile,
            row_maps,
            version,
            meaning,
        )
    result.took_ms = (time.perf_counter() - began) * 1000
    return result


def _matching(
    conn: sqlite3.Connection,
    state: StoreState,
    request: SearchRequest,
    parsed: ParsedQuery,
    lineage: Lineage,
    cache: EpochsCache,
    scoped: bool,
    by_profile: bool,
    row_maps: RowMapCache | None,
    version: tuple[object, ...] | None,
    meaning: MeaningReader | None,
) -> SearchResult:
    routes, notes = plan_routes(parsed, state.trigram_ready)
    notes = [*parsed.repairs, *notes]
    filters = request_filters(request)
    route = routes[0]
    probed = probe_routes(conn, routes, parsed)
    # A scoped scan takes its id bounds from the map too (scan.id_bounds), and a pair's
    # lookup its rows' sessions.
    wanted = row_maps is not None and (
        request.mode != "words"
        or any(
            mapped(r, request) or r.name == "pairs" or (scoped and r.table is None) for r in routes
        )
    )
    row_map = row_maps.get(conn, state, version) if row_maps is not None and wanted else None
    for index, route in enumerate(routes):
        found = find_rows(conn, route, parsed, request, filters, scoped, probed, row_map)
        if found.indexed is not None:
            probed.learn(route.name, found.indexed)  # the explanation need not probe it
        if found.rows or index == len(routes) - 1:
            break
        notes.append(
            f"No match when it {ROUTE_WORDS[route.name]}, so it "
            f"{ROUTE_WORDS[routes[index + 1].name]}."
        )

    card_of = lineage.root if request.group == "chain" else str
    mixed = blend(conn, meaning, parsed, request, filters, row_map, found.rows, card_of)
    if mixed.note:
        notes.append(mixed.note)
    titles = _title_matches(conn, parsed, request, filters, row_map)
    # A re-inserted tail row and the row it repeats are one message: every count below
    # (per card, per chain, the total) and every link reads the row a person reads.
    epochs = cache.get(conn, archived_sessions(mixed.rows))
    rows, folded = fold_copies(mixed.rows, epochs)
    rows, across = fold_family_copies(conn, rows, lineage)
    folded += across
    groups = group_rows(rows, lineage, request, titles)
    page = page_of(groups, request, rows)
    results = build_cards(conn, page, lineage, parsed, epochs, mixed.similar)
    side = "oldest" if request.sort == "oldest" else "newest"
    if found.bounded and found.scanned:
        notes.append(
            f"Searched the {side} {SCAN_ROWS:,} messages one by one (no index can answer "
            f"this query)."
        )
    elif found.bounded and request.sort == "relevance" and route.table is not None:
        notes.append(f"To stay fast, only the {side} {found.total - 1:,} were ranked.")
    elif found.bounded:
        notes.append(
            f"To stay fast, only the {side} {found.total - 1:,} were read: the sessions counted "
            f"are the ones holding them."
        )
    cutoff = found.cutoff if found.bounded else None
    alone = mixed.used and request.mode == "meaning"
    if alone:  # what the word routes did is not this answer's
        notes = [*parsed.repairs, *([mixed.note] if mixed.note else [])]
    matched = len(mixed.rows) if alone else found.total + len(mixed.similar)
    result = SearchResult(
        request=request,
        parsed=parsed,
        route="meaning" if alone else route.name,
        routes=(["meaning"] if alone else [route.name, *(["meaning"] if mixed.used else [])]),
        meaning=mixed.status,
        results=results,
        total_sessions=len(groups),
        total_matches=matched - folded,
        bounded=found.bounded,
        ranked_matches=len(rows),
        notes=notes,
        # Continuing goes away from where the order starts: older, or newer for "oldest".
        older_than=cutoff if request.sort != "oldest" else None,
        newer_than=cutoff if request.sort == "oldest" else None,
    )
    if not groups:
        result.home_empty, result.excluded_by = _why_empty(
            conn, request, parsed, routes, scoped, probed, row_map
        )
    elif by_profile:
        # A card's best session is its group's profile: a chain never leaves its profile.
        ids = json.dumps([g.best_session for g in groups])
        result.by_profile = profile_counts(conn, "s.id IN (SELECT value FROM json_each(?))", (ids,))
    return result


def _title_matches(
    conn: sqlite3.Connection,
    parsed: ParsedQuery,
    request: SearchRequest,
    filters: Filters,
    row_map: RowMap | None = None,
) -> list[tuple[str, float]]:
    """Sessions whose name (title or id) satisfies the whole query, with their start times.

    A pass over every session's name (~1 ms at 10k sessions): with ``row_map``, kept for
    its version of the archive, so paging, a filter toggled back or a query asked again
    does not read them again."""
    if request.continues:
        return []  # "search older/newer" pages continue the message hits only
    where, params = parsed.name_sql("s.title", "s.id")
    sql = (
        f"SELECT s.id, coalesce(s.started_at, 0) FROM sessions s WHERE {where}"
        f"{filters.session_sql} ORDER BY s.started_at DESC LIMIT 50"
    )
    args = (*params, *filters.session_params)

    def read() -> list[tuple[str, float]]:
        return [(r[0], r[1]) for r in conn.execute(sql, args).fetchall()]

    return read() if row_map is None else row_map.remembered(("names", sql, args), read)


def _why_empty(
    conn: sqlite3.Connection,
    request: SearchRequest,
    parsed: ParsedQuery,
    routes: list[Route],
    scoped: bool,
    probed: Mapping[str, bool],
    row_map: RowMap | None = None,
) -> tuple[bool, tuple[str, ...]]:
    """Why nothing was found: an empty home, or the filters that hide the matches.

    Each active filter is dropped alone; those whose absence lets something match are
    named. When only dropping them all helps, all are named. Each check is one
    bounded lookup (the same window as the search), and it runs only on empty results.
    """
    if conn.execute("SELECT 1 FROM sessions LIMIT 1").fetchone() is None:
        return True, ()
    active = active_filters(request)
    # Dropping filters only adds names: when none matches with every filter dropped,
    # no subset needs the name lookup (a pass over every session's name) again.
    every = request_filters(request, frozenset(active))
    names = bool(_title_matches(conn, parsed, request, every, row_map))

    def found(skip: Iterable[str]) -> bool:
        filters = request_filters(request, frozenset(skip))
        return (names and bool(_title_matches(conn, parsed, request, filters, row_map))) or any_row(
            conn, routes, parsed, request, filters, scoped, probed
        )

    if not found(active):
        return False, ()
    return False, tuple(name for name in active if found([name])) or tuple(active)


def _recent(conn: sqlite3.Connection, request: SearchRequest, lineage: Lineage) -> SearchResult:
    """The empty query: recent conversations (chain roots unless grouped by session).

    No count by profile: grouped by profile the count reads every session row (17 ms
    at 10k sessions) where this one reads an index (1.5 ms); the switcher lists them.
    """
    filters = request_filters(request)
    # Unary +: most sessions are roots, so the parent index would read nearly all of
    # them and sort; the covering index of names and starts reads them in order.
    roots_only = " AND +s.parent_session_id IS NULL" if request.group == "chain" else ""
    where = f"1{roots_only}{filters.session_sql}"
    total = conn.execute(f"SELECT count(*) FROM sessions s WHERE {where}", filters.session_params)
    total_sessions = total.fetchone()[0]
    order = "ASC" if request.sort == "oldest" else "DESC"
    rows = conn.execute(
        f"SELECT s.id FROM sessions s WHERE {where} ORDER BY s.started_at {order} LIMIT ? OFFSET ?",
        (*filters.session_params, request.per_page, (request.page - 1) * request.per_page),
    ).fetchall()
    groups = [Group(r[0], r[0]) for r in rows]
    results = build_cards(conn, groups, lineage, None)
    result = SearchResult(request, parse_query(""), "recent", results, total_sessions)
    if not total_sessions:
        result.home_empty = conn.execute("SELECT 1 FROM sessions LIMIT 1").fetchone() is None
    return result
