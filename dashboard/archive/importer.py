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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dashboard.archive.call_log import keep_calls
from dashboard.archive.copies import has_uids, mark_repeats, take_uids
from dashboard.archive.follow import follow
from dashboard.archive.layout import detect_layout
from dashboard.archive.marks import WATERMARK_PREFIX, put_meta, read_watermark, source_key
from dashboard.archive.source import (
    MESSAGE_COLUMNS,
    PROVENANCE,
    SESSION_COLUMNS,
    SOURCE_SCHEMA,
    USAGE_COLUMNS,
    USAGE_KEY,
    Adapter,
    SourceSession,
    adapter_for,
    row_digest,
    usage_source_id,
)
from dashboard.store import trigram_build
from dashboard.store.fts_upkeep import index_messages
from dashboard.store.readonly import BUSY_TIMEOUT_S, open_readonly
from dashboard.store.schema import TRIGRAM_PENDING_KEY
from dashboard.store.session_store import SessionStore
from dashboard.store.trigram_build import TrigramBuild

BATCH_SESSIONS = 50  # sessions per transaction: ~5,000 messages on a typical home


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
    replaced_why: str | None = None  # how that was told (follow.replaced_why)
    sessions_reread: int = 0  # sessions the later sync compared with the source
    calls_added: int = 0  # calls of logs/agent.log the archive kept (archive/call_log.py)
    calls_notes: tuple[str, ...] = ()  # log files that could not be read


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
    busy_timeout: float = BUSY_TIMEOUT_S,
) -> SyncReport:
    """Bring the archive level with the source; never write the source, never drop a row.

    The first import (or its resumption) copies every session, newest first, through
    the bulk path and is followed by a reconciliation, unless the source stayed still
    all through an import that was not resumed (``PRAGMA data_version`` on the reading
    connection: then every batch read the same file, and the import is its copy; at 1M
    messages the comparison costs ~15 s). A later sync is the cheap one
    (follow.py) unless ``reconcile`` asks for the full comparison, or the source looks
    replaced. ``busy_timeout``: how long to wait for a writer's lock on the source.
    Each sync then keeps the calls the home's ``logs/agent.log`` added (call_log.py).
    """

    began = time.monotonic()
    home = source_key(home_root)
    prepare_archive(archive)
    conn = open_readonly(state_db, timeout=busy_timeout)
    try:
        layout = detect_layout(conn, state_db)
        adapter = adapter_for(conn, layout, home_root, profile=profile, id_prefix=id_prefix)
        resumed = read_watermark(archive.core.conn, home) is not None
        first = (
            resumed
            or not archive.core.conn.execute(
                "SELECT 1 FROM sessions WHERE src_home=? LIMIT 1", (home,)
            ).fetchone()
        )
        added = [0, 0, 0]
        still = True
        if first:
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            added = _first_import(archive, adapter, home, batch_sessions, on_progress)
            still = conn.execute("PRAGMA data_version").fetchone()[0] == version
        check = reconcile or resumed or (first and not still)
        followed = follow(archive, adapter, home, state_db, reconcile=check, copied=first)
        archive.core.write(lambda c: take_uids(c, adapter, home))
    finally:
        conn.close()
    # The calls the home's agent.log logged (their tokens one by one): the log rotates
    # away, so every sync keeps what it has added.
    calls = keep_calls(archive, home_root, adapter.ids)
    c = followed.changes
    return SyncReport(
        adapter.name,
        followed.sessions_total,
        added[0] + c.sessions_added,
        added[1] + c.messages_added,
        added[2] + c.usage_added,
        resumed,
        time.monotonic() - began,
        bool(first),
        c.sessions_updated,
        c.messages_updated,
        c.usage_updated,
        c.marked_gone,
        c.back_in_source,
        followed.reconciled,
        followed.replaced,
        followed.replaced_why,
        c.sessions_reread,
        calls.added,
        calls.notes,
    )


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
    uids = has_uids(adapter)
    # The trigram index built on the second core as batches land (store/trigram_build.py),
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
                c: sqlite3.Connection,
                rows: list[SourceSession] = rows,
                covered: str = covered,
                at: int = start,
            ) -> None:
                # Kept per chunk (not summed here): a retried transaction re-runs this.
                now = time.time()
                added[at] = _insert(c, home, rows, now)
                added[at][1] = _copy_messages(c, home, copy, [s.row["_src_id"] for s in rows], now)
                landed[at] = _landed(home, rows, now)
                if uids:
                    mark_repeats(c, *landed[at])
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
                steps(),
                foreign_keys=False,
                rebuild_index=False,
                index_in_steps=True,
                trigram=trigram,
                trigram_in_steps=both,
            )
    finally:
        if trigram is not None:
            trigram.close()  # taken, or the import stopped: either way the thread ends
    archive.core.write(
        lambda c: c.execute("DELETE FROM state_meta WHERE key=?", (WATERMARK_PREFIX + home,))
    )
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
            (
                *(s.row[c] for c in SESSION_COLUMNS),
                home,
                s.row["_src_id"],
                now,
                row_digest(s.row["_digest"]),
            )
            for s in sessions
        ],
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
    return max(
        conn.execute(
            f"INSERT INTO messages ({', '.join(cols)}) "
            f"SELECT CASE WHEN t.clash THEN ? + t.rn ELSE t.id END, {picked_t}, ?, "
            "CAST(t.id AS TEXT), ? FROM ("
            "SELECT c.*, row_number() OVER (PARTITION BY c.clash ORDER BY c.id) AS rn FROM ("
            "SELECT b.*, EXISTS (SELECT 1 FROM main.messages x WHERE x.id = b.id) AS clash"
            f" FROM {batch} b) c) t WHERE 1 ORDER BY t.id "
            "ON CONFLICT(src_home, src_id) WHERE src_id IS NOT NULL DO NOTHING",
            [base, home, now, *session_ids],
        ).rowcount,
        0,
    )


def _landed(home: str, sessions: list[SourceSession], now: float) -> tuple[str, list[Any]]:
    """The messages one transaction landed (first seen ``now``), as a WHERE and its values."""
    marks = ",".join("?" for _ in sessions)
    return (
        f"session_id IN ({marks}) AND src_home = ? AND archive_first_seen = ?",
        [*(s.row["id"] for s in sessions), home, now],
    )
