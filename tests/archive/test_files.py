"""The archive store: migration 3's columns, where it lives, its status, the CLI."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from dashboard.archive import marks
from dashboard.archive.files import (
    ARCHIVE_FILE,
    archive_path,
    archive_status,
    open_archive,
    reopen_archive,
)
from dashboard.archive.importer import sync
from dashboard.archive.marks import source_key
from dashboard.errors import StoreUnavailableError, ValidationError
from dashboard.hermes.home import HermesHome
from dashboard.store import schema
from dashboard.store.datadir import data_dir_for
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from dashboard.store.writecore import WriteCore
from tests.support import hermes_shapes as hs
from tests.support.commands import recall

NEW_COLUMNS = {
    "messages": {"active", "compacted", "display_kind"},
    "sessions": {
        "archived",
        "pinned",
        "hidden",
        "last_activity_at",
        "title_source",
        "cwd",
        "git_branch",
        "profile",
    },
    "session_model_usage": {"task"},
}


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def test_the_store_has_what_todays_hermes_records_and_provenance(store: SessionStore) -> None:
    conn = store.core.conn
    for table, needed in NEW_COLUMNS.items():
        assert needed | {
            "src_home",
            "src_id",
            "archive_first_seen",
            "gone_from_source_at",
        } <= _columns(conn, table), table
    assert {"messages_fts", "messages_fts_trigram"} <= {
        r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
    }
    assert schema.current_version(conn) == schema.LATEST_VERSION


def test_migration_3_gives_older_rows_the_meaning_they_had(tmp_path: Path) -> None:
    path = tmp_path / "archive.db"
    core = WriteCore(path)
    assert schema.migrate(core, target=2) == [1, 2]
    core.write(
        lambda c: c.execute(
            "INSERT INTO sessions(id, source, started_at) VALUES ('old', 'cli', 100.0)"
        )
    )
    core.write(
        lambda c: c.execute(
            "INSERT INTO messages(session_id, role, content, timestamp) "
            "VALUES ('old', 'user', 'before the archive', 150.0)"
        )
    )
    core.close()
    with SessionStore(path) as store:
        conn = store.core.conn
        msg = conn.execute(
            "SELECT active, compacted, display_kind, src_id FROM messages"
        ).fetchone()
        assert tuple(msg) == (1, 0, None, None)
        s = conn.execute("SELECT archived, pinned, hidden FROM sessions").fetchone()
        assert tuple(s) == (0, 0, 0)
    assert len(list(tmp_path.glob("archive.db.v2-*.bak"))) == 1


def test_a_source_row_is_kept_once_per_home(store: SessionStore) -> None:
    insert = (
        "INSERT INTO messages(session_id, role, content, timestamp, src_home, src_id) "
        "VALUES ('s', 'user', 'x', 1.0, '/home/a', '7')"
    )
    store.core.write(
        lambda c: c.execute("INSERT INTO sessions(id, source, started_at) VALUES ('s', 'cli', 1.0)")
    )
    store.core.write(lambda c: c.execute(insert))
    with pytest.raises(sqlite3.IntegrityError):
        store.core.write(lambda c: c.execute(insert))


def test_the_archive_lives_in_the_data_directory_unless_told(tmp_path: Path) -> None:
    home = HermesHome(tmp_path / "home")
    path, _ = archive_path(home)
    assert path == data_dir_for(home) / ARCHIVE_FILE
    assert not path.is_relative_to(home.root)
    chosen, _ = archive_path(home, tmp_path / "elsewhere.db")
    assert chosen == tmp_path / "elsewhere.db"
    with pytest.raises(ValidationError):
        archive_path(home, home.state_db)


def test_status_counts_last_sync_and_the_source_layout(tmp_path: Path) -> None:
    root = tmp_path / "home"
    root.mkdir()
    db = hs.build_seed_inline(root / "state.db")
    home = HermesHome(root)
    with open_archive(tmp_path / "a" / ARCHIVE_FILE) as archive:
        before = archive_status(archive, home)
        assert (before.sessions, before.messages, before.last_sync) == (0, 0, None)
        sync(archive, db, root)
        after = archive_status(archive, home)
    assert after.sessions == after.from_home["sessions"] == 7
    assert after.messages == hs.EXPECTED["seed_inline"].total_messages
    assert after.last_sync is not None and after.last_sync["layout"] == "seed"
    assert after.in_progress is None
    assert after.source is not None
    assert after.source["fts_form"] == "inline" and after.source["sessions"] == 7
    assert after.archive_bytes > 0


def test_cli_sync_prints_progress_and_status_reads_back(tmp_path: Path) -> None:
    root = tmp_path / "home"
    root.mkdir()
    hs.build_current_views(root / "state.db")
    target = data_dir_for(HermesHome(root)) / ARCHIVE_FILE
    none_yet = recall("archive", "status", "--home", str(root))
    assert none_yet.returncode == 0 and "no archive" in none_yet.stdout
    assert not target.exists()
    out = recall("archive", "sync", "--home", str(root))
    assert out.returncode == 0, out.stderr
    assert "Archived" in out.stdout and "7/7" in out.stdout  # the progress bar
    assert "7 new sessions" in out.stdout
    assert target.is_file()

    again = recall("archive", "sync", "--home", str(root))
    assert again.returncode == 0 and "0 new sessions, 0 messages" in again.stdout

    status = recall("archive", "status", "--home", str(root), "--json")
    assert status.returncode == 0, status.stderr
    answer = json.loads(status.stdout)
    assert answer["sessions"] == 7 and answer["source"]["fts_form"] == "views"
    assert answer["messages"] == hs.EXPECTED["current_views"].total_messages
    text = recall("archive", "status", "--home", str(root))
    assert "last sync" in text.stdout and "views FTS" in text.stdout


def test_cli_refuses_bad_input_with_a_message(tmp_path: Path) -> None:
    root = tmp_path / "home"
    root.mkdir()
    hs.build_seed_inline(root / "state.db")
    bad = recall("archive", "sync", "--home", str(root), "--batch", "0")
    assert bad.returncode == 2 and "--batch" in bad.stderr
    onto = recall("archive", "sync", "--home", str(root), "--archive", str(root / "state.db"))
    assert onto.returncode == 2 and "cannot be the home's own state.db" in onto.stderr


def test_status_says_a_sync_was_cut_off(tmp_path: Path) -> None:
    root = tmp_path / "home"
    root.mkdir()
    hs.build_seed_inline(root / "state.db")
    with open_archive(tmp_path / ARCHIVE_FILE) as archive:
        mark = {"started_at": 1.0, "id": "x", "first": [2.0, "y"]}
        archive.set_meta(marks.WATERMARK_PREFIX + source_key(root), json.dumps(mark))
    where = str(tmp_path / ARCHIVE_FILE)
    out = recall("archive", "status", "--home", str(root), "--archive", where)
    assert out.returncode == 0 and "cut off" in out.stdout
    with closing(sqlite3.connect(tmp_path / ARCHIVE_FILE)) as c:
        assert c.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0


def test_archive_commands_on_recalls_own_store_say_it_is_its_own_archive(tmp_path: Path) -> None:
    root = tmp_path / "home"
    with SessionStore(root / "state.db") as store:  # an agent embedding Recall
        sid = store.create_session("cli", title="own store")
        store.append_messages(sid, [NewMessage("user", "hello from the store")])
    before = (root / "state.db").read_bytes()
    folder = data_dir_for(HermesHome(root))
    for command in ("sync", "status", "verify"):
        out = recall("archive", command, "--home", str(root))
        assert out.returncode == 0, out.stderr
        assert "is Recall's own store: it is its own archive" in out.stdout, command
    assert not (folder / ARCHIVE_FILE).exists()  # nothing copied
    assert (root / "state.db").read_bytes() == before


@pytest.mark.parametrize("shape", ["seed_inline", "current_views"])
def test_a_hermes_file_named_as_the_archive_is_refused_untouched(
    tmp_path: Path, shape: str
) -> None:
    db = hs.SHAPES[shape](tmp_path / "other" / "state.db")
    wal = db.with_name("state.db-wal")
    before = db.read_bytes(), wal.read_bytes() if wal.exists() else b""
    with pytest.raises(StoreUnavailableError) as caught:
        open_archive(db, to_sync=True)
    assert caught.value.reason == "not-archive" and caught.value.path == str(db)
    # Byte-identical (a read-only open of a WAL file may leave an empty -wal beside it).
    assert (db.read_bytes(), wal.read_bytes() if wal.exists() else b"") == before
    fresh = tmp_path / "new" / ARCHIVE_FILE
    open_archive(fresh).close()  # a missing file is created, and is then Recall's
    open_archive(fresh).close()


def test_an_archive_whose_folder_was_deleted_is_written_back_from_the_open_copy(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    hs.build_current_views(home / "state.db")
    archive = tmp_path / "data" / ARCHIVE_FILE
    store = open_archive(archive, to_sync=True)
    sync(store, home / "state.db", home)
    held = store.core.conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    shutil.rmtree(archive.parent)  # deleted while Recall runs: only the open copy is left
    store, restored = reopen_archive(store)
    try:
        assert restored and archive.is_file()
        with closing(sqlite3.connect(archive)) as conn:
            assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == held > 0
        assert sorted(p.name for p in archive.parent.iterdir() if "restoring" in p.name) == []
    finally:
        store.close()
