"""Recall's own Hermes-compatible store: the write API an agent or importer uses.

Every method is one transaction through :class:`WriteCore`, so a turn's messages,
their session counters and the FTS rows land together or not at all.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from dashboard.errors import ConflictError, NotFoundError, ValidationError
from dashboard.store import schema, trigram_build
from dashboard.store.fts_upkeep import (
    TRIGRAM,
    count_write,
    defer_fts,
    defer_nothing_pending,
    drop_fts_triggers,
    finish_trigram,
    put_meta,
    restore_fts_triggers,
    triggers_off,
)
from dashboard.store.records import (
    COST_STATUS_ORDER,
    WRITTEN_MESSAGE_COLUMNS,
    ImportSession,
    NewMessage,
    Usage,
    batches,
    carrier_text,
    clean_title,
    insert_batch,
    new_session_id,
    weakest_status,
)
from dashboard.store.trigram_build import TrigramBuild
from dashboard.store.writecore import WriteCore

log = logging.getLogger(__name__)
T = TypeVar("T")


_SESSION_FIELDS = (
    "source",
    "user_id",
    "model",
    "model_config",
    "system_prompt",
    "parent_session_id",
    "started_at",
    "billing_provider",
    "billing_base_url",
    "billing_mode",
    "title",
)


#: Columns a re-inserted tail row does not copy from the row it repeats.
_COPY_SET = frozenset(("session_id", "timestamp", "active", "compacted"))


class SessionStore:
    """Recall's own ``state.db``: created, migrated and written through the write core."""

    def __init__(
        self, path: str | os.PathLike[str], *, finish_index: bool = True, **core_options: Any
    ) -> None:
        """Open (creating, migrating) the store; finish an index a killed bulk writer left.

        ``finish_index=False`` leaves an index-as-you-go import's trigram index for
        the writer about to resume it (the importer), which builds it once at its end.
        """
        self.path = Path(path)
        self.core = WriteCore(self.path, stamp=count_write, **core_options)
        try:
            schema.migrate(self.core)
            if self.index_is_stale():
                self.repair_index()  # a bulk import died half-way: finish it
            elif finish_index and triggers_off(self.core.conn):
                self.finish_deferred_index()  # one that indexed as it went died
        except BaseException:
            self.core.close()
            raise

    def close(self) -> None:
        self.core.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_meta(self, key: str, value: str | None) -> None:
        """Set (or delete, with None) one ``state_meta`` key."""

        self.core.write(lambda conn: put_meta(conn, key, value))

    # -- sessions -------------------------------------------------------------------

    def create_session(
        self,
        source: str,
        *,
        session_id: str | None = None,
        model: str | None = None,
        started_at: float | None = None,
        **fields: Any,
    ) -> str:
        """Create a session and return its id.

        Extra keyword fields: user_id, model_config (dict or JSON text),
        system_prompt, parent_session_id, billing_provider, billing_base_url,
        billing_mode, title.
        """
        unknown = set(fields) - set(_SESSION_FIELDS)
        if unknown:
            raise ValidationError(f"unknown session fields: {', '.join(sorted(unknown))}")
        if not source:
            raise ValidationError("a session needs a source (cli, telegram, cron, ...)")
        at = time.time() if started_at is None else started_at
        sid = session_id or new_session_id(at)
        if isinstance(fields.get("model_config"), dict):
            fields["model_config"] = json.dumps(fields["model_config"])
        if fields.get("title") is not None:
            fields["title"] = clean_title(fields["title"])
        values = {"id": sid, "source": source, "model": model, "started_at": at, **fields}
        values["last_activity_at"] = at
        cols = ", ".join(values)
        marks = ", ".join("?" for _ in values)

        def insert(conn: sqlite3.Connection) -> None:
            parent = values.get("parent_session_id")
            if parent and not _exists(conn, parent):
                raise NotFoundError(f"parent session {parent!r} does not exist")
            try:
                conn.execute(
                    f"INSERT INTO sessions ({cols}) VALUES ({marks})", tuple(values.values())
                )
            except sqlite3.IntegrityError as exc:
                raise ConflictError(_integrity_reason(exc, sid, values.get("title"))) from exc

        self.core.write(insert)
        return sid

    def end_session(
        self, session_id: str, end_reason: str, *, ended_at: float | None = None
    ) -> None:
        """Mark a session ended with a reason (``user_exit``, ``compression``, ...)."""
        at = time.time() if ended_at is None else ended_at

        def end(conn: sqlite3.Connection) -> None:
            cur = conn.execute(
                "UPDATE sessions SET ended_at=?, end_reason=? WHERE id=?",
                (at, end_reason, session_id),
            )
            if cur.rowcount == 0:
                raise NotFoundError(f"session {session_id!r} does not exist")

        self.core.write(end)

    def set_title(self, session_id: str, title: str | None) -> str | None:
        """Set (or clear with None/"") a unique title of at most 100 characters."""
        clean = clean_title(title) if title else None

        def update(conn: sqlite3.Connection) -> None:
            try:
                cur = conn.execute("UPDATE sessions SET title=? WHERE id=?", (clean, session_id))
            except sqlite3.IntegrityError as exc:
                raise ConflictError(_integrity_reason(exc, session_id, clean)) from exc
            if cur.rowcount == 0:
                raise NotFoundError(f"session {session_id!r} does not exist")

        self.core.write(update)
        return clean

    def delete_session(self, session_id: str) -> int:
        """Delete a session and its messages (children are detached); return rows removed."""

        def delete(conn: sqlite3.Connection) -> int:
            if not _exists(conn, session_id):
                raise NotFoundError(f"session {session_id!r} does not exist")
            conn.execute(
                "UPDATE sessions SET parent_session_id=NULL WHERE parent_session_id=?",
                (session_id,),
            )
            removed = conn.execute("DELETE FROM messages WHERE session_id=?", (session_id,))
            conn.execute("DELETE FROM session_model_usage WHERE session_id=?", (session_id,))
            conn.execute(f"DELETE FROM {schema.CALLS_TABLE} WHERE session_id=?", (session_id,))
            conn.execute("DELETE FROM sessions WHERE id=?", (session_id,))
            return removed.rowcount

        return self.core.write(delete)

    # -- messages -------------------------------------------------------------------

    def append_messages(self, session_id: str, messages: Sequence[NewMessage]) -> list[int]:
        """Append one turn's messages in a single transaction; return their ids."""
        now = time.time()
        rows = [m.row(session_id, now) for m in messages]
        calls = sum(m.call_count() for m in messages)
        last = max((r[6] for r in rows), default=now)
        sql = (
            f"INSERT INTO messages ({', '.join(WRITTEN_MESSAGE_COLUMNS)}) "
            f"VALUES ({', '.join('?' for _ in WRITTEN_MESSAGE_COLUMNS)})"
        )

        def append(conn: sqlite3.Connection) -> list[int]:
            if not _exists(conn, session_id):
                raise NotFoundError(f"session {session_id!r} does not exist")
            ids = [conn.execute(sql, row).lastrowid for row in rows]
            conn.execute(
                "UPDATE sessions SET message_count = message_count + ?, "
                "tool_call_count = tool_call_count + ?, "
                "last_activity_at = max(coalesce(last_activity_at, 0), ?) WHERE id=?",
                (len(rows), calls, last, session_id),
            )
            return [int(i) for i in ids if i is not None]

        return self.core.write(append)

    # -- usage and cost ---------------------------------------------------------------

    def record_usage(self, session_id: str, usage: Usage) -> None:
        """Add a call's tokens and cost to its (model, provider, task) row and the session.

        A missing estimate stays NULL (a provider-reported actual cost replaces
        the estimate; it is not zero spend), and ``unknown`` stays unknown.
        """
        if usage.cost_status not in COST_STATUS_ORDER:
            raise ValidationError(f"cost_status must be one of {', '.join(COST_STATUS_ORDER)}")
        at = time.time() if usage.at is None else usage.at
        key = (
            session_id,
            usage.model,
            usage.billing_provider,
            usage.billing_base_url,
            usage.billing_mode,
            usage.task,
        )
        tokens = (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.reasoning_tokens,
        )

        def record(conn: sqlite3.Connection) -> None:
            session = conn.execute(
                "SELECT cost_status FROM sessions WHERE id=?", (session_id,)
            ).fetchone()
            if session is None:
                raise NotFoundError(f"session {session_id!r} does not exist")
            conn.execute(
                """
                INSERT INTO session_model_usage (
                    session_id, model, billing_provider, billing_base_url, billing_mode, task,
                    api_call_count, input_tokens, output_tokens, cache_read_tokens,
                    cache_write_tokens, reasoning_tokens, estimated_cost_usd, actual_cost_usd,
                    cost_status, cost_source, pricing_version, first_seen, last_seen)
                VALUES (?,?,?,?,?,?, ?,?,?,?,?,?, ?,?,?,?,?, ?,?)
                ON CONFLICT (session_id, model, billing_provider, billing_base_url,
                             billing_mode, task) DO UPDATE SET
                    api_call_count = api_call_count + excluded.api_call_count,
                    input_tokens = input_tokens + excluded.input_tokens,
                    output_tokens = output_tokens + excluded.output_tokens,
                    cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
                    cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
                    reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens,
                    estimated_cost_usd = CASE WHEN estimated_cost_usd IS NULL
                        THEN excluded.estimated_cost_usd
                        ELSE estimated_cost_usd + coalesce(excluded.estimated_cost_usd, 0) END,
                    actual_cost_usd = CASE WHEN actual_cost_usd IS NULL
                        THEN excluded.actual_cost_usd
                        ELSE actual_cost_usd + coalesce(excluded.actual_cost_usd, 0) END,
                    cost_status = excluded.cost_status,
                    cost_source = excluded.cost_source,
                    pricing_version = coalesce(excluded.pricing_version, pricing_version),
                    last_seen = max(last_seen, excluded.last_seen)
                """,
                (
                    *key,
                    usage.api_calls,
                    *tokens,
                    usage.estimated_cost_usd,
                    usage.actual_cost_usd,
                    usage.cost_status,
                    usage.cost_source,
                    usage.pricing_version,
                    at,
                    at,
                ),
            )
            status = weakest_status(
                r[0]
                for r in conn.execute(
                    "SELECT cost_status FROM session_model_usage WHERE session_id=?",
                    (session_id,),
                )
            )
            conn.execute(
                """
                UPDATE sessions SET
                    input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,
                    cache_read_tokens = cache_read_tokens + ?,
                    cache_write_tokens = cache_write_tokens + ?,
                    reasoning_tokens = reasoning_tokens + ?,
                    api_call_count = coalesce(api_call_count, 0) + ?,
                    estimated_cost_usd = CASE WHEN ? IS NULL THEN estimated_cost_usd
                        ELSE coalesce(estimated_cost_usd, 0) + ? END,
                    actual_cost_usd = CASE WHEN ? IS NULL THEN actual_cost_usd
                        ELSE coalesce(actual_cost_usd, 0) + ? END,
                    cost_status = ?, cost_source = ?,
                    pricing_version = coalesce(?, pricing_version),
                    billing_provider = coalesce(billing_provider, nullif(?, ''))
                WHERE id = ?
                """,
                (
                    *tokens,
                    usage.api_calls,
                    usage.estimated_cost_usd,
                    usage.estimated_cost_usd,
                    usage.actual_cost_usd,
                    usage.actual_cost_usd,
                    status,
                    usage.cost_source,
                    usage.pricing_version,
                    usage.billing_provider,
                    session_id,
                ),
            )

        self.core.write(record)

    # -- compaction -----------------------------------------------------------------

    def compress(
        self,
        session_id: str,
        summary: str,
        *,
        child_id: str | None = None,
        at: float | None = None,
    ) -> str:
        """End a session by compression and continue it in a child; return the child id.

        The parent gets ``end_reason='compression'`` and ``ended_at``; the child
        inherits source, model and billing, points back through
        ``parent_session_id``, and its first message holds the summary.
        """
        when = time.time() if at is None else at
        text = carrier_text(summary)
        new_id = child_id or new_session_id(when)

        def split(conn: sqlite3.Connection) -> str:
            parent = conn.execute(
                "SELECT source, user_id, model, model_config, system_prompt, billing_provider,"
                " billing_base_url, billing_mode, ended_at FROM sessions WHERE id=?",
                (session_id,),
            ).fetchone()
            if parent is None:
                raise NotFoundError(f"session {session_id!r} does not exist")
            if parent["ended_at"] is not None:
                raise ConflictError(f"session {session_id!r} has already ended")
            conn.execute(
                "UPDATE sessions SET ended_at=?, end_reason='compression' WHERE id=?",
                (when, session_id),
            )
            try:
                conn.execute(
                    "INSERT INTO sessions (id, source, user_id, model, model_config,"
                    " system_prompt, parent_session_id, started_at, last_activity_at,"
                    " billing_provider, billing_base_url, billing_mode, message_count)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,1)",
                    (
                        new_id,
                        parent["source"],
                        parent["user_id"],
                        parent["model"],
                        parent["model_config"],
                        parent["system_prompt"],
                        session_id,
                        when,
                        when,
                        parent["billing_provider"],
                        parent["billing_base_url"],
                        parent["billing_mode"],
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise ConflictError(f"session {new_id!r} already exists") from exc
            conn.execute(
                "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?,?,?,?)",
                (new_id, "user", text, when),
            )
            return new_id

        return self.core.write(split)

    def compact_in_place(
        self, session_id: str, summary: str, *, keep: int = 2, at: float | None = None
    ) -> list[int]:
        """Compact a session in place, as today's Hermes does (HERMES_FACTS, "Today's
        Hermes"): in one write every live row becomes archived (``active=0,
        compacted=1``: still shown and searched), and a summary carrier plus a copy of the
        last ``keep`` live rows are inserted as fresh live rows. Returns the new ids.
        """
        when = time.time() if at is None else at
        copied = ", ".join(c for c in WRITTEN_MESSAGE_COLUMNS if c not in _COPY_SET)

        def compact(conn: sqlite3.Connection) -> list[int]:
            row = conn.execute("SELECT ended_at FROM sessions WHERE id=?", (session_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"session {session_id!r} does not exist")
            if row["ended_at"] is not None:
                raise ConflictError(f"session {session_id!r} has already ended")
            live = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM messages WHERE session_id=? AND active=1 ORDER BY id",
                    (session_id,),
                )
            ]
            conn.execute(
                "UPDATE messages SET active=0, compacted=1 WHERE session_id=? AND active=1",
                (session_id,),
            )
            ids = [
                conn.execute(
                    "INSERT INTO messages (session_id, role, content, timestamp, active, compacted)"
                    " VALUES (?, 'user', ?, ?, 1, 0)",
                    (session_id, carrier_text(summary), when),
                ).lastrowid
            ]
            for n, source in enumerate(live[-keep:] if keep > 0 else [], start=1):
                ids.append(
                    conn.execute(
                        f"INSERT INTO messages (session_id, {copied}, timestamp, active, compacted)"
                        f" SELECT session_id, {copied}, ?, 1, 0 FROM messages WHERE id=?",
                        (when + n / 1000, source),
                    ).lastrowid
                )
            conn.execute(
                "UPDATE sessions SET message_count = message_count + ?, "
                "last_activity_at = max(coalesce(last_activity_at, 0), ?) WHERE id=?",
                (len(ids), when, session_id),
            )
            return [int(i) for i in ids if i is not None]

        return self.core.write(compact)

    # -- bulk path --------------------------------------------------------------------

    def bulk_import(
        self, sessions: Iterable[ImportSession], *, batch_messages: int = 20_000
    ) -> int:
        """Import many sessions fast: triggers off, plain inserts, FTS ``rebuild``, triggers on.

        ``fts_stale='1'`` is set while the triggers are off, so a crash half-way
        leaves a file every reader knows not to trust, and :meth:`repair_index`
        (run on the next open) finishes the job. Returns messages imported.
        """
        steps = (
            lambda conn, b=batch: insert_batch(conn, b)
            for batch in batches(sessions, batch_messages)
        )
        return sum(self.bulk_write(steps))

    def bulk_write(
        self,
        steps: Iterable[Callable[[sqlite3.Connection], T]],
        *,
        foreign_keys: bool = True,
        rebuild_index: bool = True,
        index_in_steps: bool = False,
        trigram: TrigramBuild | None = None,
        trigram_in_steps: bool = False,
    ) -> list[T]:
        """The bulk path for any writer: each step one transaction, FTS triggers off.

        The indexes are rebuilt once at the end (or on the next open after a
        crash, :meth:`repair_index`). ``index_in_steps=True`` instead has each step
        word-index the rows it added (:func:`index_messages`, same transaction), so
        they are searchable by word as they land and that index is never stale; the
        trigram index, the slow one (about 6× the word index's build), is built once
        at the end (:meth:`finish_deferred_index`) and marked pending until then, so
        readers do not ask it.
        ``rebuild_index=False`` keeps the triggers on instead, for a few rows into
        a large store, where a rebuild would cost more than indexing them one by
        one. ``foreign_keys=False`` lets an importer land a child before its
        parent, or keep a child whose parent the source lost. ``trigram``: a side
        build the steps feed, taken at the end instead of the trigram rebuild.
        ``trigram_in_steps`` (with ``index_in_steps``): the steps index both indexes
        (``index_messages(..., trigram=True)``), and nothing is pending or rebuilt —
        for rows added to an archive already indexed (another profile's first
        import), where a rebuild would re-read every row already there and leave
        every search scanning until it finished.
        """
        triggers_off = rebuild_index or index_in_steps
        both = index_in_steps and trigram_in_steps
        if triggers_off:
            off = drop_fts_triggers
            if index_in_steps:
                off = defer_nothing_pending if both else defer_fts
            self.core.write(off)
        results: list[T] = []
        try:
            for step in steps:
                # Per step, under the core's lock: another thread's write between two
                # steps (a web request on the same connection) keeps its checks.
                results.append(self.core.write(step, foreign_keys=foreign_keys))
        except (KeyboardInterrupt, SystemExit):
            # The process is going away: leave the index as a kill would, for the
            # next open or the resumed import to finish.
            index_in_steps = rebuild_index = False
            raise
        finally:
            # Also after an error: this store stays open, and its writes need triggers.
            if both:
                self.core.write(restore_fts_triggers)
            elif index_in_steps:
                self.finish_deferred_index(trigram)
            elif rebuild_index:
                self.repair_index()
        return results

    def repair_index(self) -> None:
        """Rebuild both FTS indexes from ``messages`` and restore the triggers."""

        def rebuild(conn: sqlite3.Connection) -> None:
            for table in schema.FTS_TABLES:
                conn.execute(f"INSERT INTO {table}({table}) VALUES ('rebuild')")
            restore_fts_triggers(conn)
            put_meta(conn, "fts_stale", None)

        self.core.write(rebuild)

    def finish_deferred_index(self, built: TrigramBuild | None = None) -> None:
        """Build the trigram index an index-as-you-go import deferred; triggers back on.

        With ``built`` (a side build given every batch the import landed) its index is
        taken instead of a rebuild, when it covers exactly the archive's messages.
        """
        if built is not None and self._adopt(built):
            return

        def finish(conn: sqlite3.Connection) -> None:
            conn.execute(f"INSERT INTO {TRIGRAM}({TRIGRAM}) VALUES ('rebuild')")
            finish_trigram(conn)

        self.core.write(finish)

    def _adopt(self, built: TrigramBuild) -> bool:
        """Take a side build's index in one transaction; False (nothing written) if unfit."""
        try:
            built.finish()
            # Another connection's commit, so this writer's FTS5 re-reads the index.
            with (
                WriteCore(self.core.path, stamp=count_write) as other,
                other.attached_readonly(built.path, trigram_build.BUILT_SCHEMA),
            ):
                other.write(lambda c: (built.copy_into(c), finish_trigram(c)))
            return True
        except (trigram_build.BuildFailed, sqlite3.Error) as exc:
            log.warning("trigram side build not used, rebuilding instead: %s", exc)
            return False
        finally:
            trigram_build.discard(self.core.path)

    def index_is_stale(self) -> bool:
        row = self.core.conn.execute(
            "SELECT value FROM state_meta WHERE key='fts_stale'"
        ).fetchone()
        return bool(row and row[0] == "1")


def _exists(conn: sqlite3.Connection, session_id: str) -> bool:
    return conn.execute("SELECT 1 FROM sessions WHERE id=?", (session_id,)).fetchone() is not None


def _integrity_reason(exc: sqlite3.IntegrityError, session_id: str, title: str | None) -> str:
    text = str(exc)
    if "title" in text:
        return f"another session already has the title {title!r}"
    if "sessions.id" in text:
        return f"session {session_id!r} already exists"
    return text
