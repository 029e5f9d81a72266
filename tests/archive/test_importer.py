"""The importer: every source layout into the archive, read-only, newest first, resumable."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from dashboard.archive import importer, marks, source
from dashboard.archive.importer import sync
from dashboard.archive.layout import detect_layout
from dashboard.archive.marks import source_key
from dashboard.archive.source import usage_source_id
from dashboard.costs.rules import read_cost
from dashboard.demo.build import build_demo_home
from dashboard.hermes import conventions
from dashboard.hermes.home import HermesHome
from dashboard.reader.reader import StateReader
from dashboard.search.sessions import SearchRequest
from dashboard.store import schema
from dashboard.store.readonly import open_readonly
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as hs
from tests.support.archive_checks import fts_checks, meta
from tests.support.source_checks import (
    ALL_SHAPES,
    MESSAGE_FIELDS,
    _source_rows,
    archive_messages,
    assert_mirrors,
    assert_untouched,
    digests,
    source_conn,
    source_messages,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("shape", sorted(ALL_SHAPES))
def test_every_shape_imports_every_row_read_only(shape: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = ALL_SHAPES[shape](home / "state.db")
    before = digests(db)
    key = source_key(home)
    with SessionStore(tmp_path / "archive.db") as archive:
        report = sync(archive, db, home, batch_sessions=2)
        conn = archive.core.conn
        with closing(source_conn(db)) as src:
            sessions = {r["id"]: dict(r) for r in src.execute("SELECT * FROM sessions")}
            messages = source_messages(src)
            has_usage = "session_model_usage" in {
                r[0] for r in src.execute("SELECT name FROM sqlite_master")
            }
            usage = (
                [dict(r) for r in src.execute("SELECT * FROM session_model_usage")]
                if (has_usage)
                else []
            )

        kept = {r["id"]: dict(r) for r in conn.execute("SELECT * FROM sessions")}
        assert set(kept) == set(sessions)
        for sid, row in sessions.items():
            mine = kept[sid]
            assert (mine["src_home"], mine["src_id"]) == (key, sid)
            for c in (
                "title",
                "model",
                "parent_session_id",
                "started_at",
                "ended_at",
                "message_count",
                "estimated_cost_usd",
                "cost_status",
                "archived",
                "pinned",
                "hidden",
                "title_source",
                "cwd",
                "git_branch",
            ):
                if c in row:
                    assert mine[c] == row[c], (sid, c)
            assert mine["profile"] == (row.get("profile_name") or "default")

        assert archive_messages(conn, key) == messages
        assert report.messages_added == len(messages)
        flags = [conventions.is_visible(m[-3], m[-2], m[-1]) for m in messages.values()]
        if shape in hs.EXPECTED:
            assert sum(flags) == hs.EXPECTED[shape].visible_messages
            assert len(messages) == hs.EXPECTED[shape].total_messages
        if hs.EXPECTED.get(shape, hs.EXPECTED["current_views"]).modern and shape in hs.SHAPES:
            # Today's Hermes keeps rewound and compacted rows: the archive has them, flagged.
            got = {(r[0], r[1]) for r in conn.execute("SELECT active, compacted FROM messages")}
            assert {(0, 0), (0, 1), (1, 0)} <= got

        stored = {
            r["src_id"]: dict(r)
            for r in conn.execute("SELECT * FROM session_model_usage WHERE src_home=?", (key,))
        }
        if has_usage:
            assert set(stored) == {usage_source_id(u) for u in usage}
            for u in usage:
                mine = stored[usage_source_id(u)]
                for c in (
                    "task",
                    "api_call_count",
                    "input_tokens",
                    "estimated_cost_usd",
                    "actual_cost_usd",
                    "cost_status",
                    "first_seen",
                    "last_seen",
                ):
                    assert mine[c] == u[c], c
        else:
            derived = {
                f"sessions:{sid}": source.derived_usage_row(row)
                for sid, row in sessions.items()
                if source.derived_usage_row(row) is not None
            }
            assert set(stored) == set(derived) and derived
            for src_id, row in derived.items():
                assert row is not None
                assert stored[src_id]["input_tokens"] == row["input_tokens"]
                assert stored[src_id]["cost_status"] == row["cost_status"]

        for table in ("sessions", "messages", "session_model_usage"):
            assert (
                conn.execute(
                    f"SELECT count(*) FROM {table} WHERE archive_first_seen IS NULL"
                    " OR gone_from_source_at IS NOT NULL OR src_home IS NOT ?",
                    (key,),
                ).fetchone()[0]
                == 0
            )
        fts_checks(conn)

        counts = [
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("sessions", "messages", "session_model_usage")
        ]
        again = sync(archive, db, home)
        assert (again.sessions_added, again.messages_added, again.usage_added) == (0, 0, 0)
        assert counts == [
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("sessions", "messages", "session_model_usage")
        ]
    assert_untouched(db, before)


def test_auxiliary_rows_keep_their_null_status_and_read_as_estimated(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = hs.build_cost_facts(home / "state.db")
    with SessionStore(tmp_path / "archive.db") as archive:
        sync(archive, db, home)
        row = archive.core.conn.execute(
            "SELECT cost_status, estimated_cost_usd, actual_cost_usd FROM session_model_usage"
            " WHERE session_id=? AND task='compression'",
            (hs.S_WEEK,),
        ).fetchone()
    assert row["cost_status"] is None
    assert read_cost(*row).status == "estimated"


def indexed_rows(conn: sqlite3.Connection, table: str = "messages_fts") -> int:
    """Rows in an FTS index (an external-content index keeps one docsize row per row)."""
    return conn.execute(f"SELECT count(*) FROM {table}_docsize").fetchone()[0]


def triggers(conn: sqlite3.Connection) -> set[str]:
    """The FTS triggers on (the kept counts' and the meaning index's never go off)."""
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")}
    always = {*schema.COUNT_TRIGGERS, *schema.MEANING_TRIGGERS}
    assert always <= names
    return names - always


def test_the_first_import_makes_each_batch_searchable_as_it_lands(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = hs.build_cost_facts(home / "state.db")
    path = tmp_path / "archive.db"
    seen: list[tuple[str, int, int, bool, bool]] = []

    def look(progress: importer.Progress) -> None:
        if progress.sessions_done == 0:
            return
        with closing(open_readonly(path)) as reader:
            layout = detect_layout(reader, path)
            seen.append(
                (
                    progress.phase,
                    reader.execute("SELECT count(*) FROM messages").fetchone()[0],
                    indexed_rows(reader),
                    not layout.fts_stale and layout.word_index is not None,
                    layout.trigram_index is None,
                )
            )

    with SessionStore(path) as archive:
        report = sync(archive, db, home, batch_sessions=1, on_progress=look)
        assert report.bulk
        conn = archive.core.conn
        assert triggers(conn) == set(schema.FTS_TRIGGERS)
        assert meta(conn, "fts_trigram_pending") is None and meta(conn, "fts_triggers_off") is None
        total = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        assert indexed_rows(conn, "messages_fts_trigram") == total
        fts_checks(conn)
    # Each batch searchable by word as it lands; the trigram index is not asked until built.
    assert [s[0] for s in seen] == ["copying"] * report.sessions_total + ["indexing"]
    for _, landed, indexed, trusted, no_trigram in seen:
        assert landed > 0 and indexed == landed and trusted and no_trigram
    assert [s[1] for s in seen] == sorted(s[1] for s in seen)


def test_a_substring_search_during_the_first_import_scans_instead_of_the_pending_index(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = hs.build_seed_inline(home / "state.db")
    path = tmp_path / "archive.db"
    answers: list[tuple[str, int]] = []

    def search(progress: importer.Progress) -> None:
        if progress.phase != "indexing":
            return
        reader = StateReader(HermesHome(home), path=path)
        result = reader.search(SearchRequest(query="atabas"))  # part of "database"
        answers.append((result.route, result.total_sessions))

    with SessionStore(path) as archive:
        sync(archive, db, home, on_progress=search)
    after = StateReader(HermesHome(home), path=path).search(SearchRequest(query="atabas"))
    assert after.route == "trigram" and after.total_sessions > 0
    assert answers == [("scan", after.total_sessions)]


def test_opening_an_archive_whose_import_was_killed_finishes_its_index(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = hs.build_cost_facts(home / "state.db")
    path = tmp_path / "archive.db"

    # A process that dies (os._exit, as under kill -9) after two sessions landed.
    script = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from dashboard.archive.importer import sync\n"
        "from dashboard.store.session_store import SessionStore\n"
        "def die(p):\n"
        "    if p.sessions_done == 2: os._exit(9)\n"
        "sync(SessionStore(Path(sys.argv[1])), Path(sys.argv[2]), Path(sys.argv[3]),\n"
        "     batch_sessions=1, on_progress=die)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    died = subprocess.run([sys.executable, "-c", script, str(path), str(db), str(home)], env=env)
    assert died.returncode == 9
    with SessionStore(path, finish_index=False) as archive:  # a sync about to resume
        assert meta(archive.core.conn, "fts_trigram_pending") == "1"
    with SessionStore(path) as archive:  # anyone else finishes it on open
        conn = archive.core.conn
        assert meta(conn, "fts_trigram_pending") is None
        assert triggers(conn) == set(schema.FTS_TRIGGERS)
        landed = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        assert indexed_rows(conn) == indexed_rows(conn, "messages_fts_trigram") == landed > 0
        fts_checks(conn)


def test_newest_sessions_land_first(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = hs.build_cost_facts(home / "state.db")
    with SessionStore(tmp_path / "archive.db") as archive:
        sync(archive, db, home, batch_sessions=1)
        rows = archive.core.conn.execute(
            "SELECT started_at, archive_first_seen FROM sessions ORDER BY rowid"
        ).fetchall()
    starts = [r[0] for r in rows]
    seen = [r[1] for r in rows]
    assert starts == sorted(starts, reverse=True) and len(set(starts)) > 1
    assert seen == sorted(seen)


def test_sessions_added_to_the_source_during_a_cut_off_pass_are_not_missed(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = hs.build_cost_facts(home / "state.db")
    key = source_key(home)
    with SessionStore(tmp_path / "archive.db") as archive:
        # A pass that began when the second-newest session was the newest and was
        # killed after covering it; the newest session started after the pass began.
        with closing(source_conn(db)) as src:
            newest, began = src.execute(
                "SELECT started_at, id FROM sessions ORDER BY started_at DESC, id DESC LIMIT 2"
            ).fetchall()
        mark = {"started_at": began[0], "id": began[1], "first": [began[0], began[1]]}
        archive.set_meta(marks.WATERMARK_PREFIX + key, json.dumps(mark))
        report = sync(archive, db, home)
        assert report.resumed
        # Everything but the session the watermark covers came in, the newest included;
        # the reconciliation that follows a first import found the one it claimed.
        assert report.sessions_added == report.sessions_total and report.reconciled
        ids = [r[0] for r in archive.core.conn.execute("SELECT id FROM sessions ORDER BY rowid")]
        assert newest[1] in ids and ids[-1] == began[1]


def _sync_process(home: Path, archive: Path, out: int = subprocess.PIPE) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dashboard.cli",
            "archive",
            "sync",
            "--home",
            str(home),
            "--archive",
            str(archive),
            "--batch",
            "1",
        ],
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=out,
    )


def _watermark(archive: Path, key: str) -> dict[str, object] | None:
    try:
        with closing(sqlite3.connect(f"file:{archive}?mode=ro", uri=True, timeout=5)) as c:
            row = c.execute(
                "SELECT value FROM state_meta WHERE key=?", (marks.WATERMARK_PREFIX + key,)
            ).fetchone()
    except sqlite3.Error:
        return None  # not created yet
    return json.loads(row[0]) if row else None


def test_a_sync_killed_mid_way_resumes_without_duplicates_or_gaps(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # The bulk path writes the same rows as the write API, in a seventh of the time.
    build_demo_home(home, sessions=600, messages=4000, seed=3, bulk=True)
    db = home / "state.db"
    before = digests(db)
    archive = tmp_path / "archive" / "archive.db"
    key = source_key(home)
    proc = _sync_process(home, archive, subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    mark = None
    while mark is None and proc.poll() is None and time.monotonic() < deadline:
        mark = _watermark(archive, key)
        time.sleep(0.01)
    assert mark is not None and proc.poll() is None, "the sync ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    with closing(sqlite3.connect(archive)) as c:
        partial = c.execute("SELECT count(*) FROM sessions").fetchone()[0]
        # What landed before the kill is searchable by word and the index is trustworthy.
        assert meta(c, "fts_stale") is None and meta(c, "fts_trigram_pending") == "1"
        assert indexed_rows(c) == c.execute("SELECT count(*) FROM messages").fetchone()[0]
        fts_checks(c, ("messages_fts",))  # the trigram index is built at the end
    with closing(source_conn(db)) as src:
        total_sessions = src.execute("SELECT count(*) FROM sessions").fetchone()[0]
        source_ids = {str(r[0]) for r in src.execute("SELECT id FROM messages")}
        usage_rows = src.execute("SELECT count(*) FROM session_model_usage").fetchone()[0]
    assert 0 < partial < total_sessions

    resumed = _sync_process(home, archive)
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err.decode()
    assert "resumed" in out.decode()
    with closing(sqlite3.connect(archive)) as c:
        kept = [r[0] for r in c.execute("SELECT src_id FROM messages WHERE src_home=?", (key,))]
        assert len(kept) == len(set(kept))  # no duplicate
        assert set(kept) == source_ids  # no missing row
        assert c.execute("SELECT count(*) FROM sessions").fetchone()[0] == total_sessions
        assert c.execute("SELECT count(*) FROM session_model_usage").fetchone()[0] == usage_rows
        assert c.execute("SELECT value FROM state_meta WHERE key='fts_stale'").fetchone() is None
        fts_checks(c)
        assert triggers(c) == set(schema.FTS_TRIGGERS)
        starts = [r[0] for r in c.execute("SELECT started_at FROM sessions ORDER BY rowid")]
        assert starts == sorted(starts, reverse=True)  # newest first, across the kill
    assert _watermark(archive, key) is None  # the pass finished
    assert_untouched(db, before)


def test_a_later_sync_adds_new_rows_and_indexes_them_without_a_rebuild(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = hs.build_seed_inline(home / "state.db")
    with SessionStore(tmp_path / "archive.db") as archive:
        assert sync(archive, db, home).bulk
        with closing(sqlite3.connect(db)) as agent:  # the agent writes a new turn
            agent.execute(
                "INSERT INTO messages(session_id, role, content, timestamp) "
                "VALUES (?, 'user', 'latecomerword arrives', 2e9)",
                (hs.S_ROOT,),
            )
            agent.commit()
        again = sync(archive, db, home)
        assert not again.bulk and not again.resumed
        assert (again.sessions_added, again.messages_added, again.usage_added) == (0, 1, 0)
        conn = archive.core.conn
        for table, term in (("messages_fts", "latecomerword"), ("messages_fts_trigram", "comerw")):
            hits = conn.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (term,))
            assert hits.fetchone()[0] == 1, table
        fts_checks(conn)


# -- incremental sync (issue 15, step 4) -----------------------------------------------

LATER = 1_900_000_000.0  # after every fixture's rows: what Hermes writes next


def _home(tmp_path: Path, build: hs.Builder = hs.build_current_views) -> tuple[Path, Path]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return home, build(home / "state.db")


def _counts(archive: SessionStore) -> list[int]:
    return [
        archive.core.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("sessions", "messages", "session_model_usage")
    ]


@pytest.mark.parametrize(
    "shape",
    [
        "current_views",
        "seed_inline",
        "cost_facts_sessions_only",
        "missing_new_columns",
        "stale_index",
    ],
)
def test_a_later_sync_follows_every_change_hermes_makes(shape: str, tmp_path: Path) -> None:
    home, db = _home(tmp_path, ALL_SHAPES[shape])
    with SessionStore(tmp_path / "archive.db") as archive:
        sync(archive, db, home)
        hs.append_turn(db, hs.S_CRON, "a newcomerword question", "an answer", LATER)
        hs.end_session(db, hs.S_CRON, LATER + 10, "cron_complete")
        hs.retitle(db, hs.S_TELEGRAM, "Renamed by the user")
        hs.grow_usage(db, hs.S_TELEGRAM, 1234, 0.5, LATER + 20)
        hs.set_session_flag(db, hs.S_BRANCH, "pinned", 1)
        hs.compact_in_place(db, hs.S_TELEGRAM, "what happened so far", LATER + 30)
        hs.rewind(db, hs.S_SUBAGENT, 1, LATER + 40)
        before = digests(db)
        report = sync(archive, db, home)
        assert_untouched(db, before)
        assert not report.bulk
        assert_mirrors(archive, db, home)
        hits = archive.core.conn.execute(
            "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'newcomerword'"
        ).fetchone()[0]
        assert hits == 1
        counts = _counts(archive)
        assert sync(archive, db, home).messages_added == 0  # nothing new: nothing twice
        assert _counts(archive) == counts
        fts_checks(archive.core.conn)


def test_rows_gone_from_the_source_are_kept_marked_and_cleared_when_back(tmp_path: Path) -> None:
    home, db = _home(tmp_path, hs.build_cost_facts)
    backup = hs.backup_copy(db, tmp_path / "backup.db")
    key = source_key(home)
    with SessionStore(tmp_path / "archive.db") as archive:
        sync(archive, db, home)
        counts = _counts(archive)
        pruned = hs.prune(db, retention_days=90, now=hs._epoch(hs.S_CRON) + 100 * 86400)
        assert pruned and hs.S_ROOT not in pruned  # pinned: spared
        sync(archive, db, home)
        assert _counts(archive) == counts  # nothing left the archive
        conn = archive.core.conn
        for table, column in (
            ("sessions", "id"),
            ("messages", "session_id"),
            ("session_model_usage", "session_id"),
        ):
            marks = ",".join("?" for _ in pruned)
            rows = conn.execute(
                f"SELECT gone_from_source_at IS NOT NULL, count(*) FROM {table}"
                f" WHERE src_home=? AND {column} IN ({marks}) GROUP BY 1",
                (key, *pruned),
            ).fetchall()
            assert [tuple(r)[0] for r in rows] == [1], table
        assert_mirrors(archive, db, home)
        marked = {
            table: conn.execute(
                f"SELECT count(*) FROM {table} WHERE gone_from_source_at IS NOT NULL"
            ).fetchone()[0]
            for table in ("sessions", "messages", "session_model_usage")
        }
        assert marked["session_model_usage"] > 0
        hs.restore_copy(backup, db)  # the pruned sessions come back
        report = sync(archive, db, home)
        # Every row back in the source is counted as such, usage rows too.
        assert report.back_in_source == sum(marked.values())
        assert (
            conn.execute(
                "SELECT count(*) FROM sessions WHERE gone_from_source_at IS NOT NULL"
            ).fetchone()[0]
            == 0
        )
        assert_mirrors(archive, db, home)
        assert _counts(archive) == counts


def test_reconcile_catches_an_edit_the_cheap_check_does_not_look_for(tmp_path: Path) -> None:
    home, db = _home(tmp_path)
    with SessionStore(tmp_path / "archive.db") as archive:
        sync(archive, db, home)
        with closing(source_conn(db)) as src:
            first = src.execute("SELECT min(id) FROM messages").fetchone()[0]
        hs.edit_message(db, first, "rewritten quietly")
        sync(archive, db, home, reconcile=True)
        assert_mirrors(archive, db, home)
        hits = archive.core.conn.execute(
            "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'quietly'"
        ).fetchone()[0]
        assert hits == 1


def test_reconcile_catches_an_edit_that_keeps_every_length(tmp_path: Path) -> None:
    home, db = _home(tmp_path)
    with SessionStore(tmp_path / "archive.db") as archive:
        sync(archive, db, home)
        with closing(source_conn(db)) as src:
            first, text = src.execute(
                "SELECT id, content FROM messages WHERE length(content) > 3 ORDER BY id LIMIT 1"
            ).fetchone()
        same_length = text[::-1] if text[::-1] != text else text.swapcase()
        assert len(same_length) == len(text) and same_length != text
        hs.edit_message(db, first, same_length)
        sync(archive, db, home, reconcile=True)
        assert_mirrors(archive, db, home)


def test_a_first_import_of_a_still_source_is_its_copy_without_a_reconciliation(
    tmp_path: Path,
) -> None:
    home, db = _home(tmp_path)
    with SessionStore(tmp_path / "archive.db") as archive:
        report = sync(archive, db, home)
        assert report.bulk and not report.reconciled
        assert_mirrors(archive, db, home)


def test_an_edit_hermes_makes_during_the_first_import_is_caught_by_its_reconciliation(
    tmp_path: Path,
) -> None:
    home, db = _home(tmp_path)
    with closing(source_conn(db)) as src:
        first = src.execute("SELECT min(id) FROM messages").fetchone()[0]
    edited: list[int] = []

    def edit(progress: importer.Progress) -> None:
        # Once the batch holding the oldest message has landed, Hermes rewrites it.
        if progress.phase == "indexing" and not edited:
            hs.edit_message(db, first, "rewritten quietly")
            edited.append(first)

    with SessionStore(tmp_path / "archive.db") as archive:
        report = sync(archive, db, home, batch_sessions=1, on_progress=edit)
        assert edited and report.reconciled
        assert_mirrors(archive, db, home)
        text = archive.core.conn.execute(
            "SELECT content FROM messages WHERE src_id = ?", (str(first),)
        ).fetchone()[0]
        assert text == "rewritten quietly"


def test_a_restored_older_backup_keeps_what_only_the_archive_holds(tmp_path: Path) -> None:
    home, db = _home(tmp_path)
    backup = hs.backup_copy(db, tmp_path / "backup.db")
    key = source_key(home)
    with SessionStore(tmp_path / "archive.db") as archive:
        sync(archive, db, home)
        lost = hs.append_turn(db, hs.S_CRON, "onlyinarchive question", "reply", LATER)
        sync(archive, db, home)
        hs.restore_copy(backup, db)
        # The restored file hands the same integer ids to different messages.
        again = hs.append_turn(db, hs.S_CRON, "afterrestore question", "reply two", LATER + 60)
        assert again == lost
        before = digests(db)
        report = sync(archive, db, home)
        assert_untouched(db, before)
        assert report.replaced
        assert_mirrors(archive, db, home)
        conn = archive.core.conn
        for word, gone in (("onlyinarchive", 1), ("afterrestore", 0)):
            row = conn.execute(
                "SELECT m.gone_from_source_at IS NOT NULL FROM messages_fts f"
                " JOIN messages m ON m.id = f.rowid WHERE messages_fts MATCH ?",
                (word,),
            ).fetchall()
            assert [r[0] for r in row] == [gone], word
        assert (
            conn.execute("SELECT count(*) FROM messages WHERE src_home=?", (key,)).fetchone()[0]
            == len(_source_rows(db)[1]) + 2
        )
        fts_checks(conn)


def test_a_reset_home_lands_beside_the_old_history(tmp_path: Path) -> None:
    home, db = _home(tmp_path, hs.build_seed_inline)
    with SessionStore(tmp_path / "archive.db") as archive:
        sync(archive, db, home)
        old = dict(archive_messages(archive.core.conn, source_key(home)))
        # A reset home: a new file whose ids hold other messages (later, other words).
        fresh = hs.build_seed_inline(tmp_path / "fresh" / "state.db")
        with closing(sqlite3.connect(fresh)) as c:
            c.execute(
                "UPDATE messages SET timestamp = timestamp + 1e6,"
                " content = 'resetword ' || coalesce(content, '')"
            )
            c.commit()
        hs.restore_copy(fresh, db)
        report = sync(archive, db, home)
        assert report.replaced
        assert_mirrors(archive, db, home)
        conn = archive.core.conn
        kept = {
            tuple(r[1:])
            for r in conn.execute(
                f"SELECT src_id, {', '.join(MESSAGE_FIELDS)} FROM messages"
                " WHERE gone_from_source_at IS NOT NULL"
            )
        }
        assert kept == set(old.values())  # every old message kept, unchanged, marked gone


def test_a_title_reused_after_a_prune_imports(tmp_path: Path) -> None:
    home, db = _home(tmp_path)
    with SessionStore(tmp_path / "archive.db") as archive:
        sync(archive, db, home)
        pruned = hs.prune(db, retention_days=90, now=hs._epoch(hs.S_CRON) + 100 * 86400)
        gone, title = archive.core.conn.execute(
            f"SELECT id, title FROM sessions WHERE title IS NOT NULL"
            f" AND id IN ({','.join('?' for _ in pruned)}) LIMIT 1",
            pruned,
        ).fetchone()
        hs.start_session(db, "20261201_090000_aaaaaa", LATER, title=title)
        sync(archive, db, home)
        rows = archive.core.conn.execute(
            "SELECT id, gone_from_source_at IS NOT NULL FROM sessions WHERE title=? ORDER BY id",
            (title,),
        ).fetchall()
        assert [tuple(r) for r in rows] == [(gone, 1), ("20261201_090000_aaaaaa", 0)]


def test_a_partly_billed_session_row_stays_partly_billed_as_a_derived_usage_row(
    tmp_path: Path,
) -> None:
    """A sessions row sums every call: its bill beside an estimate is partly billed, and
    the usage row derived from it must read the same (found by the state machine)."""
    home, db = _home(tmp_path, hs.build_seed_inline)
    with SessionStore(tmp_path / "archive.db") as archive:
        sync(archive, db, home)
        row = archive.core.conn.execute(
            "SELECT cost_status, estimated_cost_usd, actual_cost_usd FROM session_model_usage"
            " WHERE session_id=?",
            (hs.S_ROOT,),
        ).fetchone()
    with closing(source_conn(db)) as src:
        session = src.execute(
            "SELECT cost_status, estimated_cost_usd, actual_cost_usd FROM sessions WHERE id=?",
            (hs.S_ROOT,),
        ).fetchone()
    assert session["cost_status"] == "actual" and session["estimated_cost_usd"]
    assert read_cost(*session, usage=False) == read_cost(*row)
    assert read_cost(*row).status == "partial"


def test_reconcile_catches_a_usage_row_that_grew_alone(tmp_path: Path) -> None:
    home, db = _home(tmp_path, hs.build_cost_facts)
    with SessionStore(tmp_path / "archive.db") as archive:
        sync(archive, db, home)
        with closing(sqlite3.connect(db)) as c:  # a usage row grows, its session row does not
            c.execute(
                "UPDATE session_model_usage SET api_call_count = api_call_count + 1,"
                " last_seen = last_seen + 60 WHERE session_id = ?",
                (hs.S_WEEK,),
            )
            c.commit()
        report = sync(archive, db, home, reconcile=True)
        assert report.usage_updated >= 1
        assert_mirrors(archive, db, home)


def test_a_second_profiles_clashing_message_ids_all_land_whatever_the_order(
    tmp_path: Path,
) -> None:
    """legacy first, then default (``recall search --profile legacy``, later ``recall
    search``): default's ids clash with legacy's, and the fresh ids given to the first
    clashes must not take ids later rows of the same batch keep."""
    facts = hs.build_profiles_home(tmp_path / "hermes")
    legacy = facts.root / "profiles" / "legacy"
    with SessionStore(tmp_path / "archive.db") as store:
        sync(store, legacy / "state.db", legacy, profile="legacy", id_prefix="legacy:")
        report = sync(store, facts.root / "state.db", facts.root, profile="default")
        conn = store.core.conn
        archived = dict(
            conn.execute(
                "SELECT profile, count(*) FROM messages m JOIN sessions s ON s.id = m.session_id"
                " GROUP BY profile"
            )
        )
    counts = {
        name: sqlite3.connect(db).execute("SELECT count(*) FROM messages").fetchone()[0]
        for name, db in facts.dbs.items()
        if name != "empty"
    }
    assert report.messages_added == counts["default"]
    assert archived == counts
