"""Recall's own data: the summary cache, USER.md / MEMORY.md revisions, cost rollup.

A separate SQLite file (default ``<home>/recall/recall.db``) written through the
same write core as Recall's state store: a user's ``state.db`` is never touched.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from dashboard.repository.cost_rollup import create_session_days, recreate_with_profiles
from dashboard.repository.cost_rollup import create_tables as create_cost_tables
from dashboard.repository.cost_rollup import recreate_tables as recreate_cost_tables
from dashboard.repository.errors import NotFoundError
from dashboard.repository.schema import Migration, migrate
from dashboard.repository.writecore import WriteCore


def _v1_summary_cache(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute(
        """
        CREATE TABLE summary_cache (
            home TEXT NOT NULL,            -- which state.db the session lives in
            session_id TEXT NOT NULL,
            query TEXT NOT NULL,           -- normalised search query
            last_message_id INTEGER NOT NULL,
            model TEXT NOT NULL,
            summary TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (home, session_id, query, last_message_id, model)
        )"""
    )


def _v2_memory_revisions(conn: sqlite3.Connection) -> None:
    conn.execute(
        """
        CREATE TABLE memory_revisions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            home TEXT NOT NULL,            -- which Hermes home (or profile) the file belongs to
            name TEXT NOT NULL,            -- USER.md or MEMORY.md
            content TEXT NOT NULL,         -- the whole file text
            sha256 TEXT NOT NULL,          -- of the UTF-8 bytes of content
            saved_at REAL NOT NULL,
            note TEXT
        )"""
    )
    conn.execute("CREATE INDEX idx_memory_revisions_file ON memory_revisions(home, name, saved_at)")


MIGRATIONS = (
    Migration(1, "summary cache", _v1_summary_cache),
    Migration(2, "memory revisions", _v2_memory_revisions),
    Migration(3, "cost rollup", create_cost_tables),
    Migration(4, "cost rollup: rows spread over the days of their calls", recreate_cost_tables),
    Migration(5, "cost rollup: sums per session and day", create_session_days),
    Migration(6, "cost rollup: every record keyed by its profile", recreate_with_profiles),
)

_REVISION_COLUMNS = ("id", "home", "name", "content", "sha256", "saved_at", "note")


@dataclass(frozen=True)
class SummaryKey:
    """What a cached summary depends on: a new message or another model is a new key."""

    home: str
    session_id: str
    query: str
    last_message_id: int
    model: str


@dataclass(frozen=True)
class CachedSummary:
    text: str
    model: str
    created_at: float


class RecallData:
    """Recall's own database file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.core = WriteCore(self.path)
        try:
            migrate(self.core, migrations=MIGRATIONS)
        except BaseException:
            self.core.close()
            raise

    def close(self) -> None:
        self.core.close()

    def cached_summary(self, key: SummaryKey) -> CachedSummary | None:
        with self.core.reading() as conn:
            row = conn.execute(
                "SELECT summary, model, created_at FROM summary_cache WHERE home=? AND "
                "session_id=? AND query=? AND last_message_id=? AND model=?",
                (key.home, key.session_id, key.query, key.last_message_id, key.model),
            ).fetchone()
        return CachedSummary(row[0], row[1], row[2]) if row else None

    def store_summary(self, key: SummaryKey, text: str, at: float | None = None) -> None:
        when = time.time() if at is None else at
        self.core.write(
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO summary_cache VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key.home, key.session_id, key.query, key.last_message_id, key.model, text, when),
            )
        )

    # -- USER.md / MEMORY.md revisions ---------------------------------------------

    def add_revision(
        self, home: str, name: str, content: str, note: str | None = None, at: float | None = None
    ) -> int:
        """Record one saved version of a memory file; returns the revision id."""
        digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
        when = time.time() if at is None else at
        return self.core.write(
            lambda conn: (
                conn.execute(
                    "INSERT INTO memory_revisions(home, name, content, sha256, saved_at, note) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (home, name, content, digest, when, note),
                ).lastrowid
            )
        )

    def revisions(self, home: str, name: str, limit: int = 50) -> list[dict]:
        """The latest ``limit`` revisions of one file, newest first."""
        with self.core.reading() as conn:
            rows = conn.execute(
                f"SELECT {', '.join(_REVISION_COLUMNS)} FROM memory_revisions "
                "WHERE home=? AND name=? ORDER BY saved_at DESC, id DESC LIMIT ?",
                (home, name, max(0, int(limit))),
            ).fetchall()
        return [dict(zip(_REVISION_COLUMNS, row, strict=True)) for row in rows]

    def revision(self, revision_id: int) -> dict:
        """One revision by id; :class:`NotFoundError` when there is none."""
        with self.core.reading() as conn:
            row = conn.execute(
                f"SELECT {', '.join(_REVISION_COLUMNS)} FROM memory_revisions WHERE id=?",
                (revision_id,),
            ).fetchone()
        if row is None:
            raise NotFoundError(f"memory revision {revision_id} does not exist")
        return dict(zip(_REVISION_COLUMNS, row, strict=True))
