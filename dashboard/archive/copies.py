"""Which archived rows re-insert an earlier row: ``messages.repeats``, from ``message_uid``.

Hermes's newest storage code (schema 31, HERMES_FACTS "Hermes v31") gives every message
a ``message_uid`` and keeps it on every re-inserted copy: the head copies a first
in-place compaction inserts before its summary, the retained tail's live copies, a
rotation child's opening rows. One message is one uid, so the archive marks each copy
with the row it repeats (the first row of its session with that uid) when the copy lands,
and every count, view and label reads that column (conventions.visible_sql, lineage.epochs).

A row a summary was merged into (``compressed_summary = 1``) is *not* a copy, though it
keeps the retained row's uid: it is that compaction's summary carrier, and its text is
new. A later plain copy of such a carrier is a copy again.

Sources without ``message_uid`` (older Hermes) leave ``repeats`` NULL: today's rules hold.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from dashboard.archive.marks import put_meta
from dashboard.archive.source import Adapter
from dashboard.store.schema import IDENTITY_KEY

#: state_meta key prefix: a home whose archived rows took their uids from the source
#: (rows archived before schema migration 7 had none).
UIDS_DONE_PREFIX = "archive_uids:"
BACKFILL_ROWS = 4_000  # source rows read per step of :func:`take_uids`

_EARLIER = (
    "x.session_id = messages.session_id AND x.message_uid = messages.message_uid"
    " AND x.id < messages.id"
)


def mark_repeats(conn: sqlite3.Connection, where: str, params: Sequence[Any]) -> int:
    """Set ``repeats`` on the rows matching ``where`` (over ``messages``) that re-insert an
    earlier row of their session; returns how many were marked."""
    return conn.execute(
        f"UPDATE messages SET repeats = (SELECT min(x.id) FROM messages x WHERE {_EARLIER}) "
        f"WHERE ({where}) AND message_uid IS NOT NULL AND repeats IS NULL"
        f" AND EXISTS (SELECT 1 FROM messages x WHERE {_EARLIER})"
        # A merged summary carrier is new text; a plain copy of one (a later compaction
        # retaining it) repeats it.
        f" AND (compressed_summary = 0 OR EXISTS (SELECT 1 FROM messages x"
        f"  WHERE {_EARLIER} AND x.compressed_summary = 1))",
        tuple(params),
    ).rowcount


def has_uids(adapter: Adapter) -> bool:
    """Whether the source gives its messages a ``message_uid``."""
    return "message_uid" in adapter.layout.message_columns


def take_uids(conn: sqlite3.Connection, adapter: Adapter, home: str) -> int:
    """Give the home's archived rows the source's uids, once (an archive made before
    schema migration 7, or a source Hermes upgraded and backfilled since); returns how
    many rows changed. Runs inside the caller's write transaction."""
    key = UIDS_DONE_PREFIX + home
    if not has_uids(adapter):
        return 0
    if conn.execute("SELECT 1 FROM state_meta WHERE key = ?", (key,)).fetchone():
        return 0
    lacking = conn.execute(
        "SELECT 1 FROM messages WHERE src_home = ? AND message_uid IS NULL"
        " AND gone_from_source_at IS NULL LIMIT 1",
        (home,),
    ).fetchone()
    changed = 0
    cur = adapter.conn.execute(
        "SELECT CAST(m.id AS TEXT), m.message_uid, "
        + (
            'm."_compressed_summary"'
            if "_compressed_summary" in adapter.layout.message_columns
            else "0"
        )
        + " FROM messages m WHERE m.message_uid IS NOT NULL"
    )
    while lacking and (rows := cur.fetchmany(BACKFILL_ROWS)):
        changed += conn.executemany(
            "UPDATE messages SET message_uid = ?2, compressed_summary = coalesce(?3, 0)"
            " WHERE src_home = ?4 AND src_id = ?1 AND message_uid IS NULL",
            [(sid, uid, merged, home) for sid, uid, merged in rows],
        ).rowcount
    if changed:
        mark_repeats(conn, "src_home = ?", (home,))
        conn.execute(
            "INSERT INTO state_meta(key, value) VALUES (?, '1') "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
            (IDENTITY_KEY,),
        )
    put_meta(conn, key, "1")
    return changed
