"""Checks of an archive file the importer, syncer and server tests share."""

from __future__ import annotations

import sqlite3

FTS = ("messages_fts", "messages_fts_trigram")


def fts_checks(
    conn: sqlite3.Connection, tables: tuple[str, ...] = FTS, against_content: tuple[str, ...] = FTS
) -> None:
    """``PRAGMA integrity_check`` and the FTS5 ``integrity-check`` of ``tables`` pass.

    For the tables in ``against_content`` the check runs with rank 1: FTS5 also compares
    the index with the messages it covers (external content); for the others it checks
    the index's own structure only (a trigram index still to be built holds nothing).
    """
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    for table in tables:
        rank = 1 if table in against_content else 0
        conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', {rank})")


def meta(conn: sqlite3.Connection, key: str) -> str | None:
    """A ``state_meta`` value (None when absent)."""
    row = conn.execute("SELECT value FROM state_meta WHERE key=?", (key,)).fetchone()
    return row[0] if row else None
