"""The write API: sessions, turns, usage, compaction, titles, bulk import, FTS under churn."""

from __future__ import annotations

import random
import sqlite3
import threading
from pathlib import Path

import pytest

from dashboard.errors import ConflictError, NotFoundError, ValidationError
from dashboard.hermes.conventions import COMPACTION_MARKER
from dashboard.store import schema
from dashboard.store.records import ImportSession, NewMessage, Usage, new_session_id
from dashboard.store.session_store import SessionStore


def _hits(conn: sqlite3.Connection, table: str, query: str) -> list[int]:
    rows = conn.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rowid", (query,))
    return [r[0] for r in rows]


def _integrity_check(conn: sqlite3.Connection) -> None:
    for table in schema.FTS_TABLES:
        # Raises sqlite3.DatabaseError ("database disk image is malformed") on a bad index.
        conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")


def test_session_ids_look_like_hermes_ids() -> None:
    sid = new_session_id(1_753_216_000.0)
    date, clock, suffix = sid.split("_")
    assert len(date) == 8 and len(clock) == 6 and len(suffix) == 6


def test_turn_is_appended_in_one_transaction_with_counters(store: SessionStore) -> None:
    sid = store.create_session("telegram", model="claude-sonnet-4", started_at=1000.0)
    ids = store.append_messages(
        sid,
        [
            NewMessage("user", "why is redis refusing connections?", timestamp=1001.0),
            NewMessage(
                "assistant",
                None,
                finish_reason="tool_calls",
                timestamp=1002.0,
                tool_calls=[
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {
                            "name": "terminal",
                            "arguments": '{"command": "redis-cli ping"}',
                        },
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "redis.conf"}'},
                    },
                ],
            ),
            NewMessage(
                "tool", "ECONNREFUSED", tool_call_id="c1", tool_name="terminal", timestamp=1003.0
            ),
        ],
    )
    assert len(ids) == 3 and ids == sorted(ids)
    row = store.core.conn.execute(
        "SELECT message_count, tool_call_count, last_activity_at FROM sessions WHERE id=?", (sid,)
    ).fetchone()
    assert tuple(row) == (3, 2, 1003.0)


def test_append_to_unknown_session_writes_nothing(store: SessionStore) -> None:
    with pytest.raises(NotFoundError):
        store.append_messages("nope", [NewMessage("user", "lost?")])
    assert store.core.conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0


def test_end_session_and_unknown_ids(store: SessionStore) -> None:
    sid = store.create_session("cli")
    store.end_session(sid, "user_exit", ended_at=5.0)
    row = store.core.conn.execute("SELECT ended_at, end_reason FROM sessions").fetchone()
    assert tuple(row) == (5.0, "user_exit")
    with pytest.raises(NotFoundError):
        store.end_session("missing", "user_exit")
    with pytest.raises(NotFoundError):
        store.create_session("cli", parent_session_id="missing")
    with pytest.raises(ValidationError):
        store.create_session("cli", colour="blue")


def test_titles_are_unique_trimmed_and_bounded(store: SessionStore) -> None:
    a = store.create_session("cli")
    b = store.create_session("cli")
    assert store.set_title(a, "  Fix   the redis pool  ") == "Fix the redis pool"
    with pytest.raises(ConflictError, match="already has the title"):
        store.set_title(b, "Fix the redis pool")
    with pytest.raises(ValidationError, match="at most 100"):
        store.set_title(b, "x" * 101)
    assert store.set_title(b, "y" * 100) == "y" * 100
    store.set_title(a, None)
    assert (
        store.core.conn.execute("SELECT title FROM sessions WHERE id=?", (a,)).fetchone()[0] is None
    )
    with pytest.raises(NotFoundError):
        store.set_title("missing", "t")


def test_usage_accumulates_per_model_and_task(store: SessionStore) -> None:
    sid = store.create_session("cli", model="gpt-5")
    main = Usage(
        model="gpt-5",
        billing_provider="openrouter",
        input_tokens=1000,
        output_tokens=200,
        cache_read_tokens=5000,
        actual_cost_usd=0.012,
        cost_status="actual",
        cost_source="provider_generation_api",
    )
    store.record_usage(sid, main)
    store.record_usage(sid, main)
    store.record_usage(
        sid,
        Usage(
            model="gemini-flash",
            billing_provider="google",
            task="compression",
            input_tokens=800,
            estimated_cost_usd=0.001,
            cost_status="estimated",
            cost_source="official_docs_snapshot",
        ),
    )
    conn = store.core.conn
    rows = conn.execute(
        "SELECT task, api_call_count, input_tokens, cache_read_tokens, estimated_cost_usd,"
        " actual_cost_usd FROM session_model_usage ORDER BY task"
    ).fetchall()
    assert [tuple(r) for r in rows] == [
        ("", 2, 2000, 10000, None, pytest.approx(0.024)),
        ("compression", 1, 800, 0, 0.001, None),
    ]
    s = conn.execute(
        "SELECT input_tokens, cache_read_tokens, estimated_cost_usd, actual_cost_usd, cost_status,"
        " billing_provider, api_call_count FROM sessions"
    ).fetchone()
    # The actual cost is not mixed into the estimate: a null estimate is not zero spend.
    assert tuple(s) == (2800, 10000, 0.001, pytest.approx(0.024), "estimated", "openrouter", 3)


def test_unknown_cost_stays_null_and_unknown(store: SessionStore) -> None:
    sid = store.create_session("cli")
    store.record_usage(sid, Usage(model="local-llama", input_tokens=10, cost_status="unknown"))
    row = store.core.conn.execute(
        "SELECT estimated_cost_usd, actual_cost_usd, cost_status FROM sessions"
    ).fetchone()
    assert tuple(row) == (None, None, "unknown")
    with pytest.raises(ValidationError):
        store.record_usage(sid, Usage(cost_status="free"))


def test_compress_continues_in_a_child(store: SessionStore) -> None:
    parent = store.create_session(
        "cli", model="claude", started_at=10.0, billing_provider="anthropic"
    )
    store.append_messages(parent, [NewMessage("user", "long conversation", timestamp=11.0)])
    child = store.compress(parent, "We fixed the pool size.", at=20.0)
    conn = store.core.conn
    p = conn.execute("SELECT ended_at, end_reason FROM sessions WHERE id=?", (parent,)).fetchone()
    assert tuple(p) == (20.0, "compression")
    c = conn.execute(
        "SELECT parent_session_id, started_at, model, billing_provider, message_count"
        " FROM sessions WHERE id=?",
        (child,),
    ).fetchone()
    assert tuple(c) == (parent, 20.0, "claude", "anthropic", 1)
    first = conn.execute("SELECT content FROM messages WHERE session_id=?", (child,)).fetchone()[0]
    assert first.startswith(COMPACTION_MARKER) and "pool size" in first
    with pytest.raises(ConflictError):
        store.compress(parent, "again")
    with pytest.raises(NotFoundError):
        store.compress("missing", "x")


def edit_message(store: SessionStore, message_id: int, content: str) -> None:
    """Change a message's text in place (as a rewrite elsewhere would): the triggers follow."""
    store.core.write(
        lambda c: c.execute("UPDATE messages SET content=? WHERE id=?", (content, message_id))
    )


def test_fts_stays_correct_under_churn(store: SessionStore) -> None:
    rng = random.Random(3)
    words = ["docker", "redis", "nginx", "postgres", "kafka", "数据库连接池", "部署失败了"]
    live: dict[int, str] = {}
    sessions = [store.create_session("cli") for _ in range(5)]
    for round_ in range(40):
        sid = rng.choice(sessions)
        text = f"{rng.choice(words)} {rng.choice(words)} round{round_}"
        (mid,) = store.append_messages(sid, [NewMessage("user", text)])
        live[mid] = text
        if round_ % 3 == 0:
            victim = rng.choice(sorted(live))
            edit_message(store, victim, f"edited zebra{round_}")
            live[victim] = f"edited zebra{round_}"
    # Rewind (delete) the tail of one session, delete another session outright.
    conn = store.core.conn
    first = conn.execute("SELECT min(id) FROM messages WHERE session_id=?", (sessions[0],))
    after = first.fetchone()[0]  # the tail after it goes, as an edit elsewhere would do it
    store.core.write(
        lambda c: c.execute(
            "DELETE FROM messages WHERE session_id=? AND id>?", (sessions[0], after)
        )
    )
    store.delete_session(sessions[1])
    before = len(live)
    live = {r[0]: r[1] for r in conn.execute("SELECT id, content FROM messages")}
    assert len(live) < before
    _integrity_check(conn)
    (fresh,) = store.append_messages(sessions[2], [NewMessage("user", "unrelated words only")])
    live[fresh] = "unrelated words only"
    _integrity_check(conn)
    for term in ["docker", "redis", "zebra12", "round5", "unrelated", "kafka"]:
        as_word = sorted(m for m, t in live.items() if term in t.split())
        as_substring = sorted(m for m, t in live.items() if term in t)
        assert _hits(conn, "messages_fts", term) == as_word, term
        assert _hits(conn, "messages_fts_trigram", term) == as_substring, term
    expected = sorted(m for m, t in live.items() if "连接池" in t)
    assert _hits(conn, "messages_fts_trigram", '"连接池"') == expected


def test_deleted_words_are_gone_from_both_indexes(store: SessionStore) -> None:
    sid = store.create_session("cli")
    (mid,) = store.append_messages(sid, [NewMessage("user", "ephemeral platypus")])
    edit_message(store, mid, "ordinary text")
    conn = store.core.conn
    assert _hits(conn, "messages_fts", "platypus") == []
    assert _hits(conn, "messages_fts_trigram", "platypus") == []
    store.delete_session(sid)
    assert _hits(conn, "messages_fts", "ordinary") == []
    assert _hits(conn, "messages_fts_trigram", "ordinary") == []
    _integrity_check(conn)


def _import_sessions(n: int) -> list[ImportSession]:
    out = []
    for i in range(n):
        out.append(
            ImportSession(
                id=f"s{i:03d}",
                source="cli",
                started_at=1000.0 + i,
                model="m",
                title=f"t{i}",
                parent_session_id=f"s{i - 1:03d}" if i % 4 else None,
                messages=[
                    NewMessage("user", f"question {i} about bulkword{i % 7}", timestamp=1000.0 + i),
                    NewMessage(
                        "assistant",
                        "answer",
                        tool_calls=[
                            {
                                "id": "x",
                                "type": "function",
                                "function": {"name": "terminal", "arguments": "{}"},
                            }
                        ],
                    ),
                ],
                usage=[
                    Usage(
                        model="m",
                        billing_provider="p",
                        input_tokens=10,
                        estimated_cost_usd=0.5,
                        cost_status="estimated",
                    )
                ],
            )
        )
    return out


def test_bulk_import_rebuilds_indexes_and_restores_triggers(store: SessionStore) -> None:
    assert store.bulk_import(_import_sessions(50), batch_messages=17) == 100
    conn = store.core.conn
    assert not store.index_is_stale()
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")}
    assert set(schema.FTS_TRIGGERS) <= names
    assert len(_hits(conn, "messages_fts", "bulkword3")) == len(
        [i for i in range(50) if i % 7 == 3]
    )
    assert len(_hits(conn, "messages_fts_trigram", "lkword3")) == 7
    _integrity_check(conn)
    row = conn.execute(
        "SELECT message_count, tool_call_count, estimated_cost_usd, cost_status"
        " FROM sessions WHERE id='s010'"
    ).fetchone()
    assert tuple(row) == (2, 1, 0.5, "estimated")
    # Triggers are back: a normal append is indexed at once.
    store.append_messages("s000", [NewMessage("user", "afterbulk")])
    assert len(_hits(conn, "messages_fts", "afterbulk")) == 1


def test_interrupted_bulk_import_is_finished_on_next_open(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SessionStore(path)

    def exploding():
        yield from _import_sessions(10)
        raise RuntimeError("importer died")

    with pytest.raises(RuntimeError):
        store.bulk_import(exploding(), batch_messages=4)
    # The finally-block rebuilt the index; simulate a harder crash on top of it.
    store.core.write(lambda c: c.execute("DROP TRIGGER messages_fts_insert"))
    store.core.write(lambda c: c.execute("INSERT INTO state_meta VALUES ('fts_stale', '1')"))
    store.core.write(
        lambda c: c.execute(
            "INSERT INTO messages(session_id, role, content, timestamp) "
            "VALUES ('s000', 'user', 'unindexedword', 1.0)"
        )
    )
    store.close()
    with SessionStore(path) as reopened:
        assert not reopened.index_is_stale()
        assert len(_hits(reopened.core.conn, "messages_fts", "unindexedword")) == 1
        _integrity_check(reopened.core.conn)


def test_bulk_write_lands_a_child_before_its_parent_when_told(store: SessionStore) -> None:
    def child(c: sqlite3.Connection) -> int:
        c.execute(
            "INSERT INTO sessions(id, source, started_at, parent_session_id)"
            " VALUES ('kid', 'cli', 2.0, 'elder')"
        )
        c.execute(
            "INSERT INTO messages(session_id, role, content, timestamp)"
            " VALUES ('kid', 'user', 'orphanword', 2.0)"
        )
        return 1

    def parent(c: sqlite3.Connection) -> int:
        c.execute("INSERT INTO sessions(id, source, started_at) VALUES ('elder', 'cli', 1.0)")
        return 2

    with pytest.raises(sqlite3.IntegrityError):
        store.bulk_write([child])  # foreign keys on by default: the parent is missing
    assert store.bulk_write([child, parent], foreign_keys=False) == [1, 2]
    conn = store.core.conn
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1  # restored
    assert not store.index_is_stale()
    assert len(_hits(conn, "messages_fts", "orphanword")) == 1
    _integrity_check(conn)


def test_bulk_write_without_foreign_keys_leaves_them_on_for_other_threads(
    store: SessionStore,
) -> None:
    """An importer's bulk pass (foreign keys off) and a web request share the store's
    connection: a write the request makes between two steps still checks them."""
    between = threading.Event()
    checked = threading.Event()
    outcome: list[BaseException | None] = []

    def orphan(conn: sqlite3.Connection) -> None:
        conn.execute(
            "INSERT INTO messages(session_id, role, content, timestamp)"
            " VALUES ('no-such-session', 'user', 'x', 1.0)"
        )

    def request() -> None:
        between.wait(timeout=30)
        try:
            store.core.write(orphan)
            outcome.append(None)
        except sqlite3.IntegrityError as exc:
            outcome.append(exc)
        checked.set()

    def steps():
        yield lambda c: c.execute("SELECT 1")
        between.set()  # the bulk pass is between two steps: the request runs now
        assert checked.wait(timeout=30)
        yield lambda c: c.execute("SELECT 1")

    worker = threading.Thread(target=request)
    worker.start()
    store.bulk_write(steps(), foreign_keys=False, rebuild_index=False)
    worker.join(timeout=30)
    assert len(outcome) == 1 and isinstance(outcome[0], sqlite3.IntegrityError)
    assert store.core.conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0


def test_compact_in_place_archives_the_live_rows_and_repeats_the_tail(
    store: SessionStore,
) -> None:
    sid = store.create_session("cli", started_at=1000.0)
    store.append_messages(
        sid,
        [
            NewMessage("user", "first walrus", timestamp=1001.0),
            NewMessage("assistant", "a reply", timestamp=1002.0),
            NewMessage("user", "and then", timestamp=1003.0),
        ],
    )
    new = store.compact_in_place(sid, "so far", keep=2, at=1010.0)
    conn = store.core.conn
    rows = conn.execute(
        "SELECT id, role, content, timestamp, active, compacted FROM messages"
        " WHERE session_id=? ORDER BY id",
        (sid,),
    ).fetchall()
    assert [tuple(r)[4:] for r in rows] == [(0, 1)] * 3 + [(1, 0)] * 3
    assert [r[0] for r in rows[3:]] == new
    assert rows[3]["content"] == f"{COMPACTION_MARKER}\nso far" and rows[3]["timestamp"] == 1010.0
    assert [(r["role"], r["content"]) for r in rows[4:]] == [
        (r["role"], r["content"]) for r in rows[1:3]
    ]
    assert [r["timestamp"] for r in rows[4:]] == [1010.001, 1010.002]
    session = conn.execute(
        "SELECT message_count, last_activity_at FROM sessions WHERE id=?", (sid,)
    ).fetchone()
    assert tuple(session) == (6, 1010.0)
    assert len(_hits(conn, "messages_fts", "walrus")) == 1  # archived, still searchable
    _integrity_check(conn)
    with pytest.raises(NotFoundError):
        store.compact_in_place("nope", "x")
    store.end_session(sid, "user_exit", ended_at=1020.0)
    with pytest.raises(ConflictError):
        store.compact_in_place(sid, "x")


def test_every_write_moves_the_write_counter(store: SessionStore) -> None:
    """What a reader's cache keys on (lineage.py): an in-place update moves it too."""

    def writes() -> int:
        row = store.core.conn.execute(
            "SELECT value FROM state_meta WHERE key = ?", (schema.WRITES_KEY,)
        ).fetchone()
        return int(row[0])

    start = writes()
    sid = store.create_session("cli", started_at=100.0)
    store.end_session(sid, "compression", ended_at=200.0)
    store.set_title(sid, "renamed")
    assert writes() == start + 3
    with pytest.raises(NotFoundError):
        store.end_session("no-such-session", "done")
    assert writes() == start + 3  # a refused write commits nothing, the counter included
