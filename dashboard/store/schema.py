"""Recall's own Hermes-compatible ``state.db`` schema and its numbered migrations.

The tables are the seed's final (v11) form, so Hermes tooling and Recall's
read-only opener see a familiar file. One deliberate difference: both FTS5
indexes are *external content* over ``messages`` with three columns (content,
tool_name, tool_calls) rather than inline copies. Measured (PERF_NOTES, and
``bench/fts_layout_size.py`` here): inline dual indexes store the text twice more
(+480 MB per index at 1M messages) for the same query speed, and external content
is what makes the bulk path's ``rebuild`` possible (it re-reads ``messages``).
The price is the delete rule: the triggers remove old rows with FTS5's
``'delete'`` command and the old values, never a plain DELETE.

Recall's own version lives in ``state_meta('recall_schema_version')``; the Hermes
``schema_version`` table says 11, the seed form this file follows.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dashboard.store.writecore import WriteCore
from dashboard.text import CJK_RANGES

HERMES_SCHEMA_VERSION = 11
VERSION_KEY = "recall_schema_version"
#: state_meta keys: the trigram index is still to be built (a first import); a demo home.
TRIGRAM_PENDING_KEY = "fts_trigram_pending"
DEMO_KEY = "recall_demo_seed"
#: state_meta key: how many write transactions the store has committed. Every write of
#: a SessionStore bumps it in the same transaction, so a reader's cache (lineage.py)
#: sees any change, in place or not, from one row read in its own snapshot (PRAGMA
#: data_version answers only on one long-lived connection; pages open one per request).
WRITES_KEY = "recall_writes"
#: state_meta key: bumped when rows got their ``message_uid`` after they landed (an
#: archive older than migration 7 taking them, archive/copies.py), which changes what
#: is a copy without adding a row: caches of derived epochs compare it too.
IDENTITY_KEY = "recall_identity_generation"
FTS_TABLES = ("messages_fts", "messages_fts_trigram")
FTS_COLUMNS = ("content", "tool_name", "tool_calls")

_SESSIONS = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    user_id TEXT,
    model TEXT,
    model_config TEXT,
    system_prompt TEXT,
    parent_session_id TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0,
    cache_read_tokens INTEGER DEFAULT 0,
    cache_write_tokens INTEGER DEFAULT 0,
    reasoning_tokens INTEGER DEFAULT 0,
    billing_provider TEXT,
    billing_base_url TEXT,
    billing_mode TEXT,
    estimated_cost_usd REAL,
    actual_cost_usd REAL,
    cost_status TEXT,
    cost_source TEXT,
    pricing_version TEXT,
    title TEXT,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)
)"""

_MESSAGES = """
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_calls TEXT,
    tool_name TEXT,
    timestamp REAL NOT NULL,
    token_count INTEGER,
    finish_reason TEXT,
    reasoning TEXT,
    reasoning_content TEXT,
    reasoning_details TEXT,
    codex_reasoning_items TEXT,
    codex_message_items TEXT
)"""


def fts_table_sql(table: str) -> str:
    """The CREATE statement of one external-content FTS5 index over ``messages``."""
    tokenize = ", tokenize='trigram'" if table.endswith("_trigram") else ""
    cols = ", ".join(FTS_COLUMNS)
    return (
        f"CREATE VIRTUAL TABLE {table} USING fts5({cols}, "
        f"content='messages', content_rowid='id'{tokenize})"
    )


def fts_trigger_sql() -> list[str]:
    """Insert/delete/update triggers keeping both indexes in step with ``messages``."""
    cols = ", ".join(FTS_COLUMNS)
    new = ", ".join(f"new.{c}" for c in FTS_COLUMNS)
    old = ", ".join(f"old.{c}" for c in FTS_COLUMNS)
    insert = "".join(f"INSERT INTO {t}(rowid, {cols}) VALUES (new.id, {new});" for t in FTS_TABLES)
    # External content: the FTS5 'delete' command with the *old* values. A plain
    # DELETE leaves stale terms behind and integrity-check reports corruption.
    delete = "".join(
        f"INSERT INTO {t}({t}, rowid, {cols}) VALUES ('delete', old.id, {old});" for t in FTS_TABLES
    )
    return [
        f"CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN {insert} END",
        f"CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN {delete} END",
        f"CREATE TRIGGER messages_fts_update AFTER UPDATE OF {cols} ON messages "
        f"BEGIN {delete}{insert} END",
    ]


FTS_TRIGGERS = ("messages_fts_insert", "messages_fts_delete", "messages_fts_update")


def _v1_seed_form(conn: sqlite3.Connection) -> None:
    """The seed's v11 tables, indexes, FTS5 indexes and triggers."""
    for sql in (
        _SESSIONS,
        _MESSAGES,
        "CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT)",
        "CREATE TABLE schema_version (version INTEGER NOT NULL)",
        "CREATE INDEX idx_sessions_source ON sessions(source)",
        "CREATE INDEX idx_sessions_parent ON sessions(parent_session_id)",
        "CREATE INDEX idx_sessions_started ON sessions(started_at DESC)",
        "CREATE UNIQUE INDEX idx_sessions_title_unique ON sessions(title) WHERE title IS NOT NULL",
        "CREATE INDEX idx_messages_session ON messages(session_id, timestamp)",
        *(fts_table_sql(t) for t in FTS_TABLES),
        *fts_trigger_sql(),
    ):
        conn.execute(sql)
    conn.execute("INSERT INTO schema_version(version) VALUES (?)", (HERMES_SCHEMA_VERSION,))


def _v2_usage_and_activity(conn: sqlite3.Connection) -> None:
    """Per-model/task usage rows and the activity columns newer Hermes files carry."""
    conn.execute(
        """
        CREATE TABLE session_model_usage (
            session_id TEXT NOT NULL REFERENCES sessions(id),
            model TEXT NOT NULL DEFAULT '',
            billing_provider TEXT NOT NULL DEFAULT '',
            billing_base_url TEXT NOT NULL DEFAULT '',
            billing_mode TEXT NOT NULL DEFAULT '',
            task TEXT NOT NULL DEFAULT '',
            api_call_count INTEGER NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cache_read_tokens INTEGER NOT NULL DEFAULT 0,
            cache_write_tokens INTEGER NOT NULL DEFAULT 0,
            reasoning_tokens INTEGER NOT NULL DEFAULT 0,
            estimated_cost_usd REAL,
            actual_cost_usd REAL,
            cost_status TEXT,
            cost_source TEXT,
            pricing_version TEXT,
            first_seen REAL,
            last_seen REAL,
            PRIMARY KEY (session_id, model, billing_provider, billing_base_url,
                         billing_mode, task)
        )"""
    )
    conn.execute("ALTER TABLE sessions ADD COLUMN last_activity_at REAL")
    conn.execute("ALTER TABLE sessions ADD COLUMN api_call_count INTEGER DEFAULT 0")
    conn.execute(
        "UPDATE sessions SET last_activity_at = coalesce("
        "(SELECT max(timestamp) FROM messages m WHERE m.session_id = sessions.id),"
        " started_at)"
    )
    conn.execute("CREATE INDEX idx_usage_last_seen ON session_model_usage(last_seen)")


#: Provenance columns every archived row carries (issue 15): the source home it was
#: read from, its id there, when the archive first saw it, when the source lost it.
#: ``src_id`` prefix of a usage row the importer derived from a session row (a source
#: without ``session_model_usage``): it sums the whole session, as that row did.
DERIVED_USAGE_PREFIX = "sessions:"


def _v3_archive_columns(conn: sqlite3.Connection) -> None:
    """What today's Hermes records and the archive keeps: flags, context, provenance.

    Defaults say what an older row meant: live, not compacted, not archived.
    """
    for sql in (
        "ALTER TABLE messages ADD COLUMN active INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE messages ADD COLUMN compacted INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE messages ADD COLUMN display_kind TEXT",
        "ALTER TABLE sessions ADD COLUMN archived INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE sessions ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE sessions ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE sessions ADD COLUMN title_source TEXT",
        "ALTER TABLE sessions ADD COLUMN cwd TEXT",
        "ALTER TABLE sessions ADD COLUMN git_branch TEXT",
        "ALTER TABLE sessions ADD COLUMN profile TEXT",
    ):
        conn.execute(sql)
    for table in ("sessions", "messages", "session_model_usage"):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN src_home TEXT")
        conn.execute(f"ALTER TABLE {table} ADD COLUMN src_id TEXT")
        conn.execute(f"ALTER TABLE {table} ADD COLUMN archive_first_seen REAL")
        conn.execute(f"ALTER TABLE {table} ADD COLUMN gone_from_source_at REAL")
    # A source row is archived once: its (home, id) is the key an import upserts on.
    conn.execute(
        "CREATE UNIQUE INDEX idx_messages_source_row ON messages(src_home, src_id) "
        "WHERE src_id IS NOT NULL"
    )


def _v4_session_digest(conn: sqlite3.Connection) -> None:
    """A digest of each archived session's source row, so a later sync finds the
    sessions that changed by reading the source's sessions table once.

    The index covers what that sync reads of every session: without it each row's
    tail columns sit behind its system prompt (kilobytes, in overflow pages).
    """
    conn.execute("ALTER TABLE sessions ADD COLUMN src_digest TEXT")
    conn.execute(
        "CREATE INDEX idx_sessions_source_row"
        " ON sessions(src_home, src_id, src_digest, gone_from_source_at)"
    )


def _v5_compacted_index(conn: sqlite3.Connection) -> None:
    """Which sessions compacted in place, without a pass over every message (the
    chains index asks after each write): a partial index of the rows a compaction
    archived, nothing for the others."""
    conn.execute("CREATE INDEX idx_messages_compacted ON messages(session_id) WHERE compacted = 1")


def _v6_profile_index(conn: sqlite3.Connection) -> None:
    """Which sessions are one profile's (profiles.py: a scoped reader's views ask it on
    every statement)."""
    # With the id: the scope's ids come from the index alone (a row's profile sits
    # behind its system prompt, in overflow pages).
    conn.execute("CREATE INDEX idx_sessions_profile ON sessions(profile, id)")


def _v7_message_identity(conn: sqlite3.Connection) -> None:
    """Schema 31's message identity (HERMES_FACTS, "Hermes v31"): ``message_uid`` (a
    re-inserted copy keeps its original's), ``compressed_summary`` (the source's
    ``_compressed_summary``: a summary merged into a retained row), and ``repeats``,
    which Recall derives on import (archive/copies.py): the row a re-inserted copy
    repeats, in its session. NULL for every row of an older source: today's rules hold.
    """
    for sql in (
        "ALTER TABLE messages ADD COLUMN message_uid TEXT",
        "ALTER TABLE messages ADD COLUMN compressed_summary INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE messages ADD COLUMN repeats INTEGER",
        # Finding a row's copies (and a copy's original) is one seek in its session.
        "CREATE INDEX idx_messages_uid ON messages(session_id, message_uid)"
        " WHERE message_uid IS NOT NULL",
    ):
        conn.execute(sql)


#: The rows the visible-row rule may leave out (conventions.visible_sql): re-inserted
#: copies, rows flagged like a rewind, hidden rows. A partial index of them lets the
#: overview count visible messages as every message less these few, not by reading every
#: row's flags (past its text, in overflow pages: 0.4–0.7 s at 1M messages).
UNSHOWN_ROWS = (
    "(repeats IS NOT NULL OR (active = 0 AND compacted = 0)"
    " OR coalesce(display_kind, '') = 'hidden')"
)
#: Rows Hermes no longer has (store/presence.py), counted the same way.
GONE_ROWS = "gone_from_source_at IS NOT NULL"
#: Rows that name a tool (a call's result). The overview's top tools count them from a
#: partial index of (session, tool) alone: the tool's name sits behind the row's text.
TOOL_ROWS = "tool_name IS NOT NULL AND tool_name != ''"


def _v8_count_indexes(conn: sqlite3.Connection) -> None:
    """Partial indexes of the few rows the overview counts apart (see UNSHOWN_ROWS)."""
    conn.execute(f"CREATE INDEX idx_messages_unshown ON messages(session_id) WHERE {UNSHOWN_ROWS}")
    conn.execute(f"CREATE INDEX idx_messages_gone ON messages(session_id) WHERE {GONE_ROWS}")


def _v9_session_names(conn: sqlite3.Connection) -> None:
    """What a search reads of every session to match names (title, id, source, start)
    and the recent browse (roots by start), apart from the rows' system prompts: a scan
    of this index, not of the table."""
    conn.execute(
        "CREATE INDEX idx_sessions_names"
        " ON sessions(started_at DESC, title, source, id, parent_session_id)"
    )


def _v10_tool_index(conn: sqlite3.Connection) -> None:
    """The tool rows of each session by name (see TOOL_ROWS), for the overview's top tools."""
    conn.execute(
        f"CREATE INDEX idx_messages_tools ON messages(session_id, tool_name) WHERE {TOOL_ROWS}"
    )


#: Each session's in-place compaction count, kept so the chains index need not derive
#: every compacted session's epochs from all its rows (~3 s at 1M messages). The rule is
#: lineage/epochs.py's, above the store, which writes the counts
#: (``keep_in_place_counts``); the store only forgets them: these triggers delete a
#: session's count in the transaction that writes any of its rows or its parent link,
#: so a count kept is the rule's for the rows as they are, or is missing (then derived).
COMPACTIONS_TABLE = "session_compactions"
COUNT_TRIGGERS = (
    "session_compactions_row_insert",
    "session_compactions_row_update",
    "session_compactions_row_delete",
    "session_compactions_session_update",
    "session_compactions_session_delete",
)


def _v11_compaction_counts(conn: sqlite3.Connection) -> None:
    """A table of kept in-place compaction counts, forgotten by any write to a session
    (see COMPACTIONS_TABLE); empty at first: counts are derived until kept."""
    forget = f"DELETE FROM {COMPACTIONS_TABLE} WHERE session_id"
    insert, update, delete, session_update, session_delete = COUNT_TRIGGERS
    for sql in (
        f"CREATE TABLE {COMPACTIONS_TABLE} (session_id TEXT PRIMARY KEY,"
        " compactions INTEGER NOT NULL) WITHOUT ROWID",
        f"CREATE TRIGGER {insert} AFTER INSERT ON messages BEGIN {forget} = new.session_id; END",
        # Any column: flags, content, uids, order and provenance all feed the rule.
        f"CREATE TRIGGER {update} AFTER UPDATE ON messages"
        f" BEGIN {forget} IN (old.session_id, new.session_id); END",
        f"CREATE TRIGGER {delete} AFTER DELETE ON messages BEGIN {forget} = old.session_id; END",
        # A child's first summary may be its opening one (epochs._opens_child).
        f"CREATE TRIGGER {session_update} AFTER UPDATE OF id, parent_session_id ON sessions"
        f" BEGIN {forget} IN (old.id, new.id); END",
        f"CREATE TRIGGER {session_delete} AFTER DELETE ON sessions BEGIN {forget} = old.id; END",
    ):
        conn.execute(sql)


#: A message's last two characters: the key of :data:`CJK_TAIL_INDEX`. A two-character
#: CJK term is in a text either as the start of a three-character piece of the trigram
#: index or at the text's very end, where no piece starts with it (search/pairs.py).
PAIR_TAIL = "substr(content, -2)"
#: Rows whose content ends in a CJK character (text.CJK_RANGES): the rows that index holds.
CJK_TAIL_ROWS = (
    "("
    + " OR ".join(f"unicode(substr(content, -1)) BETWEEN {a} AND {b}" for a, b in CJK_RANGES)
    + ")"
)
CJK_TAIL_INDEX = "idx_messages_cjk_tail"
#: Rows whose content is structured (led by a NUL: hermes/content.py). SQLite's text
#: functions stop at the NUL, and so does the trigram tokenizer: none of their text is in
#: that index. Compared as bytes, they sort between char(0) and char(1) ('' sorts below).
STRUCTURED_ROWS = "(content >= char(0) AND content < char(1))"


def _v12_short_term_indexes(conn: sqlite3.Connection) -> None:
    """What the trigram index cannot say about a two-character term: the rows ending in
    CJK by their last two characters, and the structured rows (a few in any home)."""
    conn.execute(f"CREATE INDEX {CJK_TAIL_INDEX} ON messages({PAIR_TAIL}) WHERE {CJK_TAIL_ROWS}")
    conn.execute(
        f"CREATE INDEX idx_messages_structured ON messages(session_id) WHERE {STRUCTURED_ROWS}"
    )


#: The meaning index (meaning/builder.py): a message's vector as sign bits, in the order
#: they were written (``seq``: a reader takes in the rows past the last it read).
MEANING_TABLE = "message_meaning"
#: Messages whose vector a change of their text threw away, to embed again.
MEANING_REDO = "meaning_redo"
#: state_meta keys of the meaning index: the embedder its vectors come from; the ids
#: considered so far, ``[floor, top]`` (a first build walks down from the newest, new
#: rows extend it upwards); how many rows were considered; bumped whenever a vector is
#: deleted, so a reader holding vectors in memory reads them all again.
MEANING_MODEL_KEY = "meaning_model"
MEANING_FLOOR_KEY = "meaning_floor"
MEANING_TOP_KEY = "meaning_top"
MEANING_DONE_KEY = "meaning_considered"
MEANING_GENERATION_KEY = "meaning_generation"
#: Each titled session's title as embedded, and its vector (float16): titles are few
#: (one a session) and say what a whole conversation was about.
TITLE_MEANING_TABLE = "session_meaning"
#: state_meta key bumped by every write of title vectors (readers read them all again).
TITLE_GENERATION_KEY = "meaning_titles_generation"
MEANING_TRIGGERS = ("meaning_message_delete", "meaning_message_text", "meaning_vector_delete")


def _v13_meaning_index(conn: sqlite3.Connection) -> None:
    """An empty meaning index, kept in step with the rows it describes by triggers: a
    deleted message loses its vector; one whose text changed loses it and is queued to
    be embedded again. Its deletions bump a generation a reader checks."""
    for sql in (
        f"CREATE TABLE {MEANING_TABLE} (seq INTEGER PRIMARY KEY,"
        " message_id INTEGER NOT NULL UNIQUE, code BLOB NOT NULL)",
        f"CREATE TABLE {MEANING_REDO} (message_id INTEGER PRIMARY KEY)",
        f"CREATE TRIGGER {MEANING_TRIGGERS[0]} AFTER DELETE ON messages BEGIN"
        f" DELETE FROM {MEANING_TABLE} WHERE message_id = old.id;"
        f" DELETE FROM {MEANING_REDO} WHERE message_id = old.id; END",
        f"CREATE TRIGGER {MEANING_TRIGGERS[1]} AFTER UPDATE OF content, tool_calls ON messages"
        " WHEN old.content IS NOT new.content OR old.tool_calls IS NOT new.tool_calls BEGIN"
        f" INSERT OR IGNORE INTO {MEANING_REDO} VALUES (old.id);"
        f" DELETE FROM {MEANING_TABLE} WHERE message_id = old.id; END",
        f"CREATE TRIGGER {MEANING_TRIGGERS[2]} AFTER DELETE ON {MEANING_TABLE} BEGIN"
        f" INSERT INTO state_meta(key, value) VALUES ('{MEANING_GENERATION_KEY}', 1)"
        " ON CONFLICT(key) DO UPDATE SET value = value + 1; END",
    ):
        conn.execute(sql)


def _v14_title_meaning(conn: sqlite3.Connection) -> None:
    """Title vectors, kept by the builder (it compares each title with the one embedded)."""
    conn.execute(
        f"CREATE TABLE {TITLE_MEANING_TABLE} (session_id TEXT PRIMARY KEY, title TEXT NOT NULL,"
        " vector BLOB NOT NULL) WITHOUT ROWID"
    )


#: The model calls Hermes logged in ``logs/agent.log`` (hermes/agent_log.py), kept
#: because the log rotates away (archive/call_log.py): one row a call, its tokens, so a
#: price that depends on one call's size (a long-context tier) can be applied.
#: ``session_id`` is the archive's id of the session the line's tag names (NULL for an
#: untagged line), with no foreign key: a call may be read before its session is
#: imported, and outlives its session in Hermes as every archived row does.
CALLS_TABLE = "logged_calls"
#: How far each log file was read: per home and file identity (device, inode, which a
#: rotation's rename keeps), the offset after the last whole line and a digest of the
#: file's first bytes (a new file that took a deleted one's inode is read from 0).
CALL_FILES_TABLE = "logged_call_files"


def _v15_logged_calls(conn: sqlite3.Connection) -> None:
    """Empty tables of logged calls and of how far each log file was read."""
    for sql in (
        f"CREATE TABLE {CALLS_TABLE} (id INTEGER PRIMARY KEY, src_home TEXT NOT NULL,"
        " session_id TEXT, number INTEGER NOT NULL, at REAL NOT NULL, model TEXT NOT NULL,"
        " provider TEXT NOT NULL, prompt_tokens INTEGER, output_tokens INTEGER,"
        " cache_read_tokens INTEGER NOT NULL DEFAULT 0,"
        " cache_write_tokens INTEGER NOT NULL DEFAULT 0, archive_first_seen REAL)",
        # One call, however often its line is read: Hermes numbers calls per turn, so
        # the line's time (to the millisecond) is part of what names it.
        f"CREATE UNIQUE INDEX idx_logged_calls_line ON {CALLS_TABLE}"
        " (src_home, ifnull(session_id, ''), at, number)",
        # The repricer's read: the calls of these sessions, by model.
        f"CREATE INDEX idx_logged_calls_session ON {CALLS_TABLE}(session_id, model)"
        " WHERE session_id IS NOT NULL",
        f"CREATE TABLE {CALL_FILES_TABLE} (src_home TEXT NOT NULL, device INTEGER NOT NULL,"
        " inode INTEGER NOT NULL, offset INTEGER NOT NULL, head TEXT NOT NULL, path TEXT,"
        " read_at REAL, PRIMARY KEY (src_home, device, inode)) WITHOUT ROWID",
    ):
        conn.execute(sql)


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    apply: Callable[[sqlite3.Connection], None]
    # False for a migration that only adds indexes (or columns with a default, which
    # SQLite adds without rewriting a row): nothing to lose, so no backup
    # (of an archive that may be gigabytes) before it.
    changes_rows: bool = True


MIGRATIONS: Sequence[Migration] = (
    Migration(1, "seed v11 form", _v1_seed_form),
    Migration(2, "session_model_usage and activity columns", _v2_usage_and_activity),
    Migration(3, "archive: message flags, session context, provenance", _v3_archive_columns),
    Migration(4, "archive: a digest of each session's source row", _v4_session_digest),
    Migration(
        5,
        "archive: an index of the rows in-place compaction archived",
        _v5_compacted_index,
        changes_rows=False,
    ),
    Migration(6, "archive: sessions by profile", _v6_profile_index, changes_rows=False),
    # Columns with defaults and an index: SQLite rewrites no row, so nothing to back up.
    Migration(
        7,
        "archive: message identity (message_uid, merged summaries)",
        _v7_message_identity,
        changes_rows=False,
    ),
    Migration(8, "archive: counts of unshown and gone rows", _v8_count_indexes, changes_rows=False),
    Migration(9, "sessions: names and starts apart", _v9_session_names, changes_rows=False),
    Migration(10, "archive: tool rows by session and name", _v10_tool_index, changes_rows=False),
    # A new table and triggers, empty: no row changes.
    Migration(
        11,
        "archive: kept in-place compaction counts",
        _v11_compaction_counts,
        changes_rows=False,
    ),
    Migration(
        12,
        "search: rows ending in CJK, structured rows",
        _v12_short_term_indexes,
        changes_rows=False,
    ),
    Migration(13, "search: the meaning index", _v13_meaning_index, changes_rows=False),
    Migration(14, "search: the meaning of titles", _v14_title_meaning, changes_rows=False),
    Migration(15, "archive: the calls agent.log logged", _v15_logged_calls, changes_rows=False),
)
LATEST_VERSION = MIGRATIONS[-1].version


def current_version(conn: sqlite3.Connection) -> int:
    """Recall's schema version of an open file; 0 for an empty one."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='state_meta'"
    ).fetchone()
    if not has_meta:
        return 0
    row = conn.execute("SELECT value FROM state_meta WHERE key=?", (VERSION_KEY,)).fetchone()
    return int(row[0]) if row else 0


def migrate(
    core: WriteCore, target: int | None = None, migrations: Sequence[Migration] = MIGRATIONS
) -> list[int]:
    """Bring ``core``'s file up to ``target`` (default: the last of ``migrations``).

    The file is backed up first when it already held a Recall schema and a pending
    migration changes rows (one that only adds an index does not). Each
    migration runs in its own write transaction together with the version bump
    (kept in ``state_meta``, which every Recall file's first migration creates),
    so a crash leaves the file at a whole version. Returns the versions applied.
    """
    latest = migrations[-1].version
    target = latest if target is None else target
    start = current_version(core.conn)
    if start > latest:
        raise RuntimeError(f"{core.path} was written by a newer Recall (schema {start} > {latest})")
    pending = [m for m in migrations if start < m.version <= target]
    if start > 0 and any(m.changes_rows for m in pending):
        backup_before_migration(core, start)
    if start == 0 and pending:
        # A new file is made whole in one transaction: a reader opening it meanwhile
        # (a page during a first import) never sees it half-way at an older version.
        def create(conn: sqlite3.Connection) -> None:
            for m in pending:
                m.apply(conn)
            _set_version(conn, pending[-1].version)

        core.write(create)
        return [m.version for m in pending]
    for migration in pending:

        def step(conn: sqlite3.Connection, m: Migration = migration) -> None:
            m.apply(conn)
            _set_version(conn, m.version)

        core.write(step)
    return [m.version for m in pending]


def _set_version(conn: sqlite3.Connection, version: int) -> None:
    """Record Recall's schema version inside the migration's own transaction."""
    conn.execute(
        "INSERT INTO state_meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
        (VERSION_KEY, str(version)),
    )


def backup_before_migration(core: WriteCore, version: int) -> Path:
    """Copy the file (through SQLite's online backup, so the WAL is included)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = core.path.with_name(f"{core.path.name}.v{version}-{stamp}.bak")
    dest = sqlite3.connect(target)
    try:
        core.conn.backup(dest)
    finally:
        dest.close()
    target.chmod(0o600)
    return target
