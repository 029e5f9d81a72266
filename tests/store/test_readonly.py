"""Foreign homes open read-only in every shape, and their files stay byte-identical."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dashboard.archive.layout import detect_layout
from dashboard.errors import StoreUnavailableError
from dashboard.hermes.content import decode_content
from dashboard.reader.overview import store_overview
from dashboard.store.readonly import open_own_readonly, open_readonly
from tests.support import hermes_shapes as shapes

EMPTY = hashlib.sha256(b"").hexdigest()
LAYOUT_FORM = {"inline": "inline", "external_messages": "external", "external_views": "views"}


def _digests(db: Path) -> dict[str, str | None]:
    out = {}
    for suffix in ("", "-wal"):
        f = Path(f"{db}{suffix}")
        out[suffix or "db"] = hashlib.sha256(f.read_bytes()).hexdigest() if f.exists() else None
    return out


@pytest.mark.parametrize("shape", sorted(shapes.SHAPES))
def test_every_shape_opens_read_only_and_is_left_unchanged(tmp_path: Path, shape: str) -> None:
    db = shapes.SHAPES[shape](tmp_path / shape / "state.db")
    facts = shapes.EXPECTED[shape]
    before = _digests(db)
    assert (before["-wal"] is not None) == (facts.journal_mode == "wal" and facts.wal_only)

    conn = open_readonly(db)
    try:
        layout = detect_layout(conn, db)
        overview = store_overview(conn, layout)
        # Reading every message, decoded, through the visible-rows rule.
        rows = conn.execute(
            f"SELECT content FROM messages m WHERE {layout.visible_messages_sql('m')}"
        ).fetchall()
        texts = [decode_content(r[0]) for r in rows]
        with pytest.raises(sqlite3.OperationalError, match="readonly|read-only"):
            conn.execute("UPDATE sessions SET title = 'x'")
    finally:
        conn.close()

    assert layout.schema_version == facts.schema_version
    assert layout.journal_mode == facts.journal_mode
    assert layout.fts_form == LAYOUT_FORM[facts.fts_layout]
    assert bool(layout.trigram_index) == facts.has_trigram
    assert ("messages_fts_cjk" in layout.fts) == facts.has_cjk
    assert layout.fts_stale == facts.fts_stale
    assert layout.word_index is not None
    flags = {"active", "compacted", "display_kind"}
    assert (flags <= layout.message_columns) == bool(flags & layout.message_columns) == facts.modern
    assert layout.has_model_usage == facts.modern
    assert not layout.is_recall_store
    assert overview["messages"] == facts.visible_messages == len(texts)
    assert overview["sessions"] == len(shapes.SESSION_IDS)
    assert not any(t.startswith(shapes.JSON_CONTENT_PREFIX) for t in texts)
    # The file and its WAL are byte-for-byte what they were. Where no WAL existed,
    # SQLite's reader may leave an empty one (every reader of a WAL file does):
    # no page of data is ever written.
    after = _digests(db)
    assert after["db"] == before["db"]
    if before["-wal"] is None:
        assert after["-wal"] in (None, EMPTY)
    else:
        assert after["-wal"] == before["-wal"]
    # A journal mode we never touched.
    check = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == facts.journal_mode
    finally:
        check.close()


def test_wal_only_rows_are_seen(tmp_path: Path) -> None:
    db = shapes.build_current_views(tmp_path / "state.db")
    conn = open_readonly(db)
    try:
        hits = conn.execute(
            "SELECT count(*) FROM messages WHERE instr(content, ?) > 0", (shapes.WAL_WORD,)
        ).fetchone()[0]
    finally:
        conn.close()
    assert hits == 2


def test_cjk_table_without_its_tokenizer_is_reported_unusable(tmp_path: Path) -> None:
    db = shapes.build_cjk_without_tokenizer(tmp_path / "state.db")
    conn = open_readonly(db)
    try:
        layout = detect_layout(conn, db)
    finally:
        conn.close()
    cjk = layout.fts["messages_fts_cjk"]
    assert cjk.tokenizer == "cjk_unicode61"
    assert not cjk.usable and "no such tokenizer" in (cjk.error or "")
    assert layout.cjk_index is None
    assert layout.word_index is not None and layout.trigram_index is not None
    assert layout.summary()["cjk_index"].startswith("unusable")


def test_current_form_columns_and_views_are_parsed(tmp_path: Path) -> None:
    db = shapes.build_current_views(tmp_path / "state.db")
    conn = open_readonly(db)
    try:
        layout = detect_layout(conn, db)
    finally:
        conn.close()
    word = layout.fts["messages_fts"]
    assert word.columns == ("content", "tool_name", "tool_calls")
    assert word.content == "messages_fts_src" and word.tokenizer == "unicode61"
    assert layout.fts["messages_fts_trigram"].tokenizer == "trigram"
    assert "fts_rebuilding" in layout.summary()


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailableError) as info:
        open_readonly(tmp_path / "nope" / "state.db")
    assert info.value.reason == "missing"
    assert not (tmp_path / "nope").exists()  # nothing created on the way


def test_not_a_database(tmp_path: Path) -> None:
    junk = tmp_path / "state.db"
    junk.write_bytes(b"this is a text file, not SQLite\n" * 200)
    before = junk.read_bytes()
    with pytest.raises(StoreUnavailableError) as info:
        open_readonly(junk)
    assert info.value.reason == "corrupt"
    assert junk.read_bytes() == before


def test_truncated_database_is_corrupt(tmp_path: Path) -> None:
    db = shapes.build_seed_inline(tmp_path / "state.db")
    data = db.read_bytes()
    db.write_bytes(data[:100] + b"\xff" * 4000)  # header kept, pages destroyed
    with pytest.raises(StoreUnavailableError) as info:
        conn = open_readonly(db)
        try:
            layout = detect_layout(conn, db)
            store_overview(conn, layout)
        finally:
            conn.close()
    assert info.value.reason == "corrupt"


LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(10)
"""


def test_exclusively_locked_file_reports_locked(tmp_path: Path) -> None:
    db = shapes.build_delete_journal(tmp_path / "state.db")
    with subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(db)], stdout=subprocess.PIPE, text=True
    ) as locker:
        try:
            assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
            with pytest.raises(StoreUnavailableError) as info:
                open_readonly(db, timeout=0.2)
            assert info.value.reason == "locked"
        finally:
            locker.kill()


def test_error_reasons_are_classified() -> None:
    from dashboard.store.readonly import classify

    here = Path(__file__)
    assert classify(sqlite3.OperationalError("disk I/O error"), here).reason == "io"
    assert classify(sqlite3.DatabaseError("file is not a database"), here).reason == "corrupt"
    assert classify(sqlite3.OperationalError("database is locked"), here).reason == "locked"


def test_an_emptied_file_beside_a_wal_is_never_opened(tmp_path: Path) -> None:
    """``: > state.db`` while Hermes writes in WAL mode: SQLite opening the 0-byte file
    would delete the -wal beside it, the only copy of Hermes's newest rows."""
    db = shapes.build_current_views(tmp_path / "state.db")
    wal = Path(f"{db}-wal")
    wal.write_bytes(b"the writer's newest rows")
    db.write_bytes(b"")
    with pytest.raises(StoreUnavailableError) as info:
        open_readonly(db)
    assert info.value.reason == "empty"
    assert wal.read_bytes() == b"the writer's newest rows"
    wal.unlink()  # no -wal: an empty file is an empty database, opened as before
    open_readonly(db).close()


def test_a_foreign_file_is_never_memory_mapped(tmp_path: Path) -> None:
    """A mapped file truncated in place (``: > state.db``) kills its reader with SIGBUS."""
    db = shapes.build_current_views(tmp_path / "state.db")
    conn = open_readonly(db)
    try:
        assert conn.execute("PRAGMA mmap_size").fetchone()[0] == 0
    finally:
        conn.close()


def test_a_hot_journal_is_read_only_recovery_not_corruption(tmp_path: Path) -> None:
    """SQLite says "attempt to write a readonly database": the file is fine, a rollback is due."""
    db = shapes.build_hot_journal(tmp_path / "state.db")
    journal = Path(f"{db}-journal")
    before = (db.read_bytes(), journal.read_bytes())
    with pytest.raises(StoreUnavailableError) as info:
        open_readonly(db)
    assert info.value.reason == "rollback"
    assert (db.read_bytes(), journal.read_bytes()) == before  # Recall rolled nothing back


def test_a_wal_home_in_a_read_only_folder_is_read_only_not_corrupt(tmp_path: Path) -> None:
    db = shapes.build_seed_inline(tmp_path / "home" / "state.db")
    with shapes.read_only(db, db.parent), pytest.raises(StoreUnavailableError) as info:
        open_readonly(db)  # no -shm yet, and the folder refuses to hold one
    assert info.value.reason == "readonly"


def test_readonly_error_codes_are_named() -> None:
    from dashboard.store.readonly import classify

    here = Path(__file__)
    for code, reason in ((776, "rollback"), (264, "readonly"), (1288, "readonly"), (8, "readonly")):
        exc = sqlite3.OperationalError("attempt to write a readonly database")
        exc.sqlite_errorcode = code  # type: ignore[attr-defined]
        assert classify(exc, here).reason == reason, code


def test_recalls_own_wal_file_in_a_read_only_folder_is_read_without_its_shm(
    tmp_path: Path,
) -> None:
    """A WAL file needs its -shm even to be read; in a read-only folder none can be made,
    and no one can write the file there either: it is read as immutable."""
    folder = tmp_path / "data"
    db = folder / "archive.db"
    folder.mkdir()
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (42)")
    conn.close()  # the last connection out folds the WAL in and removes -wal and -shm
    assert sorted(p.name for p in folder.iterdir()) == ["archive.db"]
    with shapes.read_only(folder, db):
        with pytest.raises(StoreUnavailableError):
            open_readonly(db)  # what a Hermes file in such a folder gets: its own reason
        conn = open_own_readonly(db)
        try:
            assert [tuple(r) for r in conn.execute("SELECT x FROM t")] == [(42,)]
        finally:
            conn.close()
    assert sorted(p.name for p in folder.iterdir()) == ["archive.db"]


def test_recalls_own_file_in_a_folder_that_is_gone_names_the_folder(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailableError) as info:
        open_own_readonly(tmp_path / "data" / "archive.db")
    assert info.value.reason == "folder-missing" and info.value.path == str(tmp_path / "data")
