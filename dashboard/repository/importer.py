"""One importer from a Hermes home's ``state.db`` into the archive, one adapter per layout.

The source is opened read-only (readonly.open_readonly: ``mode=ro``, ``query_only``,
no memory map) and never written. Every layout-specific read lives in an
:class:`Adapter`; every Hermes convention it relies on comes from conventions.py.

The first import walks sessions **newest first** and lands them through the
store's bulk path, a few sessions per transaction. Each transaction also commits
the watermark (the ``(started_at, id)`` of the last session it covers), so a
process killed at any point resumes after the last whole transaction: nothing
twice (rows are keyed by their source home and id), nothing missed.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dashboard.repository import conventions
from dashboard.repository.layout import Layout, detect_layout
from dashboard.repository.readonly import open_readonly, read_snapshot
from dashboard.repository.schema import DERIVED_USAGE_PREFIX
from dashboard.repository.store import SessionStore, index_messages

BATCH_SESSIONS = 50  # sessions per transaction: ~5,000 messages on a typical home
WATERMARK_PREFIX = "archive_watermark:"
LAST_SYNC_PREFIX = "archive_last_sync:"

#: Archive columns copied from a source row when the source has them.
SESSION_COLUMNS = (
    "id", "source", "user_id", "model", "model_config", "system_prompt", "parent_session_id",
    "started_at", "ended_at", "end_reason", "message_count", "tool_call_count",
    "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
    "reasoning_tokens", "billing_provider", "billing_base_url", "billing_mode",
    "estimated_cost_usd", "actual_cost_usd", "cost_status", "cost_source", "pricing_version",
    "title", "last_activity_at", "api_call_count", "archived", "pinned", "hidden",
    "title_source", "cwd", "git_branch", "profile",
)  # fmt: skip
MESSAGE_COLUMNS = (
    "id", "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name",
    "timestamp", "token_count", "finish_reason", "reasoning", "reasoning_content",
    "reasoning_details", "codex_reasoning_items", "codex_message_items",
    "active", "compacted", "display_kind",
)  # fmt: skip
USAGE_COLUMNS = (
    "session_id", "model", "billing_provider", "billing_base_url", "billing_mode", "task",
    "api_call_count", "input_tokens", "output_tokens", "cache_read_tokens",
    "cache_write_tokens", "reasoning_tokens", "estimated_cost_usd", "actual_cost_usd",
    "cost_status", "cost_source", "pricing_version", "first_seen", "last_seen",
)  # fmt: skip
USAGE_KEY = USAGE_COLUMNS[:6]
PROVENANCE = ("src_home", "src_id", "archive_first_seen")


@dataclass
class SourceSession:
    """One session as read from the source: its row, its messages, its usage rows."""

    row: dict[str, Any]
    messages: list[dict[str, Any]]
    usage: list[dict[str, Any]]


class Adapter:
    """Reads one layout of ``state.db``; subclasses say how their layout differs.

    The base reads what every layout shares: ``sessions`` and ``messages`` as
    tables, with the columns the file has (a read-only opener sees only those).
    A column the file lacks takes the value the conventions give it.
    """

    name = "base"

    def __init__(self, conn: sqlite3.Connection, layout: Layout, home_root: Path) -> None:
        self.conn = conn
        self.layout = layout
        self.profile = conventions.profile_of(home_root)

    def session_keys(self) -> list[tuple[float, str]]:
        """Every session's ``(started_at, id)``, newest first."""
        rows = self.conn.execute(
            "SELECT started_at, id FROM sessions ORDER BY started_at DESC, id DESC"
        )
        return [(float(r[0]), str(r[1])) for r in rows]

    def read(self, ids: Sequence[str]) -> list[SourceSession]:
        """The sessions ``ids`` with their messages and usage, from one snapshot."""
        marks = ",".join("?" for _ in ids)
        with read_snapshot(self.conn):
            sessions = [
                dict(r)
                for r in self.conn.execute(
                    f"SELECT {self._session_select()} FROM sessions s WHERE s.id IN ({marks})",
                    tuple(ids),
                )
            ]
            messages: dict[str, list[dict[str, Any]]] = {sid: [] for sid in ids}
            for r in self.conn.execute(
                f"SELECT {self._select('messages', MESSAGE_COLUMNS, conventions.MESSAGE_DEFAULTS)}"
                f" FROM messages m WHERE m.session_id IN ({marks}) ORDER BY m.id",
                tuple(ids),
            ):
                messages[r["session_id"]].append(dict(r))
            usage = self.usage(ids, sessions)
        out = []
        for s in sessions:
            rows = messages.get(s["id"], [])
            if s.get("last_activity_at") is None:
                s["last_activity_at"] = max(
                    (m["timestamp"] for m in rows), default=s["started_at"]
                )
            if s.get("profile") is None:
                s["profile"] = self.profile
            out.append(SourceSession(s, rows, usage.get(s["id"], [])))
        return out

    def usage(
        self, ids: Sequence[str], sessions: list[dict[str, Any]]
    ) -> dict[str, list[dict[str, Any]]]:
        """Usage rows per session: this layout has none, so each comes from its session row."""
        out: dict[str, list[dict[str, Any]]] = {}
        for s in sessions:
            row = conventions.derived_usage_row(s)
            if row is not None:
                out[s["id"]] = [{"session_id": s["id"], **row, "_derived": True}]
        return out

    # -- column mapping ---------------------------------------------------------------

    def _source_columns(self, table: str) -> frozenset[str]:
        if table == "sessions":
            return self.layout.session_columns
        if table == "messages":
            return self.layout.message_columns
        return frozenset(r[1] for r in self.conn.execute(f"PRAGMA table_info({table})"))

    def _select(self, table: str, columns: Sequence[str], defaults: dict[str, Any]) -> str:
        """``alias.col`` for columns the file has, the convention's default (or NULL) else."""
        have = self._source_columns(table)
        alias = table[0]
        return ", ".join(
            f"{alias}.{c}" if c in have else f"{_literal(defaults.get(c))} AS {c}" for c in columns
        )

    def _session_select(self) -> str:
        have = self.layout.session_columns
        mapped = {"profile": "profile_name"} if "profile_name" in have else {}
        parts = []
        for c in SESSION_COLUMNS:
            if c in mapped:
                parts.append(f"s.{mapped[c]} AS {c}")
            elif c == "system_prompt":
                parts.append(f"{self._system_prompt()} AS system_prompt")
            elif c in have:
                parts.append(f"s.{c}")
            else:
                parts.append(f"{_literal(conventions.SESSION_DEFAULTS.get(c))} AS {c}")
        return ", ".join(parts)

    def _system_prompt(self) -> str:
        return "s.system_prompt" if "system_prompt" in self.layout.session_columns else "NULL"


class SeedAdapter(Adapter):
    """Seed and older forms (inline or external FTS, any journal mode): no usage table."""

    name = "seed"


class CurrentAdapter(Adapter):
    """Today's Hermes (FTS through views): usage rows, prompts by hash, profile names."""

    name = "current"

    def _system_prompt(self) -> str:
        cols = self.layout.session_columns
        inline = "s.system_prompt" if "system_prompt" in cols else "NULL"
        if "system_prompt_hash" not in cols or "system_prompts" not in self.layout.tables:
            return inline
        # Hermes stores each prompt once and points to it by content hash.
        return (
            f"coalesce({inline}, (SELECT p.prompt FROM system_prompts p "
            "WHERE p.hash = s.system_prompt_hash))"
        )

    def usage(
        self, ids: Sequence[str], sessions: list[dict[str, Any]]
    ) -> dict[str, list[dict[str, Any]]]:
        marks = ",".join("?" for _ in ids)
        select = self._select("session_model_usage", USAGE_COLUMNS, {})
        out: dict[str, list[dict[str, Any]]] = {}
        for r in self.conn.execute(
            f"SELECT {select} FROM session_model_usage s WHERE s.session_id IN ({marks}) "
            "ORDER BY s.rowid",
            tuple(ids),
        ):
            out.setdefault(r["session_id"], []).append(dict(r))
        return out


class RecallStoreAdapter(CurrentAdapter):
    """Recall's own store (the demo home, an agent embedding Recall): usage rows, inline prompts."""

    name = "recall-store"


def adapter_for(conn: sqlite3.Connection, layout: Layout, home_root: Path) -> Adapter:
    """The adapter reading ``layout``."""
    if layout.is_recall_store:
        return RecallStoreAdapter(conn, layout, home_root)
    if layout.has_model_usage:
        return CurrentAdapter(conn, layout, home_root)
    return SeedAdapter(conn, layout, home_root)


# -- the import ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    """How far a sync is: sessions done of the pass's total, rows added so far.

    ``phase`` is ``copying``, then on a first import ``indexing`` while the trigram
    index is built (searches by word already work then).
    """

    sessions_done: int
    sessions_total: int
    messages_added: int
    phase: str = "copying"


@dataclass(frozen=True)
class SyncReport:
    """What one ``sync`` did."""

    adapter: str
    sessions_total: int
    sessions_added: int
    messages_added: int
    usage_added: int
    resumed: bool
    seconds: float
    bulk: bool


def source_key(home_root: Path) -> str:
    """How the archive names a source home (its resolved path)."""
    return str(Path(home_root).expanduser().resolve())


def read_watermark(conn: sqlite3.Connection, home: str) -> dict[str, Any] | None:
    """The pass in progress for ``home`` (None when the last pass finished or none ran)."""
    row = conn.execute(
        "SELECT value FROM state_meta WHERE key=?", (WATERMARK_PREFIX + home,)
    ).fetchone()
    return json.loads(row[0]) if row else None


def sync(
    archive: SessionStore,
    state_db: Path,
    home_root: Path,
    *,
    batch_sessions: int = BATCH_SESSIONS,
    on_progress: Callable[[Progress], None] | None = None,
) -> SyncReport:
    """Copy every source row the archive lacks, newest sessions first; resume a killed pass."""
    began = time.monotonic()
    home = source_key(home_root)
    conn = open_readonly(state_db)
    try:
        layout = detect_layout(conn, state_db)
        adapter = adapter_for(conn, layout, home_root)
        keys = adapter.session_keys()
        mark = read_watermark(archive.core.conn, home)
        resumed = mark is not None
        if mark is not None:
            # A pass was cut off: what it began with, down to its watermark, is in;
            # sessions that started since then are newer than its first one.
            done_key = (mark["started_at"], mark["id"])
            first_key = tuple(mark["first"])
            todo = [k for k in keys if k < done_key or k > first_key]
        else:
            todo = keys
            first_key = keys[0] if keys else (0.0, "")
        total = len(keys)
        added: dict[int, list[int]] = {}  # chunk -> sessions, messages, usage added
        done = total - len(todo)

        def steps() -> Iterator[Callable[[sqlite3.Connection], None]]:
            nonlocal done
            for start in range(0, len(todo), batch_sessions):
                chunk = todo[start : start + batch_sessions]
                rows = adapter.read([sid for _, sid in chunk])
                rows.sort(key=lambda s: (s.row["started_at"], s.row["id"]), reverse=True)
                last = chunk[-1]

                covered = json.dumps({"started_at": last[0], "id": last[1], "first": first_key})

                def step(
                    c: sqlite3.Connection, rows: list[SourceSession] = rows, covered: str = covered,
                    at: int = start,
                ) -> None:
                    # Kept per chunk (not summed here): a retried transaction re-runs this.
                    now = time.time()
                    added[at] = _insert(c, home, rows, now)
                    if bulk:
                        _index_landed(c, home, rows, now)
                    _put(c, WATERMARK_PREFIX + home, covered)

                yield step
                done += len(chunk)
                if on_progress:
                    on_progress(Progress(done, total, sum(a[1] for a in added.values())))
            if on_progress and bulk:  # bulk_write builds the trigram index next
                on_progress(Progress(done, total, sum(a[1] for a in added.values()), "indexing"))

        if on_progress:
            on_progress(Progress(done, total, 0))
        # The first import (or its resumption) takes the bulk path: triggers off, and
        # each transaction indexes the rows it lands, so the newest sessions are
        # searchable seconds after the start and a kill leaves a trustworthy index.
        # A later sync adds few rows to a large archive; the triggers index them.
        bulk = resumed or not archive.core.conn.execute(
            "SELECT 1 FROM sessions WHERE src_home=? LIMIT 1", (home,)
        ).fetchone()
        archive.bulk_write(
            steps(), foreign_keys=False, rebuild_index=False, index_in_steps=bool(bulk)
        )
    finally:
        conn.close()

    def finish(c: sqlite3.Connection) -> None:
        c.execute("DELETE FROM state_meta WHERE key=?", (WATERMARK_PREFIX + home,))
        _put(c, LAST_SYNC_PREFIX + home, json.dumps({"at": time.time(), "layout": adapter.name}))

    archive.core.write(finish)
    sums = [sum(a[i] for a in added.values()) for i in range(3)]
    return SyncReport(adapter.name, total, *sums, resumed, time.monotonic() - began, bulk)


def _insert(
    conn: sqlite3.Connection, home: str, sessions: list[SourceSession], now: float
) -> list[int]:
    """Insert rows the archive lacks (keyed by source home and id); return how many of each."""
    # rowcount, not total_changes: the FTS triggers' own writes must not count.
    added_sessions = conn.executemany(
        f"INSERT INTO sessions ({', '.join(SESSION_COLUMNS + PROVENANCE)}) "
        f"VALUES ({', '.join('?' for _ in SESSION_COLUMNS + PROVENANCE)}) "
        "ON CONFLICT(id) DO NOTHING",
        [(*(s.row[c] for c in SESSION_COLUMNS), home, s.row["id"], now) for s in sessions],
    ).rowcount
    # The source's message id is kept as the archive's when it is free, so links to
    # a message (#m123) stay the same; a second home's clash gets a fresh id.
    cols = MESSAGE_COLUMNS + PROVENANCE
    added_messages = conn.executemany(
        f"INSERT INTO messages ({', '.join(cols)}) VALUES ("
        "CASE WHEN EXISTS (SELECT 1 FROM messages WHERE id = ?1) THEN NULL ELSE ?1 END, "
        f"{', '.join(f'?{i}' for i in range(2, len(cols) + 1))}) "
        "ON CONFLICT(src_home, src_id) WHERE src_id IS NOT NULL DO NOTHING",
        [
            (*(m[c] for c in MESSAGE_COLUMNS), home, str(m["id"]), now)
            for s in sessions
            for m in s.messages
        ],
    ).rowcount
    cols = USAGE_COLUMNS + PROVENANCE
    added_usage = conn.executemany(
        f"INSERT INTO session_model_usage ({', '.join(cols)}) "
        f"VALUES ({', '.join('?' for _ in cols)}) "
        f"ON CONFLICT({', '.join(USAGE_KEY)}) DO NOTHING",
        [
            (*(u[c] for c in USAGE_COLUMNS), home, usage_source_id(u), now)
            for s in sessions
            for u in s.usage
        ],
    ).rowcount
    return [max(added_sessions, 0), max(added_messages, 0), max(added_usage, 0)]


def _index_landed(
    conn: sqlite3.Connection, home: str, sessions: list[SourceSession], now: float
) -> None:
    """Index the messages this transaction landed (first seen ``now``) in both FTS indexes."""
    marks = ",".join("?" for _ in sessions)
    index_messages(
        conn,
        f"session_id IN ({marks}) AND src_home = ? AND archive_first_seen = ?",
        [*(s.row["id"] for s in sessions), home, now],
    )


def usage_source_id(usage: dict[str, Any]) -> str:
    """A usage row's id in its source: its key, or the session row it was derived from."""
    if usage.get("_derived"):
        return f"{DERIVED_USAGE_PREFIX}{usage['session_id']}"
    return json.dumps([usage[c] for c in USAGE_KEY], ensure_ascii=False)


def _put(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO state_meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
        (key, value),
    )


def _literal(value: Any) -> str:
    """A SQL literal for a convention's default (ints and None only)."""
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(int(value))
    raise TypeError(f"no literal for {value!r}")
