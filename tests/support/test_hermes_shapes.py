"""Checks that every Hermes state.db shape built by ``hermes_shapes`` is what it claims."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as hs
from tests.support.archived import archive_home
from tests.support.source_checks import assert_mirrors

SHAPE_NAMES = sorted(hs.SHAPES)


@contextmanager
def opened(path: Path, *, readonly: bool = True) -> Iterator[sqlite3.Connection]:
    """A connection that is always closed (read-only by default)."""
    uri = f"file:{path}?mode=ro" if readonly else f"file:{path}"
    with closing(sqlite3.connect(uri, uri=True)) as conn:
        yield conn


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def objects(conn: sqlite3.Connection, kind: str) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = ?", (kind,))
    return {row[0] for row in rows}


def fts_hits(conn: sqlite3.Connection, table: str, query: str) -> list[str]:
    """Session ids of messages whose FTS rowid matches ``query``."""
    sql = (
        f"SELECT m.session_id FROM {table} f JOIN messages m ON m.id = f.rowid "
        f"WHERE {table} MATCH ? ORDER BY m.id"
    )
    return [row[0] for row in conn.execute(sql, (query,))]


def like_count(conn: sqlite3.Connection, word: str) -> int:
    sql = "SELECT count(*) FROM messages WHERE content LIKE ?"
    return conn.execute(sql, (f"%{word}%",)).fetchone()[0]


@pytest.fixture(params=SHAPE_NAMES)
def shape(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    name = request.param
    path = hs.SHAPES[name](tmp_path / "hermes" / "state.db")
    return name, path


def test_shape_registry_is_complete() -> None:
    assert (
        set(hs.SHAPES)
        == set(hs.EXPECTED)
        == {
            "seed_inline",
            "seed_external",
            "current_views",
            "no_trigram",
            "cjk_without_tokenizer",
            "stale_index",
            "delete_journal",
            "missing_new_columns",
        }
    )


def test_basic_facts(shape: tuple[str, Path], tmp_path: Path) -> None:
    name, path = shape
    facts = hs.EXPECTED[name]
    assert path == tmp_path / "hermes" / "state.db" and path.is_file()
    with opened(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == facts.journal_mode
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [
            (facts.schema_version,)
        ]
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == facts.total_messages
        ids = {row[0] for row in conn.execute("SELECT id FROM sessions")}
        assert ids == set(hs.SESSION_IDS)
        counted = conn.execute("SELECT sum(message_count) FROM sessions").fetchone()[0]
        assert counted == facts.total_messages
        assert "idx_sessions_title_unique" in objects(conn, "index")
    assert 36 <= facts.total_messages <= 50


def test_visible_messages(shape: tuple[str, Path]) -> None:
    name, path = shape
    with opened(path) as conn:
        cols = columns(conn, "messages")
        where = "1"
        if "active" in cols:
            where = "(active = 1 OR compacted = 1) AND COALESCE(display_kind, '') <> 'hidden'"
        visible = conn.execute(f"SELECT count(*) FROM messages WHERE {where}").fetchone()[0]
    assert visible == hs.visible_message_count(name)


def test_unique_word_matches_one_message(shape: tuple[str, Path]) -> None:
    _, path = shape
    with opened(path) as conn:
        assert fts_hits(conn, "messages_fts", hs.UNIQUE_WORD) == [hs.S_ROOT]
        assert like_count(conn, hs.UNIQUE_WORD) == 1


def test_fts_layout_and_rowids(shape: tuple[str, Path]) -> None:
    name, path = shape
    facts = hs.EXPECTED[name]
    with opened(path) as conn:
        ddl = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'messages_fts'"
        ).fetchone()[0]
        views = objects(conn, "view")
        message_ids = {row[0] for row in conn.execute("SELECT id FROM messages")}
        fts_ids = {row[0] for row in conn.execute("SELECT rowid FROM messages_fts")}
        assert fts_ids <= message_ids
        if facts.fts_layout == "external_views":
            assert "tool_name" in ddl and "content='messages_fts_src'" in ddl
            assert "messages_fts_src" in views
            assert columns(conn, "messages_fts") == ["content", "tool_name", "tool_calls"]
        else:
            assert "tool_name" not in ddl and not views
            assert columns(conn, "messages_fts") == ["content"]
            assert fts_ids == message_ids
            if facts.fts_layout == "external_messages":
                assert "content='messages'" in ddl
            else:  # inline: the index stores content || tool_name || tool_calls itself
                assert "content=" not in ddl
                stored = conn.execute(
                    "SELECT f.content FROM messages_fts f JOIN messages m ON m.id = f.rowid "
                    "WHERE m.tool_name = 'patch'"
                ).fetchone()[0]
                assert " patch " in stored


def test_tool_call_word(shape: tuple[str, Path]) -> None:
    name, path = shape
    with opened(path) as conn:
        hits = fts_hits(conn, "messages_fts", hs.TOOL_CALL_WORD)
        in_content = like_count(conn, hs.TOOL_CALL_WORD)
    assert in_content == 0  # only in tool_calls JSON
    if hs.EXPECTED[name].fts_layout == "external_messages":
        assert hits == []  # v1..v10 indexed content only
    else:
        assert hits == [hs.S_ROOT]


def test_trigram(shape: tuple[str, Path]) -> None:
    name, path = shape
    facts = hs.EXPECTED[name]
    with opened(path) as conn:
        tables = objects(conn, "table")
        if not facts.has_trigram:
            assert "messages_fts_trigram" not in tables
            assert "messages_fts_trigram_src" not in objects(conn, "view")
            return
        phrase = f'"{hs.CJK_PHRASE}"'
        assert fts_hits(conn, "messages_fts_trigram", phrase) == [hs.S_TELEGRAM]
        # Two CJK characters are below the trigram minimum: only LIKE finds them.
        assert fts_hits(conn, "messages_fts_trigram", f'"{hs.CJK_SHORT}"') == []
        assert like_count(conn, hs.CJK_SHORT) >= 3
        cron = fts_hits(conn, "messages_fts_trigram", hs.CRON_WORD)
        tool_rows = fts_hits(conn, "messages_fts_trigram", '"exit_code"')
        if facts.fts_layout == "external_views":
            assert "messages_fts_trigram_src" in objects(conn, "view")
            assert cron == [] and tool_rows == []  # cron sessions and tool rows skipped
            subagent = conn.execute(
                "SELECT count(*) FROM messages_fts_trigram_src t JOIN messages m ON m.id = t.id "
                "WHERE m.session_id = ?",
                (hs.S_SUBAGENT,),
            ).fetchone()[0]
            assert subagent == 0
        else:
            assert cron == [hs.S_CRON, hs.S_CRON] and tool_rows


def test_state_meta(shape: tuple[str, Path]) -> None:
    name, path = shape
    facts = hs.EXPECTED[name]
    with opened(path) as conn:
        if "state_meta" not in objects(conn, "table"):
            assert name == "seed_external"
            return
        meta = dict(conn.execute("SELECT key, value FROM state_meta"))
    if facts.fts_layout == "external_views":
        assert meta["fts_storage_version"] == str(hs.FTS_STORAGE_VERSION)
    else:
        assert "fts_storage_version" not in meta
    assert (meta.get("fts_stale") == "1") is facts.fts_stale


NEW_SESSION_COLUMNS = (
    "title_source",
    "archived",
    "pinned",
    "hidden",
    "last_activity_at",
    "api_call_count",
    "profile_name",
)
NEW_MESSAGE_COLUMNS = ("active", "compacted", "display_kind")
CORE_SESSION_COLUMNS = (
    "id",
    "source",
    "user_id",
    "model",
    "model_config",
    "system_prompt",
    "parent_session_id",
    "started_at",
    "ended_at",
    "end_reason",
    "message_count",
    "tool_call_count",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "billing_provider",
    "billing_base_url",
    "billing_mode",
    "estimated_cost_usd",
    "actual_cost_usd",
    "cost_status",
    "cost_source",
    "pricing_version",
    "title",
)


def test_columns(shape: tuple[str, Path]) -> None:
    name, path = shape
    modern = hs.EXPECTED[name].modern
    with opened(path) as conn:
        session_cols, message_cols = columns(conn, "sessions"), columns(conn, "messages")
        has_usage = "session_model_usage" in objects(conn, "table")
    assert set(CORE_SESSION_COLUMNS) <= set(session_cols)
    for col in NEW_SESSION_COLUMNS:
        assert (col in session_cols) is modern, col
    for col in NEW_MESSAGE_COLUMNS:
        assert (col in message_cols) is modern, col
    assert has_usage is modern
    if modern:
        assert len(session_cols) > 60


def test_old_file_column_order(tmp_path: Path) -> None:
    old = hs.build_missing_new_columns(tmp_path / "old" / "state.db")
    seed = hs.build_seed_inline(tmp_path / "seed" / "state.db")
    with opened(old) as conn:
        old_cols = columns(conn, "sessions")
        old_ddl = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'sessions'").fetchone()
    with opened(seed) as conn:
        seed_cols = columns(conn, "sessions")
    assert set(old_cols) == set(seed_cols)
    assert old_cols.index("title") < old_cols.index("cache_read_tokens")
    assert seed_cols.index("title") > seed_cols.index("cache_read_tokens")
    assert old_cols[-1] == "pricing_version" and seed_cols[-1] == "title"
    assert "title TEXT" in old_ddl[0]  # ALTER TABLE ADD COLUMN appends to the stored DDL


def test_lineage(shape: tuple[str, Path]) -> None:
    name, path = shape
    prefix = hs.EXPECTED[name].summary_prefix
    with opened(path) as conn:
        rows = conn.execute(
            "SELECT id, source, parent_session_id, started_at, ended_at, end_reason, "
            "model_config FROM sessions"
        )
        sessions = {row[0]: row[1:] for row in rows}
        for parent, child in zip(hs.COMPACTION_CHAIN, hs.COMPACTION_CHAIN[1:], strict=False):
            _, child_parent, child_start, *_ = sessions[child]
            _, _, _, parent_end, parent_reason, _ = sessions[parent]
            assert child_parent == parent and parent_reason == "compression"
            assert child_start >= parent_end
            first = conn.execute(
                "SELECT content FROM messages WHERE session_id = ? ORDER BY timestamp, id LIMIT 1",
                (child,),
            ).fetchone()[0]
            assert first.startswith(prefix)
    source, parent, start, _, _, config = sessions[hs.S_BRANCH]
    assert parent == hs.S_TELEGRAM and json.loads(config)["_branched_from"] == hs.S_TELEGRAM
    assert sessions[hs.S_TELEGRAM][4] == "branched" and start >= sessions[hs.S_TELEGRAM][3]
    source, parent, *_, config = sessions[hs.S_SUBAGENT]
    assert source == "subagent" and json.loads(config)["_delegate_from"] == parent == hs.S_CONT2
    assert {row[0] for row in sessions.values()} == {"cli", "telegram", "cron", "subagent"}


def test_structured_content_and_tool_calls(shape: tuple[str, Path]) -> None:
    _, path = shape
    with opened(path) as conn:
        contents = [row[0] for row in conn.execute("SELECT content FROM messages")]
        # Text functions stop at the NUL: LIKE and length() cannot see these rows, instr() can.
        assert like_count(conn, "screenshot") == 0
        assert (
            conn.execute(
                "SELECT count(*) FROM messages WHERE instr(content, 'screenshot') > 0"
            ).fetchone()[0]
            == 1
        )
        assert fts_hits(conn, "messages_fts", "screenshot") == [hs.S_TELEGRAM]
        calls = conn.execute(
            "SELECT tool_calls FROM messages WHERE role = 'assistant' AND tool_calls IS NOT NULL"
        ).fetchall()
        results = conn.execute(
            "SELECT tool_call_id, tool_name FROM messages WHERE role = 'tool'"
        ).fetchall()
    structured = [c for c in contents if c and c.startswith(hs.JSON_CONTENT_PREFIX)]
    assert structured == [hs.STRUCTURED_CONTENT]
    parts = json.loads(structured[0][len(hs.JSON_CONTENT_PREFIX) :])
    assert [part["type"] for part in parts] == ["text", "image_url"]
    call_ids = {}
    for (raw,) in calls:
        for call in json.loads(raw):
            assert call["type"] == "function"
            json.loads(call["function"]["arguments"])
            call_ids[call["id"]] = call["function"]["name"]
    assert results and all(call_ids[cid] == tool for cid, tool in results)


def test_costs(shape: tuple[str, Path]) -> None:
    name, path = shape
    with opened(path) as conn:
        rows = conn.execute(
            "SELECT cost_status, estimated_cost_usd, actual_cost_usd FROM sessions"
        ).fetchall()
        usage = None
        if hs.EXPECTED[name].modern:
            usage = conn.execute(
                "SELECT task, cost_status FROM session_model_usage WHERE session_id = ?",
                (hs.S_ROOT,),
            ).fetchall()
    assert {row[0] for row in rows} == {"actual", "estimated", "unknown"}
    for status, estimated, actual in rows:
        if status == "unknown":
            assert estimated is None and actual is None
        elif status == "actual":
            assert actual is not None
        else:
            assert estimated is not None and actual is None
    if usage is not None:
        assert sorted(usage) == [
            ("", "actual"),
            ("compression", "actual"),
            ("title_generation", "estimated"),
        ]


def test_visibility_rows(shape: tuple[str, Path]) -> None:
    name, path = shape
    with opened(path) as conn:
        modern = "active" in columns(conn, "messages")
        assert like_count(conn, hs.COMPACTED_WORD) == 1
        assert like_count(conn, hs.REWOUND_WORD) == like_count(conn, hs.HIDDEN_WORD) == int(modern)
        if not modern:
            return
        flags = "SELECT active, compacted, display_kind FROM messages WHERE content LIKE ?"
        assert conn.execute(flags, (f"%{hs.COMPACTED_WORD}%",)).fetchall() == [(0, 1, None)]
        assert conn.execute(flags, (f"%{hs.REWOUND_WORD}%",)).fetchall() == [(0, 0, None)]
        assert conn.execute(flags, (f"%{hs.HIDDEN_WORD}%",)).fetchall() == [(1, 0, "hidden")]
        compacted = conn.execute("SELECT count(*) FROM messages WHERE compacted = 1").fetchone()
    assert compacted[0] == 4


def test_current_views_leaves_wal_frames(tmp_path: Path) -> None:
    path = hs.build_current_views(tmp_path / "state.db")
    wal = path.with_name("state.db-wal")
    assert wal.is_file() and wal.stat().st_size > 32
    alone = tmp_path / "copy" / "state.db"
    alone.parent.mkdir()
    shutil.copyfile(path, alone)
    with opened(alone) as conn:
        assert like_count(conn, hs.WAL_WORD) == 0  # the main file alone lacks the tail
    with opened(path) as conn:  # read-only open replays the WAL, leaves it in place
        assert like_count(conn, hs.WAL_WORD) == 2
        assert fts_hits(conn, "messages_fts", hs.WAL_WORD) == [hs.S_BRANCH] * 2
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 46
    assert wal.is_file()
    with opened(path, readonly=False) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_cjk_table_without_tokenizer(tmp_path: Path) -> None:
    path = hs.build_cjk_without_tokenizer(tmp_path / "state.db")
    with opened(path) as conn:
        ddl = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'messages_fts_cjk'"
        ).fetchone()[0]
        assert "tokenize='cjk_unicode61'" in ddl and "messages_fts_cjk_src" in ddl
        with pytest.raises(sqlite3.OperationalError, match="no such tokenizer: cjk_unicode61"):
            conn.execute(
                "SELECT rowid FROM messages_fts_cjk WHERE messages_fts_cjk MATCH ?",
                (hs.CJK_SHORT,),
            ).fetchall()
        with pytest.raises(sqlite3.OperationalError, match="no such tokenizer"):
            conn.execute("SELECT count(*) FROM messages_fts_cjk").fetchall()
        # Everything else in the same file and connection still works.
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 46
        assert fts_hits(conn, "messages_fts", hs.UNIQUE_WORD) == [hs.S_ROOT]
        assert fts_hits(conn, "messages_fts_trigram", f'"{hs.CJK_PHRASE}"') == [hs.S_TELEGRAM]
        assert conn.execute("SELECT count(*) FROM messages_fts_cjk_src").fetchone()[0] > 0
    with opened(path, readonly=False) as conn:  # its sync triggers break writes on this host
        with pytest.raises(sqlite3.OperationalError, match="no such tokenizer"):
            conn.execute(
                "INSERT INTO messages (session_id, role, content, timestamp) "
                "VALUES (?, 'user', 'x', 0)",
                (hs.S_CRON,),
            )


def test_stale_index_misses_rows(tmp_path: Path) -> None:
    path = hs.build_stale_index(tmp_path / "state.db")
    with opened(path) as conn:
        triggers = objects(conn, "trigger")
        assert like_count(conn, hs.STALE_WORD) == 1
        assert fts_hits(conn, "messages_fts", hs.STALE_WORD) == []
        assert fts_hits(conn, "messages_fts_trigram", hs.STALE_WORD) == []
        assert fts_hits(conn, "messages_fts", hs.UNIQUE_WORD) == [hs.S_ROOT]
        indexed = conn.execute("SELECT count(*) FROM messages_fts").fetchone()[0]
    assert not any(name.startswith("messages_fts") for name in triggers)
    assert indexed == 48  # count(*) reads the content view, not the index: only MATCH is stale


def test_delete_journal_leaves_no_wal(tmp_path: Path) -> None:
    path = hs.build_delete_journal(tmp_path / "state.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.db"]
    with opened(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_wal_shapes_close_cleanly(shape: tuple[str, Path]) -> None:
    name, path = shape
    sidecars = sorted(p.name for p in path.parent.iterdir() if p.name != "state.db")
    expected = ["state.db-shm", "state.db-wal"] if hs.EXPECTED[name].wal_only else []
    assert sidecars == expected


@pytest.mark.parametrize("name", ["seed_inline", "current_views", "missing_new_columns"])
def test_deterministic_and_rebuildable(name: str, tmp_path: Path) -> None:
    def dump(path: Path) -> list[tuple[object, ...]]:
        with opened(path) as conn:
            return (
                conn.execute("SELECT * FROM messages ORDER BY id").fetchall()
                + conn.execute("SELECT * FROM sessions ORDER BY id").fetchall()
            )

    first = dump(hs.SHAPES[name](tmp_path / "a" / "state.db"))
    again = hs.SHAPES[name](tmp_path / "a" / "state.db")  # over an existing file
    assert dump(again) == first == dump(hs.SHAPES[name](tmp_path / "b" / "state.db"))


@pytest.mark.parametrize("form", hs.EPOCH_FORMS)
def test_the_epochs_home_holds_what_hermes_writes_when_it_compacts_in_place(
    form: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    facts = hs.build_epochs_home(home, form)
    with closing(sqlite3.connect(f"file:{facts.db}?mode=ro", uri=True)) as conn:
        rows = {
            r[0]: r[1:]
            for r in conn.execute(
                "SELECT id, role, content, active, compacted FROM messages WHERE session_id = ?",
                (hs.S_EPOCHS,),
            )
        }
        sessions = {
            r[0]: r[1:]
            for r in conn.execute(
                "SELECT id, parent_session_id, started_at, ended_at FROM sessions"
            )
        }
    epochs = facts.compactions[hs.S_EPOCHS]
    assert len(epochs) == 3 and len(facts.compactions[hs.S_ROTATED_TIP]) == 2
    for _, archived, written in epochs:
        # Each compaction archives every live row and writes a summary plus a copy of
        # the last two: the tail exists twice, once archived and once live.
        assert all(rows[i][2:] == (0, 1) for i in archived)
        assert hs.is_summary_text(rows[written[0]][1])
        assert [rows[i][:2] for i in written[1:]] == [rows[i][:2] for i in archived[-2:]]
    assert [rows[i][2:] for i in facts.rewound] == [(0, 0), (0, 0)]
    assert hs.EPOCH_REWOUND_WORD in rows[facts.rewound[0]][1]
    live = [rows[i][:2] for i in sorted(rows) if rows[i][2] == 1]
    assert live[0][1].startswith(hs.SUMMARY_PREFIX) and len(live) == 5
    # Every distinct message once: the archived rows with each re-inserted tail dropped.
    copies = {i for _, _, written in epochs for i in written[1:]}
    shown = [rows[i][:2] for i in sorted(rows) if i not in copies and i not in facts.rewound]
    assert shown == facts.distinct
    assert sessions[hs.S_ROTATED_TIP][0] == hs.S_ROTATED
    parent, child = sessions[hs.S_EARLY_PARENT], sessions[hs.S_EARLY_CHILD]
    assert child[0] == hs.S_EARLY_PARENT and parent[2] - child[1] == 3
    # The archive copies all of it, flags included (issue 16 reads the epochs there).
    path = archive_home(home)
    with SessionStore(path) as archive:
        assert_mirrors(archive, facts.db, home)


def test_the_profiles_home_is_three_homes_that_share_ids_but_no_words(tmp_path: Path) -> None:
    from dashboard.hermes.home import HermesHome

    facts = hs.build_profiles_home(tmp_path / "home")
    home = HermesHome(facts.root)
    assert set(home.profiles()) == {"legacy", "empty"}  # the root is the default profile
    assert home.state_db == facts.dbs["default"]
    said: dict[str, set[str]] = {}
    for name, db in facts.dbs.items():
        with closing(sqlite3.connect(db)) as conn:
            text = " ".join(r[0] or "" for r in conn.execute("SELECT content FROM messages"))
            ids = {r[0] for r in conn.execute("SELECT id FROM sessions")}
        said[name] = {p for p, w in hs.PROFILE_WORDS.items() if w in text}
        if name == "empty":
            assert ids == set() and text == ""
        else:
            assert set(facts.shared_ids) <= ids
    assert said == {"default": {"default"}, "legacy": {"legacy"}, "empty": set()}
    # Each profile keeps its own memory files.
    homes = {"default": home, **home.profiles()}
    users = {name: h.user_md.read_text(encoding="utf-8") for name, h in homes.items()}
    assert len(set(users.values())) == 3 and "legacy" in users["legacy"]
