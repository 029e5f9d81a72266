"""The ``memory`` tool calls the archive holds, as rows: each result row with the
assistant row that made the call.

Read here, below ``memory/`` (which reads them for provenance), as ``logged_calls`` is
read below the costs that price it. The entry point is the partial index of tool rows
(schema migration 10, ``idx_messages_tools``): the query repeats its condition
(:data:`schema.TOOL_ROWS`) so SQLite may use it. A re-inserted copy (``repeats``) is
the call it repeats, read once; a rewound call is kept (its write happened on disk).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from dashboard.hermes.conventions import visible_sql
from dashboard.hermes.memory_tool import MEMORY_TOOL
from dashboard.store.schema import TOOL_ROWS


@dataclass(frozen=True)
class MemoryCallRow:
    """One memory call's result row and the assistant row that made the call."""

    session_id: str
    profile: str | None
    result_id: int  # the tool row
    result: str | None  # its content
    tool_call_id: str | None
    call_id: int | None  # the assistant row (None: not found before the result)
    at: float | None  # the assistant row's timestamp (else the result's)
    tool_calls: str | None
    shown: bool  # the assistant row is visible (else the transcript needs ``all=1``)


def memory_call_rows(conn: sqlite3.Connection) -> list[MemoryCallRow]:
    """Every memory call in the connection's scope, oldest first.

    The caller is the session's nearest earlier assistant row with ``tool_calls``
    (results follow the message that made the calls), found by a backward walk of
    ``idx_messages_session`` from the result's time.
    """
    rows = conn.execute(
        f"""
        SELECT t.session_id, s.profile, t.id, t.content, t.tool_call_id, t.timestamp,
               (SELECT a.id FROM messages a
                 WHERE a.session_id = t.session_id AND a.timestamp <= t.timestamp
                   AND a.id < t.id AND a.role = 'assistant' AND a.tool_calls IS NOT NULL
                 ORDER BY a.timestamp DESC, a.id DESC LIMIT 1)
        FROM messages t JOIN sessions s ON s.id = t.session_id
        WHERE t.tool_name = ? AND {TOOL_ROWS.replace("tool_name", "t.tool_name")}
          AND t.repeats IS NULL
        ORDER BY t.timestamp, t.id
        """,
        (MEMORY_TOOL,),
    ).fetchall()
    callers = {r[6] for r in rows if r[6] is not None}
    found: dict[int, tuple[float, str | None, bool]] = {}
    if callers:
        marks = ",".join("?" * len(callers))
        for mid, at, calls, shown in conn.execute(
            f"SELECT m.id, m.timestamp, m.tool_calls, {visible_sql('m')} FROM messages m"
            f" WHERE m.id IN ({marks})",
            sorted(callers),
        ):
            found[mid] = (at, calls, bool(shown))
    out = []
    for session_id, profile, result_id, result, call_ref, result_at, caller in rows:
        at, calls, shown = found.get(caller, (result_at, None, True))
        out.append(
            MemoryCallRow(
                session_id,
                profile,
                result_id,
                result,
                call_ref,
                caller if caller in found else None,
                at,
                calls,
                shown,
            )
        )
    return out
