"""The trigram index built beside a first import: taken when whole, refused when not."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest

from dashboard.store import schema
from dashboard.store.fts_upkeep import index_messages
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from dashboard.store.trigram_build import BuildFailed, TrigramBuild, scratch_path
from tests.support import hermes_shapes as hs
from tests.support.archive_checks import fts_checks
from tests.support.archived import archive_home

WORDS, TRIGRAM = schema.FTS_TABLES
SAID = ["redis refused the connection", "连接超时 again", "the pgbouncer pool", "C++ linker"]


def _trigram_hits(conn: sqlite3.Connection, text: str) -> list[int]:
    rows = conn.execute(
        f"SELECT rowid FROM {TRIGRAM} WHERE {TRIGRAM} MATCH ? ORDER BY rowid", (f'"{text}"',)
    )
    return [r[0] for r in rows]


def _store_with_sessions(path: Path, count: int) -> tuple[SessionStore, list[str]]:
    """A store whose sessions are written through the bulk path later: only the sessions."""
    store = SessionStore(path)
    ids = [store.create_session("cli", started_at=1000.0 + i) for i in range(count)]
    return store, ids


def _land(
    store: SessionStore, ids: list[str], build: TrigramBuild, feed: Callable[[int], bool]
) -> None:
    """One bulk-path step per session, word-indexed as it lands; ``feed(i)`` says
    whether the side build is told about step ``i`` (an importer tells it every one)."""

    def steps() -> Iterator[Callable[[sqlite3.Connection], None]]:
        for i, sid in enumerate(reversed(ids)):  # newest first, as the importer goes

            def step(conn: sqlite3.Connection, sid: str = sid, i: int = i) -> None:
                for n, text in enumerate(SAID):
                    conn.execute(
                        "INSERT INTO messages (session_id, role, content, timestamp) "
                        "VALUES (?, 'user', ?, ?)",
                        (sid, f"{text} #{i}", 2000.0 + i * 10 + n),
                    )
                index_messages(conn, "session_id = ?", [sid])

            yield step
            if feed(i):
                build.add("session_id = ?", [sid])

    store.bulk_write(steps(), rebuild_index=False, index_in_steps=True, trigram=build)


def test_the_writer_that_cached_the_empty_index_reads_the_one_taken(tmp_path: Path) -> None:
    store, ids = _store_with_sessions(tmp_path / "a.db", 6)
    # The writer opens the (empty) trigram index first, so FTS5 caches its structure.
    assert _trigram_hits(store.core.conn, "pgbouncer") == []
    build = TrigramBuild(store.core.path)
    _land(store, ids, build, feed=lambda i: True)
    assert build.rows == 6 * len(SAID)
    hits = _trigram_hits(store.core.conn, "pgbouncer")
    assert len(hits) == 6
    assert len(_trigram_hits(store.core.conn, "连接超")) == 6
    assert not scratch_path(store.core.path).exists()
    fts_checks(store.core.conn)
    # The triggers are back: a turn written now is in both indexes at once.
    store.append_messages(ids[0], [NewMessage("user", "a pgbouncer after the import")])
    assert len(_trigram_hits(store.core.conn, "pgbouncer")) == 7
    fts_checks(store.core.conn)
    store.close()


def test_a_build_missing_a_batch_is_refused_and_a_rebuild_stands_in(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, ids = _store_with_sessions(tmp_path / "a.db", 5)
    build = TrigramBuild(store.core.path)
    with caplog.at_level(logging.WARNING):
        _land(store, ids, build, feed=lambda i: i != 2)
    assert "4 of them missing" in caplog.text and "rebuilding instead" in caplog.text
    assert len(_trigram_hits(store.core.conn, "redis refused")) == 5  # the rebuild's
    assert not scratch_path(store.core.path).exists()
    fts_checks(store.core.conn)
    store.close()


def test_a_build_whose_thread_failed_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, ids = _store_with_sessions(tmp_path / "a.db", 3)
    build = TrigramBuild(store.core.path)
    build.add("no_such_column = ?", [1])
    with caplog.at_level(logging.WARNING):
        _land(store, ids, build, feed=lambda i: True)
    assert "the side build stopped" in caplog.text and "no_such_column" in caplog.text
    assert len(_trigram_hits(store.core.conn, "C++ linker")) == 3
    fts_checks(store.core.conn)
    store.close()


def test_finish_names_the_failure(tmp_path: Path) -> None:
    store, _ = _store_with_sessions(tmp_path / "a.db", 1)
    build = TrigramBuild(store.core.path)
    build.add("no_such_column = ?", [1])
    with pytest.raises(BuildFailed, match="no_such_column"):
        build.finish()
    build.close()  # after finish: nothing left to do, no error
    store.close()


def test_a_fresh_first_import_takes_the_side_index(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    hs.build_current_views(home / "state.db")
    with caplog.at_level(logging.WARNING):
        path = archive_home(home, tmp_path / "archive.db")
    assert "rebuilding instead" not in caplog.text
    assert not scratch_path(path).exists()
    with closing(sqlite3.connect(path)) as conn:
        fts_checks(conn)  # rank 1: the index equals what the messages hold
        taken = _trigram_hits(conn, hs.UNIQUE_WORD)
        conn.execute(f"INSERT INTO {TRIGRAM}({TRIGRAM}) VALUES ('rebuild')")
        assert taken and taken == _trigram_hits(conn, hs.UNIQUE_WORD)


def test_an_archive_holding_rows_rebuilds_and_drops_a_left_scratch_file(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    hs.build_current_views(first / "state.db")
    hs.build_seed_external(second / "state.db")
    path = archive_home(first, tmp_path / "archive.db")
    scratch_path(path).write_bytes(b"what a killed import left")
    archive_home(second, path)  # another home's first import: not every row comes through it
    assert not scratch_path(path).exists()
    with closing(sqlite3.connect(path)) as conn:
        fts_checks(conn)
        homes = conn.execute(
            f"SELECT count(DISTINCT m.src_home) FROM {TRIGRAM} t JOIN messages m ON m.id = t.rowid"
            f" WHERE {TRIGRAM} MATCH ?",
            (f'"{hs.UNIQUE_WORD}"',),
        ).fetchone()[0]
    assert homes == 2


def test_an_abandoned_build_ends_its_thread_and_keeps_nothing(tmp_path: Path) -> None:
    store, ids = _store_with_sessions(tmp_path / "a.db", 3)
    build = TrigramBuild(store.core.path)
    for sid in ids:
        build.add("session_id = ?", [sid])
    build.close()
    build.close()  # twice is fine
    assert not any(t.name == "trigram-build" and t.is_alive() for t in threading.enumerate())
    with pytest.raises(BuildFailed, match="abandoned"):  # never taken once abandoned
        build.finish()
    store.close()
