"""Stage 1 of session search: FTS5 hits grouped by session (or chain), in milliseconds.

The query router picks the index per query and layout:

* ``unicode61`` (``messages_fts``) for Latin words, phrases, prefixes;
* ``trigram`` for CJK runs of 3+ characters, and as the retry when the word
  index finds nothing (substrings such as ``config.ts`` inside ``app-config.ts``);
* ``scan`` (``instr`` over ``messages``) for 1-2 character CJK terms, which no
  index can find, and when the index is missing, stale or being rebuilt.

Ranking work is bounded (PERF_NOTES: bm25 costs ~1 µs per *matching* row, so
``the`` over 1M messages takes ~1 s): matches are counted first (cheap), and
above :data:`RANK_WINDOW` only the newest matches are ranked; the result says so
and carries the rowid to continue from ("search older"). Below it, sessions
come in exact bm25 order of their best message, with exact hit counts, and
pagination covers every matching session.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from dashboard.repository.content import decode_content
from dashboard.repository.errors import ValidationError
from dashboard.repository.gone import gone_sql, parse_presence, presence_sql
from dashboard.repository.layout import Layout
from dashboard.repository.lineage import Lineage, load_lineage
from dashboard.repository.model_names import model_family
from dashboard.repository.params import date_bound, whole_number
from dashboard.repository.query import ParsedQuery, parse_query
from dashboard.repository.snippets import (
    make_snippet,
    markdown_plain,
    preview,
    readable,
    readable_tool_calls,
)

RANK_WINDOW = 6_000  # matches ranked by bm25 before the work is bounded (~20 ms here)
PREFIX_RANK_WINDOW = 2_000  # bm25 over prefix expansions costs ~3x more per row
# Matches read for newest/oldest. Reading RANK_WINDOW there too (so the session count
# never changed with the order) took newest-first from 16 to 35-70 ms at 1M messages;
# instead a bounded sort says so and offers the next matches in its direction.
SORT_WINDOW = 1_000
SCAN_WINDOW = 5_000  # hits a scan collects (newest first) before stopping
SCAN_ROWS = 60_000  # messages one scan reads at most (~30 ms here); then "search older"
HITS_SHOWN = 3
HIT_CANDIDATES = 12  # hits read per card so that identical ones (compaction copies) can go
MAX_PER_PAGE = 100
HIDDEN_SOURCES = ("cron", "subagent")  # background sessions: shown only when asked for
SORTS = ("relevance", "newest", "oldest")
ROLES = ("user", "assistant", "tool", "system")
# What each route did, in the words a person uses (pages and notes say it this way).
ROUTE_WORDS = {
    "unicode61": "searched whole words",
    "trigram": "searched for parts of words",
    "scan": "searched every message",
}
MODEL_FACETS = 50  # models listed in the filter
@dataclass(frozen=True)
class SearchRequest:
    """Everything that shapes one search, as it appears in the URL."""

    query: str = ""
    roles: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()  # empty: every source except HIDDEN_SOURCES
    model: str | None = None
    after: float | None = None
    before: float | None = None
    exclude: tuple[str, ...] = ()
    sort: str = "relevance"
    group: str = "chain"  # "chain": one card per chain root; "session": one per session
    page: int = 1
    per_page: int = 20
    older_than: int | None = None  # continue a bounded search below this message id
    newer_than: int | None = None  # continue an oldest-first search above this message id
    rank_window: int | None = None  # fewer matches ranked (an agent's prefetch), not in URLs
    presence: str = "all"  # all, hermes (still in Hermes), archive (only in Recall's archive)
    # Every stored spelling of ``model`` (its :func:`model_family`); search_sessions fills it.
    model_spellings: tuple[str, ...] = ()

    @classmethod
    def from_params(cls, get: Callable[[str], str | None], getlist: Callable[[str], list[str]],
                    *, now: float | None = None) -> SearchRequest:  # fmt: skip
        """Parse URL-style parameters; raise ValidationError naming the bad one."""

        def many(name: str) -> tuple[str, ...]:
            values = [v.strip() for raw in getlist(name) for v in raw.split(",")]
            return tuple(v for v in values if v)

        roles = many("role")
        bad = [r for r in roles if r not in ROLES]
        if bad:
            raise ValidationError(f"role must be one of {', '.join(ROLES)} (got {bad[0]!r})")
        sort = (get("sort") or "relevance").strip()
        if sort not in SORTS:
            raise ValidationError(f"sort must be one of {', '.join(SORTS)}")
        group = (get("group") or "chain").strip()
        if group not in ("chain", "session"):
            raise ValidationError("group must be 'chain' or 'session'")
        after = date_bound(get("after"), "after")
        before = date_bound(get("before"), "before", end_of_day=True)
        days = whole_number(get("days"), "days", 1, 36_500)
        if days is not None:
            after = max(after or 0.0, (now or time.time()) - days * 86_400)
        return cls(
            query=(get("q") or "").strip(),
            roles=roles,
            sources=many("source"),
            model=model_family(get("model") or "") or None,
            after=after,
            before=before,
            exclude=many("exclude"),
            sort=sort,
            group=group,
            page=whole_number(get("page"), "page", 1, 100_000) or 1,
            per_page=whole_number(get("per_page"), "per_page", 1, MAX_PER_PAGE) or 20,
            older_than=whole_number(get("older_than"), "older_than", 1, 2**62),
            newer_than=whole_number(get("newer_than"), "newer_than", 0, 2**62),
            presence=parse_presence(get("presence")),
        )

    @property
    def continues(self) -> bool:
        """A "search older/newer" page: it carries on a bounded search's message hits."""
        return self.older_than is not None or self.newer_than is not None


@dataclass
class Hit:
    message_id: int
    session_id: str
    role: str
    timestamp: float | None
    snippet: str  # safe HTML: escaped text with <mark> around the terms


@dataclass
class SessionResult:
    session_id: str  # the session holding the best hit (the session itself when browsing)
    root_session_id: str
    title: str | None
    preview: str
    source: str
    model: str | None
    started_at: float | None
    last_activity: float | None
    message_count: int | None
    hit_count: int  # matching messages in the card's group (its chain, or the session)
    session_hit_count: int = 0  # of those, in ``session_id`` (what its page counts)
    title_match: bool = False
    hits: list[Hit] = field(default_factory=list)
    chain_part: tuple[int, int] | None = None  # part n of an m-segment compaction chain
    gone_at: float | None = None  # when the card's session left Hermes (gone.py), else None


@dataclass
class SearchResult:
    request: SearchRequest
    parsed: ParsedQuery | None
    route: str  # "recent", "unicode61", "trigram" or "scan"
    results: list[SessionResult]
    total_sessions: int
    total_matches: int | None = None
    bounded: bool = False
    ranked_matches: int | None = None
    older_than: int | None = None  # pass back as older_than to search older matches
    newer_than: int | None = None  # pass back as newer_than to search newer matches
    notes: list[str] = field(default_factory=list)
    took_ms: float = 0.0
    # When nothing matched: the filters that each hide matches ("dates", "model",
    # "source", "role", "exclude"), all active ones when only together; () if none.
    excluded_by: tuple[str, ...] = ()
    home_empty: bool = False  # the home has no sessions at all

    @property
    def pages(self) -> int:
        return max(1, -(-self.total_sessions // self.request.per_page))

    @property
    def past_end(self) -> bool:
        """The page asked for lies beyond the last page of results."""
        return self.total_sessions > 0 and self.request.page > self.pages

    @property
    def route_words(self) -> str:
        """What the search did, in plain words ("searched for parts of words")."""
        return ROUTE_WORDS.get(self.route, "listed recent conversations")

    @property
    def window(self) -> int | None:
        """How many matching messages were read when the work was bounded, else None."""
        return self.total_matches - 1 if self.bounded and self.total_matches else None

    def to_json(self) -> dict[str, object]:
        """The ``/api/search`` shape."""
        return {
            "query": self.request.query,
            "normalized": self.parsed.display if self.parsed else "",
            "route": self.route,
            "bounded": self.bounded,
            "total_sessions": self.total_sessions,
            "total_matches": self.total_matches,
            "ranked_matches": self.ranked_matches,
            "older_than": self.older_than,
            "newer_than": self.newer_than,
            "past_end": self.past_end,
            "excluded_by": list(self.excluded_by),
            "home_empty": self.home_empty,
            "page": self.request.page,
            "per_page": self.request.per_page,
            "notes": self.notes,
            "results": [
                {
                    "session_id": r.session_id,
                    "root_session_id": r.root_session_id,
                    "title": r.title,
                    "preview": r.preview,
                    "source": r.source,
                    "model": r.model,
                    "started_at": r.started_at,
                    "last_activity": r.last_activity,
                    "message_count": r.message_count,
                    "title_match": r.title_match,
                    "chain_part": list(r.chain_part) if r.chain_part else None,
                    "gone_from_source_at": r.gone_at,
                    "hit_count": r.hit_count,
                    "session_hit_count": r.session_hit_count,
                    "hits": [
                        {
                            "message_id": h.message_id,
                            "session_id": h.session_id,
                            "role": h.role,
                            "timestamp": h.timestamp,
                            "snippet": h.snippet,
                        }
                        for h in r.hits
                    ],
                }
                for r in self.results
            ],
            "took_ms": round(self.took_ms, 2),
        }


# -- entry point ------------------------------------------------------------------------


def search_sessions(
    conn: sqlite3.Connection, layout: Layout, request: SearchRequest,
    lineage: Lineage | None = None,
) -> SearchResult:  # fmt: skip
    """Run one search (or the recent-sessions browse for an empty query).

    ``lineage`` is the session graph when the caller keeps one cached.
    """
    began = time.perf_counter()
    parsed = parse_query(request.query)
    if lineage is None:
        lineage = load_lineage(conn)
    if request.model:
        request = replace(request, model_spellings=_spellings(conn, layout, request.model))
    if parsed.empty:
        result = _recent(conn, layout, request, lineage)
    else:
        result = _matching(conn, layout, request, parsed, lineage)
    result.took_ms = (time.perf_counter() - began) * 1000
    return result


# -- matching ---------------------------------------------------------------------------


_Row = tuple[int, str, float, float]  # message id, session id, score, timestamp


@dataclass(frozen=True)
class _Route:
    name: str
    table: str | None  # the FTS table, None for a scan
    match: str | None
    literal: bool = False  # also check the terms as literal text (their symbols count)


def plan_routes(layout: Layout, parsed: ParsedQuery) -> tuple[list[_Route], list[str]]:
    """The routes to try in order, and notes explaining the choice."""
    notes: list[str] = []
    terms = [*parsed.positive, *parsed.negative]
    scan = _Route("scan", None, None)
    if any(t.short_cjk for t in terms):
        notes.append(
            "Chinese, Japanese and Korean terms of 1–2 characters are found by reading every "
            "message."
        )
        return [scan], notes
    if not layout.index_trusted:
        why = (
            "stale" if layout.fts_stale else "being rebuilt" if layout.fts_rebuilding else "missing"
        )
        notes.append(f"The search index is {why}, so every message was searched instead.")
        return [scan], notes
    trigram = layout.trigram_index
    tri_match = parsed.fts_match("trigram") if trigram else None
    tri = _Route("trigram", trigram.name, tri_match) if trigram and tri_match else None
    if any(t.cjk for t in terms):
        if tri:
            return [tri], notes
        notes.append(
            (
                "The index of word parts is still being built (the import is finishing)"
                if layout.trigram_pending
                else "This home has no index of word parts"
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
    word = _Route(
        "unicode61", layout.word_index.name, parsed.fts_match("unicode61"),  # type: ignore[union-attr]
        literal=bool(symbolic),
    )  # fmt: skip
    routes = [word, tri] if tri else [word]
    if layout.trigram_pending or not layout.word_index_covers_tools:
        # While the index of word parts is being built, a part of a word is found by
        # scanning, as it will be by that index once built. Old files index message
        # text only: a term in tool-call arguments is found by scanning then too.
        routes.append(scan)
    return routes, notes


def _matching(
    conn: sqlite3.Connection, layout: Layout, request: SearchRequest, parsed: ParsedQuery,
    lineage: Lineage,
) -> SearchResult:  # fmt: skip
    routes, notes = plan_routes(layout, parsed)
    notes = [*parsed.repairs, *notes]
    filters = _filters(layout, request)
    rows: list[_Row] = []
    total = bounded = None
    cutoff = None
    route = routes[0]
    for index, route in enumerate(routes):
        if route.table is None:
            rows, total, bounded, cutoff = _scan(conn, layout, parsed, request, filters)
        else:
            rows, total, bounded, cutoff = _fts(conn, layout, parsed, route, request, filters)
        if rows or index == len(routes) - 1:
            break
        notes.append(
            f"No match when it {ROUTE_WORDS[route.name]}, so it "
            f"{ROUTE_WORDS[routes[index + 1].name]}."
        )

    titles = _title_matches(conn, layout, parsed, request, filters)
    groups = _group(rows, lineage, request, titles)
    page = _page(groups, request)
    results = _cards(conn, layout, page, lineage, parsed)
    side = "oldest" if request.sort == "oldest" else "newest"
    if bounded and route.table is None:
        notes.append(
            f"Searched the {side} {SCAN_ROWS:,} messages one by one (no index can answer "
            f"this query)."
        )
    elif bounded and request.sort == "relevance":
        notes.append(f"To stay fast, only the {side} {total - 1:,} were ranked.")
    elif bounded:
        notes.append(
            f"To stay fast, only the {side} {total - 1:,} were read: the sessions counted "
            f"are the ones holding them."
        )
    result = SearchResult(
        request=request, parsed=parsed, route=route.name, results=results,
        total_sessions=len(groups), total_matches=total, bounded=bool(bounded),
        ranked_matches=len(rows), notes=notes,
        # Continuing goes away from where the order starts: older, or newer for "oldest".
        older_than=cutoff if bounded and request.sort != "oldest" else None,
        newer_than=cutoff if bounded and request.sort == "oldest" else None,
    )  # fmt: skip
    if not groups:
        result.home_empty, result.excluded_by = _why_empty(conn, layout, request, parsed, routes)
    return result


def _fts(
    conn: sqlite3.Connection, layout: Layout, parsed: ParsedQuery, route: _Route,
    request: SearchRequest, filters: _Filters,
) -> tuple[list[_Row], int, bool, int | None]:  # fmt: skip
    """Matching rows (id, session, score, timestamp), best first, within a bounded window.

    Returns the rows, the match count (capped just above the window: an exact
    count of a word in most messages costs more than the search; below it, the
    rows that pass the filters), whether the window cut the matches, and the id
    the window stops at.
    """
    t = route.table
    older = _continuation_sql(request, "rowid")
    window = _window(request, route)
    direction = "ASC" if request.sort == "oldest" else "DESC"
    # One walk in rowid order (no bm25 scoring) finds the window's far edge and
    # whether anything lies beyond it.
    edge = conn.execute(
        f"SELECT rowid FROM {t} WHERE {t} MATCH ?{older} ORDER BY rowid {direction} "
        f"LIMIT 2 OFFSET ?",
        (route.match, window - 1),
    ).fetchall()
    bounded = len(edge) == 2
    cutoff = edge[0][0] if bounded else None
    bound = "" if cutoff is None else f" AND rowid {'<=' if direction == 'ASC' else '>='} {cutoff}"
    score = "rank" if request.sort == "relevance" else "0"
    literal, literal_params = _literal_sql(layout, parsed, route)
    # Score inside the FTS table alone, then join, then sort here: ordering the
    # joined rows by rank made SQLite twice as slow, and ~10k floats sort in a blink.
    rows = conn.execute(
        f"SELECT m.id, m.session_id, r.score, coalesce(m.timestamp, 0) FROM "
        f"(SELECT rowid, {score} AS score FROM {t} WHERE {t} MATCH ?{older}{bound}) r "
        f"JOIN messages m ON m.id = r.rowid JOIN sessions s ON s.id = m.session_id "
        f"WHERE 1{filters.sql}{literal}",
        (route.match, *filters.params, *literal_params),
    ).fetchall()
    if request.sort == "relevance":
        rows.sort(key=lambda r: (r[2], -r[0]))
    else:
        rows.sort(key=lambda r: r[0], reverse=direction == "DESC")
    total = window + 1 if bounded else len(rows)
    return [tuple(r) for r in rows], total, bounded, cutoff


def _literal_sql(layout: Layout, parsed: ParsedQuery, route: _Route) -> tuple[str, list[str]]:
    """An ``AND`` condition: the query as literal text, for a route whose symbols count.

    The index finds the words (``node js``); this keeps only rows holding the text
    (``node.js``). Words without symbols pass it whenever the index matched them.
    """
    if not route.literal:
        return "", []
    where, params = parsed.scan_sql(_scan_columns(layout))
    return f" AND {where}", params


def _continuation_sql(request: SearchRequest, column: str) -> str:
    """The bound a "search older/newer" page puts on message ids (trusted integers)."""
    sql = ""
    if request.older_than is not None:
        sql += f" AND {column} < {int(request.older_than)}"
    if request.newer_than is not None:
        sql += f" AND {column} > {int(request.newer_than)}"
    return sql


def _window(request: SearchRequest, route: _Route) -> int:
    """How many matches one request reads: fewer when each costs more to score."""
    if request.sort != "relevance":
        return SORT_WINDOW
    if route.match and '"*' in route.match.replace(" ", ""):  # a prefix term: "deploy"*
        window = PREFIX_RANK_WINDOW
    else:
        window = RANK_WINDOW
    return min(window, request.rank_window) if request.rank_window else window


def _scan(
    conn: sqlite3.Connection, layout: Layout, parsed: ParsedQuery, request: SearchRequest,
    filters: _Filters,
) -> tuple[list[_Row], int, bool, int | None]:  # fmt: skip
    """Rows found by instr() over the newest SCAN_ROWS messages, newest first.

    No index can answer these queries, so the work is bounded by rows read, not
    by hits: the result offers to continue below the window ("search older").
    """
    where, params = parsed.scan_sql(_scan_columns(layout))
    # Two statements: min() and max() together defeat SQLite's one-seek optimisation.
    low_id = conn.execute("SELECT min(id) FROM messages").fetchone()[0]
    high_id = conn.execute("SELECT max(id) FROM messages").fetchone()[0]
    if low_id is None:
        return [], 0, False, None
    upper = min(request.older_than, high_id + 1) if request.older_than else high_id + 1
    lower = max(low_id, upper - SCAN_ROWS)
    if request.sort == "oldest":
        lower = max(low_id, (request.newer_than or 0) + 1)
        upper = min(upper, lower + SCAN_ROWS)
    direction = "ASC" if request.sort == "oldest" else "DESC"
    rows = conn.execute(
        f"SELECT m.id, m.session_id, 0, coalesce(m.timestamp, 0) FROM messages m "
        f"JOIN sessions s ON s.id = m.session_id "
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
    return [tuple(r) for r in rows], len(rows), cutoff is not None, cutoff


def _why_empty(
    conn: sqlite3.Connection, layout: Layout, request: SearchRequest, parsed: ParsedQuery,
    routes: list[_Route],
) -> tuple[bool, tuple[str, ...]]:  # fmt: skip
    """Why nothing was found: an empty home, or the filters that hide the matches.

    Each active filter is dropped alone; those whose absence lets something match are
    named. When only dropping them all helps, all are named. Each check is one
    bounded lookup (the same window as the search), and it runs only on empty results.
    """
    if conn.execute("SELECT 1 FROM sessions LIMIT 1").fetchone() is None:
        return True, ()
    active = _active_filters(request)

    def found(skip: Iterable[str]) -> bool:
        filters = _filters(layout, request, frozenset(skip))
        return _any_match(conn, layout, request, parsed, routes, filters)

    if not found(active):
        return False, ()
    return False, tuple(name for name in active if found([name])) or tuple(active)


def _any_match(
    conn: sqlite3.Connection, layout: Layout, request: SearchRequest, parsed: ParsedQuery,
    routes: list[_Route], filters: _Filters,
) -> bool:  # fmt: skip
    if _title_matches(conn, layout, parsed, request, filters):
        return True
    for route in routes:
        if route.table is None:
            if _scan(conn, layout, parsed, request, filters)[0]:
                return True
            continue
        t = route.table
        direction = "ASC" if request.sort == "oldest" else "DESC"
        literal, literal_params = _literal_sql(layout, parsed, route)
        row = conn.execute(
            f"SELECT 1 FROM (SELECT rowid FROM {t} WHERE {t} MATCH ?"
            f"{_continuation_sql(request, 'rowid')} ORDER BY rowid {direction} LIMIT ?) r "
            f"JOIN messages m ON m.id = r.rowid JOIN sessions s ON s.id = m.session_id "
            f"WHERE 1{filters.sql}{literal} LIMIT 1",
            (route.match, _window(request, route), *filters.params, *literal_params),
        ).fetchone()
        if row is not None:
            return True
    return False


def session_matches(
    conn: sqlite3.Connection, layout: Layout, session_id: str, parsed: ParsedQuery
) -> list[int]:
    """Ids of the messages of one session that match ``parsed``, in id order.

    The same definition as a result card's hit count: the same router and index,
    visible rows only, no other filter. The first route that finds anything in
    this session answers (the word index, then trigram, then a scan).
    """
    if parsed.empty:
        return []
    routes, _ = plan_routes(layout, parsed)
    visible = layout.visible_messages_sql("m")
    low, high = conn.execute(
        "SELECT min(id), max(id) FROM messages WHERE session_id = ?", (session_id,)
    ).fetchone()
    if low is None:
        return []
    for route in routes:
        if route.table is None:
            where, params = parsed.scan_sql(_scan_columns(layout))
            sql = f"SELECT m.id FROM messages m WHERE m.session_id = ? AND {visible} AND {where}"
            args: tuple[object, ...] = (session_id, *params)
        else:
            t = route.table
            # The session's id range bounds the index walk: a common word costs no more
            # than the session holds.
            literal, literal_params = _literal_sql(layout, parsed, route)
            sql = (
                f"SELECT m.id FROM {t} r JOIN messages m ON m.id = r.rowid WHERE {t} MATCH ? "
                f"AND r.rowid BETWEEN ? AND ? AND m.session_id = ? AND {visible}{literal}"
            )
            args = (route.match, low, high, session_id, *literal_params)
        ids = sorted(r[0] for r in conn.execute(sql, args))
        if ids:
            return ids
    return []


def _scan_columns(layout: Layout) -> list[str]:
    """The message columns a scan searches: the text and, where present, the tool call."""
    wanted = ("content", "tool_name", "tool_calls")
    return [f"m.{c}" for c in wanted if c in layout.message_columns]


# -- filters ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Filters:
    sql: str  # " AND ..." fragments over aliases m (messages) and s (sessions)
    params: tuple[object, ...]
    session_sql: str  # the same, for session-level queries (alias s only)
    session_params: tuple[object, ...]


FILTERS = ("dates", "model", "source", "role", "exclude", "presence")  # _why_empty can blame


def _filters(
    layout: Layout, request: SearchRequest, skip: frozenset[str] = frozenset()
) -> _Filters:
    """The request's filters as SQL; ``skip`` leaves some out (see :data:`FILTERS`)."""
    msg: list[str] = []
    msg_params: list[object] = []
    ses: list[str] = []
    ses_params: list[object] = []
    visible = layout.visible_messages_sql("m")
    if visible != "1":
        msg.append(visible)
    if request.roles and "role" not in skip:
        msg.append(f"m.role IN ({','.join('?' * len(request.roles))})")
        msg_params.extend(request.roles)
    if request.after is not None and "dates" not in skip:
        msg.append("m.timestamp >= ?")
        msg_params.append(request.after)
        ses.append("coalesce(s.ended_at, s.started_at) >= ?")
        ses_params.append(request.after)
    if request.before is not None and "dates" not in skip:
        msg.append("m.timestamp < ?")
        msg_params.append(request.before)
        ses.append("s.started_at < ?")
        ses_params.append(request.before)
    if "source" in skip:
        pass
    elif request.sources:
        ses.append(f"s.source IN ({','.join('?' * len(request.sources))})")
        ses_params.extend(request.sources)
    else:
        ses.append(f"s.source NOT IN ({','.join('?' * len(HIDDEN_SOURCES))})")
        ses_params.extend(HIDDEN_SOURCES)
    if request.model and "model" not in skip:
        spellings = request.model_spellings or (request.model,)
        ses.append(f"s.model IN ({','.join('?' * len(spellings))})")
        ses_params.extend(spellings)
    if request.exclude and "exclude" not in skip:
        ses.append(f"s.id NOT IN ({','.join('?' * len(request.exclude))})")
        ses_params.extend(request.exclude)
    if request.presence != "all" and "presence" not in skip:
        ses.append(presence_sql(request.presence, "s"))
    both = msg + ses
    return _Filters(
        sql="".join(f" AND {c}" for c in both),
        params=(*msg_params, *ses_params),
        session_sql="".join(f" AND {c}" for c in ses),
        session_params=tuple(ses_params),
    )


def _active_filters(request: SearchRequest) -> list[str]:
    """The filters that narrow this request (the default source filter always does)."""
    active = {
        "dates": request.after is not None or request.before is not None,
        "model": bool(request.model),
        "source": True,
        "role": bool(request.roles),
        "exclude": bool(request.exclude),
        "presence": request.presence != "all",
    }
    return [name for name in FILTERS if active[name]]


def _title_matches(
    conn: sqlite3.Connection, layout: Layout, parsed: ParsedQuery, request: SearchRequest,
    filters: _Filters,
) -> list[tuple[str, float]]:  # fmt: skip
    """Sessions whose name (title or id) satisfies the whole query, with their start times."""
    if request.continues:
        return []  # "search older/newer" pages continue the message hits only
    title = "s.title" if "title" in layout.session_columns else "NULL"
    where, params = parsed.name_sql(title, "s.id")
    rows = conn.execute(
        f"SELECT s.id, coalesce(s.started_at, 0) FROM sessions s WHERE {where}"
        f"{filters.session_sql} ORDER BY s.started_at DESC LIMIT 50",
        (*params, *filters.session_params),
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


# -- grouping ---------------------------------------------------------------------------


@dataclass
class _Group:
    key: str
    best_session: str
    hit_ids: list[tuple[int, str]] = field(default_factory=list)  # (message id, session id)
    hit_count: int = 0
    session_hits: dict[str, int] = field(default_factory=dict)  # hits per member session
    title_match: bool = False
    when: float | None = None  # newest (or oldest) time among its hits and matched names


def _group(
    rows: Iterable[_Row],
    lineage: Lineage,
    request: SearchRequest,
    titles: list[tuple[str, float]],
) -> list[_Group]:
    """Fold rows into groups in the request's order.

    Best match: by best row, name matches first. Newest and oldest: by the newest
    (oldest) time of any hit or name-matched session start, name matches included.
    """
    groups: dict[str, _Group] = {}
    roots: dict[str, str] = {}
    oldest = request.sort == "oldest"
    chains = request.group == "chain"

    def key_of(sid: str) -> str:
        if not chains:
            return sid
        root = roots.get(sid)
        if root is None:
            root = roots[sid] = lineage.root(sid)
        return root

    def seen(group: _Group, when: float) -> None:
        if group.when is None or (when < group.when if oldest else when > group.when):
            group.when = when

    for sid, started in titles:
        key = key_of(sid)
        group = groups.setdefault(key, _Group(key, sid))
        group.title_match = True
        seen(group, started)
    timed = request.sort != "relevance"
    for message_id, sid, _score, when in rows:
        key = key_of(sid) if chains else sid
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(key, sid)
        if timed and not group.hit_count:
            # Rows come newest (oldest) first: a group's first row is its newest (oldest).
            seen(group, when)
        group.hit_count += 1
        hits = group.session_hits
        hits[sid] = hits.get(sid, 0) + 1
        if len(group.hit_ids) < HIT_CANDIDATES:
            group.hit_ids.append((message_id, sid))
    ordered = list(groups.values())
    if request.sort != "relevance":
        ordered.sort(key=lambda g: g.when or 0.0, reverse=not oldest)  # stable: ties keep order
    return ordered


def _page(groups: list[_Group], request: SearchRequest) -> list[_Group]:
    start = (request.page - 1) * request.per_page
    return groups[start : start + request.per_page]


# -- cards ------------------------------------------------------------------------------


def _session_rows(
    conn: sqlite3.Connection, layout: Layout, ids: Iterable[str]
) -> dict[str, sqlite3.Row]:
    ids = list(dict.fromkeys(ids))
    if not ids:
        return {}
    cols = layout.session_columns
    pick = ["id", "source", f"{gone_sql('sessions')} AS gone_at"] + [
        c if c in cols else f"NULL AS {c}"
        for c in ("title", "model", "started_at", "ended_at", "message_count", "last_activity_at")
    ]
    rows = conn.execute(
        f"SELECT {', '.join(pick)} FROM sessions WHERE id IN ({','.join('?' * len(ids))})", ids
    ).fetchall()
    return {r["id"]: r for r in rows}


def _first_user_messages(
    conn: sqlite3.Connection, layout: Layout, ids: list[str]
) -> dict[str, str]:
    """Each session's first visible user message, in one statement.

    The inner lookup walks (session_id, timestamp) in index order and stops at
    the first user row, so it reads a handful of rows per session.
    """
    if not ids:
        return {}
    visible = layout.visible_messages_sql("x")
    rows = conn.execute(
        "SELECT m.session_id, m.content FROM messages m WHERE m.id IN ("
        " SELECT (SELECT x.id FROM messages x WHERE x.session_id = j.value"
        f"  AND x.role = 'user' AND {visible} ORDER BY x.timestamp, x.id LIMIT 1)"
        " FROM json_each(?) j)",
        (json.dumps(ids),),
    ).fetchall()
    return {sid: decode_content(content) for sid, content in rows}


def _cards(
    conn: sqlite3.Connection, layout: Layout, page: list[_Group], lineage: Lineage,
    parsed: ParsedQuery | None,
) -> list[SessionResult]:  # fmt: skip
    if not page:
        return []
    wanted = [g.best_session for g in page] + [g.key for g in page]
    sessions = _session_rows(conn, layout, wanted)
    firsts = _first_user_messages(conn, layout, list(dict.fromkeys(wanted)))
    activity = _chain_activity(conn, layout, {g.key: lineage.family(g.key) for g in page})
    hit_ids = [mid for g in page for mid, _ in g.hit_ids]
    messages = _message_rows(conn, hit_ids)
    terms = parsed.highlight_terms() if parsed else []
    cards = []
    for g in page:
        s = sessions.get(g.best_session) or sessions.get(g.key)
        root = sessions.get(g.key) or s
        if s is None:
            continue
        title = (root["title"] if root is not None else None) or s["title"]
        hits: list[Hit] = []
        shown: set[str] = set()
        for mid, sid in g.hit_ids:
            m = messages.get(mid)
            if m is None or len(hits) == HITS_SHOWN:
                continue
            text = readable(decode_content(m["content"]))
            extra = " ".join(x for x in (m["tool_name"], readable_tool_calls(m["tool_calls"])) if x)
            snippet = make_snippet(text, terms, extra)
            if snippet in shown:
                continue  # the same text again (in-place compaction keeps a copy): once is enough
            shown.add(snippet)
            hits.append(Hit(mid, sid, m["role"], m["timestamp"], snippet))
        cards.append(SessionResult(
            session_id=s["id"], root_session_id=g.key, title=title,
            preview=preview(markdown_plain(firsts.get(g.key) or firsts.get(s["id"]) or "")),
            source=s["source"], model=s["model"], started_at=(root or s)["started_at"],
            last_activity=activity.get(g.key),
            message_count=s["message_count"], hit_count=g.hit_count,
            session_hit_count=g.session_hits.get(s["id"], 0), title_match=g.title_match,
            hits=hits, chain_part=lineage.part_of(s["id"]), gone_at=s["gone_at"],
        ))  # fmt: skip
    return cards


def _message_rows(conn: sqlite3.Connection, ids: list[int]) -> dict[int, sqlite3.Row]:
    if not ids:
        return {}
    rows = conn.execute(
        "SELECT id, role, content, tool_name, tool_calls, timestamp FROM messages "
        f"WHERE id IN ({','.join('?' * len(ids))})",
        ids,
    ).fetchall()
    return {r["id"]: r for r in rows}


def _chain_activity(
    conn: sqlite3.Connection, layout: Layout, families: dict[str, list[str]]
) -> dict[str, float | None]:
    """Latest activity across each chain root and its descendants, in one statement."""
    cols = layout.session_columns
    parts = [c for c in ("last_activity_at", "ended_at", "started_at") if c in cols]
    expr = f"max({', '.join(f'coalesce({c}, 0)' for c in parts)})" if len(parts) > 1 else parts[0]
    members = sorted({sid for family in families.values() for sid in family})
    latest = dict(
        conn.execute(
            f"SELECT s.id, {expr} FROM sessions s JOIN json_each(?) j ON s.id = j.value",
            (json.dumps(members),),
        ).fetchall()
    )
    return {
        root: max((latest.get(sid) or 0 for sid in family), default=0) or None
        for root, family in families.items()
    }


# -- recent sessions (empty query) ------------------------------------------------------


def _recent(
    conn: sqlite3.Connection, layout: Layout, request: SearchRequest, lineage: Lineage
) -> SearchResult:
    filters = _filters(layout, request)
    roots_only = request.group == "chain" and "parent_session_id" in layout.session_columns
    where = "1" + (" AND s.parent_session_id IS NULL" if roots_only else "") + filters.session_sql
    total = conn.execute(f"SELECT count(*) FROM sessions s WHERE {where}", filters.session_params)
    total_sessions = total.fetchone()[0]
    order = "ASC" if request.sort == "oldest" else "DESC"
    rows = conn.execute(
        f"SELECT s.id FROM sessions s WHERE {where} ORDER BY s.started_at {order} LIMIT ? OFFSET ?",
        (*filters.session_params, request.per_page, (request.page - 1) * request.per_page),
    ).fetchall()
    groups = [_Group(r[0], r[0]) for r in rows]
    results = _cards(conn, layout, groups, lineage, None)
    result = SearchResult(request, parse_query(""), "recent", results, total_sessions)
    if not total_sessions:
        result.home_empty = conn.execute("SELECT 1 FROM sessions LIMIT 1").fetchone() is None
    return result


@dataclass(frozen=True)
class ModelFacet:
    """One model in the filter: all its stored spellings under one entry."""

    key: str  # what the filter sends: the spellings' model_family
    label: str  # the spelling most sessions use
    count: int  # sessions, all spellings together
    spellings: tuple[str, ...]  # most used first


def _model_counts(conn: sqlite3.Connection, layout: Layout) -> list[tuple[str, int]]:
    """Each stored model name with its number of sessions, most used first."""
    if "model" not in layout.session_columns:
        return []
    return [(r[0], r[1]) for r in conn.execute(
        "SELECT model, count(*) FROM sessions WHERE model IS NOT NULL AND model != '' "
        "GROUP BY model ORDER BY count(*) DESC, model")]  # fmt: skip


def _spellings(conn: sqlite3.Connection, layout: Layout, model: str) -> tuple[str, ...]:
    """The stored names of ``model`` under any of its spellings; never empty."""
    family = model_family(model)
    names = tuple(n for n, _ in _model_counts(conn, layout) if model_family(n) == family)
    return names or (model,)


def session_facets(conn: sqlite3.Connection, layout: Layout) -> dict[str, object]:
    """Sources and models present, most used first, with their session counts.

    ``sources``: names; ``source_counts``: name → sessions; ``models``: ModelFacet list.
    """
    counted = conn.execute(
        "SELECT source, count(*) FROM sessions GROUP BY source ORDER BY count(*) DESC, source"
    ).fetchall()
    groups: dict[str, list[tuple[str, int]]] = {}
    for name, count in _model_counts(conn, layout):
        groups.setdefault(model_family(name), []).append((name, count))
    models = [
        ModelFacet(key, names[0][0], sum(c for _, c in names), tuple(n for n, _ in names))
        for key, names in groups.items()
    ]
    models.sort(key=lambda f: (-f.count, f.label))
    return {
        "sources": [r[0] for r in counted],
        "source_counts": {r[0]: r[1] for r in counted},
        "models": models[:MODEL_FACETS],
    }
