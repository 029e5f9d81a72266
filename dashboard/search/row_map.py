"""Which session each message id belongs to, held in memory: the ranked read joins nothing.

A search ranks up to ``RANK_WINDOW`` matches inside the FTS index and needs, for each,
its session (to group and count it) and whether it is shown. Joining every ranked row
to ``messages`` and ``sessions`` cost as much again as the ranking itself (on the 1M
demo, 6,000 rows of a mid-frequency word: ~15 ms of bm25, then ~15 ms more of joins):
it is why a search was slower than the naive ``ORDER BY rank LIMIT 50``.

The archive's message ids are ``AUTOINCREMENT``: an id never changes session and is
never reused, so the map from id to session only grows. It is held as runs of ids (a
session's rows arrive together, so 1M rows are a few thousand runs), built once from
each session's id range, then extended by the rows past its newest id. What does change
in place is read apart, again whenever the archive is written (its write counter): the
few rows a search never shows (the partial index ``idx_messages_unshown``), the sessions
holding archived rows (``idx_messages_compacted``), and, per set of filters, the
sessions they let through. Each is one read of a small index, never of ``messages``.

A restored or replaced archive can reuse ids: its file identity and its
``sqlite_sequence`` going backwards rebuild the map. A store without ``AUTOINCREMENT``
on ``messages`` gets no map (the caller joins, as before).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from array import array
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field

from dashboard.hermes.conventions import visible_sql
from dashboard.store.schema import UNSHOWN_ROWS, WRITES_KEY

FILTER_SETS = 16  # sets of allowed sessions kept per archive version (one per filter set)


@dataclass(frozen=True)
class Runs:
    """Runs of message ids, each owned by one session: ``starts[i]..ends[i]``."""

    starts: array
    ends: array
    owners: list[str]
    top: int  # the newest id the runs cover (rows past it are read on the next use)

    def owner(self, rowid: int) -> str | None:
        """The session of message ``rowid`` (None: not a message this map knows)."""
        i = bisect_right(self.starts, rowid) - 1
        if i >= 0 and rowid <= self.ends[i]:
            return self.owners[i]
        return None


@dataclass
class Flags:
    """What may change in place, read for one version of the archive."""

    key: tuple[object, ...]
    hidden: frozenset[int]  # rows never shown (conventions.visible_sql says no)
    superseded: frozenset[int]  # shown rows with active = 0, compacted = 0 (a copy's original)
    compacted: Runs  # rows an in-place compaction archived (compacted = 1), as runs
    with_archive: frozenset[str]  # the sessions holding either
    allowed: dict[tuple[object, ...], frozenset[str]] = field(default_factory=dict)

    def archived(self, rowid: int, session_id: str) -> bool:
        """Whether shown row ``rowid`` is archived: compacted history, or the original of
        a re-inserted copy (the rule of ``archived`` in routes.Row, without a read)."""
        return rowid in self.superseded or self.compacted.owner(rowid) == session_id


class RowMap:
    """The runs and flags of one archive as one snapshot sees them (see the module)."""

    def __init__(self, runs: Runs, flags: Flags, conn: sqlite3.Connection):
        self.runs = runs
        self.flags = flags
        self._conn = conn
        self._lock = threading.Lock()

    def owner(self, rowid: int) -> str | None:
        return self.runs.owner(rowid)

    def allowed(self, session_sql: str, params: tuple[object, ...]) -> frozenset[str]:
        """The sessions the request's session filters let through (``session_sql`` is
        filters.Filters.session_sql over alias ``s``), read once per archive version."""
        key = (session_sql, params)
        with self._lock:
            found = self.flags.allowed.get(key)
        if found is not None:
            return found
        rows = self._conn.execute(f"SELECT s.id FROM sessions s WHERE 1{session_sql}", params)
        found = frozenset(r[0] for r in rows)
        with self._lock:
            if len(self.flags.allowed) >= FILTER_SETS:
                self.flags.allowed.pop(next(iter(self.flags.allowed)))
            self.flags.allowed[key] = found
        return found

    def rows(
        self, scored: Iterable[tuple[int, float]], allowed: frozenset[str]
    ) -> list[tuple[int, str, float, float, int]]:
        """``scored`` (rowid, bm25) as routes.Row tuples: the rows shown whose session is
        ``allowed``, each with its session and archived flag (no timestamp: 0)."""
        starts, ends, owners = self.runs.starts, self.runs.ends, self.runs.owners
        hidden, flags = self.flags.hidden, self.flags
        with_archive = flags.with_archive
        out = []
        for rowid, score in scored:
            i = bisect_right(starts, rowid) - 1  # Runs.owner, inline: thousands of rows
            if i < 0 or rowid > ends[i]:
                continue
            sid = owners[i]
            if sid not in allowed or rowid in hidden:
                continue
            archived = sid in with_archive and flags.archived(rowid, sid)
            out.append((rowid, sid, score, 0.0, int(archived)))
        return out


class RowMapCache:
    """One archive's :class:`Runs` and :class:`Flags`, kept by a reader across requests.

    ``scoped``: the reader's connections see some profiles only (store/scope.py); the
    map then holds their sessions' rows alone, so another profile's match has no owner.
    """

    def __init__(self, scoped: bool = False) -> None:
        self._scoped = scoped
        self._lock = threading.Lock()
        self._identity: tuple[str, int, int] | None = None
        self._runs: Runs | None = None
        self._flags: Flags | None = None

    def get(self, conn: sqlite3.Connection, path: str) -> RowMap | None:
        """The map for the snapshot ``conn`` reads (``path``: the archive's file), or None
        when the store's message ids may be reused (no ``AUTOINCREMENT``)."""
        seq = conn.execute("SELECT seq FROM main.sqlite_sequence WHERE name = 'messages'")
        top = (seq.fetchone() or (None,))[0]
        if top is None:
            return None
        identity = _identity(path)
        key = _version(conn, path)
        with self._lock:
            runs = self._runs if identity == self._identity else None
            flags = self._flags if self._flags is not None and self._flags.key == key else None
        if runs is None or top < runs.top:
            runs = _build(conn, self._scoped)
        elif top > runs.top:
            runs = _extend(conn, runs, self._scoped)
        if flags is None:
            flags = _flags(conn, key)
        with self._lock:
            if self._runs is None or self._identity != identity or runs.top >= self._runs.top:
                self._identity, self._runs = identity, runs
            self._flags = flags
        return RowMap(runs, flags, conn)


def _identity(path: str) -> tuple[str, int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (path, -1, -1)
    return (path, st.st_dev, st.st_ino)


def _version(conn: sqlite3.Connection, path: str) -> tuple[object, ...]:
    """What moves when the archive is written: its write counter, and (for rows written
    by anything else) the newest message and session rowids and the sessions' count."""
    return (
        path,
        *conn.execute(
            "SELECT (SELECT value FROM main.state_meta WHERE key = ?),"
            " (SELECT max(rowid) FROM main.messages), max(rowid), count(*) FROM main.sessions",
            (WRITES_KEY,),
        ).fetchone(),
    )


def _mine(scoped: bool) -> str:
    # A scoped connection's ``sessions`` is its profiles' view (store/scope.py).
    return " AND session_id IN (SELECT id FROM sessions)" if scoped else ""


def _build(conn: sqlite3.Connection, scoped: bool) -> Runs:
    """The runs of every message: a session whose ids are consecutive is one run (read
    from its index entries alone); the others' ids are read and cut into runs."""
    where = f"WHERE 1{_mine(scoped)}"
    spans: list[tuple[int, int, str]] = []
    scattered: list[str] = []
    for sid, low, high, count in conn.execute(
        f"SELECT session_id, min(id), max(id), count(*) FROM main.messages {where}"
        " GROUP BY session_id"
    ):
        if high - low + 1 == count:
            spans.append((low, high, sid))
        else:
            scattered.append(sid)
    for sid in scattered:
        ids = conn.execute(
            "SELECT id FROM main.messages WHERE session_id = ? ORDER BY id", (sid,)
        ).fetchall()
        spans.extend((low, high, sid) for low, high in _consecutive(r[0] for r in ids))
    return _runs(spans, _seq(conn))


def _runs(spans: list[tuple[int, int, str]], top: int) -> Runs:
    spans.sort()
    return Runs(
        array("q", (s[0] for s in spans)),
        array("q", (s[1] for s in spans)),
        [s[2] for s in spans],
        max(spans[-1][1] if spans else 0, top),
    )


def _extend(conn: sqlite3.Connection, runs: Runs, scoped: bool) -> Runs:
    """``runs`` with the rows past its newest id: every id between two of them belongs to
    no message (ids only grow), so a session's next row continues its last run."""
    rows = conn.execute(
        f"SELECT id, session_id FROM main.messages WHERE id > ?{_mine(scoped)} ORDER BY id",
        (runs.top,),
    ).fetchall()
    starts, ends, owners = array("q", runs.starts), array("q", runs.ends), list(runs.owners)
    last = max(range(len(ends)), key=ends.__getitem__) if ends else -1
    for rowid, sid in rows:
        if last >= 0 and owners[last] == sid and last == len(ends) - 1:
            ends[last] = rowid
        else:
            starts.append(rowid)
            ends.append(rowid)
            owners.append(sid)
            last = len(ends) - 1
    return Runs(starts, ends, owners, max(runs.top, _seq(conn), rows[-1][0] if rows else 0))


def _seq(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT seq FROM main.sqlite_sequence WHERE name = 'messages'").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _consecutive(ids: Iterable[int]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for rowid in ids:
        if spans and spans[-1][1] == rowid - 1:
            spans[-1] = (spans[-1][0], rowid)
        else:
            spans.append((rowid, rowid))
    return spans


def _flags(conn: sqlite3.Connection, key: tuple[object, ...]) -> Flags:
    """The rows a search treats apart, each set read from a partial index: the rows
    never shown and the shown originals of copies (``idx_messages_unshown``: a few), and
    the archived rows (``idx_messages_compacted``: a session's archived rows are
    consecutive ids, so one run each, read from the index's entries alone)."""
    # Unaliased, so the condition is the partial index's own (schema.UNSHOWN_ROWS).
    unshown = conn.execute(
        f"SELECT id, session_id, {visible_sql('messages')} FROM main.messages WHERE {UNSHOWN_ROWS}"
    ).fetchall()
    spans: list[tuple[int, int, str]] = []
    for sid, low, high, count in conn.execute(
        "SELECT session_id, min(rowid), max(rowid), count(*) FROM main.messages"
        " WHERE compacted = 1 GROUP BY session_id"
    ):
        if high - low + 1 == count:
            spans.append((low, high, sid))
            continue
        ids = conn.execute(
            "SELECT rowid FROM main.messages WHERE compacted = 1 AND session_id = ? ORDER BY rowid",
            (sid,),
        ).fetchall()
        spans.extend((lo, hi, sid) for lo, hi in _consecutive(r[0] for r in ids))
    superseded = [(rowid, sid) for rowid, sid, shown in unshown if shown]
    compacted = _runs(spans, 0)
    return Flags(
        key,
        hidden=frozenset(rowid for rowid, _, shown in unshown if not shown),
        superseded=frozenset(rowid for rowid, _ in superseded),
        compacted=compacted,
        with_archive=frozenset([*compacted.owners, *(sid for _, sid in superseded)]),
    )
