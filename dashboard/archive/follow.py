"""Following a source after its first import: the cheap sync, the reconciliation pass.

Nothing ever leaves the archive here. A row the source lost is kept and gets
``gone_from_source_at``; a row that comes back has it cleared. For rows still in
the source the archive holds what the source holds, column for column.

**The cheap sync** (after every source commit) reads three things from the source:
the sessions table's ids and row digests (one text per row, hashed: every
column, so a change Hermes makes to a session's messages shows through the
counters it bumps), the sessions of messages above the watermark (the highest
source message id seen), and the identity of the message at the watermark. The
sessions that changed or got messages are *dirty*: their message flags are
re-read and compared (new rows copied, flips and rewinds applied, lost rows
marked gone), their session row and usage rows upserted. Sessions the source no
longer has are marked gone with their rows.

**The reconciliation pass** (``reconcile=True``; the syncer runs it at start and
every few minutes, and every sync runs it when the source looks replaced)
compares per-session sums over every message (count, ids, timestamps, text
lengths, flags: :func:`importer.message_sums_select`) and re-reads every column
of the sessions that differ. It catches what the cheap sync does not look for:
an edit to a message that touched no session row, a row deleted in place.

**A replaced file** (a restored backup, a reset home) hands integer ids to other
messages. A message's identity is its ``(session_id, role, timestamp)``
(:data:`importer.IDENTITY_COLUMNS`): Hermes stamps each row with ``time.time()``,
so two messages of one session and role never share one, while content may be
edited in place and must stay the same row. When the source row at an id has
another identity than the archived one, the archived row is *retired* (kept,
marked gone, its ``src_id`` suffixed with ``~<archive id>`` so the source id is
free) and the source's row lands as a new row. The cheap sync suspects a
replacement when the file's inode changed, when the watermark message is gone or
another, or when the newest id went backwards, and reconciles then. It *says* the
file was replaced (:func:`replaced_why`, shown on the pages) on evidence alone:
another inode, another ``store_instance_id``/``db_file_generation``, the id
high-water gone down, or the watermark's id naming another message.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from dashboard.archive.copies import mark_repeats
from dashboard.archive.marks import LAST_SYNC_PREFIX, put_meta
from dashboard.archive.source import (
    FLAG_COLUMNS,
    IDENTITY_COLUMNS,
    MESSAGE_COLUMNS,
    SESSION_COLUMNS,
    USAGE_COLUMNS,
    USAGE_KEY,
    Adapter,
    SourceSession,
    add_checksum,
    message_sums_select,
    row_digest,
    usage_sets,
    usage_source_id,
)
from dashboard.store.readonly import read_snapshot
from dashboard.store.session_store import SessionStore

SOURCE_STATE_PREFIX = "archive_source:"
CHUNK = 400  # ids per IN (...) list, well under SQLite's variable limit
RECONCILE_BATCH = 100  # dirty sessions per archive transaction in a reconciliation


@dataclass
class Changes:
    """What one pass changed in the archive."""

    sessions_added: int = 0
    sessions_updated: int = 0
    messages_added: int = 0
    messages_updated: int = 0
    usage_added: int = 0
    usage_updated: int = 0
    marked_gone: int = 0
    back_in_source: int = 0
    retired: int = 0
    sessions_reread: int = 0  # sessions brought level with the source (or marked gone)

    def add(self, other: Changes) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass(frozen=True)
class FollowReport:
    """A later sync's outcome: what changed, whether it reconciled and why."""

    changes: Changes
    sessions_total: int  # sessions in the source
    reconciled: bool
    replaced: bool
    replaced_why: str | None = None  # how it was told (replaced_why); None: ids reused only


def read_source_state(conn: sqlite3.Connection, home: str) -> dict[str, Any] | None:
    """What the last sync saw of ``home``'s file (None before the first finished)."""
    row = conn.execute(
        "SELECT value FROM state_meta WHERE key=?", (SOURCE_STATE_PREFIX + home,)
    ).fetchone()
    return json.loads(row[0]) if row else None


def follow(
    archive: SessionStore,
    adapter: Adapter,
    home: str,
    state_db: Path,
    *,
    reconcile: bool,
    copied: bool = False,
) -> FollowReport:
    """Bring the archive level with the source after the first import (see the module).

    ``copied``: a first import just copied the whole file while no one wrote to it,
    so the cheap pass (session digests) stands in for the reconciliation there is no
    earlier state to spare.
    """
    with archive.core.reading() as conn:
        state = read_source_state(conn, home)
    inode = _inode(state_db)
    with read_snapshot(adapter.conn):
        newest = _newest(adapter)
        marks = adapter.file_marks()
        if state is None and copied:
            state = {"newest": newest, "inode": inode, **marks}
        why = replaced_why(adapter, state, inode, marks, newest) if state else None
        suspect = state is None or why is not None or _watermark_lost(adapter, state, newest)
        if reconcile or suspect:
            changes, total = _reconcile(archive, adapter, home)
        else:
            changes, total = _cheap(archive, adapter, home, state or {})

        def finish(c: sqlite3.Connection) -> None:
            value = {"newest": newest, "inode": inode, **marks}
            put_meta(c, SOURCE_STATE_PREFIX + home, json.dumps(value))
            put_meta(
                c,
                LAST_SYNC_PREFIX + home,
                json.dumps({"at": time.time(), "layout": adapter.name}),
            )

        archive.core.write(finish)
    # Retired rows alone: ids reused after a replacement told earlier (or never told).
    replaced = why is not None or changes.retired > 0
    return FollowReport(changes, total, reconcile or suspect, replaced, why)


def _inode(path: Path) -> list[int]:
    st = os.stat(path)
    return [st.st_dev, st.st_ino]


def replaced_why(
    adapter: Adapter,
    state: dict[str, Any],
    inode: list[int],
    marks: dict[str, Any],
    newest: dict[str, Any] | None,
) -> str | None:
    """Why the file at the source's path is another copy than the one the last sync
    read, in a person's words; None when nothing says so.

    Another inode; another ``store_instance_id`` or ``db_file_generation`` (v31 homes;
    a file without them is not judged by them); the id high-water gone down, or the
    id the last sync saw newest naming another message (an older copy put back in
    place: ``cp backup.db state.db`` keeps the inode). A newest message merely gone
    (deleted) is not a replacement: the sync reconciles it all the same.
    """
    if state.get("inode") is not None and state["inode"] != inode:
        return "another file was put at its path"
    kept = state.get("store") or {}
    for key, what in (
        ("store_instance_id", "it is another Hermes store"),
        ("db_file_generation", "Hermes started a new generation of the file"),
    ):
        if kept.get(key) is not None and marks["store"].get(key) not in (None, kept[key]):
            return f"{what} ({key} changed)"
    older = "an older copy was put back (restored from a backup?)"
    if state.get("seq") is not None and marks["seq"] is not None and marks["seq"] < state["seq"]:
        return older
    mark = state.get("newest")
    if mark is None:
        return None
    if marks["seq"] is None and (newest is None or newest["id"] < mark["id"]):
        return older  # no AUTOINCREMENT record: the newest id going down says it
    rows = adapter.messages_where("m.id = ?", (mark["id"],), columns=FLAG_COLUMNS)
    return older if rows and _identity_of(rows[0]) != mark else None


def _newest(adapter: Adapter) -> dict[str, Any] | None:
    """The identity of the source's highest message id (None: no messages)."""
    rows = adapter.messages_where("m.id = (SELECT max(id) FROM messages)", (), columns=FLAG_COLUMNS)
    return _identity_of(rows[0]) if rows else None


def _identity_of(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": int(row["id"]), **{c: row[c] for c in IDENTITY_COLUMNS}}


def _watermark_lost(adapter: Adapter, state: dict[str, Any], newest: dict | None) -> bool:
    """Whether the message the last sync saw newest is gone, another, or above the newest."""
    mark = state.get("newest")
    if mark is None:
        return False
    if newest is None or newest["id"] < mark["id"]:
        return True
    rows = adapter.messages_where("m.id = ?", (mark["id"],), columns=FLAG_COLUMNS)
    return not rows or _identity_of(rows[0]) != mark


# -- the two passes ---------------------------------------------------------------------


def _archived_sessions(archive: SessionStore, home: str) -> dict[str, tuple[Any, Any]]:
    with archive.core.reading() as conn:
        rows = conn.execute(
            "SELECT id, src_digest, gone_from_source_at FROM sessions WHERE src_home=?",
            (home,),
        )
        return {str(r[0]): (r[1], r[2]) for r in rows}


def _session_sets(
    source: dict[str, str], kept: dict[str, tuple[Any, Any]]
) -> tuple[set[str], set[str]]:
    """Sessions new, changed or back in the source; sessions the source lost."""
    dirty = {
        sid
        for sid, digest in source.items()
        if sid not in kept or kept[sid][0] != digest or kept[sid][1] is not None
    }
    lost = {sid for sid, (_, gone) in kept.items() if gone is None and sid not in source}
    return dirty, lost


def _cheap(
    archive: SessionStore, adapter: Adapter, home: str, state: dict[str, Any]
) -> tuple[Changes, int]:
    source = adapter.session_digests()
    dirty, lost = _session_sets(source, _archived_sessions(archive, home))
    mark = (state.get("newest") or {}).get("id", 0)
    touched = {
        adapter.archive_id(str(r[0]))
        for r in adapter.conn.execute(
            "SELECT DISTINCT session_id FROM messages WHERE id > ?", (mark,)
        )
    }
    dirty |= touched & set(source)
    changes = Changes(sessions_reread=len(dirty) + len(lost))

    def step(c: sqlite3.Connection) -> None:
        changes.add(merge_sessions(c, adapter, home, sorted(dirty), full=False))
        changes.marked_gone += mark_sessions_gone(c, home, sorted(lost))

    archive.core.write(step, foreign_keys=False)
    return changes, len(source)


def _reconcile(archive: SessionStore, adapter: Adapter, home: str) -> tuple[Changes, int]:
    source = adapter.session_digests()
    dirty, lost = _session_sets(source, _archived_sessions(archive, home))
    sums = adapter.message_sums()
    with archive.core.reading() as conn:
        kept_sums = archive_message_sums(conn, home)
    # A session with no messages left in the source has no sums there: it differs
    # from its kept rows and is merged, which marks them gone.
    dirty |= {sid for sid in source if sums.get(sid) != kept_sums.get(sid)}
    # Usage rows too: one can grow without its session row changing.
    usage = adapter.usage_sums()
    if usage:
        with archive.core.reading() as conn:
            kept_usage = archive_usage_sums(conn, home)
        dirty |= {sid for sid in source if usage.get(sid) != kept_usage.get(sid)}
    changes = Changes(sessions_reread=len(dirty) + len(lost))
    order = sorted(dirty)
    for start in range(0, len(order), RECONCILE_BATCH):
        batch = order[start : start + RECONCILE_BATCH]

        def step(c: sqlite3.Connection, batch: list[str] = batch) -> Changes:
            return merge_sessions(c, adapter, home, batch, full=True)

        changes.add(archive.core.write(step, foreign_keys=False))
    changes.marked_gone += archive.core.write(
        lambda c: mark_sessions_gone(c, home, sorted(lost)), foreign_keys=False
    )
    return changes, len(source)


def archive_message_sums(conn: sqlite3.Connection, home: str) -> dict[str, tuple[Any, ...]]:
    """The archive's side of :meth:`Adapter.message_sums`: ``home``'s rows still in it."""
    select = message_sums_select(lambda c: f"m.{c}", "CAST(m.src_id AS INTEGER)")
    add_checksum(conn)
    rows = conn.execute(
        f"SELECT m.session_id, {select} FROM messages m"
        " WHERE m.src_home=? AND m.gone_from_source_at IS NULL GROUP BY m.session_id",
        (home,),
    )
    return {str(r[0]): tuple(r[1:]) for r in rows}


def archive_usage_sums(conn: sqlite3.Connection, home: str) -> dict[str, frozenset[tuple]]:
    """The archive's side of :meth:`Adapter.usage_sums`: ``home``'s rows still in it."""
    return usage_sets(
        conn.execute(
            f"SELECT {', '.join(USAGE_COLUMNS)} FROM session_model_usage"
            " WHERE src_home=? AND gone_from_source_at IS NULL",
            (home,),
        )
    )


# -- making the archive's rows of some sessions equal the source's ------------------------


def merge_sessions(
    c: sqlite3.Connection, adapter: Adapter, home: str, ids: Sequence[str], *, full: bool
) -> Changes:
    """Make the archive's rows of sessions ``ids`` what the source holds (inside a write).

    ``full`` compares every copied message column; otherwise only the flags and the
    identity (new rows are read whole either way).
    """
    changes = Changes()
    for chunk in _chunks(ids):
        found = adapter.read(chunk, messages=full)
        changes.add(_merge_rows(c, adapter, home, found, full=full))
    return changes


def _merge_rows(
    c: sqlite3.Connection, adapter: Adapter, home: str, found: list[SourceSession], *, full: bool
) -> Changes:
    now = time.time()
    changes = Changes()
    ids = [s.row["id"] for s in found]
    if not ids:
        return changes
    _upsert_sessions(c, home, found, now, changes)
    marks = ",".join("?" for _ in ids)
    if full:
        source = [m for s in found for m in s.messages]
        columns = MESSAGE_COLUMNS
    else:
        source = adapter.messages_where(
            f"m.session_id IN ({marks})", tuple(adapter.source_ids(ids)), FLAG_COLUMNS
        )
        columns = FLAG_COLUMNS
    _merge_messages(c, adapter, home, ids, source, columns, now, changes)
    _merge_usage(c, home, ids, [u for s in found for u in s.usage], now, changes)
    return changes


def _upsert_sessions(
    c: sqlite3.Connection, home: str, found: list[SourceSession], now: float, changes: Changes
) -> None:
    for s in found:
        digest = row_digest(s.row["_digest"])
        old = c.execute(
            "SELECT src_digest, gone_from_source_at FROM sessions WHERE id=?", (s.row["id"],)
        ).fetchone()
        if old is None:
            cols = (*SESSION_COLUMNS, "src_home", "src_id", "archive_first_seen", "src_digest")
            c.execute(
                f"INSERT INTO sessions ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                (*(s.row[k] for k in SESSION_COLUMNS), home, s.row["_src_id"], now, digest),
            )
            changes.sessions_added += 1
            continue
        if old[0] == digest and old[1] is None:
            continue
        sets = ", ".join(f"{k}=?" for k in SESSION_COLUMNS[1:])
        c.execute(
            f"UPDATE sessions SET {sets}, src_digest=?, gone_from_source_at=NULL"
            " WHERE id=? AND src_home=?",
            (*(s.row[k] for k in SESSION_COLUMNS[1:]), digest, s.row["id"], home),
        )
        changes.sessions_updated += old[0] != digest
        changes.back_in_source += old[1] is not None


def _merge_messages(
    c: sqlite3.Connection,
    adapter: Adapter,
    home: str,
    session_ids: Sequence[str],
    source: list[dict[str, Any]],
    columns: Sequence[str],
    now: float,
    changes: Changes,
) -> None:
    compared = [k for k in columns if k != "id"]
    select = f"id, src_id, gone_from_source_at, {', '.join(compared)}"
    kept: dict[str, sqlite3.Row] = {}
    marks = ",".join("?" for _ in session_ids)
    for r in c.execute(
        f"SELECT {select} FROM messages WHERE src_home=? AND session_id IN ({marks})",
        (home, *session_ids),
    ):
        kept[r["src_id"]] = r
    # A source id may be archived under another session (a reset home's clash).
    elsewhere = [str(m["id"]) for m in source if str(m["id"]) not in kept]
    for chunk in _chunks(elsewhere):
        for r in c.execute(
            f"SELECT {select} FROM messages WHERE src_home=? "
            f"AND src_id IN ({','.join('?' for _ in chunk)})",
            (home, *chunk),
        ):
            kept[r["src_id"]] = r
    new: list[int] = []
    present = set()
    merged = set(session_ids)
    for m in source:
        sid = str(m["id"])
        present.add(sid)
        mine = kept.get(sid)
        if mine is not None and any(mine[k] != m[k] for k in IDENTITY_COLUMNS):
            retire(c, mine["id"], now)
            changes.retired += 1
            mine = None
        if mine is None:
            new.append(int(m["id"]))
            continue
        updated, back = _refresh(c, "messages", "id", mine["id"], mine, m, compared)
        changes.messages_updated += updated
        changes.back_in_source += back
    lost = [
        r["id"]
        for sid, r in kept.items()
        if sid not in present
        and r["gone_from_source_at"] is None
        and r["src_id"] is not None
        and str(r["session_id"]) in merged
    ]
    changes.marked_gone += _mark_gone(c, "messages", "id", lost, now)
    if new:
        wanted = set(new)
        whole = (
            [m for m in source if int(m["id"]) in wanted]
            if list(columns) == list(MESSAGE_COLUMNS)
            else [
                m
                for chunk in _chunks(new)
                for m in adapter.messages_where(
                    f"m.id IN ({','.join('?' for _ in chunk)})", tuple(chunk)
                )
            ]
        )
        changes.messages_added += insert_messages(c, home, whole, now)


def insert_messages(
    c: sqlite3.Connection, home: str, rows: Iterable[dict[str, Any]], now: float
) -> int:
    """Insert source messages; each keeps its source id as the archive's when free."""
    cols = (*MESSAGE_COLUMNS, "src_home", "src_id", "archive_first_seen")
    added = c.executemany(
        f"INSERT INTO messages ({', '.join(cols)}) VALUES ("
        "CASE WHEN EXISTS (SELECT 1 FROM messages WHERE id = ?1) THEN NULL ELSE ?1 END, "
        f"{', '.join(f'?{i}' for i in range(2, len(cols) + 1))}) "
        "ON CONFLICT(src_home, src_id) WHERE src_id IS NOT NULL DO NOTHING",
        [(*(m[k] for k in MESSAGE_COLUMNS), home, str(m["id"]), now) for m in rows],
    ).rowcount
    sessions = sorted({str(m["session_id"]) for m in rows if m.get("message_uid")})
    for chunk in _chunks(sessions):
        marks = ",".join("?" for _ in chunk)
        mark_repeats(
            c,
            f"session_id IN ({marks}) AND src_home = ? AND archive_first_seen = ?",
            (*chunk, home, now),
        )
    return max(added, 0)


def retire(c: sqlite3.Connection, archive_id: int, now: float) -> None:
    """Keep an archived message whose source id now names another message: mark it
    gone and free the source id (``<src_id>~<archive id>`` still says where it came from)."""
    c.execute(
        "UPDATE messages SET src_id = src_id || '~' || id,"
        " gone_from_source_at = coalesce(gone_from_source_at, ?) WHERE id=?",
        (now, archive_id),
    )


def _merge_usage(
    c: sqlite3.Connection,
    home: str,
    session_ids: Sequence[str],
    source: list[dict[str, Any]],
    now: float,
    changes: Changes,
) -> None:
    marks = ",".join("?" for _ in session_ids)
    kept = {
        r["src_id"]: r
        for r in c.execute(
            f"SELECT rowid AS rid, src_id, gone_from_source_at, {', '.join(USAGE_COLUMNS)}"
            f" FROM session_model_usage WHERE src_home=? AND session_id IN ({marks})",
            (home, *session_ids),
        )
    }
    present = set()
    for u in source:
        sid = usage_source_id(u)
        present.add(sid)
        mine = kept.get(sid)
        if mine is None:
            cols = (*USAGE_COLUMNS, "src_home", "src_id", "archive_first_seen")
            updates = ", ".join(f"{k}=excluded.{k}" for k in USAGE_COLUMNS[len(USAGE_KEY) :])
            c.execute(
                f"INSERT INTO session_model_usage ({', '.join(cols)}) "
                f"VALUES ({', '.join('?' for _ in cols)}) "
                f"ON CONFLICT({', '.join(USAGE_KEY)}) DO UPDATE SET {updates},"
                " src_home=excluded.src_home, src_id=excluded.src_id, gone_from_source_at=NULL",
                (*(u[k] for k in USAGE_COLUMNS), home, sid, now),
            )
            changes.usage_added += 1
            continue
        updated, back = _refresh(
            c, "session_model_usage", "rowid", mine["rid"], mine, u, USAGE_COLUMNS
        )
        changes.usage_updated += updated
        changes.back_in_source += back
    lost = [
        r["rid"]
        for sid, r in kept.items()
        if sid not in present and r["gone_from_source_at"] is None
    ]
    changes.marked_gone += _mark_gone(c, "session_model_usage", "rowid", lost, now)


def _refresh(
    c: sqlite3.Connection,
    table: str,
    key: str,
    key_value: object,
    mine: sqlite3.Row,
    source: dict[str, Any],
    columns: Sequence[str],
) -> tuple[bool, bool]:
    """Copy the source row's differing ``columns`` onto the archived one and clear its
    gone mark (it is in the source again); return (whether it changed, whether it was back)."""
    differ = [k for k in columns if mine[k] != source[k]]
    back = mine["gone_from_source_at"] is not None
    if differ or back:
        sets = "".join(f"{k}=?, " for k in differ)
        c.execute(
            f"UPDATE {table} SET {sets}gone_from_source_at=NULL WHERE {key}=?",
            (*(source[k] for k in differ), key_value),
        )
    return bool(differ), back


def mark_sessions_gone(c: sqlite3.Connection, home: str, ids: Sequence[str]) -> int:
    """Mark sessions the source lost, and their messages and usage rows; return rows marked."""
    now = time.time()
    marked = 0
    for chunk in _chunks(ids):
        marks = ",".join("?" for _ in chunk)
        for table, column in (
            ("sessions", "id"),
            ("messages", "session_id"),
            ("session_model_usage", "session_id"),
        ):
            marked += c.execute(
                f"UPDATE {table} SET gone_from_source_at=? WHERE src_home=?"
                f" AND gone_from_source_at IS NULL AND {column} IN ({marks})",
                (now, home, *chunk),
            ).rowcount
    return marked


def _mark_gone(c: sqlite3.Connection, table: str, key: str, ids: Sequence[Any], now: float) -> int:
    marked = 0
    for chunk in _chunks(ids):
        marked += c.execute(
            f"UPDATE {table} SET gone_from_source_at=? WHERE gone_from_source_at IS NULL"
            f" AND {key} IN ({','.join('?' for _ in chunk)})",
            (now, *chunk),
        ).rowcount
    return marked


def _chunks(items: Sequence[Any]) -> Iterator[list[Any]]:
    items = list(items)
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]
