"""FTS upkeep for bulk writers: triggers off and back on, rows indexed in steps, write counts."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from dashboard.store import schema

WORDS, TRIGRAM = schema.FTS_TABLES  # the unicode61 index, the trigram one


def count_write(conn: sqlite3.Connection) -> None:
    """Bump the store's write counter (:data:`schema.WRITES_KEY`) inside a write.

    Every transaction of the store's write core runs this (its ``stamp``); the first
    one, migration 1, creates ``state_meta`` before it runs.
    """
    conn.execute(
        "INSERT INTO state_meta(key, value) VALUES (?, '1') "
        "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
        (schema.WRITES_KEY,),
    )


def put_meta(conn: sqlite3.Connection, key: str, value: str | None) -> None:
    if value is None:
        conn.execute("DELETE FROM state_meta WHERE key=?", (key,))
    else:
        conn.execute(
            "INSERT INTO state_meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (key, value),
        )


def drop_fts_triggers(conn: sqlite3.Connection) -> None:
    put_meta(conn, "fts_stale", "1")
    for name in schema.FTS_TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS main.{name}")  # never an attached file's


def triggers_off(conn: sqlite3.Connection) -> bool:
    """Whether a bulk writer has the FTS triggers off (under way, or killed half-way).

    A row written then by anyone else would miss the index (or leave it
    inconsistent), and opening the store would finish the bulk writer's index.
    """
    rows = conn.execute(
        "SELECT value FROM state_meta WHERE key IN ('fts_stale', 'fts_triggers_off')"
    ).fetchall()
    return any(r[0] == "1" for r in rows)


def defer_fts(conn: sqlite3.Connection) -> None:
    """Triggers off; the word index stays trusted (the writer indexes its rows), the
    trigram index waits for :meth:`SessionStore.finish_deferred_index`."""
    put_meta(conn, "fts_triggers_off", "1")
    put_meta(conn, schema.TRIGRAM_PENDING_KEY, "1")
    for name in schema.FTS_TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS main.{name}")  # never an attached file's


def defer_nothing_pending(conn: sqlite3.Connection) -> None:
    """Triggers off while the writer indexes its own rows in both indexes: nothing is
    pending, so readers keep asking both (a kill leaves them consistent with every
    committed step; the next open restores the triggers, rebuilding the trigram)."""
    put_meta(conn, "fts_triggers_off", "1")
    for name in schema.FTS_TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS main.{name}")  # never an attached file's


def finish_trigram(conn: sqlite3.Connection) -> None:
    """The trigram index is built: triggers back on, readers may ask it."""
    restore_fts_triggers(conn)
    put_meta(conn, schema.TRIGRAM_PENDING_KEY, None)


def restore_fts_triggers(conn: sqlite3.Connection) -> None:
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")}
    for name, sql in zip(schema.FTS_TRIGGERS, schema.fts_trigger_sql(), strict=True):
        if name not in present:
            conn.execute(sql)
    put_meta(conn, "fts_triggers_off", None)


def index_messages(
    conn: sqlite3.Connection, where: str, params: Sequence[Any], *, trigram: bool = False
) -> int:
    """Add the messages matching ``where`` to the word index (``trigram``: and to the
    trigram index); return how many.

    Only for rows written while the triggers are off (``bulk_write(index_in_steps=True)``):
    a row indexed twice would leave the external-content index inconsistent.
    """
    cols = ", ".join(schema.FTS_COLUMNS)
    count = 0
    for table in (WORDS, TRIGRAM) if trigram else (WORDS,):
        # In id order: FTS5 flushes its pending terms to a new segment whenever a rowid
        # goes backwards, as it would between the sessions of a batch read by session.
        count = conn.execute(
            f"INSERT INTO {table}(rowid, {cols}) SELECT id, {cols} FROM messages "
            f"WHERE {where} ORDER BY id",
            tuple(params),
        ).rowcount
    return count
