"""Recall's own schema: the seed v11 form, external-content FTS, numbered migrations."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dashboard.store import schema
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from dashboard.store.writecore import WriteCore


def _names(conn: sqlite3.Connection, kind: str) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type=?", (kind,))
    return {r[0] for r in rows}


def test_fresh_store_has_the_seed_tables_and_both_indexes(store: SessionStore) -> None:
    conn = store.core.conn
    tables = _names(conn, "table")
    assert {"sessions", "messages", "state_meta", "schema_version", "session_model_usage"} <= tables
    assert {"messages_fts", "messages_fts_trigram"} <= tables
    assert _names(conn, "trigger") >= set(schema.FTS_TRIGGERS)
    assert conn.execute("SELECT version FROM schema_version").fetchone()[0] == 11
    assert schema.current_version(conn) == schema.LATEST_VERSION
    cols = {r[1] for r in conn.execute("PRAGMA table_info(sessions)")}
    for needed in (
        "billing_provider",
        "estimated_cost_usd",
        "actual_cost_usd",
        "cost_status",
        "cost_source",
        "pricing_version",
        "title",
        "parent_session_id",
        "cache_read_tokens",
        "reasoning_tokens",
        "last_activity_at",
    ):
        assert needed in cols
    ddl = conn.execute("SELECT sql FROM sqlite_master WHERE name='messages_fts_trigram'")
    assert "trigram" in ddl.fetchone()[0]


def test_both_indexes_cover_content_tool_name_and_tool_calls(store: SessionStore) -> None:
    sid = store.create_session("cli")
    store.append_messages(
        sid,
        [
            NewMessage(
                "assistant",
                "checking",
                tool_calls=[
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "terminal", "arguments": '{"command": "uptime"}'},
                    }
                ],
            ),
            NewMessage("tool", "load average 0.42", tool_name="read_logfile", tool_call_id="c1"),
        ],
    )
    conn = store.core.conn
    for table, term in (
        ("messages_fts", "uptime"),
        ("messages_fts", "read_logfile"),
        ("messages_fts_trigram", "ptim"),
        ("messages_fts_trigram", "logfi"),
    ):
        hits = conn.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (term,))
        assert hits.fetchone()[0] == 1, (table, term)


def test_migrating_an_older_file_backs_it_up_first(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    core = WriteCore(path)
    assert schema.migrate(core, target=1) == [1]
    core.write(
        lambda c: c.execute(
            "INSERT INTO sessions(id, source, started_at) VALUES ('old', 'cli', 100.0)"
        )
    )
    core.write(
        lambda c: c.execute(
            "INSERT INTO messages(session_id, role, content, timestamp) "
            "VALUES ('old', 'user', 'hello from version one', 150.0)"
        )
    )
    core.close()

    with SessionStore(path) as store:
        conn = store.core.conn
        assert schema.current_version(conn) == schema.LATEST_VERSION
        row = conn.execute("SELECT last_activity_at FROM sessions WHERE id='old'").fetchone()
        assert row[0] == 150.0
        hits = conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'version'")
        assert hits.fetchone()[0] == 1

    backups = list(tmp_path.glob("state.db.v1-*.bak"))
    assert len(backups) == 1
    old = sqlite3.connect(backups[0])
    try:
        assert schema.current_version(old) == 1
        assert old.execute("SELECT count(*) FROM messages").fetchone()[0] == 1
    finally:
        old.close()


def test_fresh_file_is_not_backed_up(tmp_path: Path) -> None:
    SessionStore(tmp_path / "state.db").close()
    SessionStore(tmp_path / "state.db").close()
    assert not list(tmp_path.glob("*.bak"))


def test_an_index_only_migration_makes_no_backup_and_the_index_is_used(tmp_path: Path) -> None:
    path = tmp_path / "archive.db"
    core = WriteCore(path)
    schema.migrate(core, target=4)
    core.close()
    with SessionStore(path) as store:
        conn = store.core.conn
        assert schema.current_version(conn) == schema.LATEST_VERSION
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT DISTINCT session_id FROM messages WHERE compacted = 1"
        ).fetchall()
        by_profile = conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM sessions WHERE profile IN ('work')"
        ).fetchall()
    assert "idx_messages_compacted" in " ".join(str(tuple(r)) for r in plan)
    assert "idx_sessions_profile" in " ".join(str(tuple(r)) for r in by_profile)
    assert not list(tmp_path.glob("*.bak"))  # v4 -> v7 adds indexes and defaulted columns


def test_a_newer_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    SessionStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE state_meta SET value='999' WHERE key=?", (schema.VERSION_KEY,))
    conn.commit()
    conn.close()
    with pytest.raises(RuntimeError, match="newer Recall"):
        SessionStore(path)


def test_migration_15_adds_logged_calls_without_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "archive.db"
    core = WriteCore(path)
    schema.migrate(core, target=14)
    core.close()
    with SessionStore(path) as store:
        conn = store.core.conn
        assert {schema.CALLS_TABLE, schema.CALL_FILES_TABLE} <= _names(conn, "table")
        row = ("/home", "s1", 3, 1.7e9 + 0.5, "m", "p", 10, 1)
        insert = (
            f"INSERT OR IGNORE INTO {schema.CALLS_TABLE} (src_home, session_id, number, at,"
            " model, provider, prompt_tokens, output_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
        untagged = ("/home", None, *row[2:])
        for values in (row, row, untagged, untagged):  # each line read twice: once each
            store.core.write(lambda c, v=values: c.execute(insert, v))
        assert conn.execute(f"SELECT count(*) FROM {schema.CALLS_TABLE}").fetchone()[0] == 2
        plan = conn.execute(
            f"EXPLAIN QUERY PLAN SELECT * FROM {schema.CALLS_TABLE} WHERE session_id IN ('s1')"
        ).fetchall()
    assert "idx_logged_calls_session" in " ".join(str(tuple(r)) for r in plan)
    assert not list(tmp_path.glob("*.bak"))  # a new empty table: nothing to back up
