"""The user's newest messages a query matches, and the closest in meaning to a text,
after a moment: what the memory page asks of the archive for each entry
(reader/staleness.py).

Stage-1 search ranks a window of the newest matches of every role and leaves older ones
to "search older": a common word's window at 1M messages holds a few days of the
assistant's and the tools' rows, and a user's words of six weeks ago are past it. This
walks the index newest first and keeps the user's rows as it goes (the search's own
filters: visible rows, the scope, no cron or subagent sessions, the date), stopping at
``limit``: ~3–8 ms at 1M for a few hundred rows, ~100 ms for the rare question with
matches all the way back. No scan: a question the indexes cannot answer finds nothing.
"""

from __future__ import annotations

import sqlite3

from dashboard.errors import QuerySyntaxError
from dashboard.meaning.embedder import EmbedderUnavailable
from dashboard.meaning.reader import MeaningReader
from dashboard.search.filters import request_filters
from dashboard.search.hybrid import meaning_rows
from dashboard.search.query import parse_query
from dashboard.search.request import SearchRequest
from dashboard.search.routes import literal_sql, plan_routes
from dashboard.store.state import StoreState

UserMatch = tuple[int, str, float | None]  # message id, session id, timestamp


def newest_user_matches(
    conn: sqlite3.Connection, state: StoreState, query: str, since: float | None, limit: int
) -> list[UserMatch]:
    """The user's visible messages after ``since`` that ``query`` (search syntax) matches,
    newest first, at most ``limit``; none for a query with nothing to search."""
    try:
        parsed = parse_query(query)
    except QuerySyntaxError:
        return []
    if parsed.empty:
        return []
    routes, _ = plan_routes(parsed, state.trigram_ready)
    filters = request_filters(SearchRequest(roles=("user",), after=since))
    for route in routes:
        if route.table is None:
            continue
        t = route.table
        literal, literal_params = literal_sql(parsed, route)
        rows = conn.execute(
            f"SELECT m.id, m.session_id, m.timestamp FROM {t} r "
            f"JOIN messages m ON m.id = r.rowid JOIN sessions s ON s.id = m.session_id "
            f"WHERE {t} MATCH ?{filters.sql}{literal} ORDER BY r.rowid DESC LIMIT ?",
            (route.match, *filters.params, *literal_params, limit),
        ).fetchall()
        if rows:
            return [(r[0], r[1], r[2]) for r in rows]
    return []


def nearest_user_messages(
    conn: sqlite3.Connection, meaning: MeaningReader, text: str, since: float | None, limit: int
) -> list[UserMatch]:
    """The user's visible messages after ``since`` closest in meaning to ``text``, closest
    first, at most ``limit`` (search's own closeness, filters and scope, no cards)."""
    request = SearchRequest(roles=("user",), after=since)
    try:
        rows = meaning_rows(conn, meaning, text, request, request_filters(request), None)
    except EmbedderUnavailable:
        return []
    return [(r[0], r[1], r[3] or None) for r in rows[:limit]]
