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

import hashlib
import json
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dashboard.repository import conventions, trigram_build
from dashboard.repository.layout import Layout, detect_layout
from dashboard.repository.readonly import open_readonly, read_snapshot
from dashboard.repository.schema import DERIVED_USAGE_PREFIX, TRIGRAM_PENDING_KEY
from dashboard.repository.store import SessionStore, index_messages
from dashboard.repository.trigram_build import TrigramBuild

SOURCE_SCHEMA = "hermes_source"  # the source's name while attached to the archive
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
#: What a message is, for telling one message from another that took its id in a
#: replaced file (see follow.py): not its content, which may be edited in place.
IDENTITY_COLUMNS = ("session_id", "role", "timestamp")
FLAG_COLUMNS = ("id", *IDENTITY_COLUMNS, "active", "compacted", "display_kind")


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

    def __init__(
        self, conn: sqlite3.Connection, layout: Layout, home_root: Path, *,
        profile: str | None = None, id_prefix: str = "",
    ) -> None:  # fmt: skip
        self.conn = conn
        self.layout = layout
        # The profile every row of this source is archived under (profiles.py names
        # them; the folder's own name when the caller does not).
        self.profile = profile or conventions.profile_of(home_root)
        # What the archive puts before this source's session ids (profiles.Profile).
        # Every session id this adapter returns is the archive's; every one it is
        # given is too: the source's own ids never leave it.
        self.id_prefix = id_prefix

    def archive_sql(self, expr: str) -> str:
        """SQL naming the archive's id of the source's session id ``expr``."""
        if not self.id_prefix:
            return expr
        return "'" + self.id_prefix.replace("'", "''") + "' || " + expr

    def source_ids(self, ids: Iterable[str]) -> list[str]:
        """The source's own ids of archive session ids (each starts with the prefix)."""
        cut = len(self.id_prefix)
        return [str(i)[cut:] for i in ids]

    def archive_id(self, source_id: str) -> str:
        return f"{self.id_prefix}{source_id}"

    def session_keys(self) -> list[tuple[float, str]]:
        """Every session's ``(started_at, id)``, newest first."""
        rows = self.conn.execute(
            f"SELECT started_at, {self.archive_sql('id')} FROM sessions"
            " ORDER BY started_at DESC, id DESC"
        )
        return [(float(r[0]), str(r[1])) for r in rows]

    def read(self, ids: Sequence[str], *, messages: bool = True) -> list[SourceSession]:
        """The sessions ``ids`` with their usage (and messages), from one snapshot.

        Each row also carries ``_digest``, the text :func:`row_digest` hashes.
        """
        marks = ",".join("?" for _ in ids)
        own = tuple(self.source_ids(ids))
        with read_snapshot(self.conn):
            sessions = [
                dict(r)
                for r in self.conn.execute(
                    f"SELECT {self._session_select()}, {self.digest_sql()} AS _digest,"
                    f" s.id AS _src_id FROM sessions s WHERE s.id IN ({marks})",
                    own,
                )
            ]
            found: dict[str, list[dict[str, Any]]] = {sid: [] for sid in ids}
            if messages:
                for m in self.messages_where(f"m.session_id IN ({marks})", own):
                    found[m["session_id"]].append(m)
            # A file without last_activity_at: the session's newest message says it.
            latest: dict[str, float] = {}
            if "last_activity_at" not in self.layout.session_columns:
                latest = {
                    self.archive_id(r[0]): r[1]
                    for r in self.conn.execute(
                        f"SELECT session_id, max(timestamp) FROM messages"
                        f" WHERE session_id IN ({marks}) GROUP BY session_id",
                        own,
                    )
                }
            usage = self.usage(ids, sessions) if sessions else {}
        out = []
        for s in sessions:
            if s.get("last_activity_at") is None:
                s["last_activity_at"] = latest.get(s["id"]) or s["started_at"]
            # The folder says which profile a row is, not a column a copied file carries.
            s["profile"] = self.profile
            out.append(SourceSession(s, found.get(s["id"], []), usage.get(s["id"], [])))
        return out

    # -- what a later sync asks (dashboard/repository/follow.py) ------------------------

    def messages_where(
        self, where: str, params: tuple[Any, ...], columns: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """Messages (``columns``, default every copied one) matching ``where``, by id."""
        select = self._select("messages", columns or MESSAGE_COLUMNS, conventions.MESSAGE_DEFAULTS)
        return [
            dict(r)
            for r in self.conn.execute(
                f"SELECT {select} FROM messages m WHERE {where} ORDER BY m.id", params
            )
        ]

    def messages_select(self, schema: str) -> str:
        """A SELECT of every copied message column (``m``) from ``schema``'s ``messages``:
        the first import's ``INSERT … SELECT`` from the attached source."""
        select = self._select("messages", MESSAGE_COLUMNS, conventions.MESSAGE_DEFAULTS)
        return f"SELECT {select} FROM {schema}.messages m"

    def digest_sql(self) -> str:
        """Every column of the source's session row as one text (``s`` the alias).

        Every column, not only those the archive copies: Hermes bumps some (say
        ``rewind_count``) when it changes a session's messages. Formatting a REAL
        as text is the slow part of reading 20k rows this way (3-5x the rest), so
        REAL columns count in micro-units as integers (a cost to $0.000001, a time
        to the microsecond); the system prompt counts by its length (it is large
        and written once).
        """
        parts = []
        for name, declared in sorted(self._session_types().items()):
            col = f's."{name}"'
            if name == "system_prompt":
                parts.append(f"coalesce(length({col}), -1)")
            elif "REAL" in declared or "FLOA" in declared or "DOUB" in declared:
                parts.append(f"coalesce(CAST(round({col} * 1000000) AS INTEGER), 'n')")
            else:  # text and integers concatenate as they are; NULL is char(1)
                parts.append(f"coalesce({col}, char(1))")
        return " || '|' || ".join(parts)

    def _session_types(self) -> dict[str, str]:
        """The sessions table's columns and their declared types (upper case)."""
        if not hasattr(self, "_types"):
            self._types = {
                str(r[1]): str(r[2] or "").upper()
                for r in self.conn.execute("PRAGMA table_info(sessions)")
            }
        return self._types

    def session_digests(self) -> dict[str, str]:
        """Every source session's id and :func:`row_digest`."""
        rows = self.conn.execute(f"SELECT s.id, {self.digest_sql()} FROM sessions s")
        return {self.archive_id(str(r[0])): row_digest(r[1]) for r in rows}

    def message_sums_sql(self, alias: str = "m", id_sql: str = "m.id") -> str:
        """Per-session sums over messages that change when any row is added, lost,
        re-flagged or rewritten (:data:`MESSAGE_SUMS`), as a SELECT list."""
        have = self.layout.message_columns

        def col(c: str) -> str:
            if c in have:
                return f"{alias}.{c}"
            return _literal(conventions.MESSAGE_DEFAULTS.get(c))

        return message_sums_select(col, id_sql)

    def message_sums(self) -> dict[str, tuple[Any, ...]]:
        """:meth:`message_sums_sql` for every source session."""
        add_checksum(self.conn)
        rows = self.conn.execute(
            f"SELECT m.session_id, {self.message_sums_sql()} FROM messages m GROUP BY m.session_id"
        )
        return {self.archive_id(str(r[0])): tuple(r[1:]) for r in rows}

    def usage_sums(self) -> dict[str, frozenset[tuple[Any, ...]]]:
        """Every session's usage rows as a comparable set (this layout: none of its own;
        each derived row follows its session row, which the digests compare)."""
        return {}

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

        def one(c: str) -> str:
            if c not in have:
                return f"{_literal(defaults.get(c))} AS {c}"
            if c == "session_id" and self.id_prefix:
                return f"{self.archive_sql(f'{alias}.{c}')} AS {c}"
            return f"{alias}.{c}"

        return ", ".join(one(c) for c in columns)

    def _session_select(self) -> str:
        have = self.layout.session_columns
        mapped = {"profile": "profile_name"} if "profile_name" in have else {}
        parts = []
        for c in SESSION_COLUMNS:
            if c in ("id", "parent_session_id") and self.id_prefix and c in have:
                parts.append(f"{self.archive_sql(f's.{c}')} AS {c}")
            elif c in mapped:
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

    def usage_sums(self) -> dict[str, frozenset[tuple[Any, ...]]]:
        select = self._select("session_model_usage", USAGE_COLUMNS, {})
        return usage_sets(self.conn.execute(f"SELECT {select} FROM session_model_usage s"))

    def usage(
        self, ids: Sequence[str], sessions: list[dict[str, Any]]
    ) -> dict[str, list[dict[str, Any]]]:
        marks = ",".join("?" for _ in ids)
        select = self._select("session_model_usage", USAGE_COLUMNS, {})
        out: dict[str, list[dict[str, Any]]] = {}
        for r in self.conn.execute(
            f"SELECT {select} FROM session_model_usage s WHERE s.session_id IN ({marks}) "
            "ORDER BY s.rowid",
            tuple(self.source_ids(ids)),
        ):
            out.setdefault(r["session_id"], []).append(dict(r))
        return out


class RecallStoreAdapter(CurrentAdapter):
    """Recall's own store (the demo home, an agent embedding Recall): usage rows, inline prompts."""

    name = "recall-store"


def adapter_for(
    conn: sqlite3.Connection, layout: Layout, home_root: Path, *, profile: str | None = None,
    id_prefix: str = "",
) -> Adapter:  # fmt: skip
    """The adapter reading ``layout`` (``profile``, ``id_prefix``: see :class:`Adapter`)."""
    kind: type[Adapter] = SeedAdapter
    if layout.is_recall_store:
        kind = RecallStoreAdapter
    elif layout.has_model_usage:
        kind = CurrentAdapter
    return kind(conn, layout, home_root, profile=profile, id_prefix=id_prefix)


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
    """What one ``sync`` did (added: new rows; updated: rows the source changed)."""

    adapter: str
    sessions_total: int
    sessions_added: int
    messages_added: int
    usage_added: int
    resumed: bool
    seconds: float
    bulk: bool
    sessions_updated: int = 0
    messages_updated: int = 0
    usage_updated: int = 0
    marked_gone: int = 0  # rows the source lost since the last sync (kept, marked)
    back_in_source: int = 0  # rows marked gone that the source has again
    reconciled: bool = False  # compared every session's message sums, not the cheap checks
    replaced: bool = False  # the source file was replaced: ids name other messages now


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
    reconcile: bool = False,
    profile: str | None = None,
    id_prefix: str = "",
) -> SyncReport:
    """Bring the archive level with the source; never write the source, never drop a row.

    The first import (or its resumption) copies every session, newest first, through
    the bulk path and is followed by a reconciliation, unless the source stayed still
    all through an import that was not resumed (``PRAGMA data_version`` on the reading
    connection: then every batch read the same file, and the import is its copy; at 1M
    messages the comparison costs ~15 s). A later sync is the cheap one
    (follow.py) unless ``reconcile`` asks for the full comparison, or the source looks
    replaced.
    """
    from dashboard.repository.follow import follow  # follow.py builds on this module

    began = time.monotonic()
    home = source_key(home_root)
    prepare_archive(archive)
    conn = open_readonly(state_db)
    try:
        layout = detect_layout(conn, state_db)
        adapter = adapter_for(conn, layout, home_root, profile=profile, id_prefix=id_prefix)
        resumed = read_watermark(archive.core.conn, home) is not None
        first = resumed or not archive.core.conn.execute(
            "SELECT 1 FROM sessions WHERE src_home=? LIMIT 1", (home,)
        ).fetchone()
        added = [0, 0, 0]
        still = True
        if first:
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            added = _first_import(archive, adapter, home, batch_sessions, on_progress)
            still = conn.execute("PRAGMA data_version").fetchone()[0] == version
        check = reconcile or resumed or (first and not still)
        followed = follow(archive, adapter, home, state_db, reconcile=check, copied=first)
    finally:
        conn.close()
    c = followed.changes
    return SyncReport(
        adapter.name, followed.sessions_total, added[0] + c.sessions_added,
        added[1] + c.messages_added, added[2] + c.usage_added, resumed,
        time.monotonic() - began, bool(first), c.sessions_updated, c.messages_updated,
        c.usage_updated, c.marked_gone, c.back_in_source, followed.reconciled, followed.replaced,
    )  # fmt: skip


def prepare_archive(archive: SessionStore) -> None:
    """What an archive differs in from Recall's store: titles need not be unique.

    Hermes keeps titles unique among the sessions it has; the archive also keeps
    the ones it pruned, and a new session may take a pruned one's title. (Recall's
    own store keeps the index: there it is Hermes's rule, and set_title's answer.)
    """
    unique = archive.core.conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='index' AND name='idx_sessions_title_unique'"
    ).fetchone()
    if unique:
        archive.core.write(
            lambda c: (
                c.execute("DROP INDEX idx_sessions_title_unique"),
                c.execute("CREATE INDEX IF NOT EXISTS idx_sessions_title ON sessions(title)"),
            )
        )


def _first_import(
    archive: SessionStore,
    adapter: Adapter,
    home: str,
    batch_sessions: int,
    on_progress: Callable[[Progress], None] | None,
) -> list[int]:
    """Copy every source row the archive lacks, newest sessions first; resume a killed pass.

    Returns the sessions, messages and usage rows added.
    """
    keys = adapter.session_keys()
    mark = read_watermark(archive.core.conn, home)
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

    copy = adapter.messages_select(SOURCE_SCHEMA)
    # The trigram index built on the second core as batches land (trigram_build.py),
    # when every message the archive will hold comes through this pass.
    any_message = archive.core.conn.execute("SELECT 1 FROM messages LIMIT 1").fetchone()
    fresh = mark is None and not any_message
    trigram = TrigramBuild(archive.core.path) if fresh else None
    # Rows of another home (profile) already indexed, no trigram index pending: each
    # step indexes its rows in both indexes, and searches keep the trigram meanwhile.
    pending = archive.core.conn.execute(
        "SELECT 1 FROM state_meta WHERE key=? AND value='1'", (TRIGRAM_PENDING_KEY,)
    ).fetchone()
    both = bool(any_message) and not pending
    if trigram is None:
        trigram_build.discard(archive.core.path)  # a killed import's, useless now
    landed: dict[int, tuple[str, list[Any]]] = {}  # chunk -> what its transaction landed

    def steps() -> Iterator[Callable[[sqlite3.Connection], None]]:
        nonlocal done
        for start in range(0, len(todo), batch_sessions):
            chunk = todo[start : start + batch_sessions]
            rows = adapter.read([sid for _, sid in chunk], messages=False)
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
                added[at][1] = _copy_messages(
                    c, home, copy, [s.row["_src_id"] for s in rows], now)  # fmt: skip
                landed[at] = _landed(home, rows, now)
                index_messages(c, *landed[at], trigram=both)
                put_meta(c, WATERMARK_PREFIX + home, covered)

            yield step  # resumed once the step committed
            if trigram is not None:
                trigram.add(*landed.pop(start))
            done += len(chunk)
            if on_progress:
                on_progress(Progress(done, total, sum(a[1] for a in added.values())))
        if on_progress:  # bulk_write builds the trigram index next
            on_progress(Progress(done, total, sum(a[1] for a in added.values()), "indexing"))

    if on_progress:
        on_progress(Progress(done, total, 0))
    # Triggers off; each transaction word-indexes the rows it lands, so the newest
    # sessions are searchable seconds after the start and a kill leaves a trustworthy
    # word index; the trigram index is built once at the end.
    # The source's messages go straight from the file into the archive (attached
    # read-only): on a 1M-message home, reading them into Python and back cost more
    # than the whole copy in SQL.
    try:
        with archive.core.attached_readonly(Path(adapter.layout.path), SOURCE_SCHEMA):
            archive.bulk_write(
                steps(), foreign_keys=False, rebuild_index=False, index_in_steps=True,
                trigram=trigram, trigram_in_steps=both,
            )  # fmt: skip
    finally:
        if trigram is not None:
            trigram.close()  # taken, or the import stopped: either way the thread ends
    archive.core.write(lambda c: c.execute(
        "DELETE FROM state_meta WHERE key=?", (WATERMARK_PREFIX + home,)))  # fmt: skip
    # The trigram build left hundreds of MB in the WAL: copy them back now, as part of
    # the import, rather than on whichever later write SQLite's auto-checkpoint picks.
    archive.core.checkpoint()
    return [sum(a[i] for a in added.values()) for i in range(3)]


def _insert(
    conn: sqlite3.Connection, home: str, sessions: list[SourceSession], now: float
) -> list[int]:
    """Insert rows the archive lacks (keyed by source home and id); return how many of each."""
    # rowcount, not total_changes: the FTS triggers' own writes must not count.
    cols = SESSION_COLUMNS + PROVENANCE + ("src_digest",)
    added_sessions = conn.executemany(
        f"INSERT INTO sessions ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)}) "
        "ON CONFLICT(id) DO NOTHING",
        [
            (*(s.row[c] for c in SESSION_COLUMNS), home, s.row["_src_id"], now,
             row_digest(s.row["_digest"]))
            for s in sessions
        ],
    ).rowcount  # fmt: skip
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


def _copy_messages(
    conn: sqlite3.Connection, home: str, select: str, session_ids: list[str], now: float
) -> int:
    """Copy the messages of ``session_ids`` (the source's own ids) from the attached
    source (``select``: :meth:`Adapter.messages_select`) in one statement; return how
    many were added.

    The same rules as :func:`_insert` for rows read into Python: the source's id is
    kept when it is free, a row already archived (same home and source id) is left.
    """
    cols = MESSAGE_COLUMNS + PROVENANCE
    marks = ",".join("?" for _ in session_ids)
    batch = f"({select} WHERE m.session_id IN ({marks}))"
    # A row keeps the source's id when it is free. A clashing row gets a fresh one, in
    # source order, above both the archive's ids and every id of the batch: a fresh id
    # chosen at insert time (max + 1) could be one a later row of the batch keeps
    # (UNIQUE failed: a profile imported after another's rows).
    base = conn.execute(
        f"SELECT max(coalesce((SELECT max(id) FROM main.messages), 0),"
        f" coalesce((SELECT max(id) FROM {batch}), 0))",
        session_ids,
    ).fetchone()[0]
    picked_t = ", ".join(f"t.{c}" for c in MESSAGE_COLUMNS[1:])
    return max(conn.execute(
        f"INSERT INTO messages ({', '.join(cols)}) "
        f"SELECT CASE WHEN t.clash THEN ? + t.rn ELSE t.id END, {picked_t}, ?, "
        "CAST(t.id AS TEXT), ? FROM ("
        "SELECT c.*, row_number() OVER (PARTITION BY c.clash ORDER BY c.id) AS rn FROM ("
        "SELECT b.*, EXISTS (SELECT 1 FROM main.messages x WHERE x.id = b.id) AS clash"
        f" FROM {batch} b) c) t WHERE 1 ORDER BY t.id "
        "ON CONFLICT(src_home, src_id) WHERE src_id IS NOT NULL DO NOTHING",
        [base, home, now, *session_ids],
    ).rowcount, 0)


def _landed(home: str, sessions: list[SourceSession], now: float) -> tuple[str, list[Any]]:
    """The messages one transaction landed (first seen ``now``), as a WHERE and its values."""
    marks = ",".join("?" for _ in sessions)
    return (
        f"session_id IN ({marks}) AND src_home = ? AND archive_first_seen = ?",
        [*(s.row["id"] for s in sessions), home, now],
    )


def usage_source_id(usage: dict[str, Any]) -> str:
    """A usage row's id in its source: its key, or the session row it was derived from."""
    if usage.get("_derived"):
        return f"{DERIVED_USAGE_PREFIX}{usage['session_id']}"
    return json.dumps([usage[c] for c in USAGE_KEY], ensure_ascii=False)


def put_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    """Set one ``state_meta`` key inside a write."""
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


def row_digest(text: str | None) -> str:
    """The compact digest of a session row's :meth:`Adapter.digest_sql` text."""
    return hashlib.blake2b((text or "").encode(), digest_size=12).hexdigest()


CHECKSUM = "recall_crc32"


def add_checksum(conn: sqlite3.Connection) -> None:
    """Give ``conn`` :data:`CHECKSUM`, the CRC-32 of a value's text (0 for NULL), which
    :func:`message_sums_select` sums. A function is per connection: no write, and a
    read-only source connection may have one."""
    conn.create_function(CHECKSUM, 1, _crc32, deterministic=True)


def _crc32(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, bytes):
        return zlib.crc32(value)
    return zlib.crc32(str(value).encode("utf-8", "surrogatepass"))


def message_sums_select(col: Callable[[str], str], id_sql: str) -> str:
    """The per-session sums :meth:`Adapter.message_sums` compares, ``col(name)`` naming
    a column (the archive names its own, a source file its own or a default). The
    connection needs :func:`add_checksum`: lengths alone miss an edit that keeps them."""
    lengths = ("content", "tool_calls", "tool_name", "tool_call_id", "reasoning", "display_kind")
    return ", ".join(
        (
            "count(*)",
            f"sum({id_sql})",
            f"sum({CHECKSUM}({col('content')}))",
            f"sum({CHECKSUM}({col('tool_calls')}))",
            # Milliseconds as integers: a float sum depends on the order it is added in.
            f"sum(CAST(round({col('timestamp')} * 1000) AS INTEGER))",
            *(f"total(length({col(c)}))" for c in lengths),
            f"sum({col('active')})",
            f"sum({col('compacted')})",
            f"total({col('token_count')})",
        )
    )


def usage_sets(rows: Iterable[sqlite3.Row]) -> dict[str, frozenset[tuple[Any, ...]]]:
    """Usage rows (``USAGE_COLUMNS`` first) grouped by session as sets of their values."""
    out: dict[str, set[tuple[Any, ...]]] = {}
    for r in rows:
        out.setdefault(str(r[0]), set()).add(tuple(r[c] for c in USAGE_COLUMNS))
    return {sid: frozenset(v) for sid, v in out.items()}
