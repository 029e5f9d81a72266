"""Recall's own data: the summary cache, USER.md / MEMORY.md revisions, cost rollup.

A separate SQLite file (default ``<home>/recall/recall.db``) written through the
same write core as Recall's state store: a user's ``state.db`` is never touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from dashboard.errors import NotFoundError
from dashboard.store.datadir import unwritable
from dashboard.store.schema import Migration, migrate
from dashboard.store.writecore import WriteCore

T = TypeVar("T")


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


# The cost rollup's vectors as its tables store them (costs.rollup reads and writes
# them; tests/store/test_recalldb.py holds them equal to costs.spend's columns). Written
# out here, not imported: a migration's tables are the tables of its day.
ROLLUP_TOKEN_COLUMNS = ("t_input", "t_output", "t_cache_read", "t_cache_write", "t_reasoning")
ROLLUP_SUM_COLUMNS = (
    "rows",
    "e_sum",
    "e_n",
    "a_sum",
    "a_n",
    "eff_sum",
    "eff_n",
    "pa_sum",
    "pe_sum",
    "pair_n",
    "n_actual",
    "n_partial",
    "n_estimated",
    "n_included",
    "n_unknown",
    *ROLLUP_TOKEN_COLUMNS,
    "calls",
    # Recomputed (issue 28, migration 7)
    "r_sum",
    "r_n",
    "er_sum",
    "re_sum",
    "er_n",
    "br_sum",
    "rb_sum",
    "br_n",
    "ur_sum",
    "n_ur",
    "n_unpriced",
    "n_unsized",
    "own_sum",
    "own_n",
)


def _cost_tables(conn: sqlite3.Connection) -> None:
    """The rollup's tables (Recall migration 3, again by 4 and 6)."""
    # Homes by number: the path would be repeated in every one of ~2 rows per usage row.
    conn.execute("CREATE TABLE cost_homes (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE)")
    conn.execute(
        """
        CREATE TABLE cost_rollup_state (
            home INTEGER PRIMARY KEY,
            version TEXT NOT NULL,
            zone TEXT NOT NULL,             -- IANA key the days are local to
            watermark REAL,                 -- the newest last_seen read
            max_rid INTEGER NOT NULL,       -- the newest usage rowid read
            max_mid INTEGER NOT NULL,       -- the newest message rowid read
            row_count INTEGER NOT NULL,
            fingerprint TEXT NOT NULL,      -- costs.fingerprint() when last brought up to date
            built_at REAL NOT NULL
        )"""
    )
    tokens = ", ".join(f"{c} INTEGER NOT NULL" for c in ROLLUP_TOKEN_COLUMNS)
    conn.execute(
        f"""
        CREATE TABLE cost_row (
            home INTEGER NOT NULL, rid INTEGER NOT NULL,
            day INTEGER NOT NULL,           -- proleptic ordinal of the local date; 0: no time
            weight INTEGER NOT NULL,        -- the day's share of the row (costs.days)
            sid TEXT NOT NULL,
            provider TEXT NOT NULL, model TEXT NOT NULL, source TEXT NOT NULL, task TEXT NOT NULL,
            profile TEXT NOT NULL,
            status TEXT NOT NULL, e REAL, a REAL, {tokens}, calls INTEGER NOT NULL,
            r REAL, r_status TEXT NOT NULL, unsized INTEGER NOT NULL, -- recomputed (7)
            r_own INTEGER NOT NULL,         -- priced by the user's prices.yaml (7)
            PRIMARY KEY (home, rid, day)
        ) WITHOUT ROWID"""
    )
    conn.execute("CREATE INDEX idx_cost_row_sid ON cost_row(home, sid)")
    sums = ", ".join(f"{c} NUMERIC NOT NULL" for c in ROLLUP_SUM_COLUMNS)
    conn.execute(
        f"""
        CREATE TABLE cost_day (
            home INTEGER NOT NULL, day INTEGER NOT NULL, provider TEXT NOT NULL,
            model TEXT NOT NULL, source TEXT NOT NULL, task TEXT NOT NULL,
            profile TEXT NOT NULL, {sums},
            PRIMARY KEY (home, day, provider, model, source, task, profile)
        ) WITHOUT ROWID"""
    )
    conn.execute(
        """
        CREATE TABLE cost_day_sessions (
            home INTEGER NOT NULL, dim TEXT NOT NULL, day INTEGER NOT NULL, key TEXT NOT NULL,
            source TEXT NOT NULL, profile TEXT NOT NULL, sessions INTEGER NOT NULL,
            PRIMARY KEY (home, dim, day, key, source, profile)
        ) WITHOUT ROWID"""
    )
    conn.execute(
        "CREATE TABLE cost_multi (home INTEGER NOT NULL, sid TEXT NOT NULL, "
        "PRIMARY KEY (home, sid)) WITHOUT ROWID"
    )


def _cost_session_days(conn: sqlite3.Connection) -> None:
    """Recall migration 5: ``cost_session_day``, sums per (day, session), for the
    costliest sessions of a range (filled by the next build: ROLLUP_VERSION 3)."""
    sums = ", ".join(f"{c} NUMERIC NOT NULL" for c in ROLLUP_SUM_COLUMNS)
    conn.execute(
        f"""
        CREATE TABLE cost_session_day (
            home INTEGER NOT NULL, day INTEGER NOT NULL, sid TEXT NOT NULL,
            source TEXT NOT NULL, profile TEXT NOT NULL, {sums},
            PRIMARY KEY (home, day, sid, source, profile)
        ) WITHOUT ROWID"""
    )


def _cost_rows_by_day(conn: sqlite3.Connection) -> None:
    """Recall migration 4: rows spread over days (issue 13). The sums are rebuilt anyway."""
    _drop_tables(conn)
    _cost_tables(conn)


def _cost_by_profile(conn: sqlite3.Connection) -> None:
    """Recall migration 6: every record keyed by its profile too (issue 17). The sums are
    rebuilt from the archive by the next question (ROLLUP_VERSION 4)."""
    _drop_tables(conn)
    _cost_tables(conn)
    _cost_session_days(conn)


def _cost_recomputed(conn: sqlite3.Connection) -> None:
    """Recall migration 7: each row's recomputed figure and its sums (issue 28). The sums
    are rebuilt from the archive by the next question (ROLLUP_VERSION 5)."""
    _cost_by_profile(conn)


def _drop_tables(conn: sqlite3.Connection) -> None:
    for table in (
        "cost_session_day",
        "cost_multi",
        "cost_day_sessions",
        "cost_day",
        "cost_row",
        "cost_rollup_state",
        "cost_homes",
    ):
        conn.execute(f"DROP TABLE IF EXISTS {table}")


MIGRATIONS = (
    Migration(1, "summary cache", _v1_summary_cache),
    Migration(2, "memory revisions", _v2_memory_revisions),
    Migration(3, "cost rollup", _cost_tables),
    Migration(4, "cost rollup: rows spread over the days of their calls", _cost_rows_by_day),
    Migration(5, "cost rollup: sums per session and day", _cost_session_days),
    Migration(6, "cost rollup: every record keyed by its profile", _cost_by_profile),
    Migration(7, "cost rollup: every row priced again", _cost_recomputed),
)

#: ``state_meta`` key prefix of a Hermes file's overview figures, kept across restarts.
SOURCE_FIGURES_PREFIX = "source_figures:"

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
        """Open (creating, migrating) the file; :class:`NotWritableError` naming the folder
        when its folder cannot take it (gone and not made, read-only, full)."""
        self.path = Path(path)
        try:
            self.core = WriteCore(self.path)
        except (sqlite3.Error, OSError) as exc:
            self._refused(exc)
            raise
        try:
            migrate(self.core, migrations=MIGRATIONS)
        except BaseException as exc:
            self.core.close()
            if isinstance(exc, sqlite3.Error):
                self._refused(exc)
            raise

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """One write; a folder that refuses it is :class:`NotWritableError`, said so."""
        try:
            return self.core.write(fn)
        except sqlite3.Error as exc:
            self._refused(exc)
            raise

    def _refused(self, exc: BaseException) -> None:
        """Raise ``exc`` as its folder's fault when it is one (datadir.unwritable)."""
        error = unwritable(self.path, exc)
        if error is not None:
            raise error from exc

    def close(self) -> None:
        self.core.close()

    def kept_source_figures(self, path: str, stamps: str) -> dict[str, Any] | None:
        """The overview figures kept for the Hermes file at ``path`` when they were read
        at ``stamps`` (its files' stamps, as the reader writes them); None otherwise."""
        with self.core.reading() as conn:
            row = conn.execute(
                "SELECT value FROM state_meta WHERE key = ?", (SOURCE_FIGURES_PREFIX + path,)
            ).fetchone()
        kept = json.loads(row[0]) if row else {}
        return kept["figures"] if kept.get("stamps") == stamps else None

    def keep_source_figures(self, path: str, stamps: str, figures: dict[str, Any]) -> None:
        """Keep ``figures`` of the Hermes file at ``path``, read at ``stamps`` (one entry
        a file: the last one read)."""
        value = json.dumps({"stamps": stamps, "figures": figures})
        self._write(
            lambda conn: conn.execute(
                "INSERT INTO state_meta(key, value) VALUES (?, ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (SOURCE_FIGURES_PREFIX + path, value),
            )
        )

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
        self._write(
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
        return self._write(
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
