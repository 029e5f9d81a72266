"""Profile scoping of a connection: a scoped reader sees one profile's rows only."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from dashboard.hermes.profiles import Scope

#: The archive's tables that hold a profile's rows; a scoped connection sees them
#: through temporary views of the same names (see :func:`apply_scope`).
SCOPED_TABLES = ("sessions", "messages", "session_model_usage")


#: The scope's session ids, kept in the connection's temporary schema (see apply_scope).
SCOPE_IDS = "scope_sessions"
_SEEN = "scope_seen"  # the archive version the ids were read at


def apply_scope(conn: sqlite3.Connection, scope: Scope) -> None:
    """Make ``conn`` see only ``scope``'s profiles, whatever a query asks.

    SQLite resolves an unqualified table name in ``temp`` before ``main``, so a
    temporary view named ``sessions`` (``messages``, ``session_model_usage``) over
    the archive's table, restricted to the scope's sessions, stands in for it in
    every statement this connection runs: search, transcripts, chains, costs. A
    query cannot forget the scope, and one that names ``main.`` explicitly is
    visible in review. ``rowid`` is carried as a column: views have none, and
    SQLite would read it as NULL. The FTS5 indexes still span every profile; each
    query reaches rows through ``messages``, so a hit of another profile is joined
    away. Temporary objects are per connection and need a writable temp schema:
    they are made before ``query_only`` is set again.

    The scope's session ids are a temporary table (:data:`SCOPE_IDS`, its primary
    key the index each view probes), filled here and again by :func:`follow_scope`
    when the archive has changed: a subquery over ``idx_sessions_profile`` in each
    view was built again by every statement (~0.4 ms for 3,300 sessions, a dozen
    statements a page). The unary ``+`` keeps each view's filter a filter: the
    planner still drives a query by the indexes it chose without the scope (an FTS hit
    list, a session id, started_at order), and only probes the list.
    """
    if scope.everything:
        return
    mine = f"SELECT id FROM temp.{SCOPE_IDS}"
    conn.execute("PRAGMA query_only=0")
    try:
        conn.execute(f"CREATE TEMP TABLE {SCOPE_IDS} (id TEXT PRIMARY KEY) WITHOUT ROWID")
        conn.execute(f"CREATE TEMP TABLE {_SEEN} (version TEXT)")
        conn.execute(
            "CREATE TEMP VIEW sessions AS SELECT rowid AS rowid, * FROM main.sessions"
            f" WHERE +id IN ({mine})"
        )
        for table in SCOPED_TABLES[1:]:
            conn.execute(
                f"CREATE TEMP VIEW {table} AS SELECT rowid AS rowid, * FROM main.{table}"
                f" WHERE +session_id IN ({mine})"
            )
        _fill(conn, scope, None)  # a connection for one unit of work needs no follow_scope
        # sqlite3 began a transaction for the fill's writes: end it, or the caller's
        # next read would join it instead of starting its own snapshot.
        conn.commit()
    finally:
        conn.execute("PRAGMA query_only=1")


def follow_scope(
    conn: sqlite3.Connection, scope: Scope, version: Callable[[], tuple[object, ...]]
) -> None:
    """Fill the scope's session ids again when the archive's ``version()``
    (graph.archive_version, read in this snapshot; not read for every profile's scope)
    is not the one they were read at: a sync may have added sessions to a profile.
    Inside the read transaction, so the ids and every statement after see one state of
    the file."""
    if scope.everything:
        return
    seen = repr(version())
    row = conn.execute(f"SELECT version FROM temp.{_SEEN}").fetchone()
    if row is not None and row[0] == seen:
        return
    conn.execute("PRAGMA query_only=0")
    try:
        _fill(conn, scope, seen)
    finally:
        conn.execute("PRAGMA query_only=1")


def _fill(conn: sqlite3.Connection, scope: Scope, seen: str | None) -> None:
    """The scope's session ids read again (a writable temp schema: query_only off)."""
    names = ", ".join("'" + n.replace("'", "''") + "'" for n in sorted(scope.names))
    conn.execute(f"DELETE FROM temp.{SCOPE_IDS}")
    # idx_sessions_profile(profile, id) covers it: a session row's profile sits behind
    # its system prompt, in overflow pages.
    conn.execute(
        f"INSERT INTO temp.{SCOPE_IDS} SELECT id FROM main.sessions WHERE profile IN ({names})"
    )
    conn.execute(f"DELETE FROM temp.{_SEEN}")
    conn.execute(f"INSERT INTO temp.{_SEEN} VALUES (?)", (seen,))
