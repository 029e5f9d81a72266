"""A home synced into an archive, then pruned by Hermes: what the archive page lists."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

from dashboard.archive.importer import sync
from dashboard.hermes.home import HermesHome
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as shapes

NOW = time.time()


def prune_from_source(home: HermesHome, session_id: str) -> None:
    """What Hermes's sweep does to one session: its messages, usage rows and row go."""
    with closing(sqlite3.connect(home.state_db)) as conn:
        for table, column in (
            ("messages", "session_id"),
            ("session_model_usage", "session_id"),
            ("sessions", "id"),
        ):
            conn.execute(f"DELETE FROM {table} WHERE {column}=?", (session_id,))
        conn.commit()


def mark_gone(archive: Path, session_id: str, at: float = shapes.GONE_AT) -> None:
    """The mark the sync leaves on a row the source lost."""
    with SessionStore(archive) as store:
        store.core.write(
            lambda c: c.execute(
                "UPDATE sessions SET gone_from_source_at=? WHERE id=?", (at, session_id)
            )
        )


def archived_home(tmp_path: Path) -> tuple[HermesHome, Path, dict[str, str]]:
    """A source home synced into an archive; then Hermes pruned ``ancient`` and ``older``."""
    ids = shapes.build_prune_home(tmp_path / "home", NOW)
    home = HermesHome(tmp_path / "home")
    archive = tmp_path / "archive.db"
    with SessionStore(archive) as store:
        sync(store, home.state_db, home.root)
    for name in ("ancient", "older"):
        prune_from_source(home, ids[name])
        mark_gone(archive, ids[name])
    return home, archive, ids


def fts_ok(path: Path) -> None:
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for table in ("messages_fts", "messages_fts_trigram"):
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
