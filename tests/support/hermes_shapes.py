"""Builders for real on-disk Hermes ``state.db`` files in every shape found in the wild.

Each ``build_*`` function writes a fresh SQLite file at ``path`` (creating parent
directories, replacing any file already there), fills it with the same small
deterministic dataset and closes every connection. Recall's read-only opener is
tested against these files; nothing here imports Recall.

Where the DDL comes from
------------------------
* Current form (schema v23+, FTS storage layout 3): ``SCHEMA_SQL``, ``FTS_SQL`` and
  ``FTS_TRIGRAM_SQL`` in ``hermes_state_common.py`` of NousResearch/hermes-agent
  (that stored version declares ``SCHEMA_VERSION = 30``, ``FTS_STORAGE_VERSION = 3``);
  the optional CJK index from the same project's ``FTS_CJK_TABLE_SQL``.
* Legacy inline form (v11..v22): ``LEGACY_FTS_SQL`` / ``LEGACY_FTS_TRIGRAM_SQL`` in the
  same file, with the broad ``AFTER UPDATE ON messages`` triggers of that era.
* Older external-content form (v1..v10) and the v2..v6 ``ALTER TABLE`` migrations:
  the early ``hermes_state.py`` and the seed articles.

The DDL below is written here in the same shape (same names, column order, view
bodies and trigger logic); Hermes' column lists are facts, not copied code.

How each file is left on disk
-----------------------------
Every builder closes its connection normally, so WAL files are checkpointed and
removed, except :func:`build_current_views`: its last two messages are written by a
child Python process that commits with ``wal_autocheckpoint=0`` and then leaves via
``os._exit`` without closing SQLite (what a crash or a kill -9 of a live Hermes
gateway leaves behind). The result is ``state.db`` + ``state.db-wal`` (with
committed, un-checkpointed frames) + ``state.db-shm``. Any normal or ``mode=ro``
open sees every row; a copy of ``state.db`` alone, or an ``immutable=1`` open, does
not see :data:`WAL_WORD`. A read-write open that is the last to close will
checkpoint and delete the WAL, so tests should build a fresh file each time.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.support import agent_logs as al

# ---------------------------------------------------------------------------
# Distinctive words for search tests
# ---------------------------------------------------------------------------

#: Appears in exactly one message (a visible user message of :data:`S_ROOT`).
UNIQUE_WORD = "zanzibarite"
#: Appears only inside one assistant message's ``tool_calls`` JSON arguments.
TOOL_CALL_WORD = "pgbouncer"
#: Seven-character CJK phrase in exactly one (in-place compacted, still visible) message.
CJK_PHRASE = "数据库连接池配置"
#: Two-character CJK term: too short for trigram MATCH, found only by LIKE (or cjk).
CJK_SHORT = "部署"
#: Only in an in-place compacted row (active=0, compacted=1): visible, searchable.
COMPACTED_WORD = "xylograph"
#: Only in a rewound row (active=0, compacted=0): never visible. Current forms only.
REWOUND_WORD = "tamarillo"
#: Only in the display_kind='hidden' in-place summary row. Current forms only.
HIDDEN_WORD = "hiddenhandoff"
#: Only in rows written after the FTS index went stale (build_stale_index).
STALE_WORD = "quokkalith"
#: In the last two messages; in build_current_views they exist only in state.db-wal.
WAL_WORD = "marmalith"
#: Only in cron-session messages (cron rows are excluded from the current trigram index).
CRON_WORD = "overnight"

#: Summary prefixes of compaction children (current and legacy).
SUMMARY_PREFIX = "[CONTEXT COMPACTION — REFERENCE ONLY]"
LEGACY_SUMMARY_PREFIX = "[CONTEXT SUMMARY]:"
#: Sentinel Hermes puts before JSON-encoded (structured) message content.
JSON_CONTENT_PREFIX = "\x00json:"

# Session ids (``YYYYmmdd_HHMMSS_<hex6>``, UTC here); the start time is read from the id.
S_ROOT = "20260718_091502_a1b2c3"  # cli, chain segment 1, ends 'compression', cost actual
S_CONT1 = "20260718_095530_b4c5d6"  # cli, chain segment 2, ends 'compression', estimated
S_CONT2 = "20260718_103045_c7d8e9"  # cli, chain segment 3 (tip), estimated
S_SUBAGENT = "20260718_103200_0a1b2c"  # subagent delegated from S_CONT2, cost unknown
S_TELEGRAM = "20260720_183045_d0e1f2"  # telegram, Chinese, in-place compaction, 'branched'
S_BRANCH = "20260720_184600_e3f4a5"  # telegram branch child (_branched_from), cost unknown
S_CRON = "20260721_060000_f6a7b8"  # cron job, estimated

COMPACTION_CHAIN = (S_ROOT, S_CONT1, S_CONT2)
SESSION_IDS = (S_ROOT, S_CONT1, S_CONT2, S_SUBAGENT, S_TELEGRAM, S_BRANCH, S_CRON)

CURRENT_SCHEMA_VERSION = 31
FTS_STORAGE_VERSION = 3
_TOOL_PREFIX_CHARS = 8192  # FTS_TOOL_CONTENT_PREFIX_CHARS: tool rows indexed as a prefix


def _epoch(stamp: str) -> float:
    """Epoch seconds of a ``YYYYmmdd_HHMMSS`` stamp, read as UTC."""
    return datetime.strptime(stamp[:15], "%Y%m%d_%H%M%S").replace(tzinfo=UTC).timestamp()


# ---------------------------------------------------------------------------
# Dataset
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Session:
    """One ``sessions`` row, as a superset of every form's columns."""

    id: str
    source: str
    model: str
    billing: tuple[str, str, str]  # provider, base_url, mode
    tokens: tuple[int, int, int, int, int]  # input, output, cache_read, cache_write, reasoning
    cost: tuple[float | None, float | None, str, str]  # estimated, actual, status, source
    api_calls: int
    parent: str | None = None
    ended: str | None = None  # stamp
    end_reason: str | None = None
    model_config: dict[str, Any] = field(default_factory=dict)
    title: str | None = None
    title_source: str | None = None
    user_id: str | None = None
    chat: tuple[str, str] | None = None  # chat_id, chat_type
    cwd: str | None = None
    archived: int = 0
    pinned: int = 0

    @property
    def started_at(self) -> float:
        """Start time, read from the id."""
        return _epoch(self.id)


@dataclass(frozen=True)
class Message:
    """One ``messages`` row; ``kind`` marks rows that only newer forms have."""

    session: str
    at: float  # seconds after the session start
    role: str
    content: str | None
    tool_calls: list[dict[str, Any]] | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    finish_reason: str | None = None
    reasoning: str | None = None
    token_count: int | None = None
    kind: str = "base"  # base | compacted | rewound | hidden | summary | stale
    tail: bool = False  # one of the last rows (written into the WAL by build_current_views)

    @property
    def timestamp(self) -> float:
        """Absolute epoch timestamp."""
        return _epoch(self.session) + self.at


_PROMPT = (
    "You are Hermes Agent, an intelligent AI assistant created by Nous Research. "
    "Be concise; use tools when they help."
)
_OPENROUTER = ("openrouter", "https://openrouter.ai/api/v1", "api")
_SONNET = "anthropic/claude-sonnet-4.5"

SESSIONS: tuple[Session, ...] = (
    Session(
        S_ROOT,
        "cli",
        _SONNET,
        _OPENROUTER,
        (48210, 3120, 30000, 5000, 800),
        (0.0002, 0.4211, "actual", "provider_generation_api"),
        9,
        ended=S_CONT1,
        end_reason="compression",
        model_config={"reasoning_effort": "medium"},
        title="Postgres pool tuning",
        title_source="llm",
        cwd="/home/ana/src/api",
        pinned=1,
    ),
    Session(
        S_CONT1,
        "cli",
        _SONNET,
        _OPENROUTER,
        (39120, 2410, 28000, 0, 350),
        (0.2952, None, "estimated", "official_docs_snapshot"),
        6,
        parent=S_ROOT,
        ended=S_CONT2,
        end_reason="compression",
        model_config={"reasoning_effort": "medium"},
        cwd="/home/ana/src/api",
    ),
    Session(
        S_CONT2,
        "cli",
        _SONNET,
        _OPENROUTER,
        (21030, 980, 15000, 0, 120),
        (0.1502, None, "estimated", "official_docs_snapshot"),
        3,
        parent=S_CONT1,
        ended="20260718_104315",
        end_reason="cli_close",
        model_config={"reasoning_effort": "medium"},
        cwd="/home/ana/src/api",
    ),
    Session(
        S_SUBAGENT,
        "subagent",
        "qwen3-coder-30b",
        ("custom", "http://gpu-box:8000/v1", "api"),
        (6200, 410, 0, 0, 0),
        (None, None, "unknown", "none"),
        2,
        parent=S_CONT2,
        ended="20260718_103316",
        end_reason="delegate_complete",
        model_config={"_delegate_from": S_CONT2, "toolsets": ["terminal"]},
    ),
    Session(
        S_TELEGRAM,
        "telegram",
        "deepseek/deepseek-chat",
        ("deepseek", "https://api.deepseek.com/v1", "api"),
        (15400, 1320, 8000, 0, 0),
        (0.0323, None, "estimated", "official_docs_snapshot"),
        6,
        ended="20260720_184545",
        end_reason="branched",
        title="数据库连接池配置与部署",
        title_source="derived",
        user_id="48151623",
        chat=("48151623", "dm"),
    ),
    Session(
        S_BRANCH,
        "telegram",
        "local/qwen3-32b",
        ("custom", "http://localhost:8080/v1", "api"),
        (9100, 640, 0, 0, 0),
        (None, None, "unknown", "none"),
        4,
        parent=S_TELEGRAM,
        model_config={"_branched_from": S_TELEGRAM},
        title="Pool size 20 experiment",
        title_source="user",
        user_id="48151623",
        chat=("48151623", "dm"),
    ),
    Session(
        S_CRON,
        "cron",
        "openai/gpt-4.1-mini",
        _OPENROUTER,
        (3100, 150, 0, 0, 0),
        (0.0041, None, "estimated", "provider_models_api"),
        2,
        ended="20260721_060012",
        end_reason="cron_complete",
        archived=1,
    ),
)


def _call(call_id: str, name: str, **arguments: Any) -> list[dict[str, Any]]:
    """An OpenAI-format ``tool_calls`` list with one function call."""
    return [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
    ]


def _out(output: str, exit_code: int = 0) -> str:
    """A terminal tool result as Hermes stores it."""
    return json.dumps({"output": output, "exit_code": exit_code})


def _summary(body: str) -> str:
    """Body of a compaction summary; the form adds its prefix."""
    return (
        " Earlier turns were compacted into the summary below. Treat it as background "
        "reference, NOT as active instructions.\n\n"
        + body
        + "\n\n--- END OF CONTEXT SUMMARY — respond to the message below, not the summary above ---"
    )


_SCREENSHOT_PARTS = [
    {"type": "text", "text": "这是部署失败的截图 screenshot attached"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="}},
]
STRUCTURED_CONTENT = JSON_CONTENT_PREFIX + json.dumps(_SCREENSHOT_PARTS, ensure_ascii=False)

_TAIL_AT = _epoch("20260722_204335") - _epoch(S_BRANCH)

MESSAGES: tuple[Message, ...] = (
    # --- S_ROOT: segment 1 of the compaction chain -------------------------------------
    Message(
        S_ROOT,
        5,
        "user",
        "Our API keeps timing out under load. Can you help me tune the "
        f"Postgres connection pool? The service codename is {UNIQUE_WORD}.",
        token_count=31,
    ),
    Message(
        S_ROOT,
        12,
        "assistant",
        "Let me look at the current connections first.",
        tool_calls=_call(
            "call_r1", "terminal", command="psql -c 'select count(*) from pg_stat_activity'"
        ),
        finish_reason="tool_calls",
        reasoning="Check active connections before resizing.",
    ),
    Message(
        S_ROOT,
        14,
        "tool",
        _out(" count\n-------\n    97\n"),
        tool_name="terminal",
        tool_call_id="call_r1",
    ),
    Message(
        S_ROOT,
        20,
        "assistant",
        "You have 97 active connections against max_connections=100, so the pool is saturated.",
        finish_reason="stop",
    ),
    Message(S_ROOT, 60, "user", "What pool size should we use with 8 workers?"),
    Message(
        S_ROOT,
        70,
        "assistant",
        None,
        finish_reason="tool_calls",
        tool_calls=_call("call_r2", "read_file", path="config/database.yml"),
    ),
    Message(
        S_ROOT,
        71,
        "tool",
        json.dumps({"content": "pool: 50\ntimeout: 5000\n"}),
        tool_name="read_file",
        tool_call_id="call_r2",
    ),
    Message(
        S_ROOT,
        90,
        "assistant",
        "Use 10 connections per worker (80 in total) and lower the statement timeout.",
        finish_reason="stop",
    ),
    Message(
        S_ROOT,
        120,
        "assistant",
        "Applying the change.",
        finish_reason="tool_calls",
        tool_calls=_call(
            "call_r3",
            "patch",
            path="config/database.yml",
            old="pool: 50",
            new=f"pool: 10  # behind {TOOL_CALL_WORD}",
        ),
    ),
    Message(
        S_ROOT,
        121,
        "tool",
        json.dumps({"success": True}),
        tool_name="patch",
        tool_call_id="call_r3",
    ),
    Message(
        S_ROOT, 150, "user", f"Actually switch everything to MySQL {REWOUND_WORD}", kind="rewound"
    ),
    Message(
        S_ROOT,
        180,
        "assistant",
        "Done. Restart the workers to pick up the new pool size.",
        finish_reason="stop",
    ),
    # --- S_CONT1: segment 2 ---------------------------------------------------------------
    Message(
        S_CONT1,
        0,
        "user",
        _summary(
            "Goal: stop API timeouts. The pool was cut from 50 to "
            "10 per worker; 97 of 100 connections had been in use."
        ),
        kind="summary",
    ),
    Message(
        S_CONT1,
        30,
        "user",
        "Workers restarted. Latency is better but we still see spikes at 09:00.",
    ),
    Message(
        S_CONT1,
        40,
        "assistant",
        None,
        finish_reason="tool_calls",
        tool_calls=_call("call_c1", "terminal", command="grep -c timeout /var/log/api/app.log"),
    ),
    Message(S_CONT1, 42, "tool", _out("42"), tool_name="terminal", tool_call_id="call_c1"),
    Message(
        S_CONT1,
        60,
        "assistant",
        "42 timeouts this morning, all from the nightly report job. Point it at the read replica.",
        finish_reason="stop",
    ),
    Message(S_CONT1, 120, "user", "ok, do it"),
    Message(
        S_CONT1,
        150,
        "assistant",
        "The report job now uses the replica connection string.",
        finish_reason="stop",
    ),
    # --- S_CONT2: segment 3 (chain tip) -----------------------------------------------
    Message(
        S_CONT2,
        0,
        "user",
        _summary("Pool tuned (10 per worker); nightly report moved to the read replica."),
        kind="summary",
    ),
    Message(S_CONT2, 20, "user", "Final check: is the pool config committed?"),
    Message(
        S_CONT2,
        25,
        "assistant",
        None,
        finish_reason="tool_calls",
        tool_calls=_call("call_t1", "terminal", command="git log -1 --oneline"),
    ),
    Message(
        S_CONT2,
        26,
        "tool",
        _out("a1f9c2e tune db pool"),
        tool_name="terminal",
        tool_call_id="call_t1",
    ),
    Message(
        S_CONT2,
        700,
        "assistant",
        "Yes, commit a1f9c2e has the pool change, and the "
        "delegated load test reports p95 of 182 ms.",
        finish_reason="stop",
    ),
    # --- S_SUBAGENT: delegated from S_CONT2 -----------------------------------------------
    Message(
        S_SUBAGENT, 0, "user", "Run a 60 second load test against staging and report p95 latency."
    ),
    Message(
        S_SUBAGENT,
        5,
        "assistant",
        None,
        finish_reason="tool_calls",
        tool_calls=_call(
            "call_s1", "terminal", command="hey -z 60s https://staging.example.com/api/health"
        ),
    ),
    Message(
        S_SUBAGENT,
        70,
        "tool",
        _out("p95 latency: 182 ms"),
        tool_name="terminal",
        tool_call_id="call_s1",
    ),
    Message(S_SUBAGENT, 75, "assistant", "p95 latency is 182 ms at 50 rps.", finish_reason="stop"),
    # --- S_TELEGRAM: Chinese, in-place compaction, ends 'branched' -------------------------
    Message(S_TELEGRAM, 0, "user", f"帮我检查一下生产环境的{CJK_PHRASE}", kind="compacted"),
    Message(
        S_TELEGRAM,
        10,
        "assistant",
        "好的，当前连接池大小是 50，超时时间 5 秒。",
        finish_reason="stop",
        kind="compacted",
    ),
    Message(
        S_TELEGRAM, 40, "user", f"{COMPACTED_WORD} 这个服务的部署脚本在哪里？", kind="compacted"
    ),
    Message(
        S_TELEGRAM,
        50,
        "assistant",
        "部署脚本在 scripts/deploy.sh。",
        finish_reason="stop",
        kind="compacted",
    ),
    Message(
        S_TELEGRAM,
        55,
        "user",
        f"{SUMMARY_PREFIX} {HIDDEN_WORD}: 用户询问了连接池大小和部署脚本的位置。",
        kind="hidden",
    ),
    Message(S_TELEGRAM, 120, "user", STRUCTURED_CONTENT),
    Message(
        S_TELEGRAM,
        130,
        "assistant",
        "截图显示部署在迁移步骤失败：数据库连接被拒绝。",
        finish_reason="stop",
    ),
    Message(S_TELEGRAM, 200, "user", "那就先回滚部署。"),
    Message(
        S_TELEGRAM,
        210,
        "assistant",
        "已回滚。要不要开一个分支会话试试新的连接池参数？",
        finish_reason="stop",
    ),
    # --- S_BRANCH: branch child of S_TELEGRAM -------------------------------------------
    Message(S_BRANCH, 0, "user", "分支：试试把连接池调到 20。"),
    Message(
        S_BRANCH,
        8,
        "assistant",
        None,
        finish_reason="tool_calls",
        tool_calls=_call(
            "call_b1", "terminal", command="sed -i 's/pool: 10/pool: 20/' config/database.yml"
        ),
    ),
    Message(S_BRANCH, 9, "tool", _out(""), tool_name="terminal", tool_call_id="call_b1"),
    # --- S_CRON ---------------------------------------------------------------------------
    Message(
        S_CRON,
        0,
        "user",
        f"[SYSTEM: You are running as a scheduled cron job] Summarise {CRON_WORD} database errors.",
    ),
    Message(
        S_CRON,
        3,
        "assistant",
        None,
        finish_reason="tool_calls",
        tool_calls=_call(
            "call_k1",
            "terminal",
            command="journalctl -u postgresql --since yesterday | grep -c ERROR",
        ),
    ),
    Message(S_CRON, 4, "tool", _out("3"), tool_name="terminal", tool_call_id="call_k1"),
    Message(
        S_CRON,
        8,
        "assistant",
        f"3 database errors {CRON_WORD}; none about connection limits.",
        finish_reason="stop",
    ),
    # --- S_BRANCH resumed two days later: the last rows of every file --------------------
    Message(S_BRANCH, _TAIL_AT, "user", f"Also record the {WAL_WORD} canary result.", tail=True),
    Message(
        S_BRANCH,
        _TAIL_AT + 10,
        "assistant",
        f"Canary {WAL_WORD} passed with pool 20; no refused connections.",
        finish_reason="stop",
        tail=True,
    ),
)

#: Rows written only by build_stale_index, after the FTS triggers were detached.
STALE_MESSAGES: tuple[Message, ...] = (
    Message(S_BRANCH, _TAIL_AT + 86400, "user", f"Log the {STALE_WORD} incident.", kind="stale"),
    Message(
        S_BRANCH,
        _TAIL_AT + 86410,
        "assistant",
        "Noted in the incident log.",
        finish_reason="stop",
        kind="stale",
    ),
)

#: (session, model, task, api_calls, input, output, cache_read, estimated, actual, status, source)
MODEL_USAGE: tuple[tuple[Any, ...], ...] = (
    (S_ROOT, _SONNET, "", 8, 46010, 3020, 30000, 0.0, 0.4013, "actual", "provider_generation_api"),
    (
        S_ROOT,
        "google/gemini-2.5-flash",
        "compression",
        1,
        2100,
        90,
        0,
        0.0,
        0.0198,
        "actual",
        "provider_generation_api",
    ),
    (
        S_ROOT,
        "openai/gpt-4.1-nano",
        "title_generation",
        1,
        100,
        10,
        0,
        0.0002,
        0.0,
        "estimated",
        "official_docs_snapshot",
    ),
    (
        S_CONT1,
        _SONNET,
        "",
        5,
        36900,
        2300,
        28000,
        0.2891,
        0.0,
        "estimated",
        "official_docs_snapshot",
    ),
    (
        S_CONT1,
        "google/gemini-2.5-flash",
        "compression",
        1,
        2220,
        110,
        0,
        0.0061,
        0.0,
        "estimated",
        "official_docs_snapshot",
    ),
    (
        S_CONT2,
        _SONNET,
        "",
        3,
        21030,
        980,
        15000,
        0.1502,
        0.0,
        "estimated",
        "official_docs_snapshot",
    ),
    (S_SUBAGENT, "qwen3-coder-30b", "", 2, 6200, 410, 0, 0.0, 0.0, "unknown", "none"),
    (
        S_TELEGRAM,
        "deepseek/deepseek-chat",
        "",
        5,
        14900,
        1300,
        8000,
        0.0312,
        0.0,
        "estimated",
        "official_docs_snapshot",
    ),
    (
        S_TELEGRAM,
        "openai/gpt-4.1-mini",
        "vision",
        1,
        500,
        20,
        0,
        0.0011,
        0.0,
        "estimated",
        "official_docs_snapshot",
    ),
    (S_BRANCH, "local/qwen3-32b", "", 4, 9100, 640, 0, 0.0, 0.0, "unknown", "none"),
    (
        S_CRON,
        "openai/gpt-4.1-mini",
        "",
        2,
        3100,
        150,
        0,
        0.0041,
        0.0,
        "estimated",
        "provider_models_api",
    ),
)

# ---------------------------------------------------------------------------
# DDL: seed / legacy forms
# ---------------------------------------------------------------------------

# v6-era fresh install: v2 base columns + title (v3) + cache/billing/cost columns (v5).
_SEED_SESSIONS = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, source TEXT NOT NULL, user_id TEXT, model TEXT, model_config TEXT,
    system_prompt TEXT, parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL,
    end_reason TEXT, message_count INTEGER DEFAULT 0, tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0,
    cache_read_tokens INTEGER DEFAULT 0, cache_write_tokens INTEGER DEFAULT 0,
    reasoning_tokens INTEGER DEFAULT 0, billing_provider TEXT, billing_base_url TEXT,
    billing_mode TEXT, estimated_cost_usd REAL, actual_cost_usd REAL, cost_status TEXT,
    cost_source TEXT, pricing_version TEXT, title TEXT,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)
);
"""

_SEED_V6_MESSAGES = """
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
    timestamp REAL NOT NULL, token_count INTEGER, finish_reason TEXT, reasoning TEXT,
    reasoning_details TEXT, codex_reasoning_items TEXT
);
"""

_SEED_V11_MESSAGES = """
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
    timestamp REAL NOT NULL, token_count INTEGER, finish_reason TEXT, reasoning TEXT,
    reasoning_content TEXT, reasoning_details TEXT, codex_reasoning_items TEXT,
    codex_message_items TEXT
);
"""

_COMMON_TAIL = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE INDEX idx_sessions_source ON sessions(source);
CREATE INDEX idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX idx_sessions_started ON sessions(started_at DESC);
CREATE INDEX idx_messages_session ON messages(session_id, timestamp);
"""
_TITLE_INDEX = (
    "CREATE UNIQUE INDEX idx_sessions_title_unique ON sessions(title) WHERE title IS NOT NULL;\n"
)

_STATE_META = "CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT);\n"

# v1..v10: external content over messages, content column only.
_EXTERNAL_FTS = """
CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='id');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
"""

_INLINE_DOC = (
    "COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' ' "
    "|| COALESCE(new.tool_calls, '')"
)


def _inline_fts(table: str, tokenize: str = "") -> str:
    """v11..v22 inline FTS table holding content || tool_name || tool_calls, plus triggers."""
    options = f", tokenize='{tokenize}'" if tokenize else ""
    return f"""
CREATE VIRTUAL TABLE {table} USING fts5(content{options});
CREATE TRIGGER {table}_insert AFTER INSERT ON messages BEGIN
    INSERT INTO {table}(rowid, content) VALUES (new.id, {_INLINE_DOC});
END;
CREATE TRIGGER {table}_delete AFTER DELETE ON messages BEGIN
    DELETE FROM {table} WHERE rowid = old.id;
END;
CREATE TRIGGER {table}_update AFTER UPDATE ON messages BEGIN
    DELETE FROM {table} WHERE rowid = old.id;
    INSERT INTO {table}(rowid, content) VALUES (new.id, {_INLINE_DOC});
END;
"""


_INLINE_FTS = _inline_fts("messages_fts") + _inline_fts("messages_fts_trigram", "trigram")

# A v1 file upgraded step by step by old code: v2 base tables, then ALTER TABLE ADD COLUMN.
_OLD_BASE = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, source TEXT NOT NULL, user_id TEXT, model TEXT, model_config TEXT,
    system_prompt TEXT, parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL,
    end_reason TEXT, message_count INTEGER DEFAULT 0, tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
    timestamp REAL NOT NULL, token_count INTEGER
);
"""
_OLD_ALTERS = (
    "ALTER TABLE messages ADD COLUMN finish_reason TEXT",  # v2
    "ALTER TABLE sessions ADD COLUMN title TEXT",  # v3
    "ALTER TABLE sessions ADD COLUMN cache_read_tokens INTEGER DEFAULT 0",  # v5 ...
    "ALTER TABLE sessions ADD COLUMN cache_write_tokens INTEGER DEFAULT 0",
    "ALTER TABLE sessions ADD COLUMN reasoning_tokens INTEGER DEFAULT 0",
    "ALTER TABLE sessions ADD COLUMN billing_provider TEXT",
    "ALTER TABLE sessions ADD COLUMN billing_base_url TEXT",
    "ALTER TABLE sessions ADD COLUMN billing_mode TEXT",
    "ALTER TABLE sessions ADD COLUMN estimated_cost_usd REAL",
    "ALTER TABLE sessions ADD COLUMN actual_cost_usd REAL",
    "ALTER TABLE sessions ADD COLUMN cost_status TEXT",
    "ALTER TABLE sessions ADD COLUMN cost_source TEXT",
    "ALTER TABLE sessions ADD COLUMN pricing_version TEXT",
    "ALTER TABLE messages ADD COLUMN reasoning TEXT",  # v6 ...
    "ALTER TABLE messages ADD COLUMN reasoning_details TEXT",
    "ALTER TABLE messages ADD COLUMN codex_reasoning_items TEXT",
    "ALTER TABLE messages ADD COLUMN codex_message_items TEXT",  # later
    "ALTER TABLE messages ADD COLUMN reasoning_content TEXT",
)

# ---------------------------------------------------------------------------
# DDL: current form (v23+, FTS storage layout 3)
# ---------------------------------------------------------------------------

_CURRENT_SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE system_prompts (hash TEXT PRIMARY KEY, prompt TEXT NOT NULL);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, source TEXT NOT NULL, created_source TEXT, user_id TEXT,
    session_key TEXT, chat_id TEXT, chat_type TEXT, thread_id TEXT, display_name TEXT,
    origin_json TEXT, expiry_finalized INTEGER DEFAULT 0, model TEXT, model_config TEXT,
    system_prompt TEXT, system_prompt_hash TEXT, parent_session_id TEXT,
    started_at REAL NOT NULL, ended_at REAL, end_reason TEXT, message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0, input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0, cache_read_tokens INTEGER DEFAULT 0,
    cache_write_tokens INTEGER DEFAULT 0, reasoning_tokens INTEGER DEFAULT 0, cwd TEXT,
    git_branch TEXT, git_repo_root TEXT, git_metadata_generation INTEGER NOT NULL DEFAULT 0,
    billing_provider TEXT, billing_base_url TEXT, billing_mode TEXT, estimated_cost_usd REAL,
    actual_cost_usd REAL, cost_status TEXT, cost_source TEXT, pricing_version TEXT,
    title TEXT, title_source TEXT, last_activity_at REAL, last_activity_description TEXT,
    last_activity_provenance TEXT, api_call_count INTEGER DEFAULT 0, handoff_state TEXT,
    handoff_platform TEXT, handoff_error TEXT, compression_failure_cooldown_until REAL,
    compression_failure_error TEXT, compression_fallback_streak INTEGER NOT NULL DEFAULT 0,
    compression_ineffective_count INTEGER NOT NULL DEFAULT 0,
    compression_recovery_deadline REAL, compression_overload_streak INTEGER NOT NULL DEFAULT 0,
    profile_name TEXT, transport_profile TEXT, rewind_count INTEGER NOT NULL DEFAULT 0,
    archived INTEGER NOT NULL DEFAULT 0, pinned INTEGER NOT NULL DEFAULT 0,
    hidden INTEGER NOT NULL DEFAULT 0, last_read_at REAL, tool_names TEXT,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id),
    FOREIGN KEY (system_prompt_hash) REFERENCES system_prompts(hash)
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
    effect_disposition TEXT, timestamp REAL NOT NULL, token_count INTEGER, finish_reason TEXT,
    reasoning TEXT, reasoning_content TEXT, reasoning_details TEXT, codex_reasoning_items TEXT,
    codex_message_items TEXT, platform_message_id TEXT, observed INTEGER DEFAULT 0,
    _compressed_summary INTEGER NOT NULL DEFAULT 0, active INTEGER NOT NULL DEFAULT 1,
    compacted INTEGER NOT NULL DEFAULT 0, api_content TEXT, display_kind TEXT,
    display_metadata TEXT, display_identity BLOB, display_order INTEGER
);
CREATE TABLE session_model_usage (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    model TEXT NOT NULL, billing_provider TEXT NOT NULL DEFAULT '',
    billing_base_url TEXT NOT NULL DEFAULT '', billing_mode TEXT NOT NULL DEFAULT '',
    task TEXT NOT NULL DEFAULT '', api_call_count INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0, cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0, estimated_cost_usd REAL NOT NULL DEFAULT 0,
    actual_cost_usd REAL NOT NULL DEFAULT 0, cost_status TEXT, cost_source TEXT,
    first_seen REAL, last_seen REAL,
    PRIMARY KEY (session_id, model, billing_provider, billing_base_url, billing_mode, task)
);
CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE compression_locks (
    session_id TEXT PRIMARY KEY, holder TEXT NOT NULL, acquired_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX idx_sessions_source ON sessions(source);
CREATE INDEX idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX idx_sessions_started ON sessions(started_at DESC);
CREATE INDEX idx_messages_session ON messages(session_id, timestamp);
CREATE INDEX idx_messages_session_id ON messages(session_id, id);
CREATE INDEX idx_session_model_usage_session ON session_model_usage(session_id);
CREATE INDEX idx_messages_session_active ON messages(session_id, active, timestamp);
CREATE INDEX idx_messages_display_page
    ON messages(session_id, display_order, active DESC, id DESC)
    WHERE active = 1 OR compacted = 1;
CREATE UNIQUE INDEX idx_sessions_title_unique ON sessions(title) WHERE title IS NOT NULL;
CREATE TRIGGER messages_display_order_insert
AFTER INSERT ON messages WHEN new.display_order IS NULL
BEGIN
    UPDATE messages SET display_order = new.id WHERE id = new.id;
END;
"""


def _gate(row: str, prefix: str = "fts") -> str:
    """Deferred-rebuild predicate: the row is (or must be) in the index."""
    key = "(SELECT CAST(value AS INTEGER) FROM state_meta WHERE key = '{}')"
    high, progress = (
        key.format(f"{prefix}_rebuild_high_water"),
        key.format(f"{prefix}_rebuild_progress"),
    )
    return f"({row}.id > COALESCE({high}, -1) OR {row}.id <= COALESCE({progress}, -1))"


def _indexed(row: str) -> str:
    """What the base index stores as content: tool rows are cut to a prefix."""
    return (
        f"CASE WHEN {row}.role = 'tool' THEN substr(COALESCE({row}.content, ''), 1, "
        f"{_TOOL_PREFIX_CHARS}) ELSE {row}.content END"
    )


def _trigram_session(alias: str) -> str:
    """Sessions whose rows go into the trigram index: not cron, not subagent."""
    config = f"{alias}.model_config"
    return (
        f"{alias}.source NOT IN ('cron', 'subagent') AND json_extract(CASE WHEN "
        f"json_valid({config}) THEN {config} ELSE json_object() END, '$._delegate_from') IS NULL"
    )


_CURRENT_FTS = f"""
CREATE VIEW messages_fts_src AS
    SELECT id, {_indexed("messages")} AS content, tool_name, tool_calls FROM messages;
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, tool_name, tool_calls, content='messages_fts_src', content_rowid='id'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages WHEN {_gate("new")}
BEGIN
    INSERT INTO messages_fts(rowid, content, tool_name, tool_calls)
    VALUES (new.id, {_indexed("new")}, new.tool_name, new.tool_calls);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages WHEN {_gate("old")}
BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, tool_name, tool_calls)
    VALUES ('delete', old.id, {_indexed("old")}, old.tool_name, old.tool_calls);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, tool_name, tool_calls, role
ON messages
WHEN (old.content IS NOT new.content OR old.tool_name IS NOT new.tool_name
      OR old.tool_calls IS NOT new.tool_calls OR old.role IS NOT new.role)
  AND {_gate("old")}
BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, tool_name, tool_calls)
    VALUES ('delete', old.id, {_indexed("old")}, old.tool_name, old.tool_calls);
    INSERT INTO messages_fts(rowid, content, tool_name, tool_calls)
    VALUES (new.id, {_indexed("new")}, new.tool_name, new.tool_calls);
END;
"""

_TRIGRAM_WHEN = (
    "{row}.role <> 'tool' AND EXISTS (SELECT 1 FROM sessions AS s "
    "WHERE s.id = {row}.session_id AND " + _trigram_session("s") + ")"
)

_CURRENT_TRIGRAM = f"""
CREATE VIEW messages_fts_trigram_src AS
    SELECT m.id, m.role, m.content, m.tool_name
    FROM messages AS m JOIN sessions AS s ON s.id = m.session_id
    WHERE m.role <> 'tool' AND {_trigram_session("s")};
CREATE VIRTUAL TABLE messages_fts_trigram USING fts5(
    content, tool_name, content='messages_fts_trigram_src', content_rowid='id',
    tokenize='trigram'
);
CREATE TRIGGER messages_fts_trigram_insert AFTER INSERT ON messages
WHEN {_TRIGRAM_WHEN.format(row="new")} AND {_gate("new")}
BEGIN
    INSERT INTO messages_fts_trigram(rowid, content, tool_name)
    VALUES (new.id, new.content, new.tool_name);
END;
CREATE TRIGGER messages_fts_trigram_delete AFTER DELETE ON messages
WHEN {_TRIGRAM_WHEN.format(row="old")} AND {_gate("old")}
BEGIN
    INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content, tool_name)
    VALUES ('delete', old.id, old.content, old.tool_name);
END;
CREATE TRIGGER messages_fts_trigram_update AFTER UPDATE OF content, tool_name, role ON messages
WHEN (old.content IS NOT new.content OR old.tool_name IS NOT new.tool_name
      OR old.role IS NOT new.role) AND {_gate("old")}
BEGIN
    INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content, tool_name)
    SELECT 'delete', old.id, old.content, old.tool_name WHERE {_TRIGRAM_WHEN.format(row="old")};
    INSERT INTO messages_fts_trigram(rowid, content, tool_name)
    SELECT new.id, new.content, new.tool_name WHERE {_TRIGRAM_WHEN.format(row="new")};
END;
"""

# Created with a stock tokenizer, then its sqlite_master text is rewritten to cjk_unicode61.
_CJK_STAND_IN = "tokenize='unicode61'"
_CJK_TOKENIZE = "tokenize='cjk_unicode61'"
_CJK_DDL = f"""
CREATE VIEW messages_fts_cjk_src AS
    SELECT id, role, content, tool_name, tool_calls FROM messages WHERE role <> 'tool';
CREATE VIRTUAL TABLE messages_fts_cjk USING fts5(
    content, tool_name, tool_calls, content='messages_fts_cjk_src', content_rowid='id',
    {_CJK_STAND_IN}
);
INSERT INTO messages_fts_cjk(messages_fts_cjk) VALUES ('rebuild');
CREATE TRIGGER messages_fts_cjk_insert AFTER INSERT ON messages
WHEN new.role <> 'tool' AND {_gate("new", "fts_cjk")}
BEGIN
    INSERT INTO messages_fts_cjk(rowid, content, tool_name, tool_calls)
    VALUES (new.id, new.content, new.tool_name, new.tool_calls);
END;
CREATE TRIGGER messages_fts_cjk_delete AFTER DELETE ON messages
WHEN old.role <> 'tool' AND {_gate("old", "fts_cjk")}
BEGIN
    INSERT INTO messages_fts_cjk(messages_fts_cjk, rowid, content, tool_name, tool_calls)
    VALUES ('delete', old.id, old.content, old.tool_name, old.tool_calls);
END;
CREATE TRIGGER messages_fts_cjk_update AFTER UPDATE OF content, tool_name, tool_calls, role
ON messages WHEN {_gate("old", "fts_cjk")}
BEGIN
    INSERT INTO messages_fts_cjk(messages_fts_cjk, rowid, content, tool_name, tool_calls)
    SELECT 'delete', old.id, old.content, old.tool_name, old.tool_calls WHERE old.role <> 'tool';
    INSERT INTO messages_fts_cjk(rowid, content, tool_name, tool_calls)
    SELECT new.id, new.content, new.tool_name, new.tool_calls WHERE new.role <> 'tool';
END;
"""

_FTS_TRIGGERS = (
    "messages_fts_insert",
    "messages_fts_delete",
    "messages_fts_update",
    "messages_fts_trigram_insert",
    "messages_fts_trigram_delete",
    "messages_fts_trigram_update",
)

# ---------------------------------------------------------------------------
# Row writing
# ---------------------------------------------------------------------------

Statement = tuple[str, tuple[Any, ...]]


@dataclass(frozen=True)
class _Form:
    """How a family of files stores the dataset."""

    summary_prefix: str
    modern: bool  # has active/compacted/display_kind, rewound + hidden rows, prompt table


_SEED = _Form(LEGACY_SUMMARY_PREFIX, modern=False)
_CURRENT = _Form(SUMMARY_PREFIX, modern=True)


def _messages_for(form: _Form, extra: Iterable[Message] = ()) -> list[Message]:
    """The rows a form holds, in insertion (timestamp) order."""
    rows = [m for m in MESSAGES if form.modern or m.kind not in ("rewound", "hidden")]
    rows.extend(extra)
    return sorted(rows, key=lambda m: m.timestamp)


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    """Column names of ``table`` in declaration order."""
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def _insert(table: str, values: dict[str, Any], present: Sequence[str]) -> Statement:
    """An INSERT for the keys of ``values`` that exist as columns."""
    names = [name for name in values if name in present]
    marks = ", ".join("?" for _ in names)
    sql = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})"
    return sql, tuple(values[name] for name in names)


def _prompt_hash() -> str:
    """Content address of the shared system prompt."""
    return hashlib.sha256(_PROMPT.encode()).hexdigest()


def _session_values(s: Session, form: _Form) -> dict[str, Any]:
    """A sessions row as a superset of all forms' columns (counters start at zero)."""
    estimated, actual, status, source = s.cost
    inp, out, cache_read, cache_write, reasoning = s.tokens
    provider, base_url, mode = s.billing
    values: dict[str, Any] = {
        "id": s.id,
        "source": s.source,
        "user_id": s.user_id,
        "model": s.model,
        "model_config": json.dumps(s.model_config) if s.model_config else None,
        "system_prompt": None if form.modern else _PROMPT,
        "system_prompt_hash": _prompt_hash() if form.modern else None,
        "parent_session_id": s.parent,
        "started_at": s.started_at,
        "ended_at": _epoch(s.ended) if s.ended else None,
        "end_reason": s.end_reason,
        "message_count": 0,
        "tool_call_count": 0,
        "input_tokens": inp,
        "output_tokens": out,
        "cache_read_tokens": cache_read,
        "cache_write_tokens": cache_write,
        "reasoning_tokens": reasoning,
        "billing_provider": provider,
        "billing_base_url": base_url,
        "billing_mode": mode,
        "estimated_cost_usd": estimated,
        "actual_cost_usd": actual,
        "cost_status": status,
        "cost_source": source,
        "pricing_version": None if status == "unknown" else "2026-07-01",
        "title": s.title,
    }
    if form.modern:
        values.update(
            {
                "created_source": s.source,
                "title_source": s.title_source,
                "cwd": s.cwd,
                "chat_id": s.chat[0] if s.chat else None,
                "chat_type": s.chat[1] if s.chat else None,
                "session_key": f"agent:main:telegram:dm:{s.user_id}" if s.chat else None,
                "api_call_count": s.api_calls,
                "profile_name": "default",
                "archived": s.archived,
                "pinned": s.pinned,
                "hidden": 0,
                "last_activity_at": s.started_at,
            }
        )
    return values


def _message_statements(
    m: Message, form: _Form, msg_cols: Sequence[str], session_cols: Sequence[str]
) -> list[Statement]:
    """INSERT of one message plus the counter update Hermes does in the same transaction."""
    content = m.content
    if m.kind == "summary":
        content = form.summary_prefix + (content or "")
    values: dict[str, Any] = {
        "session_id": m.session,
        "role": m.role,
        "content": content,
        "tool_call_id": m.tool_call_id,
        "tool_calls": json.dumps(m.tool_calls) if m.tool_calls else None,
        "tool_name": m.tool_name,
        "timestamp": m.timestamp,
        "token_count": m.token_count,
        "finish_reason": m.finish_reason,
        "reasoning": m.reasoning,
        "active": 0 if m.kind in ("compacted", "rewound") else 1,
        "compacted": 1 if m.kind == "compacted" else 0,
        "display_kind": "hidden" if m.kind == "hidden" else None,
    }
    is_tool = int(m.role == "tool" or m.tool_calls is not None)
    sets, params = (
        "message_count = message_count + 1, tool_call_count = tool_call_count + ?",
        [is_tool],
    )
    if "last_activity_at" in session_cols:
        sets += ", last_activity_at = ?"
        params.append(m.timestamp)
    update = (f"UPDATE sessions SET {sets} WHERE id = ?", (*params, m.session))
    return [_insert("messages", values, msg_cols), update]


def _row_statements(
    conn: sqlite3.Connection, form: _Form, rows: Sequence[Message], with_sessions: bool
) -> list[Statement]:
    """Statements writing sessions (optionally) and ``rows`` into the open file."""
    session_cols, msg_cols = _columns(conn, "sessions"), _columns(conn, "messages")
    out: list[Statement] = []
    if with_sessions:
        out.extend(_insert("sessions", _session_values(s, form), session_cols) for s in SESSIONS)
    for m in rows:
        out.extend(_message_statements(m, form, msg_cols, session_cols))
    return out


def _run(conn: sqlite3.Connection, statements: Iterable[Statement]) -> None:
    """Execute ``statements`` in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    for sql, params in statements:
        conn.execute(sql, params)
    conn.execute("COMMIT")


def _connect(path: Path) -> sqlite3.Connection:
    """Autocommit connection (explicit BEGIN/COMMIT)."""
    return sqlite3.connect(path, isolation_level=None)


def _fresh(path: Path) -> Path:
    """Create parent dirs and remove a previous file and its sidecars."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    return path


# A child process commits these statements and exits without closing SQLite, so the
# commit stays in state.db-wal (un-checkpointed) - what a killed Hermes process leaves.
_CHILD = """
import json, os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA wal_autocheckpoint=0")
conn.execute("BEGIN IMMEDIATE")
for sql, params in json.load(sys.stdin):
    conn.execute(sql, params)
conn.execute("COMMIT")
sys.stdout.flush()
os._exit(0)
"""


def _commit_into_wal(path: Path, statements: list[Statement]) -> None:
    """Commit ``statements`` from a child that never checkpoints nor closes."""
    subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        input=json.dumps(statements),
        text=True,
        check=True,
        capture_output=True,
        timeout=60,
    )


# ---------------------------------------------------------------------------
# Builders
# ---------------------------------------------------------------------------


def _build_seed(path: Path, *, inline: bool, journal: str) -> Path:
    """Seed form: v11 inline FTS + trigram, or v6 external-content FTS."""
    path = _fresh(path)
    with closing(_connect(path)) as conn:
        conn.execute(f"PRAGMA journal_mode={journal}")
        messages = _SEED_V11_MESSAGES if inline else _SEED_V6_MESSAGES
        fts = _INLINE_FTS if inline else _EXTERNAL_FTS
        conn.executescript(
            _SEED_SESSIONS
            + messages
            + _COMMON_TAIL
            + _TITLE_INDEX
            + (_STATE_META if inline else "")
            + fts
        )
        statements = _row_statements(conn, _SEED, _messages_for(_SEED), with_sessions=True)
        version = 11 if inline else 6
        statements.append(("INSERT INTO schema_version (version) VALUES (?)", (version,)))
        _run(conn, statements)
    return path


def build_seed_inline(path: Path) -> Path:
    """Seed v11: inline ``messages_fts(content)`` + trigram, schema_version 11, WAL."""
    return _build_seed(path, inline=True, journal="WAL")


def build_seed_external(path: Path) -> Path:
    """Seed v6: ``messages_fts(content, content='messages')``, no trigram, version 6, WAL."""
    return _build_seed(path, inline=False, journal="WAL")


def build_delete_journal(path: Path) -> Path:
    """Seed v11 inline form in rollback-journal (DELETE) mode."""
    return _build_seed(path, inline=True, journal="DELETE")


def build_missing_new_columns(path: Path) -> Path:
    """A file last written by old code: columns added by ALTER TABLE, inline FTS, v14."""
    path = _fresh(path)
    with closing(_connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(_OLD_BASE + _COMMON_TAIL + _STATE_META)
        for alter in _OLD_ALTERS:
            conn.execute(alter)
        conn.executescript(_TITLE_INDEX + _INLINE_FTS)
        statements = _row_statements(conn, _SEED, _messages_for(_SEED), with_sessions=True)
        statements.append(("INSERT INTO schema_version (version) VALUES (?)", (14,)))
        _run(conn, statements)
    return path


def _usage_statements() -> list[Statement]:
    """session_model_usage rows (current form)."""
    by_id = {s.id: s for s in SESSIONS}
    out: list[Statement] = []
    for sid, model, task, calls, inp, outp, cache, est, act, status, source in MODEL_USAGE:
        s = by_id[sid]
        provider, base_url, mode = s.billing
        seen = [m.timestamp for m in MESSAGES if m.session == sid]
        out.append(
            (
                "INSERT INTO session_model_usage (session_id, model, billing_provider, "
                "billing_base_url, billing_mode, task, api_call_count, input_tokens, "
                "output_tokens, "
                "cache_read_tokens, estimated_cost_usd, actual_cost_usd, cost_status, cost_source, "
                "first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sid,
                    model,
                    provider,
                    base_url,
                    mode,
                    task,
                    calls,
                    inp,
                    outp,
                    cache,
                    est,
                    act,
                    status,
                    source,
                    min(seen),
                    max(seen),
                ),
            )
        )
    return out


def _build_current(path: Path, *, trigram: bool = True, wal_tail: bool = False) -> Path:
    """Current v23+ form; with ``wal_tail`` the last rows are left in an un-checkpointed WAL."""
    path = _fresh(path)
    rows = _messages_for(_CURRENT)
    head = [m for m in rows if not (wal_tail and m.tail)]
    with closing(_connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.executescript(_CURRENT_SCHEMA + _CURRENT_FTS + (_CURRENT_TRIGRAM if trigram else ""))
        statements = [
            ("INSERT INTO system_prompts (hash, prompt) VALUES (?, ?)", (_prompt_hash(), _PROMPT))
        ]
        statements += _row_statements(conn, _CURRENT, head, with_sessions=True)
        statements += _usage_statements()
        statements += [
            (
                "INSERT INTO state_meta (key, value) VALUES (?, ?)",
                ("fts_storage_version", str(FTS_STORAGE_VERSION)),
            ),
            ("INSERT INTO schema_version (version) VALUES (?)", (CURRENT_SCHEMA_VERSION,)),
        ]
        _run(conn, statements)
        tail = [m for m in rows if wal_tail and m.tail]
        tail_statements = _row_statements(conn, _CURRENT, tail, with_sessions=False)
    if tail_statements:
        _commit_into_wal(path, tail_statements)
    return path


def build_current_views(path: Path) -> Path:
    """Current form (external-content FTS via views, trigram, usage table); WAL left behind."""
    return _build_current(path, wal_tail=True)


def build_no_trigram(path: Path) -> Path:
    """Current form without ``messages_fts_trigram`` (nor its view and triggers)."""
    return _build_current(path, trigram=False)


def build_cjk_without_tokenizer(path: Path) -> Path:
    """Current form plus ``messages_fts_cjk`` declared with the absent ``cjk_unicode61``.

    The index is created and filled with unicode61, then its ``sqlite_master`` text is
    rewritten (``writable_schema``): any use of the table fails with
    "no such tokenizer: cjk_unicode61", as on a host without ``libfts5_cjk``. Its sync
    triggers are kept, as on a file copied from a capable host, so *writes* to
    ``messages`` fail here too; reads of every other table work.
    """
    path = _build_current(path)
    with closing(_connect(path)) as conn:
        conn.executescript("BEGIN;" + _CJK_DDL + "COMMIT;")
        conn.execute("PRAGMA writable_schema=ON")
        conn.execute("BEGIN")
        conn.execute(
            "UPDATE sqlite_master SET sql = replace(sql, ?, ?) "
            "WHERE type = 'table' AND name = 'messages_fts_cjk'",
            (_CJK_STAND_IN, _CJK_TOKENIZE),
        )
        version = conn.execute("PRAGMA schema_version").fetchone()[0]
        conn.execute(f"PRAGMA schema_version={version + 1}")
        conn.execute("COMMIT")
        conn.execute("PRAGMA writable_schema=OFF")
    return path


def build_stale_index(path: Path) -> Path:
    """Current form whose FTS index misses rows: ``fts_stale='1'``, triggers detached.

    Hermes drops every FTS trigger when it marks the index stale; the rows in
    :data:`STALE_MESSAGES` were written after that, so only LIKE finds them.
    """
    path = _build_current(path)
    with closing(_connect(path)) as conn:
        conn.execute("BEGIN IMMEDIATE")
        for name in _FTS_TRIGGERS:
            conn.execute(f"DROP TRIGGER IF EXISTS {name}")
        conn.execute("INSERT INTO state_meta (key, value) VALUES ('fts_stale', '1')")
        conn.execute("COMMIT")
        _run(conn, _row_statements(conn, _CURRENT, STALE_MESSAGES, with_sessions=False))
    return path


Builder = Callable[[Path], Path]

SHAPES: dict[str, Builder] = {
    "seed_inline": build_seed_inline,
    "seed_external": build_seed_external,
    "current_views": build_current_views,
    "no_trigram": build_no_trigram,
    "cjk_without_tokenizer": build_cjk_without_tokenizer,
    "stale_index": build_stale_index,
    "delete_journal": build_delete_journal,
    "missing_new_columns": build_missing_new_columns,
}

# ---------------------------------------------------------------------------
# Expected facts per shape
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ShapeFacts:
    """What a test can rely on for one shape."""

    schema_version: int
    journal_mode: str  # as PRAGMA journal_mode reports it
    fts_layout: str  # 'inline' | 'external_messages' | 'external_views'
    has_trigram: bool
    has_cjk: bool
    fts_stale: bool
    modern: bool  # active/compacted/display_kind, title_source, session_model_usage...
    total_messages: int
    visible_messages: int  # (active=1 OR compacted=1) AND display_kind <> 'hidden'
    wal_only: bool  # the WAL_WORD rows live only in state.db-wal
    summary_prefix: str


def _facts(
    version: int,
    journal: str,
    layout: str,
    *,
    trigram: bool,
    modern: bool,
    cjk: bool = False,
    stale: bool = False,
    wal_only: bool = False,
) -> ShapeFacts:
    form = _CURRENT if modern else _SEED
    rows = _messages_for(form, STALE_MESSAGES if stale else ())
    visible = [m for m in rows if m.kind not in ("rewound", "hidden")]
    return ShapeFacts(
        version,
        journal,
        layout,
        trigram,
        cjk,
        stale,
        modern,
        len(rows),
        len(visible),
        wal_only,
        form.summary_prefix,
    )


EXPECTED: dict[str, ShapeFacts] = {
    "seed_inline": _facts(11, "wal", "inline", trigram=True, modern=False),
    "seed_external": _facts(6, "wal", "external_messages", trigram=False, modern=False),
    "current_views": _facts(
        CURRENT_SCHEMA_VERSION, "wal", "external_views", trigram=True, modern=True, wal_only=True
    ),
    "no_trigram": _facts(
        CURRENT_SCHEMA_VERSION, "wal", "external_views", trigram=False, modern=True
    ),
    "cjk_without_tokenizer": _facts(
        CURRENT_SCHEMA_VERSION, "wal", "external_views", trigram=True, modern=True, cjk=True
    ),
    "stale_index": _facts(
        CURRENT_SCHEMA_VERSION, "wal", "external_views", trigram=True, modern=True, stale=True
    ),
    "delete_journal": _facts(11, "delete", "inline", trigram=True, modern=False),
    "missing_new_columns": _facts(14, "wal", "inline", trigram=True, modern=False),
}


def visible_message_count(shape: str) -> int:
    """Messages a reader should show for ``shape``."""
    return EXPECTED[shape].visible_messages


# ---------------------------------------------------------------------------
# Cost facts (HERMES_FACTS, "Today's Hermes"): NULL-status auxiliary rows, merged rows
# with a partial actual, sessions whose calls span several days
# ---------------------------------------------------------------------------

#: A cli session whose calls run from Monday 2026-11-02 to Friday 2026-11-06 (UTC noon).
S_WEEK = "20261102_120000_c057a1"
#: A telegram session over two days whose assistant messages carry no token_count.
S_UNCOUNTED = "20261130_200000_c057a2"
_DAY = 86400.0
_NOUS = ("nous", "https://inference-api.nousresearch.com/v1", "api")

COST_SESSIONS: tuple[Session, ...] = (
    Session(
        S_WEEK,
        "cli",
        _SONNET,
        _OPENROUTER,
        (50000, 5000, 0, 0, 0),
        (0.83, 0.05, "estimated", "official_docs_snapshot"),
        12,
        ended="20261106_130000",
        end_reason="cli_close",
        title="A week of refactoring",
    ),
    Session(
        S_UNCOUNTED,
        "telegram",
        "hermes-4-405b",
        _NOUS,
        (900, 90, 0, 0, 0),
        (0.012, None, None, "none"),
        2,
        title="Late question",
    ),
)


def _cost_messages() -> list[Message]:
    """Assistant replies on five days (tokens 100, 300, 0 days, 600, 1000) and two uncounted."""
    out = []
    for n, tokens in ((0, 100), (1, 300), (3, 600), (4, 1000)):
        out.append(Message(S_WEEK, n * _DAY, "user", f"day {n + 1}: next step"))
        out.append(Message(S_WEEK, n * _DAY + 60, "assistant", "done", token_count=tokens))
    for n in (0, 1):  # 20:00 on the 30th, 20:00 on the 1st of December
        out.append(Message(S_UNCOUNTED, n * _DAY, "user", "still there?"))
        out.append(Message(S_UNCOUNTED, n * _DAY + 30, "assistant", "yes"))
    return out


#: (session, model, provider, task, calls, input, output, est, actual, status, first, last)
#: first/last are seconds after the session start.
COST_USAGE: tuple[tuple[Any, ...], ...] = (
    # Main loop, merged: the last call was estimated, earlier ones billed ($0.05 of them).
    (S_WEEK, _SONNET, _OPENROUTER, "", 10, 45000, 4600, 0.80, 0.05, "estimated", 60, 4 * _DAY + 60),
    # Auxiliary compression on day 4: a real estimate, status NULL.
    (
        S_WEEK,
        "google/gemini-2.5-flash",
        _OPENROUTER,
        "compression",
        2,
        5000,
        400,
        0.03,
        0.0,
        None,
        3 * _DAY + 60,
        3 * _DAY + 60,
    ),
    (S_UNCOUNTED, "hermes-4-405b", _NOUS, "", 2, 900, 90, 0.012, 0.0, None, 30, _DAY + 30),
)


def _cost_statements(conn: sqlite3.Connection, form: _Form, usage: bool) -> list[Statement]:
    session_cols, msg_cols = _columns(conn, "sessions"), _columns(conn, "messages")
    out = [_insert("sessions", _session_values(s, form), session_cols) for s in COST_SESSIONS]
    for m in _cost_messages():
        out.extend(_message_statements(m, form, msg_cols, session_cols))
    usage_cols = _columns(conn, "session_model_usage") if usage else []
    for row in COST_USAGE if usage else ():
        sid, model, billing, task, calls, inp, outp, est, act, status, first, last = row
        values = {
            "session_id": sid,
            "model": model,
            "billing_provider": billing[0],
            "billing_base_url": billing[1],
            "billing_mode": billing[2],
            "task": task,
            "api_call_count": calls,
            "input_tokens": inp,
            "output_tokens": outp,
            "estimated_cost_usd": est,
            "actual_cost_usd": act,
            "cost_status": status,
            "cost_source": "none" if status is None else "official_docs_snapshot",
            "first_seen": _epoch(sid) + first,
            "last_seen": _epoch(sid) + last,
        }
        out.append(_insert("session_model_usage", values, usage_cols))
    return out


def build_cost_facts(path: Path) -> Path:
    """Current form plus :data:`COST_SESSIONS`: NULL-status aux rows, a partial bill, a week."""
    path = _build_current(path)
    with closing(_connect(path)) as conn:
        _run(conn, _cost_statements(conn, _CURRENT, usage=True))
    return path


def build_cost_facts_sessions_only(path: Path) -> Path:
    """Seed v11 form (no usage table) plus :data:`COST_SESSIONS` as session rows."""
    path = build_seed_inline(path)
    with closing(_connect(path)) as conn:
        _run(conn, _cost_statements(conn, _SEED, usage=False))
    return path


#: Shapes with the cost facts; every shape of :data:`SHAPES` plus these for cost tests.
COST_SHAPES: dict[str, Builder] = {
    "cost_facts": build_cost_facts,
    "cost_facts_sessions_only": build_cost_facts_sessions_only,
}


# Homes Recall can read only in part (not in SHAPES: they do not open)
# ---------------------------------------------------------------------------

_INTERRUPTED_WRITE = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size=1")  # spill to the file: the journal becomes hot
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE messages SET content = content || ' (edited)'")
conn.execute("CREATE TABLE filler(x)")
conn.execute("INSERT INTO filler SELECT randomblob(1000) FROM messages, messages LIMIT 2000")
os._exit(0)  # the agent crashed mid-write: no commit, no rollback
"""


def build_hot_journal(path: Path) -> Path:
    """A DELETE-journal home whose writer died mid-transaction, leaving ``state.db-journal``.

    Only a connection that can write rolls the journal back; a read-only one gets
    SQLITE_READONLY_ROLLBACK ("attempt to write a readonly database").
    """
    build_delete_journal(path)
    subprocess.run([sys.executable, "-c", _INTERRUPTED_WRITE, str(path)], check=True, timeout=60)
    assert Path(f"{path}-journal").stat().st_size > 0
    return path


@contextmanager
def read_only(*paths: Path) -> Iterator[None]:
    """Make files and folders unwritable for this process, root included, then restore them.

    ``chmod a-w`` stops other users; root ignores modes, so as root the immutable
    attribute (``chattr +i``) is set too, as a read-only mount would behave.
    """
    modes = {p: p.stat().st_mode for p in paths}
    for p in paths:
        p.chmod(modes[p] & ~0o222)
    immutable = os.geteuid() == 0
    if immutable:
        subprocess.run(["chattr", "+i", *map(str, paths)], check=True)
    try:
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", *map(str, paths)], check=True)
        for p, mode in modes.items():
            p.chmod(mode)


# ---------------------------------------------------------------------------
# Source operations: what Hermes does to a live home (issue 15's incremental sync)
# ---------------------------------------------------------------------------
# Each writes the file as Hermes does: its own read-write connection, one
# transaction, only the columns the file has, then closes (a last closer
# checkpoints and removes the WAL, as a Hermes process leaving does).


def _live(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=10)
    conn.row_factory = sqlite3.Row
    return conn


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name=?", (name,)).fetchone() is not None


def _bump_activity(conn: sqlite3.Connection, session_id: str, added: int, at: float) -> None:
    """The counter update Hermes makes in a message write's transaction."""
    cols = _columns(conn, "sessions")
    sets = "message_count = max(0, coalesce(message_count, 0) + ?)"
    params: list[Any] = [added]
    if "last_activity_at" in cols:
        sets += ", last_activity_at = ?"
        params.append(at)
    conn.execute(f"UPDATE sessions SET {sets} WHERE id = ?", (*params, session_id))


def append_turn(path: Path, session_id: str, user: str, reply: str, at: float) -> list[int]:
    """A user message and the assistant's reply, one transaction; return their ids."""
    turn = [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
    return append_messages(path, session_id, turn, at)


def append_messages(
    path: Path, session_id: str, messages: Sequence[dict[str, Any]], at: float
) -> list[int]:
    """Messages (role, content and any other column) written as Hermes writes a turn's,
    one transaction, a millisecond apart from ``at``; return their ids."""
    with closing(_live(path)) as conn:
        cols = _columns(conn, "messages")
        conn.execute("BEGIN IMMEDIATE")
        ids = []
        for n, message in enumerate(messages):
            values = {
                "session_id": session_id,
                "timestamp": at + n / 1000,
                "active": 1,
                "compacted": 0,
                **message,
            }
            sql, params = _insert("messages", values, cols)
            ids.append(int(conn.execute(sql, params).lastrowid or 0))
        _bump_activity(conn, session_id, len(messages), at)
        conn.execute("COMMIT")
    return ids


def start_session(path: Path, session_id: str, at: float, title: str | None = None) -> None:
    """A new cli session row (no messages yet)."""
    with closing(_live(path)) as conn:
        values = {
            "id": session_id,
            "source": "cli",
            "model": "hermes-4-405b",
            "started_at": at,
            "title": title,
            "last_activity_at": at,
            "profile_name": "default",
        }
        sql, params = _insert("sessions", values, _columns(conn, "sessions"))
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(sql, params)
        conn.execute("COMMIT")


def end_session(path: Path, session_id: str, at: float, reason: str = "user_exit") -> None:
    with closing(_live(path)) as conn:
        conn.execute(
            "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ?",
            (at, reason, session_id),
        )


def retitle(path: Path, session_id: str, title: str | None) -> None:
    with closing(_live(path)) as conn:
        conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (title, session_id))


def set_session_flag(path: Path, session_id: str, column: str, value: int) -> bool:
    """Pin, archive or hide a session; False when the file has no such column."""
    with closing(_live(path)) as conn:
        if column not in _columns(conn, "sessions"):
            return False
        conn.execute(f"UPDATE sessions SET {column} = ? WHERE id = ?", (value, session_id))
    return True


def grow_usage(path: Path, session_id: str, tokens: int, cost: float, at: float) -> None:
    """One more API call: its usage row grows (or is created) and the session's sums too.

    A file without ``session_model_usage`` keeps the sums on the session row only.
    """
    with closing(_live(path)) as conn:
        conn.execute("BEGIN IMMEDIATE")
        if _has_table(conn, "session_model_usage"):
            row = conn.execute(
                "SELECT rowid FROM session_model_usage WHERE session_id = ? ORDER BY rowid LIMIT 1",
                (session_id,),
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO session_model_usage (session_id, model, task, api_call_count,"
                    " input_tokens, estimated_cost_usd, cost_status, first_seen, last_seen)"
                    " VALUES (?, 'hermes-4-405b', '', 1, ?, ?, 'estimated', ?, ?)",
                    (session_id, tokens, cost, at, at),
                )
            else:
                conn.execute(
                    "UPDATE session_model_usage SET api_call_count = api_call_count + 1,"
                    " input_tokens = input_tokens + ?,"
                    " estimated_cost_usd = coalesce(estimated_cost_usd, 0) + ?, last_seen = ?"
                    " WHERE rowid = ?",
                    (tokens, cost, at, row[0]),
                )
        sets = "input_tokens = coalesce(input_tokens, 0) + ?"
        if "estimated_cost_usd" in _columns(conn, "sessions"):
            sets += ", estimated_cost_usd = coalesce(estimated_cost_usd, 0) + ?"
            params: tuple[Any, ...] = (tokens, cost, session_id)
        else:
            params = (tokens, session_id)
        conn.execute(f"UPDATE sessions SET {sets} WHERE id = ?", params)
        conn.execute("COMMIT")


def compact_in_place(path: Path, session_id: str, summary: str, at: float, keep: int = 2) -> bool:
    """Today's in-place compaction: one write flips the live rows to ``active=0,
    compacted=1`` and inserts a summary carrier plus the retained tail as fresh
    live rows. False when the file has no flag columns (such files rotate instead)."""
    with closing(_live(path)) as conn:
        cols = _columns(conn, "messages")
        if "compacted" not in cols:
            return False
        conn.execute("BEGIN IMMEDIATE")
        live = conn.execute(
            "SELECT role, content FROM messages WHERE session_id = ? AND active = 1 ORDER BY id",
            (session_id,),
        ).fetchall()
        conn.execute(
            "UPDATE messages SET active = 0, compacted = 1 WHERE session_id = ? AND active = 1",
            (session_id,),
        )
        rows = [("user", SUMMARY_PREFIX + "\n" + summary)]
        rows += [(r["role"], r["content"]) for r in live[-keep:]] if keep else []
        for n, (role, text) in enumerate(rows):
            values = {
                "session_id": session_id,
                "role": role,
                "content": text,
                "timestamp": at + n / 1000,
                "active": 1,
                "compacted": 0,
            }
            conn.execute(*_insert("messages", values, cols))
        _bump_activity(conn, session_id, len(rows), at)
        conn.execute("COMMIT")
    return True


def rewind(path: Path, session_id: str, count: int, at: float) -> int:
    """Undo the last ``count`` live rows: today's Hermes leaves them ``active=0,
    compacted=0`` (and counts the rewind); a file without flags loses them."""
    with closing(_live(path)) as conn:
        cols = _columns(conn, "messages")
        flagged = "active" in cols
        where = "session_id = ? AND active = 1" if flagged else "session_id = ?"
        ids = [
            r[0]
            for r in conn.execute(
                f"SELECT id FROM messages WHERE {where} ORDER BY id DESC LIMIT ?",
                (session_id, count),
            )
        ]
        if not ids:
            return 0
        marks = ",".join("?" for _ in ids)
        conn.execute("BEGIN IMMEDIATE")
        if flagged:
            conn.execute(
                f"UPDATE messages SET active = 0, compacted = 0 WHERE id IN ({marks})", ids
            )
        else:
            conn.execute(f"DELETE FROM messages WHERE id IN ({marks})", ids)
        if "rewind_count" in _columns(conn, "sessions"):
            conn.execute(
                "UPDATE sessions SET rewind_count = rewind_count + 1 WHERE id = ?", (session_id,)
            )
        _bump_activity(conn, session_id, -len(ids), at)
        conn.execute("COMMIT")
    return len(ids)


def set_parent(path: Path, session_id: str, parent_id: str | None) -> None:
    """Change a session's parent link in place (a restored copy or a repair tool can do
    it; the row count and ids stay the same)."""
    with closing(_live(path)) as conn:
        conn.execute(
            "UPDATE sessions SET parent_session_id = ? WHERE id = ?", (parent_id, session_id)
        )


def compress_into_child(
    path: Path, session_id: str, child_id: str, summary: str, at: float
) -> None:
    """Rotation: the parent ends by compression, a child continues from a summary."""
    with closing(_live(path)) as conn:
        session_cols, msg_cols = _columns(conn, "sessions"), _columns(conn, "messages")
        parent = dict(conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone())
        prefix = SUMMARY_PREFIX if "compacted" in msg_cols else LEGACY_SUMMARY_PREFIX
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "UPDATE sessions SET ended_at = ?, end_reason = 'compression' WHERE id = ?",
            (at, session_id),
        )
        values = {
            k: parent.get(k)
            for k in (
                "source",
                "user_id",
                "model",
                "model_config",
                "billing_provider",
                "profile_name",
            )
        }
        values.update(
            {
                "id": child_id,
                "parent_session_id": session_id,
                "started_at": at,
                "last_activity_at": at,
                "message_count": 1,
            }
        )
        conn.execute(*_insert("sessions", values, session_cols))
        message = {
            "session_id": child_id,
            "role": "user",
            "content": f"{prefix} {summary}",
            "timestamp": at,
            "active": 1,
            "compacted": 0,
        }
        conn.execute(*_insert("messages", message, msg_cols))
        conn.execute("COMMIT")


def prune(path: Path, retention_days: float, now: float) -> list[str]:
    """Hermes's auto-prune: delete ended sessions started over ``retention_days`` ago,
    except pinned ones, with their messages and usage rows; VACUUM when more than 25%
    of the file is free pages. Returns the deleted session ids."""
    with closing(_live(path)) as conn:
        pinned = "AND coalesce(pinned, 0) = 0" if "pinned" in _columns(conn, "sessions") else ""
        ids = [
            r[0]
            for r in conn.execute(
                f"SELECT id FROM sessions WHERE ended_at IS NOT NULL AND started_at < ? {pinned}",
                (now - retention_days * 86400,),
            )
        ]
        marks = ",".join("?" for _ in ids)
        conn.execute("BEGIN IMMEDIATE")
        if ids:
            conn.execute(f"DELETE FROM messages WHERE session_id IN ({marks})", ids)
            if _has_table(conn, "session_model_usage"):
                conn.execute(f"DELETE FROM session_model_usage WHERE session_id IN ({marks})", ids)
            conn.execute(f"DELETE FROM sessions WHERE id IN ({marks})", ids)
        conn.execute("COMMIT")
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        if pages and free / pages > 0.25:
            conn.execute("VACUUM")
    return ids


def backup_copy(path: Path, dest: Path) -> Path:
    """A consistent copy of a live home's file (what a user's backup holds)."""
    dest.unlink(missing_ok=True)
    with closing(sqlite3.connect(path)) as src, closing(sqlite3.connect(dest)) as out:
        src.backup(out)
    return dest


def restore_copy(backup: Path, path: Path) -> None:
    """Put a backup in place of the live file (``cp backup state.db`` with Hermes stopped)."""
    for suffix in ("-wal", "-shm", "-journal"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    path.write_bytes(backup.read_bytes())


def edit_message(path: Path, message_id: int, content: str) -> None:
    """Change a message's text in place, touching nothing else (no session counter)."""
    with closing(_live(path)) as conn:
        conn.execute("UPDATE messages SET content = ? WHERE id = ?", (content, message_id))


# ---------------------------------------------------------------------------
# Archive facts: sessions Hermes no longer has, kept in Recall's archive
# ---------------------------------------------------------------------------

#: When the gone session left Hermes: local noon of 2026-09-14, so its day is the
#: same in every zone the tests run in.
GONE_AT = datetime(2026, 9, 14, 12, 0).timestamp()


def build_gone_home(home: Path) -> dict[str, str]:
    """A Recall-store home as pages read an archive: ``kept`` is still in Hermes,
    ``gone`` was deleted from it on 2026-09-14 (compressed earlier into ``child``,
    still in Hermes). All three mention "redis"."""
    from dashboard.store.records import NewMessage
    from dashboard.store.session_store import SessionStore

    start = datetime(2026, 6, 1, 9, 0).timestamp()
    with SessionStore(home / "state.db") as store:
        kept = store.create_session(
            "cli", session_id="20260601_090000_aaaaaa", title="Kept redis notes", started_at=start
        )
        store.append_messages(
            kept,
            [
                NewMessage("user", "which redis eviction policy?", timestamp=start + 1),
                NewMessage("assistant", "allkeys-lru for a cache", timestamp=start + 2),
            ],
        )
        store.end_session(kept, "user_exit", ended_at=start + 60)
        gone = store.create_session(
            "cli",
            session_id="20260602_090000_bbbbbb",
            title="Pruned postgres notes",
            started_at=start + 86_400,
        )
        store.append_messages(
            gone,
            [
                NewMessage("user", "postgres locks and redis queues", timestamp=start + 86_401),
                NewMessage("assistant", "look at pg_locks first", timestamp=start + 86_402),
            ],
        )
        child = store.compress(
            gone,
            "postgres locks, redis queues",
            child_id="20260602_100000_cccccc",
            at=start + 90_000,
        )
        store.core.write(
            lambda c: c.execute(
                "UPDATE sessions SET gone_from_source_at=? WHERE id=?", (GONE_AT, gone)
            )
        )
    return {"kept": kept, "gone": gone, "child": child}


# ---------------------------------------------------------------------------
# A home Hermes's next prune sweep will reach (times relative to ``now``)
# ---------------------------------------------------------------------------

_DAY_S = 86_400.0

#: name -> (days since start, ended, pinned, messages). With ``retention_days: 30``
#: the sweep deletes exactly ``old``, ``older`` and ``ancient``.
PRUNE_SESSIONS: dict[str, tuple[float, bool, bool, int]] = {
    "old": (40, True, False, 3),
    "older": (75, True, False, 2),
    "ancient": (200, True, False, 4),
    "old_pinned": (60, True, True, 2),
    "old_open": (50, False, False, 2),
    "recent": (10, True, False, 2),
    "just_inside": (29.5, True, False, 1),
}
PRUNED_BY_30_DAYS = ("ancient", "older", "old")  # oldest first


def build_prune_home(
    home: Path,
    now: float,
    config: str | None = "sessions:\n  retention_days: 30\n",
    last_auto_prune: float | None = None,
) -> dict[str, str]:
    """A current-form home (config.yaml, usage rows) with sessions of mixed age, end and
    pin states (:data:`PRUNE_SESSIONS`); returns name -> session id."""
    path = _fresh(home / "state.db")
    if config is not None:
        (home / "config.yaml").write_text(config, encoding="utf-8")
    ids: dict[str, str] = {}
    statements: list[Statement] = []
    with closing(_connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(_CURRENT_SCHEMA + _CURRENT_FTS + _CURRENT_TRIGRAM)
        session_cols, msg_cols = _columns(conn, "sessions"), _columns(conn, "messages")
        for n, (name, (days, ended, pinned, count)) in enumerate(PRUNE_SESSIONS.items()):
            start = now - days * _DAY_S
            sid = datetime.fromtimestamp(start, UTC).strftime("%Y%m%d_%H%M%S") + f"_{n:06x}"
            ids[name] = sid
            values = {
                "id": sid,
                "source": "cli",
                "model": _SONNET,
                "started_at": start,
                "ended_at": start + 600 if ended else None,
                "end_reason": "user_exit" if ended else None,
                "title": f"Prune case {name}",
                "pinned": int(pinned),
                "message_count": count,
                "last_activity_at": start + 60,
            }
            statements.append(_insert("sessions", values, session_cols))
            for i in range(count):
                role = "user" if i % 2 == 0 else "assistant"
                message = {
                    "session_id": sid,
                    "role": role,
                    "content": f"{name} turn {i} redis",
                    "timestamp": start + i + 1,
                }
                statements.append(_insert("messages", message, msg_cols))
            statements.append(
                (
                    "INSERT INTO session_model_usage (session_id, model, api_call_count,"
                    " input_tokens, output_tokens, estimated_cost_usd, cost_status, first_seen,"
                    " last_seen) VALUES (?, ?, 1, 100, 10, 0.01, 'estimated', ?, ?)",
                    (sid, _SONNET, start, start + 60),
                )
            )
        statements += [
            (
                "INSERT INTO state_meta (key, value) VALUES (?, ?)",
                ("fts_storage_version", str(FTS_STORAGE_VERSION)),
            ),
            ("INSERT INTO schema_version (version) VALUES (?)", (CURRENT_SCHEMA_VERSION,)),
        ]
        if last_auto_prune is not None:
            statements.append(
                (
                    "INSERT INTO state_meta (key, value) VALUES (?, ?)",
                    ("last_auto_prune", str(last_auto_prune)),
                )
            )
        _run(conn, statements)
    return ids


# ---------------------------------------------------------------------------
# In-place compaction epochs (today's Hermes) beside rotation chains
# ---------------------------------------------------------------------------

#: A conversation that only ever compacted in place: 3 compactions, each re-inserting
#: the last 2 live rows (so each tail exists twice), and one rewind in the last epoch.
S_EPOCHS = "20260901_100000_e90c01"
#: A rotation chain (from before the switch) whose newest segment then compacted in
#: place twice.
S_ROTATED = "20260902_100000_e90c02"
S_ROTATED_TIP = "20260902_110000_e90c03"
#: A child that starts 3 s before its parent ended (clock slack): part 2 of 2.
S_EARLY_PARENT = "20260903_100000_e90c04"
S_EARLY_CHILD = "20260903_103057_e90c05"

#: Said only in the first epoch of :data:`S_EPOCHS` (before compaction 1 of 3).
EPOCH1_WORD = "quillwort"
#: Said only in each later epoch (2, 3, and the live one, 4).
EPOCH_WORDS = ("bramblewick", "cindervale", "duskmantle")
#: Said only in the rows the rewind undid (never shown unless asked for).
EPOCH_REWOUND_WORD = "gloamfern"
#: Said only before the rotated chain's tip compacted in place.
ROTATED_WORD = "hollowmere"

EPOCH_FORMS = ("current_views", "older_with_flags")


def is_summary_text(content: str | None) -> bool:
    """Whether a row is a compaction summary carrier (either prefix)."""
    return bool(content) and content.lstrip().startswith((SUMMARY_PREFIX, LEGACY_SUMMARY_PREFIX))  # type: ignore[union-attr]


@dataclass(frozen=True)
class EpochFacts:
    """What :func:`build_epochs_home` wrote, for the tests to check answers against."""

    db: Path
    #: Per in-place session, per compaction: (time, ids of the rows it archived,
    #: ids of the summary carrier and re-inserted tail it wrote).
    compactions: dict[str, list[tuple[float, list[int], list[int]]]]
    rewound: list[int]  # ids the rewind left active=0, compacted=0
    #: Every distinct message of S_EPOCHS in order, as a person reads "everything":
    #: (role, content), the re-inserted tails once, the summaries included.
    distinct: list[tuple[str, str]]
    word_ids: dict[str, int]  # each epoch word -> the id of the row saying it


def build_epochs_home(home: Path, form: str = "current_views") -> EpochFacts:
    """A home of ``form`` (:data:`EPOCH_FORMS`: today's views form, or an older
    inline-FTS file with ``active``/``compacted`` added by ALTER TABLE and no
    ``display_kind``) holding the fixture dataset plus the in-place and mixed
    conversations above, written through the same operations Hermes performs."""
    db = home / "state.db"
    if form == "current_views":
        build_current_views(db)
    elif form == "older_with_flags":
        build_missing_new_columns(db)
        with closing(_live(db)) as conn:
            conn.execute("ALTER TABLE messages ADD COLUMN active INTEGER NOT NULL DEFAULT 1")
            conn.execute("ALTER TABLE messages ADD COLUMN compacted INTEGER NOT NULL DEFAULT 0")
    else:
        raise ValueError(f"unknown epoch form {form!r}")
    at = _epoch(S_EPOCHS)
    compactions: dict[str, list[tuple[float, list[int], list[int]]]] = {}
    word_ids: dict[str, int] = {}
    distinct: list[tuple[str, str]] = []

    def turn(sid: str, user: str, reply: str) -> list[int]:
        nonlocal at
        at += 60
        ids = append_turn(db, sid, user, reply, at)
        if sid == S_EPOCHS:
            distinct.extend((("user", user), ("assistant", reply)))
        return ids

    def compact(sid: str, summary: str, keep: int = 2) -> None:
        nonlocal at
        at += 60
        with closing(_live(db)) as conn:
            live = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM messages WHERE session_id = ? AND active = 1 ORDER BY id",
                    (sid,),
                )
            ]
            top = conn.execute("SELECT max(id) FROM messages").fetchone()[0]
        assert compact_in_place(db, sid, summary, at, keep=keep)
        with closing(_live(db)) as conn:
            written = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM messages WHERE session_id = ? AND id > ? ORDER BY id",
                    (sid, top),
                )
            ]
        compactions.setdefault(sid, []).append((at, live, written))
        if sid == S_EPOCHS:
            distinct.append(("user", f"{SUMMARY_PREFIX}\n{summary}"))

    start_session(db, S_EPOCHS, at, title="Long in-place conversation")
    ids = turn(S_EPOCHS, f"the {EPOCH1_WORD} question", "a first answer")
    word_ids[EPOCH1_WORD] = ids[0]
    turn(S_EPOCHS, "and the retry budget?", "three retries with jitter")
    for n, word in enumerate(EPOCH_WORDS, start=1):
        compact(S_EPOCHS, f"so far: part {n}")
        ids = turn(S_EPOCHS, f"now about {word}", f"noted, {word} it is")
        word_ids[word] = ids[0]
        if n == len(EPOCH_WORDS):  # the live epoch: one turn undone
            undone = turn(S_EPOCHS, f"try {EPOCH_REWOUND_WORD} instead", "rewinding that")
            at += 60
            assert rewind(db, S_EPOCHS, 2, at) == 2
            for _ in undone:
                distinct.pop()
    with closing(_live(db)) as conn:
        rewound = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM messages WHERE session_id = ? AND active = 0 AND compacted = 0"
                " ORDER BY id",
                (S_EPOCHS,),
            )
        ]

    at = _epoch(S_ROTATED)
    start_session(db, S_ROTATED, at, title="Rotated then in place")
    turn(S_ROTATED, f"the {ROTATED_WORD} plan", "first segment")
    at = _epoch(S_ROTATED_TIP)
    compress_into_child(db, S_ROTATED, S_ROTATED_TIP, "rotation summary", at)
    ids = turn(S_ROTATED_TIP, f"still on {ROTATED_WORD}", "second segment")
    word_ids[ROTATED_WORD] = ids[0]
    compact(S_ROTATED_TIP, "tip, first in-place compaction")
    turn(S_ROTATED_TIP, "more on the tip", "ok")
    compact(S_ROTATED_TIP, "tip, second in-place compaction")
    turn(S_ROTATED_TIP, "the tip's live turn", "ok")

    at = _epoch(S_EARLY_PARENT)
    start_session(db, S_EARLY_PARENT, at, title="Clock slack")
    turn(S_EARLY_PARENT, "before the handoff", "ok")
    parent_end = _epoch(S_EARLY_CHILD) + 3  # the child's start is 3 s before this
    compress_into_child(db, S_EARLY_PARENT, S_EARLY_CHILD, "slack summary", _epoch(S_EARLY_CHILD))
    end_session(db, S_EARLY_PARENT, parent_end, reason="compression")
    at = _epoch(S_EARLY_CHILD) + 10
    turn(S_EARLY_CHILD, "after the handoff", "ok")
    return EpochFacts(db, compactions, rewound, distinct, word_ids)


def add_epoch_usage(facts: EpochFacts) -> dict[int, float] | None:
    """Usage rows for :data:`S_EPOCHS` as Hermes keeps them (one per model and task,
    accumulating): the main loop's row spans every compaction; a title call ran only in
    epoch 1; a switch to another model came only in the live epoch (4). Returns the
    estimated cost that lies inside each epoch ({1: ..., 4: ...}); None when the form
    has no usage table."""
    times = [at for at, _, _ in facts.compactions[S_EPOCHS]]
    start = _epoch(S_EPOCHS)
    rows = [
        ("hermes-4-405b", "", 0.75, start + 1, times[-1] + 300),  # spans all three
        ("hermes-4-405b", "title_generation", 0.002, start + 2, start + 3),
        ("hermes-4-70b", "", 0.04, times[-1] + 100, times[-1] + 200),
    ]
    with closing(_live(facts.db)) as conn:
        if not _has_table(conn, "session_model_usage"):
            return None
        conn.execute("BEGIN IMMEDIATE")
        for model, task, cost, first, last in rows:
            conn.execute(
                "INSERT INTO session_model_usage (session_id, model, task, api_call_count,"
                " input_tokens, estimated_cost_usd, cost_status, first_seen, last_seen)"
                " VALUES (?, ?, ?, 1, 100, ?, 'estimated', ?, ?)",
                (S_EPOCHS, model, task, cost, first, last),
            )
        conn.execute("COMMIT")
    return {1: 0.002, 4: 0.04}


# ---------------------------------------------------------------------------
# Profiles (issue 17): one Hermes home split into profiles, each a home of its own
# ---------------------------------------------------------------------------

#: A word each profile's history says and no other profile's does.
PROFILE_WORDS = {"default": "saxifrage", "legacy": "orrery", "empty": "quillback"}


@dataclass(frozen=True)
class ProfilesFacts:
    """A root home (profile ``default``, today's views form), ``profiles/legacy`` (the
    seed's external-content form) and ``profiles/empty`` (today's schema, no session
    yet), each with its own memories and config. The default and legacy profiles share
    every fixture session id (Hermes never shares records between profiles: the same id
    names two different sessions)."""

    root: Path
    dbs: dict[str, Path]  # profile -> its state.db
    words: dict[str, str]  # profile -> the word only its history says (empty: none said)
    said_in: dict[str, str]  # profile -> the session saying it
    shared_ids: tuple[str, ...]  # session ids present in more than one profile


def build_empty_current(path: Path) -> Path:
    """Today's schema with nothing in it: a profile Hermes created and never ran."""
    path = _fresh(path)
    with closing(_connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(_CURRENT_SCHEMA + _CURRENT_FTS + _CURRENT_TRIGRAM)
        conn.execute(
            "INSERT INTO state_meta (key, value) VALUES (?, ?)",
            ("fts_storage_version", str(FTS_STORAGE_VERSION)),
        )
        conn.execute("INSERT INTO schema_version (version) VALUES (?)", (CURRENT_SCHEMA_VERSION,))
    return path


def build_profiles_home(root: Path) -> ProfilesFacts:
    """The three-profile home of issue 17's checks (see :class:`ProfilesFacts`)."""
    # Hermes's own layout: the root is the profile named default, the rest under profiles/.
    profiles = root / "profiles"
    homes = {"default": root, "legacy": profiles / "legacy", "empty": profiles / "empty"}
    builders = {
        "default": build_current_views,
        "legacy": build_seed_external,
        "empty": build_empty_current,
    }
    dbs: dict[str, Path] = {}
    said_in: dict[str, str] = {}
    for name, home in homes.items():
        dbs[name] = builders[name](home / "state.db")
        memories = home / "memories"
        memories.mkdir(parents=True, exist_ok=True)
        (memories / "USER.md").write_text(f"The {name} profile's user.\n", encoding="utf-8")
        notes = f"Notes kept by the {name} profile.\n"
        (memories / "MEMORY.md").write_text(notes, encoding="utf-8")
        (home / "config.yaml").write_text("memory:\n  user_char_limit: 1375\n", encoding="utf-8")
    for name in ("default", "legacy"):
        word = PROFILE_WORDS[name]
        append_turn(dbs[name], S_CRON, f"did the {word} job run?", f"yes, {word} ran", 1.79e9)
        said_in[name] = S_CRON
    words = {n: w for n, w in PROFILE_WORDS.items() if n in said_in}
    return ProfilesFacts(root, dbs, words, said_in, SESSION_IDS)


#: What the default profile's look-alike session says (:func:`add_lookalike_session`).
LOOKALIKE_WORD = "wolfsbane"
LOOKALIKE_OPENING = f"is the {LOOKALIKE_WORD} batch ready to ship?"


def add_lookalike_session(facts: ProfilesFacts, profile: str = "legacy") -> str:
    """A default-profile session whose id reads like another profile's archived one:
    ``<profile>:<a session id that profile has>`` (issue 24, "a crafted session id
    swallows a profile"). Untitled; it says :data:`LOOKALIKE_WORD`. Returns its id."""
    crafted = f"{profile}:{facts.said_in[profile]}"
    start_session(facts.dbs["default"], crafted, 1.7905e9)
    append_turn(
        facts.dbs["default"], crafted, LOOKALIKE_OPENING, f"yes, {LOOKALIKE_WORD} ships", 1.7905e9
    )
    return crafted


@dataclass(frozen=True)
class LoggedCallsFacts:
    """``logs/agent.log`` written into a profiles home (:func:`add_agent_logs`), in
    Hermes's format (agent_logs.py): the default profile logged a turn of :data:`S_CRON`
    (3 calls), a call of no session and one without usage, then its log rotated once and
    a turn of :data:`S_ROOT` went into the new file; ``legacy`` logged a long-context turn
    of its own :data:`S_CRON` (the same id, another session: 250k tokens and up); the
    empty profile has no ``logs/`` at all."""

    calls: dict[str, list[al.Call]]  # profile -> every call its log files hold, in order
    logs: dict[str, Path]  # profile -> its logs folder (only those that have one)

    def priced(self, profile: str, session: str) -> list[al.Call]:
        """The calls of ``session`` in ``profile``'s log that logged their tokens."""
        return [c for c in self.calls[profile] if c.session == session and c.priced]


def add_agent_logs(facts: ProfilesFacts, at: float = 1.79e9) -> LoggedCallsFacts:
    """Write the profiles' agent.log files (see :class:`LoggedCallsFacts`)."""
    default, legacy = facts.root, facts.root / "profiles" / "legacy"
    first = al.turn_calls(S_CRON, at) + [
        al.Call(at + 20.125, None, 1, al.SMALL_MODEL, prompt=400, output=30),
        al.unpriced_call(S_CRON, at + 25.5, number=4),
    ]
    al.write_log(default, al.with_noise(first))
    al.rotate(default)
    second = al.turn_calls(S_ROOT, at + 60)
    al.write_log(default, al.with_noise(second))
    long_turn = al.turn_calls(S_CRON, at, first_prompt=250_000)
    al.write_log(legacy, al.with_noise(long_turn))
    calls = {"default": first + second, "legacy": long_turn, "empty": []}
    return LoggedCallsFacts(calls, {"default": default / "logs", "legacy": legacy / "logs"})
