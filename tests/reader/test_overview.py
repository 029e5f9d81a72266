"""The overview's figures (reader/overview.py): counts through partial indexes equal the
visible-row rule read row by row; a source's figures kept while its files are unchanged."""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from dashboard.hermes.conventions import visible_sql
from dashboard.hermes.home import HermesHome
from dashboard.reader import overview
from dashboard.reader.opening import reading_for
from dashboard.reader.overview import SourceFigures, archive_counts, visible_messages
from dashboard.reader.reader import StateReader
from dashboard.store.readonly import open_readonly
from dashboard.store.recalldb import RecallData
from tests.support import hermes_shapes as hs
from tests.support.archived import SHAPES, archive_home, build_shape


@pytest.mark.parametrize("shape", ["v31", "epochs", "current"])
def test_visible_messages_through_the_index_equal_the_rule_row_by_row(
    tmp_path: Path, shape: str
) -> None:
    """Copies, rewound, superseded and hidden rows all present: every message less the
    indexed few equals the rule applied to every row."""
    home = tmp_path / "home"
    build_shape(home, shape)
    path = archive_home(home)
    with closing(open_readonly(path)) as conn:
        plain = conn.execute(f"SELECT count(*) FROM messages m WHERE {visible_sql('m')}")
        every = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        expected = plain.fetchone()[0]
        assert visible_messages(conn) == expected < every
        plan = conn.execute(
            f"EXPLAIN QUERY PLAN SELECT count(*) FROM messages WHERE {overview.UNSHOWN_ROWS}"
        ).fetchall()
        assert "idx_messages_unshown" in " ".join(str(tuple(r)) for r in plan)
        newest = conn.execute("SELECT max(timestamp) FROM messages").fetchone()[0]
        assert conn.execute(overview.NEWEST_MESSAGE).fetchone()[0] == newest
        gone = conn.execute("SELECT count(*) FROM messages m WHERE m.gone_from_source_at > 0")
        assert archive_counts(conn)["gone_messages"] == gone.fetchone()[0]


def settled_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[Path]]:
    """A Hermes file last written a minute ago (past the clock's grain), and the list of
    paths each count of a source's figures (:func:`overview.source_overview`) appends to."""
    db = hs.build_current_views(tmp_path / "home" / "state.db")
    old = time.time() - 60
    for path in (db, Path(f"{db}-wal")):
        if path.exists():
            os.utime(path, (old, old))
    reads: list[Path] = []
    real = overview.source_overview
    monkeypatch.setattr(overview, "source_overview", lambda path: reads.append(path) or real(path))
    return db, reads


def test_a_source_s_figures_are_kept_until_its_files_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, reads = settled_source(tmp_path, monkeypatch)
    figures = SourceFigures()
    first = figures.get(db)
    assert first["reachable"] and figures.get(db) == first and len(reads) == 1
    hs.append_turn(db, hs.S_ROOT, "one more", "ok", 1_900_000_000.0)
    after = figures.get(db)
    assert len(reads) == 2 and after["messages"] == first["messages"] + 2
    figures.get(db)  # written just now: not kept, read again
    assert len(reads) == 3
    db.unlink()
    for side in ("-wal", "-shm"):
        Path(f"{db}{side}").unlink(missing_ok=True)
    assert figures.get(db)["reachable"] is False  # a file gone is said, not served stale


def test_a_source_s_figures_kept_on_the_shelf_outlive_the_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kept in Recall's own file, a source's figures are read back by the next process's
    reader (a restart) while the source's files are unchanged, equal to a fresh count;
    a write makes it count again."""
    db, reads = settled_source(tmp_path, monkeypatch)
    shelf = RecallData(tmp_path / "data" / "recall.db")
    first = SourceFigures().get(db, shelf)
    assert first["reachable"] and len(reads) == 1
    shelf.close()
    shelf = RecallData(tmp_path / "data" / "recall.db")  # a restart: another process
    assert SourceFigures().get(db, shelf) == first
    assert len(reads) == 1  # read from the shelf, not counted
    assert overview.source_overview(db) == first  # what a count says (2 reads now)
    hs.append_turn(db, hs.S_ROOT, "one more", "ok", 1_900_000_000.0)
    for path in (db, Path(f"{db}-wal")):
        if path.exists():
            os.utime(path, (time.time() - 30, time.time() - 30))
    after = SourceFigures().get(db, shelf)
    assert len(reads) == 3 and after["messages"] == first["messages"] + 2
    assert SourceFigures().get(db, shelf) == after and len(reads) == 3
    shelf.close()


def plain_figures(conn: sqlite3.Connection, by_profile: bool) -> dict[str, Any]:
    """The overview's counts by the plain full computation (every row read by the rule,
    as before the partial indexes, the seeks and the reader's cache)."""
    sessions, first, last = conn.execute(
        "SELECT count(*), min(started_at), max(coalesce(ended_at, started_at)) FROM sessions"
    ).fetchone()
    newest = conn.execute("SELECT max(timestamp) FROM messages").fetchone()[0]
    out: dict[str, Any] = {
        "sessions": sessions,
        "first_activity": first,
        "last_activity": newest if newest and (last or 0) < newest else last,
        "sources": dict(conn.execute("SELECT source, count(*) FROM sessions GROUP BY source")),
        "messages": conn.execute(
            f"SELECT count(*) FROM messages m WHERE {visible_sql('m')}"
        ).fetchone()[0],
    }
    if by_profile:
        profiles: dict[str, dict[str, Any]] = {}
        for name, count, begun, ended in conn.execute(
            "SELECT profile, count(*), min(started_at), max(coalesce(ended_at, started_at))"
            " FROM sessions GROUP BY profile"
        ):
            shown, newest = conn.execute(
                f"SELECT sum({visible_sql('m')}), max(m.timestamp) FROM messages m"
                " JOIN sessions s ON s.id = m.session_id WHERE s.profile = ?",
                (name,),
            ).fetchone()
            profiles[name] = {
                "sessions": count,
                "messages": shown or 0,
                "first_activity": begun,
                "last_activity": newest if newest and (ended or 0) < newest else ended,
            }
        out["profiles"] = profiles
        out["messages"] = sum(p["messages"] for p in profiles.values())
    out["archive"] = {
        "sessions": sessions,
        "messages": conn.execute("SELECT count(*) FROM messages").fetchone()[0],
        "gone_sessions": conn.execute(
            "SELECT count(*) FROM sessions WHERE gone_from_source_at IS NOT NULL"
        ).fetchone()[0],
        "gone_messages": conn.execute(
            "SELECT count(*) FROM messages NOT INDEXED WHERE gone_from_source_at IS NOT NULL"
        ).fetchone()[0],
    }
    return out


def shown_figures(reader: StateReader) -> dict[str, Any]:
    """The same figures as the overview shows them (each profile's without its source)."""
    info = reader.overview()
    shown = {k: info[k] for k in ("sessions", "first_activity", "last_activity", "messages")}
    shown["sources"] = dict(info["sources"])
    shown["archive"] = info["archive"]
    if "profiles" in info:
        keys = ("sessions", "messages", "first_activity", "last_activity")
        shown["profiles"] = {
            name: {k: figures[k] for k in keys}
            for name, figures in info["profiles"].items()
            if figures["sessions"]  # a profile with no session yet has no row to count
        }
    return shown


def the_plain_figures(reader: StateReader) -> dict[str, Any]:
    with closing(open_readonly(reader.path)) as conn:
        return plain_figures(conn, by_profile=reader.spans_profiles)


@pytest.mark.parametrize("shape", SHAPES)
def test_the_overview_s_figures_equal_the_plain_count_and_follow_each_write(
    tmp_path: Path, shape: str
) -> None:
    """Every figure equals the plain full computation; after a turn lands (a write of
    the archive), the figures the reader kept are read again."""
    home = tmp_path / "home"
    build_shape(home, shape)
    reading = reading_for(
        HermesHome(home), tmp_path / "data" / "archive.db", inline=True, folder=tmp_path / "data"
    )
    reader = reading.reader
    assert reader.spans_profiles is (shape == "profiles")
    before = shown_figures(reader)
    assert before == the_plain_figures(reader)
    assert shown_figures(reader) == before  # kept: the same answer
    if shape in ("current", "profiles"):
        db = home / "state.db"
        hs.append_turn(db, hs.S_ROOT, "one more", "ok", 1_900_000_000.0)
        after = shown_figures(reader)
        assert after == the_plain_figures(reader)
        assert after["messages"] == before["messages"] + 2
        assert after["last_activity"] > before["last_activity"]
