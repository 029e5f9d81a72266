"""What a person calls a session: its title, else its first words, else its id.

The one rule every screen names a session by (the session page's heading, search
cards, chains, costs, the archive page): a session without a title is named by its
first user message that a person sees and that says something (not blank, not a
compaction summary), as plain text on one line, clipped to :data:`NAME_CHARS`; a
session with neither by its id. Derived when read, never stored: a title Hermes gives
later, or a message synced in, renames it everywhere at once.

"First" is by time (``timestamp``, then ``id``), walking the archive's
``(session_id, timestamp)`` index so that naming a page of sessions reads a handful of
rows each. A re-inserted copy keeps its original's text and timestamp, so by time or
by id the same words name the session.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping

from dashboard.hermes.content import decode_content
from dashboard.hermes.conventions import is_summary, visible_sql
from dashboard.text import clip_line, plain_opening

NAME_CHARS = 80
#: User rows read per untitled session to find one that says something: a session
#: opens with at most a summary carrier or an empty row before its first words.
ROWS_LOOKED_AT = 5


def session_name(title: str | None, first_words: str | None, session_id: str) -> str:
    """A session's name from its title and its first user message's text."""
    if title:
        return title
    words = clip_line(plain_opening(first_words), NAME_CHARS) if first_words else ""
    return words or session_id


def session_names(conn: sqlite3.Connection, titles: Mapping[str, str | None]) -> dict[str, str]:
    """The name of each session of ``titles`` (its id -> its title, None when untitled),
    reading the first words of the untitled ones only, in one statement."""
    words = first_words(conn, [sid for sid, title in titles.items() if not title])
    return {sid: session_name(title, words.get(sid), sid) for sid, title in titles.items()}


def names_of(conn: sqlite3.Connection, ids: list[str]) -> dict[str, str]:
    """The name of each of the sessions ``ids`` that ``conn`` holds (titles read here)."""
    titles = dict(
        conn.execute(
            "SELECT s.id, s.title FROM sessions s JOIN json_each(?) j ON s.id = j.value",
            (json.dumps(list(dict.fromkeys(ids))),),
        ).fetchall()
    )
    return session_names(conn, titles)


def first_words(conn: sqlite3.Connection, ids: list[str]) -> dict[str, str]:
    """Each session's first visible user message that says something (decoded text)."""
    if not ids:
        return {}
    rows = conn.execute(
        "SELECT x.session_id, x.content, x.compressed_summary"
        " FROM json_each(?) j CROSS JOIN messages x"
        " ON x.id IN (SELECT y.id FROM messages y WHERE y.session_id = j.value"
        f"  AND y.role = 'user' AND {visible_sql('y')} ORDER BY y.timestamp, y.id LIMIT ?)"
        " ORDER BY x.session_id, x.timestamp, x.id",
        (json.dumps(list(dict.fromkeys(ids))), ROWS_LOOKED_AT),
    )
    found: dict[str, str] = {}
    for sid, content, merged in rows:
        if sid in found or content is None:
            continue
        text = decode_content(content)
        if text.strip() and not is_summary(text, merged):
            found[sid] = text
    return found
