"""Sessions in the archive: the paged list by presence, and deleting one (the only way out)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from dashboard.archive.listing import (
    archive_page,
    delete_from_archive,
    deletion_preview,
    list_archived,
)
from dashboard.errors import ConflictError, NotFoundError
from dashboard.hermes.profiles import Scope
from dashboard.lineage.links import continues
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as shapes
from tests.support.pruned_homes import NOW, archived_home, fts_ok
from tests.support.source_checks import assert_untouched, digests


def test_the_list_pages_through_sessions_by_presence(tmp_path: Path) -> None:
    home, archive, ids = archived_home(tmp_path)
    gone = list_archived(archive, "archive", 1)
    assert [s.session_id for s in gone.sessions] == [ids["older"], ids["ancient"]]  # newest first
    assert gone.total == 2 and all(s.gone_at == shapes.GONE_AT for s in gone.sessions)
    assert gone.sessions[1].messages == 4
    assert list_archived(archive, "hermes", 1).total == 5
    everything = list_archived(archive, "all", 1, page_size=3)
    assert (everything.total, everything.pages, len(everything.sessions)) == (7, 3, 3)
    assert len(list_archived(archive, "all", 3, page_size=3).sessions) == 1
    assert list_archived(archive, "all", 9, page_size=3).sessions == ()


def test_the_archive_page_is_the_radar_and_the_list(tmp_path: Path) -> None:
    home, archive, ids = archived_home(tmp_path)
    shown = archive_page(home, archive, "archive", 1, now=NOW, continues=continues)
    assert [c.session_id for c in shown.radar.candidates] == [ids["old"]]
    assert shown.listing.total == 2
    missing = archive_page(home, tmp_path / "none.db", "archive", 1, now=NOW, continues=continues)
    assert not missing.listing.exists and missing.listing.sessions == ()
    assert not (tmp_path / "none.db").exists()


def test_deleting_a_gone_session_removes_it_its_messages_and_usage_and_keeps_the_indexes(
    tmp_path: Path,
) -> None:
    home, archive, ids = archived_home(tmp_path)
    before = digests(home.state_db)
    sid = ids["ancient"]
    preview = deletion_preview(archive, sid)
    assert (preview.session_id, preview.messages, preview.usage_rows) == (sid, 4, 1)
    assert preview.title == "Prune case ancient"
    with SessionStore(archive) as store:
        assert (
            store.core.conn.execute(
                "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'ancient'"
            ).fetchone()[0]
            == 4
        )
    report = delete_from_archive(archive, sid)
    assert (report.messages, report.usage_rows) == (4, 1)
    with closing(sqlite3.connect(archive)) as conn:
        for table, column in (
            ("sessions", "id"),
            ("messages", "session_id"),
            ("session_model_usage", "session_id"),
        ):
            assert (
                conn.execute(f"SELECT count(*) FROM {table} WHERE {column}=?", (sid,)).fetchone()[0]
                == 0
            )
        for table in ("messages_fts", "messages_fts_trigram"):
            assert (
                conn.execute(
                    f"SELECT count(*) FROM {table} WHERE {table} MATCH 'ancient'"
                ).fetchone()[0]
                == 0
            )
        assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 6
    fts_ok(archive)
    assert_untouched(home.state_db, before)
    with pytest.raises(NotFoundError):
        deletion_preview(archive, sid)


def test_a_session_hermes_still_has_is_refused(tmp_path: Path) -> None:
    home, archive, ids = archived_home(tmp_path)
    with pytest.raises(ConflictError, match="still in Hermes"):
        delete_from_archive(archive, ids["recent"])
    assert deletion_preview(archive, ids["recent"]).gone_at is None
    assert list_archived(archive, "all", 1).total == 7


def test_an_unknown_session_or_a_missing_archive_is_not_found(tmp_path: Path) -> None:
    _, archive, _ = archived_home(tmp_path)
    with pytest.raises(NotFoundError):
        delete_from_archive(archive, "no-such-session")
    with pytest.raises(NotFoundError):
        deletion_preview(archive, "no-such-session")
    with pytest.raises(NotFoundError, match="no archive"):
        delete_from_archive(tmp_path / "none.db", "x")
    assert not (tmp_path / "none.db").exists()


@pytest.mark.parametrize("marker", ["fts_stale", "fts_triggers_off"])
def test_no_delete_while_a_first_import_rebuilds_the_index(tmp_path: Path, marker: str) -> None:
    # A first import runs with the FTS triggers dropped (fts_stale=1, or fts_triggers_off=1
    # when it indexes as it goes): a delete then would leave its messages in the index,
    # and opening the store would finish the import's index mid-import.
    home, archive, ids = archived_home(tmp_path)
    with SessionStore(archive) as store:
        store.set_meta(marker, "1")
    with pytest.raises(ConflictError, match="being imported"):
        delete_from_archive(archive, ids["ancient"])
    with closing(sqlite3.connect(archive)) as conn:
        assert conn.execute("SELECT value FROM state_meta WHERE key=?", (marker,)).fetchone() == (
            "1",
        )
        assert (
            conn.execute("SELECT count(*) FROM sessions WHERE id=?", (ids["ancient"],)).fetchone()[
                0
            ]
            == 1
        )


def test_a_scope_lists_previews_and_deletes_only_its_profiles_sessions(tmp_path: Path) -> None:
    """The archive holds every profile; another profile's session reads as unknown."""
    home, archive, ids = archived_home(tmp_path)  # every session is the default profile's
    elsewhere = Scope.of(["work"])
    assert list_archived(archive, "archive", 1, scope=elsewhere).total == 0
    assert list_archived(archive, "archive", 1, scope=Scope.of(["default"])).total == 2
    for look in (deletion_preview, delete_from_archive):
        with pytest.raises(NotFoundError, match="is not in the archive"):
            look(archive, ids["ancient"], elsewhere)
    assert deletion_preview(archive, ids["ancient"], Scope.of(["default"])).deletable
    assert delete_from_archive(archive, ids["ancient"], Scope.of(["default"])).messages == 4
