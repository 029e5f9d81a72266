"""``recall archive verify``: every source row present and equal, every index sound."""

from __future__ import annotations

import json
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest

from dashboard.archive.importer import sync
from dashboard.archive.verify import VerifyError, verify_archive
from dashboard.hermes.home import HermesHome
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as hs
from tests.support.commands import recall
from tests.support.source_checks import ALL_SHAPES, assert_untouched, digests


def _synced(tmp_path: Path, shape: str = "current_views") -> tuple[HermesHome, Path]:
    root = tmp_path / "home"
    root.mkdir()
    ALL_SHAPES[shape](root / "state.db")
    archive = tmp_path / "archive.db"
    with SessionStore(archive) as store:
        sync(store, root / "state.db", root, batch_sessions=2)
    return HermesHome(root), archive


def _edit(archive: Path, sql: str, *params: object) -> None:
    with closing(sqlite3.connect(archive)) as conn:
        conn.execute(sql, params)
        conn.commit()


def _cli(home: HermesHome, archive: Path, *extra: str):
    return recall("archive", "verify", "--home", str(home.root), "--archive", str(archive), *extra)


@pytest.mark.parametrize("shape", sorted(ALL_SHAPES))
def test_a_fresh_archive_of_every_shape_verifies(tmp_path: Path, shape: str) -> None:
    home, archive = _synced(tmp_path, shape)
    before = digests(home.state_db)
    report = verify_archive(home, archive)
    assert_untouched(home.state_db, before)
    assert report.ok, report.lines()
    assert report.tables["sessions"].checked > 0 and report.tables["messages"].checked > 0
    assert set(report.integrity) == {"integrity_check", "messages_fts", "messages_fts_trigram"}


def test_a_missing_message_and_a_differing_one_are_problems(tmp_path: Path) -> None:
    home, archive = _synced(tmp_path)
    with closing(sqlite3.connect(archive)) as conn:
        first, second = [r[0] for r in conn.execute("SELECT src_id FROM messages LIMIT 2")]
    # Through the store's triggers, so the index stays sound: only rows differ.
    with SessionStore(archive) as store:
        store.core.write(lambda c: c.execute("DELETE FROM messages WHERE src_id=?", (first,)))
        store.core.write(
            lambda c: c.execute("UPDATE messages SET content='tampered' WHERE src_id=?", (second,))
        )
    report = verify_archive(home, archive)
    assert not report.ok
    assert report.tables["messages"].missing == [first]
    assert report.tables["messages"].differing == [second]
    assert all(v == "ok" for v in report.integrity.values())
    out = _cli(home, archive)
    assert out.returncode == 1, out.stderr
    assert "1 missing" in out.stdout and "1 differing" in out.stdout
    answer = json.loads(_cli(home, archive, "--json").stdout)
    assert answer["ok"] is False and answer["tables"]["messages"]["missing"] == [first]


def test_missing_sessions_and_usage_rows_are_problems(tmp_path: Path) -> None:
    home, archive = _synced(tmp_path)
    with SessionStore(archive) as store:
        sid = store.core.conn.execute(
            "SELECT session_id FROM session_model_usage LIMIT 1"
        ).fetchone()[0]
        store.core.write(
            lambda c: c.execute("DELETE FROM session_model_usage WHERE session_id=?", (sid,))
        )
        store.core.write(
            lambda c: c.execute("UPDATE sessions SET title='renamed by hand' WHERE id=?", (sid,))
        )
    report = verify_archive(home, archive)
    assert report.tables["usage"].missing_count >= 1
    assert report.tables["sessions"].differing == [sid]


def test_a_corrupt_index_is_a_problem(tmp_path: Path) -> None:
    home, archive = _synced(tmp_path)
    # A row in the index that no message backs: what a plain DELETE under an
    # external-content index leaves behind.
    _edit(
        archive,
        "INSERT INTO messages_fts(rowid, content, tool_name, tool_calls) "
        "VALUES (987654, 'ghost words', NULL, NULL)",
    )
    report = verify_archive(home, archive)
    assert not report.ok and report.integrity["messages_fts"] != "ok"
    assert report.integrity["messages_fts_trigram"] == "ok"
    out = _cli(home, archive)
    assert out.returncode == 1 and "messages_fts" in out.stdout and "Traceback" not in out.stderr


def test_rows_only_the_archive_holds_are_not_problems(tmp_path: Path) -> None:
    home, archive = _synced(tmp_path)
    with closing(sqlite3.connect(home.state_db)) as conn:
        # A session nothing continues: Hermes's prune takes it whole.
        sid = conn.execute(
            "SELECT id FROM sessions WHERE id NOT IN (SELECT parent_session_id FROM sessions"
            " WHERE parent_session_id IS NOT NULL) ORDER BY started_at LIMIT 1"
        ).fetchone()[0]
        conn.execute("DELETE FROM messages WHERE session_id=?", (sid,))
        conn.execute("DELETE FROM session_model_usage WHERE session_id=?", (sid,))
        conn.execute("DELETE FROM sessions WHERE id=?", (sid,))
        conn.commit()
    report = verify_archive(home, archive)
    assert report.ok, report.lines()
    assert report.only_in_archive["sessions"] >= 1


def test_missing_or_corrupt_files_get_a_clear_message_and_exit_2(tmp_path: Path) -> None:
    home, archive = _synced(tmp_path)
    with pytest.raises(VerifyError, match="no archive"):
        verify_archive(home, tmp_path / "none.db")
    assert not (tmp_path / "none.db").exists()
    out = _cli(home, tmp_path / "none.db")
    assert out.returncode == 2 and "no archive" in out.stderr and "Traceback" not in out.stderr
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database at all " * 400)
    out = _cli(home, bad)
    assert out.returncode == 2 and "archive" in out.stderr and "corrupt" in out.stderr
    assert "Traceback" not in out.stderr
    elsewhere = HermesHome(tmp_path / "nohome")
    out = recall("archive", "verify", "--home", str(elsewhere.root), "--archive", str(archive))
    assert out.returncode == 2 and "source" in out.stderr and "Traceback" not in out.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "state.db").write_bytes(b"garbage " * 1000)
    out = recall("archive", "verify", "--home", str(broken), "--archive", str(archive))
    assert out.returncode == 2 and "source" in out.stderr and "corrupt" in out.stderr


def test_a_locked_source_or_archive_gets_a_clear_message(tmp_path: Path) -> None:
    root = tmp_path / "home"
    root.mkdir()
    hs.build_delete_journal(root / "state.db")
    home = HermesHome(root)
    archive = tmp_path / "archive.db"
    with SessionStore(archive) as store:
        sync(store, home.state_db, root)
    for path, which in ((home.state_db, "source"), (archive, "archive")):
        held, release = threading.Event(), threading.Event()

        def hold(
            target: Path = path, held: threading.Event = held, release: threading.Event = release
        ) -> None:
            conn = sqlite3.connect(target, isolation_level=None)
            conn.execute("BEGIN EXCLUSIVE")
            held.set()
            release.wait(60)
            conn.execute("ROLLBACK")
            conn.close()

        worker = threading.Thread(target=hold)
        worker.start()
        held.wait(10)
        try:
            with pytest.raises(VerifyError, match=f"{which}.*locked"):
                verify_archive(home, archive)
        finally:
            release.set()
            worker.join()
    assert verify_archive(home, archive).ok


def test_a_first_import_cut_off_before_its_trigram_index_says_so(tmp_path: Path) -> None:
    home, archive = _synced(tmp_path)
    # What a kill between the last batch and the trigram build leaves: the marker, and
    # an index that integrity-check would call damaged (it lacks every row).
    _edit(archive, "INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES ('delete-all')")
    _edit(archive, "INSERT INTO state_meta(key, value) VALUES ('fts_trigram_pending', '1')")
    report = verify_archive(home, archive)
    assert not report.ok
    assert report.integrity["messages_fts"] == "ok"
    assert report.integrity["messages_fts_trigram"].startswith("not built yet")
    out = _cli(home, archive)
    assert out.returncode == 1 and "not built yet" in out.stdout


def test_each_profile_verifies_against_its_own_rows(tmp_path: Path) -> None:
    """A profile that is not the primary is archived as ``<profile>:<id>``: its source is
    read with the same prefix, so its rows are found (and only its rows)."""
    from dashboard.hermes.profiles import by_name, discover
    from dashboard.reader.opening import reading_for

    facts = hs.build_profiles_home(tmp_path / "hermes")
    archive = tmp_path / "archive.db"
    reading_for(HermesHome(facts.root), archive, inline=True).syncer.poll()
    profiles = discover([HermesHome(facts.root)])
    legacy = by_name(profiles, "legacy")
    report = verify_archive(legacy.home, archive, profile=legacy.name, id_prefix=legacy.id_prefix)
    assert report.ok, report.lines()
    assert report.source == str(facts.dbs["legacy"])
    assert report.tables["sessions"].checked == len(facts.shared_ids)
    assert report.tables["messages"].checked > 0
    quick = verify_archive(
        legacy.home, archive, profile=legacy.name, id_prefix=legacy.id_prefix, check_integrity=False
    )
    assert quick.ok and quick.integrity == {}
    _edit(archive, "UPDATE sessions SET title = 'changed' WHERE id = ?", f"legacy:{hs.S_CRON}")
    changed = verify_archive(legacy.home, archive, profile="legacy", id_prefix="legacy:")
    assert changed.tables["sessions"].differing == [f"legacy:{hs.S_CRON}"]
    default = by_name(profiles, "default")
    assert verify_archive(default.home, archive, profile="default").ok  # untouched by the edit
