"""Profile scoping of a connection: a scoped reader sees one profile's rows only."""

from __future__ import annotations

import sqlite3

from dashboard.hermes.profiles import Scope

#: The archive's tables that hold a profile's rows; a scoped connection sees them
#: through temporary views of the same names (see :func:`apply_scope`).
SCOPED_TABLES = ("sessions", "messages", "session_model_usage")


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
    """
    if scope.everything:
        return
    names = ", ".join("'" + n.replace("'", "''") + "'" for n in sorted(scope.names))
    # The scope's session ids, read once per statement from the covering index
    # idx_sessions_profile(profile, id) (a session row's profile sits behind its
    # system prompt, in overflow pages). The unary ``+`` keeps each view's filter a
    # filter: the planner still drives a query by the indexes it chose without the
    # scope (an FTS hit list, a session id, started_at order), and only probes the list.
    mine = f"SELECT id FROM main.sessions WHERE profile IN ({names})"
    conn.execute("PRAGMA query_only=0")
    try:
        conn.execute(
            "CREATE TEMP VIEW sessions AS SELECT rowid AS rowid, * FROM main.sessions"
            f" WHERE +id IN ({mine})"
        )
        for table in SCOPED_TABLES[1:]:
            conn.execute(
                f"CREATE TEMP VIEW {table} AS SELECT rowid AS rowid, * FROM main.{table}"
                f" WHERE +session_id IN ({mine})"
            )
    finally:
        conn.execute("PRAGMA query_only=1")
