"""Per-day spend sums kept in recall.db, so /costs answers in milliseconds at 100k sessions.

Summing 180k usage rows through the status rules of :mod:`costs` takes ~380 ms on
these machines (``bench/costs.py``); even a plain ``GROUP BY`` takes ~110 ms. The
rollup keeps, per home and timezone, in Recall's own file:

* ``cost_row``: every usage row as last read (figures read by :mod:`costs.rules`,
  one record per local day it spent on, with that day's weight from
  :mod:`costs.days`), so an updated row's old contribution can be taken back out;
* ``cost_day``: sums per (day, provider, model, source, task, profile);
* ``cost_day_sessions``: distinct sessions per (dimension, key, source, profile, day),
  the dimension ``all`` counting every session (the total row);
* ``cost_multi``: sessions whose rows fall on more than one day. A week or month
  adds up its days' distinct counts, then takes back these sessions' repeats, so
  ``sessions`` stays an exact distinct count.

Hermes upserts one usage row per (session, model, provider, task) and moves its
``last_seen`` on every call. A refresh therefore reads only rows at or past the
last ``last_seen`` it saw, with a new rowid, or of a session with a new message (its
days may have moved), and applies the difference in one transaction. It rebuilds
from scratch when rows disappeared, the file was replaced, or the timezone changed.
The archive always has usage rows: for a source without them the importer derived
one per session, and those are summed here like any other.

Every record carries its session's profile (issue 17; Recall migration 6), so one
rollup of the whole archive answers every scope: ``profiles=`` filters each table
on it. A session belongs to one profile, so distinct counts per profile add up. The
rollup is always brought up to date from a connection that sees the whole archive
(a scoped reader's own connection sees one profile: ``StateReader`` opens another).
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from dashboard.costs.book import current_book
from dashboard.costs.days import DayClock
from dashboard.costs.prices import PriceBook
from dashboard.costs.rollup_records import (
    CHUNK,
    DAY_KEYS,
    EVERY,
    ROW_COLUMNS,
    SESSION_KEYS,
    Membership,
    apply_sessions,
    apply_sums,
    clean_sums,
    day_key,
    days_of,
    load_rows,
    marks,
    memberships,
    row_values,
    session_key,
    session_memberships,
)
from dashboard.costs.spend import (
    SUM_COLUMNS,
    TOKEN_COLUMNS,
    Cell,
    Plan,
    Spend,
    SpendMark,
    add_vector,
    cell_from_sums,
    fingerprint,
    plan,
)
from dashboard.costs.usage import Row, read_rows
from dashboard.errors import StoreUnavailableError
from dashboard.store.readonly import read_snapshot
from dashboard.store.writecore import WriteCore

log = logging.getLogger(__name__)

ROLLUP_VERSION = "5"  # bump when what a row contributes changes: forces a rebuild


def rollup_version(book: PriceBook) -> str:
    """What a built rollup must match: this code's version and the price book's (a new
    table or a changed prices.yaml prices every row again)."""
    return f"{ROLLUP_VERSION}|{book.version}"


def _filters(question: Plan) -> tuple[str, list[object]]:
    """The question's sources and profiles as a condition on any rollup table."""
    where, params = "", []
    for column, values in (("source", question.sources), ("profile", question.profiles)):
        if values:
            where += f" AND {column} IN ({marks(list(values))})"
            params.extend(values)
    return where, params


@dataclass(frozen=True)
class _State:
    version: str
    zone: str
    watermark: float | None
    max_rid: int
    max_mid: int
    row_count: int
    fingerprint: str


class CostRollup:
    """Spend answered from per-day sums in ``core`` (Recall's file) for one home."""

    def __init__(
        self,
        core: WriteCore,
        home: str,
        *,
        connect: Callable[[], sqlite3.Connection] | None = None,
    ) -> None:
        """``connect`` opens the archive read-only for a background build; without it the
        first question builds in the caller's thread."""
        self.core = core
        self.path = home
        self._connect = connect
        self._lock = threading.Lock()
        self._builder: threading.Thread | None = None
        self.last_refresh: dict[str, float] = {}  # what the last refresh did (for benches)

    @functools.cached_property
    def home(self) -> int:
        """This home's number in Recall's file."""

        def number(w: sqlite3.Connection) -> int:
            w.execute("INSERT OR IGNORE INTO cost_homes(path) VALUES (?)", (self.path,))
            return w.execute("SELECT id FROM cost_homes WHERE path = ?", (self.path,)).fetchone()[0]

        return self.core.write(number)

    # -- answering ----------------------------------------------------------------

    def spend(
        self, conn: sqlite3.Connection, *, mark: SpendMark | None = None, **options: object
    ) -> Spend | None:
        """Like :func:`costs.spend`; None while a first build runs in the background.

        ``mark``: the file's :func:`costs.fingerprint`, when the caller has read it in
        the read transaction ``conn`` is in.
        """
        question = plan(**options)  # type: ignore[arg-type]
        if not self.refresh(conn, question.zone, mark):
            return None
        return self._answer(question)

    def session_sums(
        self,
        conn: sqlite3.Connection,
        question: Plan,
        *,
        sort: str,
        descending: bool,
        limit: int,
        mark: SpendMark | None = None,
    ) -> tuple[int, list[tuple[str, list[float]]]] | None:
        """``(sessions that spent in the range, [(session, SUM_COLUMNS sums)])`` of the
        first ``limit`` by ``sort`` (see :mod:`costs.costly`), from ``cost_session_day``;
        None while a first build runs in the background."""
        if not self.refresh(conn, question.zone, mark):
            return None
        filters, values = _filters(question)
        where = "home = ? AND day >= ? AND day < ?" + filters
        params: list[object] = [self.home, question.days[0], question.days[-1], *values]
        way = "DESC" if descending else "ASC"
        order = {
            # Unknown (no row with an effective figure) sorts last either way.
            "cost": f"sum(eff_n) = 0, sum(eff_sum) {way}",
            "tokens": f"sum({' + '.join(TOKEN_COLUMNS)}) {way}",
            "calls": f"sum(calls) {way}",
        }[sort]
        sums = ", ".join(f"sum({c})" for c in SUM_COLUMNS)
        with self.core.reading() as rconn:
            total = rconn.execute(
                f"SELECT count(DISTINCT sid) FROM cost_session_day WHERE {where}", params
            ).fetchone()[0]
            # Rank on the one or two sums the order needs, then sum every column of the few
            # picked: ~25 ms instead of ~150 ms for every column of 20k sessions.
            picked = [
                sid
                for (sid,) in rconn.execute(
                    f"SELECT sid FROM cost_session_day WHERE {where} GROUP BY sid "
                    f"ORDER BY {order}, sid LIMIT ?",
                    [*params, limit],
                )
            ]
            found = (
                {
                    sid: list(vector)
                    for sid, *vector in rconn.execute(
                        f"SELECT sid, {sums} FROM cost_session_day WHERE {where} "
                        f"AND sid IN ({marks(picked)}) GROUP BY sid",
                        [*params, *picked],
                    )
                }
                if picked
                else {}
            )
        return int(total or 0), [(sid, found[sid]) for sid in picked]

    def refresh(
        self, conn: sqlite3.Connection, zone: ZoneInfo, mark: SpendMark | None = None
    ) -> bool:
        """Bring the sums up to date with the file; False when a background build started,
        or when Recall's file cannot take the sums now (its folder read-only or full): the
        caller answers from the raw rows, as while a build runs."""
        with self._lock:
            if self._builder is not None and self._builder.is_alive():
                return False  # answered from the raw rows meanwhile; never wait for a build
            try:
                return self._refresh(conn, zone, mark)
            except sqlite3.OperationalError:
                # Read-only or full (the syncer's banner names the folder); a damaged
                # archive raises again from the raw rows, where the page explains it.
                return False

    def _refresh(self, conn: sqlite3.Connection, zone: ZoneInfo, mark: SpendMark | None) -> bool:
        state = self._state()
        book = current_book()
        if state is None or state.version != rollup_version(book) or state.zone != zone.key:
            return self._rebuild_soon(conn, zone)
        with read_snapshot(conn):  # one state of the file: the fingerprint and the rows
            mark = mark if mark is not None else fingerprint(conn)
            if repr(mark) == state.fingerprint:
                self.last_refresh = {"changed": 0}
                return True
            newest = conn.execute(
                "SELECT session_id FROM session_model_usage WHERE rowid = ?", (state.max_rid,)
            ).fetchone()
            changed = self._read_rows(conn, zone, state, book)
        t0 = time.perf_counter()
        if not self._apply(changed, state, mark, newest[0] if newest else None):
            return self._rebuild_soon(conn, zone)
        self.last_refresh = {
            "changed": len(changed),
            "apply_ms": (time.perf_counter() - t0) * 1000,
        }
        return True

    def _rebuild_soon(self, conn: sqlite3.Connection, zone: ZoneInfo) -> bool:
        """Rebuild in the background when it can (False: not ready yet), else right now."""
        if self._connect is not None:
            self._start_build(zone)
            return False
        self._rebuild(conn, zone)
        return True

    def _answer(self, question: Plan) -> Spend:
        by = question.by
        ords = question.days[:-1]
        first, end = ords[0], question.end.toordinal()
        steps = " ".join(f"WHEN day < {o} THEN {i}" for i, o in enumerate(ords[1:]))
        bucket = f"CASE {steps} ELSE {len(ords) - 1} END" if steps else "0"
        filters, values = _filters(question)
        where = "home = ? AND day >= ? AND day < ?" + filters
        params: list[object] = [self.home, first, end, *values]
        sums = ", ".join(f"sum({c})" for c in SUM_COLUMNS)
        with self.core.reading() as rconn:
            figures = rconn.execute(
                f"SELECT {bucket}, {by}, {sums} FROM cost_day WHERE {where} GROUP BY 1, 2", params
            ).fetchall()
            counted = rconn.execute(
                f"SELECT {bucket}, key, sum(sessions) FROM cost_day_sessions "
                f"WHERE {where} AND dim = ? GROUP BY 1, 2",
                [*params, by],
            ).fetchall()
            everyone = rconn.execute(
                f"SELECT sum(sessions) FROM cost_day_sessions WHERE {where} AND dim = ?",
                [*params, EVERY[0]],
            ).fetchone()[0]
            multi = [
                sid
                for (sid,) in rconn.execute(
                    "SELECT sid FROM cost_multi WHERE home = ?", (self.home,)
                )
            ]
            seen: list[tuple[int, str, str]] = []
            for i in range(0, len(multi), CHUNK):
                chunk = multi[i : i + CHUNK]
                seen += rconn.execute(
                    f"SELECT DISTINCT day, {by}, sid FROM cost_row "
                    f"INDEXED BY idx_cost_row_sid WHERE home = ? AND sid IN ({marks(chunk)}) "
                    f"AND {where.removeprefix('home = ? AND ')}",
                    [self.home, *chunk, *params[1:]],
                ).fetchall()
        # A session on several days of one period (or of the range) counted once there.
        cell_days: dict[tuple[int, str, str], set[int]] = defaultdict(set)
        range_days: dict[str, set[int]] = defaultdict(set)
        for day, key, sid in seen:
            cell_days[(question.bucket(day), key, sid)].add(day)  # type: ignore[index]
            range_days[sid].add(day)
        sessions: dict[tuple[int, str], int] = {(b, k): n for b, k, n in counted}
        for (b, k, _sid), days in cell_days.items():
            sessions[(b, k)] -= len(days) - 1
        total = int(everyone or 0) - sum(len(days) - 1 for days in range_days.values())
        cells: list[Cell] = [
            cell_from_sums(question.labels[b], key, sums, sessions.get((b, key), 0))
            for b, key, *sums in figures
        ]
        return question.result(cells, total)

    # -- building -----------------------------------------------------------------

    def prepare(self, zone: ZoneInfo) -> None:
        """Start a background build when there is none for ``zone`` (at server start)."""
        if self._connect is None:
            return
        with self._lock:
            state = self._state()
            version = rollup_version(current_book())
            if state is None or state.version != version or state.zone != zone.key:
                self._start_build(zone)

    def _start_build(self, zone: ZoneInfo) -> None:
        if self._builder is not None and self._builder.is_alive():
            return
        connect = self._connect
        assert connect is not None

        def build() -> None:
            try:
                conn = connect()
                try:
                    # No lock held: refresh() sees the builder alive and answers at once.
                    self._rebuild(conn, zone)
                finally:
                    conn.close()
            except StoreUnavailableError as exc:  # the pages explain a missing or broken file
                log.warning("cost rollup not built: %s", exc)
            except sqlite3.OperationalError as exc:  # Recall's folder read-only or full
                log.warning("cost rollup not built: %s", exc)
            except Exception:  # the page keeps answering from the raw rows
                log.exception("building the cost rollup failed")

        self._builder = threading.Thread(target=build, name="recall-cost-rollup", daemon=True)
        self._builder.start()

    def wait_until_built(self, timeout: float | None = None) -> None:
        if self._builder is not None:
            self._builder.join(timeout)

    def _read_rows(
        self, conn: sqlite3.Connection, zone: ZoneInfo, since: _State | None, book: PriceBook
    ) -> dict[int, Row]:
        if since is None:
            return read_rows(conn, DayClock(zone), book=book)
        where = (
            "u.last_seen >= ? OR u.rowid > ? "
            "OR u.session_id IN (SELECT session_id FROM messages WHERE rowid > ?)"
        )
        watermark = since.watermark if since.watermark is not None else 0.0
        params = (watermark, since.max_rid, since.max_mid)
        return read_rows(conn, DayClock(zone), where, params, book=book)

    def _rebuild(self, conn: sqlite3.Connection, zone: ZoneInfo) -> None:
        t0 = time.perf_counter()
        book = current_book()
        with read_snapshot(conn):
            mark = fingerprint(conn)
            rows = self._read_rows(conn, zone, None, book)
        days: dict[tuple, list[float]] = {}
        session_days: dict[tuple, list[float]] = {}
        members: dict[Membership, int] = defaultdict(int)
        multi = []
        for row in rows.values():
            for day, vector in row.vectors():
                add_vector(days, day_key(row, day), vector)
                add_vector(session_days, session_key(row, day), vector)
        by_session: dict[str, set[Membership]] = defaultdict(set)
        for row in rows.values():
            by_session[row.sid] |= memberships(row)
        for sid, cells in by_session.items():
            for cell in cells:
                members[cell] += 1
            if len(days_of(cells)) > 1:
                multi.append(sid)
        state = (
            self.home,
            rollup_version(book),
            zone.key,
            mark.last_seen,
            max(rows, default=0),
            mark.newest_message or 0,
            len(rows),
            repr(mark),
            time.time(),
        )

        def write(w: sqlite3.Connection) -> None:
            for table in (
                "cost_row",
                "cost_day",
                "cost_day_sessions",
                "cost_multi",
                "cost_session_day",
            ):
                w.execute(f"DELETE FROM {table} WHERE home = ?", (self.home,))
            w.executemany(
                f"INSERT INTO cost_session_day VALUES "
                f"({', '.join('?' * (1 + len(SESSION_KEYS) + len(SUM_COLUMNS)))})",
                ((self.home, *key, *clean_sums(vec)) for key, vec in session_days.items()),
            )
            w.executemany(
                f"INSERT INTO cost_row VALUES ({', '.join('?' * (len(ROW_COLUMNS) + 2))})",
                (v for rid, row in rows.items() for v in row_values(self.home, rid, row)),
            )
            w.executemany(
                f"INSERT INTO cost_day VALUES "
                f"({', '.join('?' * (1 + len(DAY_KEYS) + len(SUM_COLUMNS)))})",
                ((self.home, *key, *clean_sums(vec)) for key, vec in days.items()),
            )
            w.executemany(
                "INSERT INTO cost_day_sessions VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    (self.home, dim, day, key, src, profile, n)
                    for (dim, key, src, profile, day), n in members.items()
                ),
            )
            w.executemany("INSERT INTO cost_multi VALUES (?, ?)", ((self.home, s) for s in multi))
            w.execute("INSERT OR REPLACE INTO cost_rollup_state VALUES (?,?,?,?,?,?,?,?,?)", state)

        self.core.write(write)
        self.last_refresh = {"rebuilt": len(rows), "build_ms": (time.perf_counter() - t0) * 1000}
        log.info(
            "cost rollup built: %d usage rows in %.0f ms", len(rows), self.last_refresh["build_ms"]
        )

    def _apply(
        self, changed: dict[int, Row], seen: _State, mark: SpendMark, newest_sid: object
    ) -> bool:
        """Apply changed rows in one transaction; False when only a rebuild can be right.

        ``mark`` is the file's fingerprint read in the same snapshot as ``changed``;
        ``newest_sid`` is the session of the usage row at the rowid we last read as newest.
        """
        watermark, count = mark.last_seen, mark.rows

        def write(w: sqlite3.Connection) -> bool:
            state = self._state(w)
            if state != seen:  # another process moved it meanwhile: start over from its state
                return False
            if state.max_rid:
                mirrored = w.execute(
                    "SELECT sid FROM cost_row WHERE home = ? AND rid = ?",
                    (self.home, state.max_rid),
                ).fetchone()
                if mirrored is None or newest_sid is None or str(newest_sid) != mirrored[0]:
                    return False  # the row we read as newest is gone or another's: replaced file
            old = load_rows(w, self.home, changed)
            rows = state.row_count + sum(1 for rid in changed if rid not in old)
            if rows != count:  # rows were deleted: their sums can't be found any more
                return False
            sessions = {row.sid for row in changed.values()} | {row.sid for row in old.values()}
            before = session_memberships(w, self.home, sessions)
            delta: dict[tuple, list[float]] = {}
            session_delta: dict[tuple, list[float]] = {}
            for rid, row in changed.items():
                previous = old.get(rid)
                if previous is not None:
                    for day, vector in previous.vectors():
                        add_vector(delta, day_key(previous, day), vector, -1)
                        add_vector(session_delta, session_key(previous, day), vector, -1)
                for day, vector in row.vectors():
                    add_vector(delta, day_key(row, day), vector)
                    add_vector(session_delta, session_key(row, day), vector)
            apply_sums(w, "cost_day", DAY_KEYS, self.home, delta)
            apply_sums(w, "cost_session_day", SESSION_KEYS, self.home, session_delta)
            ids = list(changed)
            for i in range(0, len(ids), CHUNK):  # a row's days may have changed: replace all
                chunk = ids[i : i + CHUNK]
                w.execute(
                    f"DELETE FROM cost_row WHERE home = ? AND rid IN ({marks(chunk)})",
                    (self.home, *chunk),
                )
            w.executemany(
                f"INSERT INTO cost_row VALUES ({', '.join('?' * (len(ROW_COLUMNS) + 2))})",
                (v for rid, row in changed.items() for v in row_values(self.home, rid, row)),
            )
            apply_sessions(w, self.home, before, session_memberships(w, self.home, sessions))
            w.execute(
                "UPDATE cost_rollup_state SET watermark = ?, max_rid = ?, max_mid = ?, "
                "row_count = ?, fingerprint = ?, built_at = ? WHERE home = ?",
                (
                    watermark,
                    max([state.max_rid, *changed]),
                    mark.newest_message or 0,
                    rows,
                    repr(mark),
                    time.time(),
                    self.home,
                ),
            )
            return True

        return self.core.write(write)

    def _state(self, conn: sqlite3.Connection | None = None) -> _State | None:
        def read(c: sqlite3.Connection) -> _State | None:
            row = c.execute(
                "SELECT version, zone, watermark, max_rid, max_mid, row_count, fingerprint "
                "FROM cost_rollup_state WHERE home = ?",
                (self.home,),
            ).fetchone()
            return _State(*row) if row else None

        if conn is not None:
            return read(conn)
        with self.core.reading() as c:
            return read(c)
