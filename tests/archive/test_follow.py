"""Telling a replaced source from one that changed: what a later sync says, and why."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

from dashboard.archive.importer import sync
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as hs
from tests.support.hermes_v31 import build_v31_home

LATER = 1_900_000_000.0  # after every fixture's rows


def _set_meta(db: Path, key: str, value: str) -> None:
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("UPDATE state_meta SET value=? WHERE key=?", (value, key))
        conn.commit()


def test_an_older_backup_restored_in_place_is_said_as_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    db = hs.build_current_views(home / "state.db")
    backup = hs.backup_copy(db, tmp_path / "backup.db")
    with SessionStore(tmp_path / "archive.db") as archive:
        sync(archive, db, home)
        hs.append_turn(db, hs.S_CRON, "lost question", "lost reply", LATER)
        assert not sync(archive, db, home).replaced
        inode = db.stat().st_ino
        hs.restore_copy(backup, db)  # cp backup.db state.db: the same inode
        assert db.stat().st_ino == inode
        report = sync(archive, db, home)
        assert report.replaced and report.reconciled
        assert "older copy" in (report.replaced_why or "")
        assert report.sessions_reread >= 1  # the cron session lost its turn
        again = sync(archive, db, home)
        assert not again.replaced and again.replaced_why is None


def test_a_deleted_newest_message_is_reconciled_not_called_a_replacement(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    db = hs.build_current_views(home / "state.db")
    with SessionStore(tmp_path / "archive.db") as archive:
        ids = hs.append_turn(db, hs.S_CRON, "question", "reply", LATER)
        sync(archive, db, home)
        with closing(sqlite3.connect(db)) as conn:  # AUTOINCREMENT keeps its high-water
            conn.execute("DELETE FROM messages WHERE id = ?", (ids[-1],))
            conn.commit()
        report = sync(archive, db, home)
        assert report.reconciled and not report.replaced and report.replaced_why is None


def test_another_store_or_generation_in_state_meta_is_said(tmp_path: Path) -> None:
    home = tmp_path / "home"
    build_v31_home(home)
    db = home / "state.db"
    with SessionStore(tmp_path / "archive.db") as archive:
        sync(archive, db, home)
        _set_meta(db, "db_file_generation", "2")
        report = sync(archive, db, home)
        assert report.replaced and "db_file_generation" in (report.replaced_why or "")
        _set_meta(db, "store_instance_id", "another-store")
        report = sync(archive, db, home)
        assert report.replaced and "store_instance_id" in (report.replaced_why or "")
        assert not sync(archive, db, home).replaced


def test_a_file_without_state_meta_marks_is_not_judged_by_them(tmp_path: Path) -> None:
    """Older homes lack ``store_instance_id``/``db_file_generation``; a v31 file that loses
    them (an older Hermes wrote it back) is not a replacement by that alone."""
    home = tmp_path / "home"
    build_v31_home(home)
    db = home / "state.db"
    with SessionStore(tmp_path / "archive.db") as archive:
        sync(archive, db, home)
        with closing(sqlite3.connect(db)) as conn:
            conn.execute("DELETE FROM state_meta WHERE key='store_instance_id'")
            conn.commit()
        assert not sync(archive, db, home).replaced
    seed = tmp_path / "seed"
    hs.build_seed_inline(seed / "state.db")
    with SessionStore(tmp_path / "seed-archive.db") as archive:
        sync(archive, seed / "state.db", seed)
        hs.append_turn(seed / "state.db", hs.S_CRON, "more", "reply", LATER)
        assert not sync(archive, seed / "state.db", seed).replaced


def test_another_file_at_the_path_is_said(tmp_path: Path) -> None:
    home = tmp_path / "home"
    db = hs.build_current_views(home / "state.db")
    with SessionStore(tmp_path / "archive.db") as archive:
        sync(archive, db, home)
        copy = hs.backup_copy(db, tmp_path / "copy.db")
        for side in ("-wal", "-shm"):
            Path(f"{db}{side}").unlink(missing_ok=True)
        os.replace(copy, db)
        report = sync(archive, db, home)
        assert report.replaced and "another file" in (report.replaced_why or "")
