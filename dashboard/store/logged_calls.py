"""The calls the archive kept from agent.log, as the repricer reads them.

archive/call_log.py writes them (schema migration 15's ``logged_calls``); this read lives
in the store because the cost rules that apply a price per call (a long-context tier)
sit below the archive, as the usage rows they price do.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from dashboard.store.schema import CALLS_TABLE

#: Session ids per statement (well under SQLite's bound on variables).
_IDS_PER_READ = 500


@dataclass(frozen=True)
class ArchivedCall:
    """One priced call of a session, as the archive keeps it."""

    at: float  # when Hermes logged it (epoch seconds)
    number: int  # "API call #N" of its turn
    provider: str
    prompt: int  # the whole prompt, cache reads included
    output: int
    cache_read: int
    cache_write: int


def priced_calls(
    conn: sqlite3.Connection, session_ids: Iterable[str]
) -> dict[tuple[str, str], list[ArchivedCall]]:
    """The calls of ``session_ids`` (archive ids) whose prompt and output were logged,
    by (session, model), each list in the order the calls were made: a usage row's
    calls one by one (a row sums a session's calls of one model).

    Args:
        conn: a connection to the archive. The ids say what is read: a scoped reader
            asks for its own sessions.
        session_ids: the sessions asked about; one without priced calls is absent, and
            so is a call without usage (``in=?``: its tokens are the usage row's alone).
    """
    wanted = list(dict.fromkeys(session_ids))
    found: dict[tuple[str, str], list[ArchivedCall]] = {}
    for i in range(0, len(wanted), _IDS_PER_READ):
        chunk = wanted[i : i + _IDS_PER_READ]
        rows = conn.execute(
            "SELECT session_id, model, at, number, provider, prompt_tokens, output_tokens,"
            f" cache_read_tokens, cache_write_tokens FROM {CALLS_TABLE}"
            f" WHERE session_id IN ({','.join('?' for _ in chunk)})"
            " AND prompt_tokens IS NOT NULL AND output_tokens IS NOT NULL"
            " ORDER BY session_id, model, at, number",
            chunk,
        )
        for r in rows:
            found.setdefault((r[0], r[1]), []).append(ArchivedCall(*r[2:]))
    return found
