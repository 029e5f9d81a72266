"""Checks that ``build_v31_home`` writes what Hermes v31 leaves, each fact by its own SQL."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from dashboard.archive.importer import sync
from dashboard.archive.marks import source_key
from dashboard.store.session_store import SessionStore
from tests.support import hermes_v31 as v31
from tests.support.source_checks import archive_messages, source_conn, source_messages


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory) -> v31.V31Facts:
    return v31.build_v31_home(tmp_path_factory.mktemp("v31") / "home")


@pytest.fixture
def conn(facts: v31.V31Facts) -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(f"file:{facts.db}?mode=ro", uri=True)) as c:
        yield c


def rows(conn: sqlite3.Connection, sql: str, *params: object) -> list[tuple]:
    return conn.execute(sql, params).fetchall()


def ids(conn: sqlite3.Connection, sql: str, *params: object) -> list[int]:
    return [r[0] for r in conn.execute(sql, params)]


def test_the_file_reads_back_with_every_table_column_and_meta_key(
    facts: v31.V31Facts, conn: sqlite3.Connection
) -> None:
    assert facts.db == facts.root / "state.db"
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert not facts.db.with_name("state.db-wal").exists()
    assert conn.execute("SELECT version FROM schema_version").fetchall() == [(31,)]
    names = {r[0] for r in rows(conn, "SELECT name FROM sqlite_master")}
    assert set(v31.V31_TABLES) <= names
    assert {"messages_fts_src", "messages_fts_trigram_src", "messages_message_uid_insert"} <= names
    message_cols = {r[1] for r in rows(conn, "PRAGMA table_info(messages)")}
    session_cols = {r[1] for r in rows(conn, "PRAGMA table_info(sessions)")}
    assert set(v31.V31_MESSAGE_COLUMNS) <= message_cols
    assert set(v31.V31_SESSION_COLUMNS) <= session_cols
    meta = dict(rows(conn, "SELECT key, value FROM state_meta"))
    assert meta == facts.state_meta
    assert meta["fts_storage_version"] == "3"
    assert set(meta) == {
        "store_instance_id",
        "db_file_generation",
        "message_uid_backfill",
        "fts_storage_version",
        "last_auto_prune",
    }
    for name in v31.SIDE_FILES:
        assert (facts.root / name).is_file(), name
    assert "retention_days: 90" in (facts.root / "config.yaml").read_text()
    # FTS v3: external content over the views; the trigram view leaves out tool rows,
    # cron and subagent sessions; tool rows indexed as a prefix.
    fts = conn.execute("SELECT sql FROM sqlite_master WHERE name='messages_fts'").fetchone()[0]
    assert "tool_name" in fts and "content='messages_fts_src'" in fts
    tri = conn.execute(
        "SELECT sql FROM sqlite_master WHERE name='messages_fts_trigram_src'"
    ).fetchone()[0]
    assert "'tool'" in tri and "'cron'" in tri and "'subagent'" in tri
    src = conn.execute("SELECT sql FROM sqlite_master WHERE name='messages_fts_src'").fetchone()[0]
    assert "8192" in src
    hit = ids(
        conn,
        "SELECT m.id FROM messages_fts f JOIN messages m ON m.id = f.rowid "
        "WHERE messages_fts MATCH ? ORDER BY m.id",
        v31.EPOCH_MARKERS[1],
    )
    assert hit == list(facts.markers[v31.EPOCH_MARKERS[1]].rows)
    cron_word = ids(
        conn,
        "SELECT f.rowid FROM messages_fts_trigram f WHERE messages_fts_trigram MATCH ?",
        "nightly report",
    )
    assert cron_word == []  # cron sessions are not in the trigram index
    assert rows(conn, "SELECT count(*) FROM gateway_heartbeats") == [(1,)]
    assert rows(conn, "SELECT count(*) FROM conversation_generations") == [(1,)]
    assert rows(conn, "SELECT count(*) FROM gateway_hygiene_state") == [(1,)]


def test_every_row_has_a_uid_and_the_new_columns_hold_values(
    facts: v31.V31Facts, conn: sqlite3.Connection
) -> None:
    total, missing = conn.execute(
        "SELECT count(*), sum(message_uid IS NULL OR message_uid = '') FROM messages"
    ).fetchone()
    assert (total, missing) == (facts.total_messages, 0)
    assert rows(conn, "SELECT count(*) FROM messages WHERE typeof(display_identity) <> 'blob'") == [
        (0,)
    ]
    assert rows(conn, "SELECT count(*) FROM messages WHERE display_order IS NULL") == [(0,)]
    calls = rows(
        conn,
        "SELECT tool_calls, tool_call_uids FROM messages WHERE role='assistant'"
        " AND tool_calls IS NOT NULL",
    )
    assert calls
    for tool_calls, uids in calls:
        assert set(json.loads(uids)) == {c["id"] for c in json.loads(tool_calls)}
    assert rows(
        conn, "SELECT count(*) FROM messages WHERE role='tool' AND tool_call_uid IS NULL"
    ) == [(0,)]
    absorbed = rows(
        conn, "SELECT absorbed_message_uids FROM messages WHERE absorbed_message_uids IS NOT NULL"
    )
    assert len(absorbed) == 1 and len(json.loads(absorbed[0][0])) == 1


def test_a_copy_keeps_its_originals_uid_role_and_timestamp(
    facts: v31.V31Facts, conn: sqlite3.Connection
) -> None:
    # every pair of rows sharing a message_uid, in any session, agrees on role and time
    assert rows(
        conn,
        "SELECT count(*) FROM messages a JOIN messages b ON a.message_uid = b.message_uid"
        " AND a.id < b.id WHERE a.timestamp <> b.timestamp OR a.role <> b.role",
    ) == [(0,)]
    repeats = dict(
        rows(
            conn,
            "SELECT c.id, (SELECT min(o.id) FROM messages o WHERE o.message_uid = c.message_uid)"
            " FROM messages c WHERE c.id > (SELECT min(o.id) FROM messages o"
            " WHERE o.message_uid = c.message_uid)",
        )
    )
    assert repeats == facts.repeats and repeats
    # in-place copies (same session) repeat a row no longer live
    same = rows(
        conn,
        "SELECT count(*) FROM messages c JOIN messages o ON o.message_uid = c.message_uid"
        " AND o.session_id = c.session_id AND o.id < c.id WHERE o.active = 1",
    )
    assert same == [(0,)]


def _original(conn: sqlite3.Connection, row_id: int) -> tuple:
    """The first row of the same session with the same message_uid (by id)."""
    return conn.execute(
        "SELECT o.id, o.active, o.compacted, o.timestamp = c.timestamp, o.role = c.role "
        "FROM messages c JOIN messages o ON o.session_id = c.session_id "
        "AND o.message_uid = c.message_uid AND o.id < c.id WHERE c.id = ? ORDER BY o.id LIMIT 1",
        (row_id,),
    ).fetchone()


def test_in_place_compactions_leave_the_rows_hermes_leaves(
    facts: v31.V31Facts, conn: sqlite3.Connection
) -> None:
    sid = facts.long_session
    done = facts.compactions[sid]
    assert [c.form for c in done] == ["standalone", "merged", "standalone"]
    for n, c in enumerate(done):
        # summarized rows are archived; retained originals superseded (rewind's flags)
        for row_id in c.summarized:
            assert rows(conn, "SELECT active, compacted FROM messages WHERE id=?", row_id) == [
                (0, 1)
            ]
        # every retained row's copy shares uid and timestamp with an original that is
        # active=0, compacted=0; the head's copies with an archived (compacted=1) one
        for copy_id in c.tail_copies:
            orig = _original(conn, copy_id)
            assert orig is not None and orig[0] in c.superseded
            assert orig[1:] == (0, 0, 1, 1)
        for copy_id in c.head_copies:
            orig = _original(conn, copy_id)
            assert orig is not None and orig[1:] == (0, 1, 1, 1)
        assert bool(c.head_copies) == (n == 0)
    # the head: the session's first 3 rows, re-inserted before the first summary
    first3 = rows(
        conn, "SELECT message_uid FROM messages WHERE session_id=? ORDER BY id LIMIT 3", sid
    )
    head = done[0].head_copies
    assert [rows(conn, "SELECT message_uid FROM messages WHERE id=?", i)[0] for i in head] == first3
    assert max(head) < done[0].carrier < min(done[0].tail_copies)
    assert min(head) > max(done[0].superseded)


def test_summaries_come_in_both_forms(facts: v31.V31Facts, conn: sqlite3.Connection) -> None:
    done = facts.compactions[facts.long_session]
    for c in (done[0], done[2]):
        role, content, flag, calls = conn.execute(
            "SELECT role, content, _compressed_summary, tool_calls FROM messages WHERE id=?",
            (c.carrier,),
        ).fetchone()
        assert (role, flag, calls) == ("user", 0, None)
        assert content.startswith(v31.SUMMARY_PREFIX)
        assert _original(conn, c.carrier) is None  # a new message, not a copy
    for c in done:
        text = conn.execute("SELECT content FROM messages WHERE id=?", (c.carrier,)).fetchone()[0]
        assert text.endswith(f"{v31.SUMMARY_BOILERPLATE}\n{c.summary}")
    merged = rows(
        conn,
        "SELECT id, role, content, tool_calls FROM messages WHERE session_id=?"
        " AND _compressed_summary = 1 ORDER BY id",
        facts.long_session,
    )
    assert [r[0] for r in merged] == [done[1].carrier]
    for _, _, text, _ in merged:
        assert text.startswith(v31.PRIOR_OPEN)
        end = text.index(v31.PRIOR_END)
        assert text[end + len(v31.PRIOR_END) :].lstrip().startswith(v31.SUMMARY_PREFIX)
    assert [(r[1], r[3] is not None) for r in merged] == [("assistant", True)]
    # the merged carrier is a copy of the retained row it rides on
    assert _original(conn, done[1].carrier)[0] == done[1].superseded[0]


def test_the_undone_turn_is_rewound_with_no_copy(
    facts: v31.V31Facts, conn: sqlite3.Connection
) -> None:
    assert len(facts.rewound) == 2
    for row_id in facts.rewound:
        active, compacted, uid = conn.execute(
            "SELECT active, compacted, message_uid FROM messages WHERE id=?", (row_id,)
        ).fetchone()
        assert (active, compacted) == (0, 0)
        assert rows(conn, "SELECT count(*) FROM messages WHERE message_uid=?", uid) == [(1,)]
    # every other active=0, compacted=0 row of the session is superseded: a later copy
    superseded = ids(
        conn,
        "SELECT m.id FROM messages m WHERE m.session_id=? AND m.active=0 AND m.compacted=0"
        " AND EXISTS (SELECT 1 FROM messages c WHERE c.message_uid=m.message_uid AND c.id>m.id)",
        facts.long_session,
    )
    flagged = ids(
        conn,
        "SELECT id FROM messages WHERE session_id=? AND active=0 AND compacted=0",
        facts.long_session,
    )
    assert sorted(superseded + list(facts.rewound)) == flagged
    text = conn.execute("SELECT content FROM messages WHERE id=?", (facts.rewound[0],)).fetchone()
    assert v31.UNDO_MARKER in text[0]


def test_by_time_order_differs_from_by_id_order(
    facts: v31.V31Facts, conn: sqlite3.Connection
) -> None:
    sid = facts.long_session
    by_id = ids(conn, "SELECT id FROM messages WHERE session_id=? ORDER BY id", sid)
    by_time = ids(conn, "SELECT id FROM messages WHERE session_id=? ORDER BY timestamp, id", sid)
    assert by_id != by_time
    live_by_time = ids(
        conn, "SELECT id FROM messages WHERE session_id=? AND active=1 ORDER BY timestamp, id", sid
    )
    assert live_by_time != facts.live_order[sid]
    first = facts.compactions[sid][0]
    assert by_time.index(first.carrier) > by_time.index(first.tail_copies[-1])


def test_live_order_is_what_hermes_feeds_the_agent(
    facts: v31.V31Facts, conn: sqlite3.Connection
) -> None:
    all_ids = [r[0] for r in rows(conn, "SELECT id FROM sessions")]
    assert set(facts.live_order) == set(all_ids)
    for sid in all_ids:
        live = ids(conn, "SELECT id FROM messages WHERE session_id=? AND active=1 ORDER BY id", sid)
        assert facts.live_order[sid] == live, sid
    carriers = [c.carrier for c in facts.compactions[facts.long_session]]
    assert facts.live_order[facts.long_session][0] == carriers[-1]


def test_markers_count_distinct_messages_in_the_epoch_they_were_said(
    facts: v31.V31Facts, conn: sqlite3.Connection
) -> None:
    assert {m.epoch for w, m in facts.markers.items() if w in v31.EPOCH_MARKERS.values()} == {
        1,
        2,
        3,
        4,
    }
    for word, marker in facts.markers.items():
        found = rows(
            conn,
            "SELECT id, message_uid, session_id FROM messages WHERE content LIKE ? ORDER BY id",
            f"%{word}%",
        )
        assert tuple(r[0] for r in found) == marker.rows, word
        assert len({r[1] for r in found}) == marker.messages, word
        origin = found[0]
        assert origin[2] == marker.session
        # epoch = 1 + summaries (distinct messages) written before the word was first said
        before = conn.execute(
            "SELECT count(DISTINCT message_uid) FROM messages WHERE session_id=? AND id<?"
            " AND (content LIKE ? OR _compressed_summary=1)",
            (marker.session, origin[0], f"{v31.SUMMARY_PREFIX}%"),
        ).fetchone()[0]
        assert marker.epoch == before + 1, word
    assert facts.markers[v31.HEAD_MARKER].messages == 2
    assert len(facts.markers[v31.HEAD_MARKER].rows) == 4
    assert facts.markers[v31.TAIL_MARKER].messages == 1
    assert len(facts.markers[v31.TAIL_MARKER].rows) == 2
    assert facts.markers[v31.ROTATION_MARKER].messages == 1


def test_rotation_children_open_with_the_head_copy_then_the_summary(
    facts: v31.V31Facts, conn: sqlite3.Connection
) -> None:
    chain = facts.rotation
    assert len(chain) == 4
    root_head = rows(
        conn, "SELECT message_uid FROM messages WHERE session_id=? ORDER BY id LIMIT 3", chain[0]
    )
    for parent, child in zip(chain, chain[1:], strict=False):
        end_reason, ended = conn.execute(
            "SELECT end_reason, ended_at FROM sessions WHERE id=?", (parent,)
        ).fetchone()
        started, link = conn.execute(
            "SELECT started_at, parent_session_id FROM sessions WHERE id=?", (child,)
        ).fetchone()
        assert (end_reason, link) == ("compression", parent) and started >= ended
        opening = rows(
            conn,
            "SELECT message_uid, content FROM messages WHERE session_id=? ORDER BY id LIMIT 4",
            child,
        )
        assert [(u,) for u, _ in opening[:3]] == root_head
        assert not opening[0][1].startswith(v31.SUMMARY_PREFIX)
        assert opening[3][1].startswith(v31.SUMMARY_PREFIX)
    tip = chain[-1]
    assert rows(conn, "SELECT ended_at FROM sessions WHERE id=?", tip) == [(None,)]
    assert len(facts.compactions[tip]) == 1
    assert rows(conn, "SELECT count(*) > 0 FROM messages WHERE session_id=? AND compacted=1", tip)[
        0
    ] == (1,)


def test_the_other_session_kinds_are_there(facts: v31.V31Facts, conn: sqlite3.Connection) -> None:
    s = facts.sessions
    cfg = json.loads(rows(conn, "SELECT model_config FROM sessions WHERE id=?", s["branch"])[0][0])
    assert cfg == {"_branched_from": s["branch_source"]}
    assert rows(conn, "SELECT end_reason FROM sessions WHERE id=?", s["branch_source"]) == [
        ("branched",)
    ]
    source, config = conn.execute(
        "SELECT source, model_config FROM sessions WHERE id=?", (s["subagent"],)
    ).fetchone()
    assert source == "subagent" and json.loads(config) == {"_delegate_from": facts.long_session}
    assert rows(conn, "SELECT count(*) FROM sessions WHERE source='cron'") == [(2,)]
    assert rows(conn, "SELECT id FROM sessions WHERE archived=1") == [(s["archived"],)]
    assert rows(conn, "SELECT id FROM sessions WHERE hidden=1") == [(s["hidden"],)]
    assert rows(conn, "SELECT id FROM sessions WHERE pinned=1") == [(s["pinned_1"],)]
    null_status = rows(
        conn,
        "SELECT task, estimated_cost_usd FROM session_model_usage WHERE cost_status IS NULL",
    )
    assert null_status and all(task and cost > 0 for task, cost in null_status)


def test_prune_facts_follow_hermess_rule_read_independently(
    facts: v31.V31Facts, conn: sqlite3.Connection
) -> None:
    cutoff = facts.now - facts.retention_days * 86_400
    # last activity = newest of last_activity_at, the newest message, started_at; a session
    # may go when ended, unpinned and idle past the cut-off; continuations (a parent that
    # ended by compression, a child that is no branch/delegation) form one lineage that
    # goes whole or not at all.
    deleted = {
        r[0]
        for r in conn.execute(
            """
            WITH RECURSIVE
            last(id, at) AS (
                SELECT s.id, max(s.started_at, coalesce(s.last_activity_at, 0),
                                 coalesce((SELECT max(timestamp) FROM messages m
                                           WHERE m.session_id = s.id), 0))
                FROM sessions s),
            may(id, ok) AS (
                SELECT s.id, s.ended_at IS NOT NULL AND coalesce(s.pinned, 0) = 0 AND l.at < ?
                FROM sessions s JOIN last l ON l.id = s.id),
            cont(child, parent) AS (
                SELECT c.id, p.id FROM sessions c JOIN sessions p ON p.id = c.parent_session_id
                WHERE p.end_reason = 'compression' AND c.source <> 'subagent'
                  AND json_extract(c.model_config, '$._branched_from') IS NULL
                  AND json_extract(c.model_config, '$._delegate_from') IS NULL),
            up(id, top) AS (
                SELECT id, id FROM sessions
                UNION SELECT up.id, cont.parent FROM up JOIN cont ON cont.child = up.top),
            root(id, top) AS (
                SELECT id, top FROM up WHERE top NOT IN (SELECT child FROM cont))
            SELECT r.id FROM root r
            WHERE NOT EXISTS (SELECT 1 FROM root o JOIN may ON may.id = o.id
                              WHERE o.top = r.top AND NOT may.ok)
            """,
            (cutoff,),
        )
    }
    everything = {r[0] for r in rows(conn, "SELECT id FROM sessions")}
    assert deleted == facts.prune_deleted
    assert facts.prune_kept == everything - deleted
    s = facts.sessions
    assert deleted == {s["old"], s["old_lineage_1"], s["old_lineage_2"], s["cron_old"]}
    # what a rule by start time would get wrong: each of these started before the cut-off
    # and was ended, yet stays
    started_before = {
        r[0]
        for r in conn.execute(
            "SELECT id FROM sessions WHERE ended_at IS NOT NULL AND coalesce(pinned, 0) = 0"
            " AND started_at < ?",
            (cutoff,),
        )
    }
    spared = started_before - deleted
    assert {
        s["rotation_1"],
        s["rotation_2"],
        s["rotation_3"],
        s["compacted_last_week"],
        s["active_month_later"],
        s["pinned_2"],
        s["pinned_3"],
    } == spared
    assert rows(conn, "SELECT last_activity_at FROM sessions WHERE id=?", s["active_month_later"])[
        0
    ] == (None,)
    for sid in deleted:
        assert facts.last_activity[sid] < cutoff


def test_recalls_importer_reads_it_today(facts: v31.V31Facts, tmp_path: Path) -> None:
    with SessionStore(tmp_path / "archive.db") as archive:
        report = sync(archive, facts.db, facts.root)
        conn = archive.core.conn
        with closing(source_conn(facts.db)) as src:
            messages = source_messages(src)
        assert len(messages) == facts.total_messages
        assert archive_messages(conn, source_key(facts.root)) == messages
        assert report.messages_added == facts.total_messages
        kept = {r[0] for r in conn.execute("SELECT src_id FROM sessions")}
        assert kept == set(facts.live_order)
