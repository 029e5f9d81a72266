"""Which session each message id belongs to, held in memory: the ranked read joins nothing.

A search ranks up to ``RANK_WINDOW`` matches inside the FTS index and needs, for each,
its session (to group and count it) and whether it is shown. Joining every ranked row
to ``messages`` and ``sessions`` cost as much again as the ranking itself (on the 1M
demo, 6,000 rows of a mid-frequency word: ~15 ms of bm25, then ~15 ms more of joins):
it is why a search was slower than the naive ``ORDER BY rank LIMIT 50``.

The archive's message ids are ``AUTOINCREMENT``: an id never changes session and is
never reused, so the map from id to session only grows. It is an array of a session
number per id (4 bytes a message), built once from each session's id range (a session's
rows arrive together: most are one slice), then extended by the rows past its newest
id. What does change in place is read apart, again whenever the archive is written (its
version): the few rows a search never shows (the partial index ``idx_messages_unshown``),
the archived rows (``idx_messages_compacted``, one run per session) and, per set of
filters, the sessions they let through. Each is one read of a small index.

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TypeVar

from dashboard.hermes.conventions import visible_sql
from dashboard.lineage.graph import archive_version
from dashboard.store.schema import UNSHOWN_ROWS
from dashboard.store.state import StoreState

FILTER_SETS = 16  # sets of allowed sessions kept per archive version (one per filter set)
ANSWERS = 64  # other answers kept per archive version (RowMap.remembered)
T = TypeVar("T")
# Rows past the map's newest id read one by one up to this many; more (a first import
# landing) are read as a new map, from each session's id range: faster by far.
REBUILD_PAST = 50_000


@dataclass(frozen=True)
class Runs:
    """Runs of message ids, each of one session: ``starts[i]..ends[i]`` is ``owners[i]``'s."""

    starts: array
    ends: array
    owners: list[str]

    def owner(self, rowid: int) -> str | None:
        """The session of message ``rowid`` (None: in no run)."""
        i = bisect_right(self.starts, rowid) - 1
        if i >= 0 and rowid <= self.ends[i]:
            return self.owners[i]
        return None


@dataclass(frozen=True)
class Owners:
    """Each message id's session as a number per id: a search maps thousands of ids in
    one pass in C (``map(index.__getitem__, ids)``)."""

    index: array  # message id -> session number (0: no message this map knows)
    sessions: list[str]  # session number -> session id (number 0 is no session)
    numbers: dict[str, int]  # session id -> its number
    top: int  # the newest id covered (rows past it are read on the next use)
    newest: int  # the newest id with an owner (a scoped map's newest row of its profiles)
    oldest: int  # the oldest id with an owner

    def owner(self, rowid: int) -> str | None:
        """The session of message ``rowid`` (None: not a message this map knows)."""
        number = self.index[rowid] if 0 <= rowid < len(self.index) else 0
        return self.sessions[number] if number else None


@dataclass
class Flags:
    """What may change in place, read for one version of the archive."""

    key: tuple[object, ...]
    hidden: frozenset[int]  # rows never shown (conventions.visible_sql says no)
    superseded: frozenset[int]  # shown rows with active = 0, compacted = 0 (a copy's original)
    compacted: Runs  # rows an in-place compaction archived (compacted = 1), as runs
    with_archive: frozenset[str]  # the sessions holding either
    allowed: dict[tuple[object, ...], bytes] = field(default_factory=dict)
    # Other answers of this version, by question (RowMap.remembered): sessions' names.
    answers: dict[tuple[object, ...], object] = field(default_factory=dict)

    def archived(self, rowid: int, session_id: str) -> bool:
        """Whether shown row ``rowid`` is archived: compacted history, or the original of
        a re-inserted copy (routes.ARCHIVED_M, read from the partial indexes)."""
        return rowid in self.superseded or self.compacted.owner(rowid) == session_id


class RowMap:
    """The owners and flags of one archive as one snapshot sees them (see the module)."""

    def __init__(self, owners: Owners, flags: Flags, conn: sqlite3.Connection):
        self.owners = owners
        self.flags = flags
        self._conn = conn
        self._lock = threading.Lock()

    def owner(self, rowid: int) -> str | None:
        return self.owners.owner(rowid)

    def allowed(self, session_sql: str, params: tuple[object, ...]) -> bytes:
        """The sessions the request's session filters let through (``session_sql`` is
        filters.Filters.session_sql over alias ``s``) as a byte per session number (0:
        kept out; 1: let through; 2: let through, and holding archived rows, which
        :meth:`rows` checks one by one), read once per archive version and set of filters."""
        key = (session_sql, params)
        with self._lock:
            found = self.flags.allowed.get(key)
        if found is not None and len(found) == len(self.owners.sessions):
            return found
        mask = bytearray(len(self.owners.sessions))
        numbers = self.owners.numbers
        for (sid,) in self._conn.execute(
            f"SELECT s.id FROM sessions s WHERE 1{session_sql}", params
        ):
            number = numbers.get(sid)
            if number is not None:
                mask[number] = 1
        for sid in self.flags.with_archive:
            number = numbers.get(sid)
            if number is not None and mask[number]:
                mask[number] = 2
        found = bytes(mask)
        with self._lock:
            if len(self.flags.allowed) >= FILTER_SETS:
                self.flags.allowed.pop(next(iter(self.flags.allowed)))
            self.flags.allowed[key] = found
        return found

    def remembered(self, key: tuple[object, ...], compute: Callable[[], T]) -> T:
        """``compute()``'s answer, kept for this version of the archive under ``key`` (the
        question, whole: its SQL and parameters), the :data:`ANSWERS` newest."""
        with self._lock:
            if key in self.flags.answers:
                return self.flags.answers[key]  # type: ignore[return-value]
        value = compute()
        with self._lock:
            if len(self.flags.answers) >= ANSWERS:
                self.flags.answers.pop(next(iter(self.flags.answers)))
            self.flags.answers[key] = value
        return value

    def scope_matches(
        self, cur: sqlite3.Cursor, walk: str, match: str, window: int
    ) -> tuple[list[int], int]:
        """A scoped map's matches of ``walk`` (an FTS ``SELECT rowid … WHERE … MATCH ?``,
        no order), newest first, up to one past ``window``; and how many other profiles'
        matches lie among those scored (from the first to the window's last, or to the
        scope's oldest row). Walked in rowid order, no bm25, between the scope's newest
        and oldest rows: profiles imported one after another are blocks of ids."""
        owners = self.owners
        index = owners.index
        owned: list[int] = []
        walked: list[int] = []
        cur.execute(
            f"{walk} AND rowid BETWEEN {owners.oldest} AND {owners.newest} ORDER BY rowid DESC",
            (match,),
        )
        while len(owned) <= window and (chunk := cur.fetchmany(4096)):
            ids = [r[0] for r in chunk]  # every id <= newest < len(index)
            walked += ids
            numbers = map(index.__getitem__, ids)
            owned += [rowid for rowid, n in zip(ids, numbers, strict=True) if n]
        if not owned:
            return owned, 0
        # Newest first: the scored range runs from the first to the window's last match,
        # or, short of a window, to the walk's end.
        last = walked.index(owned[window - 1]) if len(owned) > window else len(walked) - 1
        return owned, last - walked.index(owned[0]) + 1 - min(len(owned), window)

    def rows(
        self, scored: list[tuple[int, float]], allowed: bytes
    ) -> list[tuple[int, str, float, float, int]]:
        """``scored`` (rowid, bm25) as routes.Row tuples: the rows shown whose session
        ``allowed`` lets through, each with its session and archived flag (no timestamp:
        0). Thousands of rows a search: ids become session numbers and numbers verdicts
        in passes in C; Python builds the rows kept only."""
        if not scored:
            return []
        owners, flags = self.owners, self.flags
        ids = list(map(itemgetter(0), scored))
        past = len(owners.index)
        if max(ids) >= past:  # a row newer than the map's snapshot: no owner here
            ids = [rowid if rowid < past else 0 for rowid in ids]
        numbers = list(map(owners.index.__getitem__, ids))
        hidden, names, archived = flags.hidden, owners.sessions, flags.archived
        verdicts = map(allowed.__getitem__, numbers)
        # One pass; only a session holding archived rows (verdict 2) asks row by row.
        return [
            (rowid, names[n], score, 0.0, 1 if ok == 2 and archived(rowid, names[n]) else 0)
            for (rowid, score), n, ok in zip(scored, numbers, verdicts, strict=True)
            if ok and rowid not in hidden
        ]


class RowMapCache:
    """One archive's :class:`Owners` and :class:`Flags`, kept by a reader across requests.

    ``scoped``: the reader's connections see some profiles only (store/scope.py); the
    map then holds their sessions' rows alone, so another profile's match has no owner.
    """

    def __init__(self, scoped: bool = False) -> None:
        self._scoped = scoped
        self._lock = threading.Lock()
        self._identity: tuple[str, int, int] | None = None
        self._owners: Owners | None = None
        self._flags: Flags | None = None

    def get(
        self, conn: sqlite3.Connection, state: StoreState, version: tuple[object, ...] | None = None
    ) -> RowMap | None:
        """The map for the snapshot ``conn`` reads (``state`` names the archive), or None
        when the store's message ids may be reused (no ``AUTOINCREMENT``). ``version``:
        its graph.archive_version, when the caller read it already."""
        top = _seq(conn)
        if top is None:
            return None
        identity = _identity(state.path)
        # Rows written by anything but Recall (no write counter move) show in the newest id.
        key = (version if version is not None else archive_version(conn, state), top)
        with self._lock:
            owners = self._owners if identity == self._identity else None
            flags = self._flags if self._flags is not None and self._flags.key == key else None
        if owners is None or top < owners.top or top - owners.top > REBUILD_PAST:
            owners = _build(conn, self._scoped, top)
        elif top > owners.top:
            owners = _extend(conn, owners, self._scoped, top)
        if flags is None:
            flags = _flags(conn, key)
        with self._lock:
            kept = self._owners
            if kept is None or self._identity != identity or owners.top >= kept.top:
                self._identity, self._owners = identity, owners
            self._flags = flags
        return RowMap(owners, flags, conn)


def _identity(path: str) -> tuple[str, int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (path, -1, -1)
    return (path, st.st_dev, st.st_ino)


def _seq(conn: sqlite3.Connection) -> int | None:
    """The newest message id the store ever gave (None: ids may be reused)."""
    row = conn.execute("SELECT seq FROM main.sqlite_sequence WHERE name = 'messages'").fetchone()
    return int(row[0]) if row and row[0] is not None else None


def _mine(scoped: bool) -> str:
    # A scoped connection's ``sessions`` is its profiles' view (store/scope.py).
    return " AND session_id IN (SELECT id FROM sessions)" if scoped else ""


def _zeros(count: int) -> array:
    return array("i", bytes(4 * max(count, 0)))


def _build(conn: sqlite3.Connection, scoped: bool, top: int) -> Owners:
    """Every message's session, one slice of the index per run of its ids."""
    spans = _spans(conn, f"1{_mine(scoped)}")
    high = max((span[1] for span in spans), default=0)
    index = _zeros(max(top, high) + 1)
    sessions, numbers = [""], {}
    for low, high, sid in spans:
        number = numbers.get(sid)
        if number is None:
            number = numbers[sid] = len(sessions)
            sessions.append(sid)
        index[low : high + 1] = array("i", [number]) * (high - low + 1)
    newest = max((span[1] for span in spans), default=0)
    oldest = min((span[0] for span in spans), default=0)
    return Owners(index, sessions, numbers, len(index) - 1, newest, oldest)


def _spans(conn: sqlite3.Connection, where: str) -> list[tuple[int, int, str]]:
    """The runs of consecutive ids of each session's rows matching ``where``, in id order:
    a session whose ids are consecutive is one run, read from its index entries alone
    (min, max, count); the others' ids are read and cut into runs."""
    spans: list[tuple[int, int, str]] = []
    for sid, low, high, count in conn.execute(
        f"SELECT session_id, min(id), max(id), count(*) FROM main.messages WHERE {where}"
        " GROUP BY session_id"
    ):
        if high - low + 1 == count:
            spans.append((low, high, sid))
            continue
        ids = conn.execute(
            f"SELECT id FROM main.messages WHERE {where} AND session_id = ? ORDER BY id", (sid,)
        )
        spans.extend((lo, hi, sid) for lo, hi in _consecutive(r[0] for r in ids))
    spans.sort()
    return spans


def _extend(conn: sqlite3.Connection, owners: Owners, scoped: bool, top: int) -> Owners:
    """``owners`` with the rows past its newest id (ids only grow: the rest stands)."""
    rows = conn.execute(
        f"SELECT id, session_id FROM main.messages WHERE id > ?{_mine(scoped)}",
        (owners.top,),
    ).fetchall()
    top = max(top, owners.top, *(r[0] for r in rows))
    index = array("i", owners.index)
    index.extend(_zeros(top + 1 - len(index)))
    sessions, numbers = list(owners.sessions), dict(owners.numbers)
    for rowid, sid in rows:
        number = numbers.get(sid)
        if number is None:
            number = numbers[sid] = len(sessions)
            sessions.append(sid)
        index[rowid] = number
    newest = max(owners.newest, *(r[0] for r in rows)) if rows else owners.newest
    oldest = owners.oldest or (min(r[0] for r in rows) if rows else 0)
    return Owners(index, sessions, numbers, top, newest, oldest)


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
    spans = _spans(conn, "compacted = 1")
    compacted = Runs(
        array("q", (s[0] for s in spans)), array("q", (s[1] for s in spans)), [s[2] for s in spans]
    )
    superseded = [(rowid, sid) for rowid, sid, shown in unshown if shown]
    return Flags(
        key,
        hidden=frozenset(rowid for rowid, _, shown in unshown if not shown),
        superseded=frozenset(rowid for rowid, _ in superseded),
        compacted=compacted,
        with_archive=frozenset([*compacted.owners, *(sid for _, sid in superseded)]),
    )
