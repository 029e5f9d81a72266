"""Per-day spend sums kept in recall.db, so /costs answers in milliseconds at 100k sessions.

Summing 180k usage rows through the status rules of :mod:`costs` takes ~380 ms on
these machines (``bench/costs.py``); even a plain ``GROUP BY`` takes ~110 ms. The
rollup keeps, per home and timezone, in Recall's own file:

* ``cost_row``: every usage row as last read (normalised figures, local day), so an
  updated row's old contribution can be taken back out;
* ``cost_day``: sums per (day, provider, model, source, task);
* ``cost_day_sessions``: distinct sessions per (dimension, key, source, day);
* ``cost_multi``: sessions whose rows fall on more than one day. A week or month
  adds up its days' distinct counts, then takes back these sessions' repeats, so
  ``sessions`` stays an exact distinct count.

Hermes upserts one usage row per (session, model, provider, task) and moves its
``last_seen`` on every call. A refresh therefore reads only rows at or past the
last ``last_seen`` it saw, or with a new rowid, and applies the difference in one
transaction. It rebuilds from scratch when rows disappeared, the file was
replaced, or the timezone changed. Files without ``session_model_usage`` are
summed directly (:func:`costs.spend`): their rows are sessions, whose figures
change without a moving timestamp.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from dashboard.repository.costs import (
    STATUSES,
    TOKEN_KINDS,
    Cell,
    Plan,
    Spend,
    fingerprint,
    make_cell,
    plan,
    row_sql,
)
from dashboard.repository.errors import StoreUnavailableError
from dashboard.repository.layout import Layout
from dashboard.repository.readonly import read_snapshot
from dashboard.repository.writecore import WriteCore

log = logging.getLogger(__name__)

ROLLUP_VERSION = "1"  # bump when what a row contributes changes: forces a rebuild
DIMENSIONS = ("provider", "model", "source", "task")
TOKEN_COLUMNS = tuple(f"t_{k}" for k in TOKEN_KINDS)
# One vector per row or day-cell; sums of these are what cost_day stores.
SUM_COLUMNS = (
    "rows", "e_sum", "e_n", "a_sum", "a_n", "eff_sum", "eff_n", "pa_sum", "pe_sum", "pair_n",
    *(f"n_{s}" for s in STATUSES), *TOKEN_COLUMNS, "calls",
)  # fmt: skip
# Chunks of ids per IN (...): below SQLite's variable limit. Lookups by session name
# the index: without statistics the planner would scan the table by its home prefix.
CHUNK = 500
ROW_COLUMNS = ("sid", "day", *DIMENSIONS, "status", "e", "a", *TOKEN_COLUMNS, "calls")


def create_tables(conn: sqlite3.Connection) -> None:
    """Recall migration 3 (see :mod:`recalldb`)."""
    # Homes by number: the path would be repeated in every one of ~2 rows per usage row.
    conn.execute("CREATE TABLE cost_homes (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE)")
    conn.execute(
        """
        CREATE TABLE cost_rollup_state (
            home INTEGER PRIMARY KEY,
            version TEXT NOT NULL,
            zone TEXT NOT NULL,             -- IANA key the days are local to
            watermark REAL,                 -- the newest last_seen read
            max_rid INTEGER NOT NULL,       -- the newest usage rowid read
            row_count INTEGER NOT NULL,
            fingerprint TEXT NOT NULL,      -- costs.fingerprint() when last brought up to date
            built_at REAL NOT NULL
        )"""
    )
    tokens = ", ".join(f"{c} INTEGER NOT NULL" for c in TOKEN_COLUMNS)
    conn.execute(
        f"""
        CREATE TABLE cost_row (
            home INTEGER NOT NULL, rid INTEGER NOT NULL, sid TEXT NOT NULL,
            day INTEGER,                    -- proleptic ordinal of the local date; NULL: no time
            provider TEXT NOT NULL, model TEXT NOT NULL, source TEXT NOT NULL, task TEXT NOT NULL,
            status TEXT NOT NULL, e REAL, a REAL, {tokens}, calls INTEGER NOT NULL,
            PRIMARY KEY (home, rid)
        ) WITHOUT ROWID"""
    )
    conn.execute("CREATE INDEX idx_cost_row_sid ON cost_row(home, sid)")
    sums = ", ".join(f"{c} NUMERIC NOT NULL" for c in SUM_COLUMNS)
    conn.execute(
        f"""
        CREATE TABLE cost_day (
            home INTEGER NOT NULL, day INTEGER NOT NULL, provider TEXT NOT NULL,
            model TEXT NOT NULL, source TEXT NOT NULL, task TEXT NOT NULL, {sums},
            PRIMARY KEY (home, day, provider, model, source, task)
        ) WITHOUT ROWID"""
    )
    conn.execute(
        """
        CREATE TABLE cost_day_sessions (
            home INTEGER NOT NULL, dim TEXT NOT NULL, day INTEGER NOT NULL, key TEXT NOT NULL,
            source TEXT NOT NULL, sessions INTEGER NOT NULL,
            PRIMARY KEY (home, dim, day, key, source)
        ) WITHOUT ROWID"""
    )
    conn.execute(
        "CREATE TABLE cost_multi (home INTEGER NOT NULL, sid TEXT NOT NULL, "
        "PRIMARY KEY (home, sid)) WITHOUT ROWID"
    )


@dataclass(frozen=True)
class Row:
    """One usage row, normalised (what ``cost_row`` keeps)."""

    sid: str
    day: int | None
    provider: str
    model: str
    source: str
    task: str
    status: str
    e: float | None
    a: float | None
    tokens: tuple[int, ...]
    calls: int

    def key(self, dim: str) -> str:
        return getattr(self, dim)

    def vector(self) -> list[float]:
        """This row's contribution to a ``cost_day`` cell, in SUM_COLUMNS order."""
        e, a = self.e, self.a
        eff = a if a is not None else e
        # Drift pairs only rows billed with both figures for the same calls (costs.py).
        paired = self.status == "actual" and a is not None and e is not None
        status = self.status if self.status in STATUSES else "unknown"
        return [
            1, e or 0.0, e is not None, a or 0.0, a is not None, eff or 0.0, eff is not None,
            a if paired else 0.0, e if paired else 0.0, paired,
            *(status == s for s in STATUSES), *self.tokens, self.calls,
        ]  # fmt: skip

    def memberships(self) -> set[tuple[str, str, str, int]]:
        """(dimension, key, source, day) cells this row makes its session count in."""
        if self.day is None:
            return set()
        return {(dim, self.key(dim), self.source, self.day) for dim in DIMENSIONS}


@dataclass(frozen=True)
class _State:
    version: str
    zone: str
    watermark: float | None
    max_rid: int
    row_count: int
    fingerprint: str


class CostRollup:
    """Spend answered from per-day sums in ``core`` (Recall's file) for one home."""

    def __init__(
        self, core: WriteCore, home: str, *, connect: Callable[[], tuple] | None = None
    ) -> None:
        """``connect`` returns ``(conn, layout)`` of the home's state.db for a background
        build; without it the first question builds in the caller's thread."""
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
        self, conn: sqlite3.Connection, layout: Layout, *, mark: tuple | None = None,
        **options: object,
    ) -> Spend | None:  # fmt: skip
        """Like :func:`costs.spend`; None while a first build runs in the background.

        ``mark``: the file's :func:`costs.fingerprint`, when the caller has read it in
        the read transaction ``conn`` is in.
        """
        question = plan(layout, **options)  # type: ignore[arg-type]
        if not layout.has_model_usage:
            return None
        if not self.refresh(conn, layout, question.zone, mark):
            return None
        return self._answer(layout, question)

    def refresh(
        self, conn: sqlite3.Connection, layout: Layout, zone: ZoneInfo, mark: tuple | None = None
    ) -> bool:
        """Bring the sums up to date with the file; False when a background build started."""
        with self._lock:
            if self._builder is not None and self._builder.is_alive():
                return False  # answered from the raw rows meanwhile; never wait for a build
            state = self._state()
            if state is None or state.version != ROLLUP_VERSION or state.zone != zone.key:
                return self._rebuild_soon(conn, layout, zone)
            with read_snapshot(conn):  # one state of the file: the fingerprint and the rows
                mark = mark if mark is not None else fingerprint(conn, layout)
                if repr(mark) == state.fingerprint:
                    self.last_refresh = {"changed": 0}
                    return True
                newest = conn.execute(
                    "SELECT session_id FROM session_model_usage WHERE rowid = ?", (state.max_rid,)
                ).fetchone()
                changed = self._read_rows(conn, layout, zone, state)
            t0 = time.perf_counter()
            if not self._apply(changed, state, mark, newest[0] if newest else None):
                return self._rebuild_soon(conn, layout, zone)
            self.last_refresh = {
                "changed": len(changed), "apply_ms": (time.perf_counter() - t0) * 1000
            }  # fmt: skip
            return True

    def _rebuild_soon(self, conn: sqlite3.Connection, layout: Layout, zone: ZoneInfo) -> bool:
        """Rebuild in the background when it can (False: not ready yet), else right now."""
        if self._connect is not None:
            self._start_build(zone)
            return False
        self._rebuild(conn, layout, zone)
        return True

    def _answer(self, layout: Layout, question: Plan) -> Spend:
        by = question.by
        ords = [d.toordinal() for d in question.starts]
        first, end = ords[0], question.end.toordinal()
        steps = " ".join(f"WHEN day < {o} THEN {i}" for i, o in enumerate(ords[1:]))
        bucket = f"CASE {steps} ELSE {len(ords) - 1} END" if steps else "0"
        where = "home = ? AND day >= ? AND day < ?"
        params: list[object] = [self.home, first, end]
        if question.sources:
            where += f" AND source IN ({','.join('?' * len(question.sources))})"
            params.extend(question.sources)
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
            multi = [sid for (sid,) in rconn.execute(
                "SELECT sid FROM cost_multi WHERE home = ?", (self.home,))]  # fmt: skip
            repeats = []
            for i in range(0, len(multi), CHUNK):
                chunk = multi[i : i + CHUNK]
                repeats += rconn.execute(
                    f"SELECT {bucket}, {by}, sid, count(DISTINCT day) FROM cost_row "
                    f"INDEXED BY idx_cost_row_sid WHERE home = ? AND sid IN ({_marks(chunk)}) "
                    f"AND {where.removeprefix('home = ? AND ')} "
                    "GROUP BY 1, 2, 3 HAVING count(DISTINCT day) > 1",
                    [self.home, *chunk, *params[1:]],
                ).fetchall()
        sessions: dict[tuple[int, str], int] = {(b, k): n for b, k, n in counted}
        for b, k, _sid, days in repeats:
            sessions[(b, k)] -= days - 1  # one session, several days of the same period
        cells: list[Cell] = []
        for row in figures:
            index, key = row[0], row[1]
            cells.append(
                _from_sums(question.labels[index], key, row[2:], sessions.get((index, key), 0))
            )
        return question.result(layout, cells)

    # -- building -----------------------------------------------------------------

    def prepare(self, zone: ZoneInfo) -> None:
        """Start a background build when there is none for ``zone`` (at server start)."""
        if self._connect is None:
            return
        with self._lock:
            state = self._state()
            if state is None or state.version != ROLLUP_VERSION or state.zone != zone.key:
                self._start_build(zone)

    def _start_build(self, zone: ZoneInfo) -> None:
        if self._builder is not None and self._builder.is_alive():
            return
        connect = self._connect
        assert connect is not None

        def build() -> None:
            try:
                conn, layout = connect()
                try:
                    if not layout.has_model_usage:
                        return  # sessions-only files are always summed directly
                    # No lock held: refresh() sees the builder alive and answers at once.
                    self._rebuild(conn, layout, zone)
                finally:
                    conn.close()
            except StoreUnavailableError as exc:  # the pages explain a missing or broken file
                log.warning("cost rollup not built: %s", exc)
            except Exception:  # the page keeps answering from the raw rows
                log.exception("building the cost rollup failed")

        self._builder = threading.Thread(target=build, name="recall-cost-rollup", daemon=True)
        self._builder.start()

    def wait_until_built(self, timeout: float | None = None) -> None:
        if self._builder is not None:
            self._builder.join(timeout)

    def _read_rows(
        self, conn: sqlite3.Connection, layout: Layout, zone: ZoneInfo, since: _State | None
    ) -> dict[int, Row]:
        r = row_sql(layout)
        keys = ", ".join(r.keys[d] for d in DIMENSIONS)
        sql = (
            f"SELECT u.rowid, {r.sid}, {r.ts}, {keys}, {r.status}, {r.est}, {r.act}, "
            f"{', '.join(r.tokens)}, {r.calls} FROM {r.source_from(join_sessions=True)}"
        )
        params: tuple[object, ...] = ()
        if since is not None:
            sql += " WHERE u.last_seen >= ? OR u.rowid > ?"
            params = (since.watermark if since.watermark is not None else 0.0, since.max_rid)
        rows: dict[int, Row] = {}
        for rid, sid, ts, provider, model, source, task, status, e, a, *rest in conn.execute(
            sql, params
        ):
            rows[rid] = Row(
                str(sid), _local_day(ts, zone), provider, model, source, task, status,
                _number(e), _number(a), tuple(int(t or 0) for t in rest[:-1]), int(rest[-1] or 0),
            )  # fmt: skip
        return rows

    def _rebuild(self, conn: sqlite3.Connection, layout: Layout, zone: ZoneInfo) -> None:
        t0 = time.perf_counter()
        with read_snapshot(conn):
            mark = fingerprint(conn, layout)
            rows = self._read_rows(conn, layout, zone, None)
        days: dict[tuple, list[float]] = {}
        members: dict[tuple[str, str, str, int], int] = defaultdict(int)
        by_session: dict[str, set[tuple[str, str, str, int]]] = defaultdict(set)
        for row in rows.values():
            if row.day is not None:
                _add(days, _day_key(row), row.vector(), 1)
            by_session[row.sid] |= row.memberships()
        multi = []
        for sid, cells in by_session.items():
            for cell in cells:
                members[cell] += 1
            if len({cell[3] for cell in cells}) > 1:
                multi.append(sid)
        state = (
            self.home, ROLLUP_VERSION, zone.key, mark[1], max(rows, default=0), len(rows),
            repr(mark), time.time(),
        )  # fmt: skip

        def write(w: sqlite3.Connection) -> None:
            for table in ("cost_row", "cost_day", "cost_day_sessions", "cost_multi"):
                w.execute(f"DELETE FROM {table} WHERE home = ?", (self.home,))
            w.executemany(
                f"INSERT INTO cost_row VALUES ({', '.join('?' * (len(ROW_COLUMNS) + 2))})",
                (_row_values(self.home, rid, row) for rid, row in rows.items()),
            )
            w.executemany(
                f"INSERT INTO cost_day VALUES ({', '.join('?' * (6 + len(SUM_COLUMNS)))})",
                ((self.home, *key, *_clean(vec)) for key, vec in days.items()),
            )
            w.executemany(
                "INSERT INTO cost_day_sessions VALUES (?, ?, ?, ?, ?, ?)",
                ((self.home, dim, day, key, src, n) for (dim, key, src, day), n in members.items()),
            )
            w.executemany("INSERT INTO cost_multi VALUES (?, ?)", ((self.home, s) for s in multi))
            w.execute("INSERT OR REPLACE INTO cost_rollup_state VALUES (?,?,?,?,?,?,?,?)", state)

        self.core.write(write)
        self.last_refresh = {"rebuilt": len(rows), "build_ms": (time.perf_counter() - t0) * 1000}
        log.info("cost rollup built: %d usage rows in %.0f ms", len(rows),
                 self.last_refresh["build_ms"])  # fmt: skip

    def _apply(
        self, changed: dict[int, Row], seen: _State, mark: tuple, newest_sid: object
    ) -> bool:
        """Apply changed rows in one transaction; False when only a rebuild can be right.

        ``mark`` is the file's fingerprint (table, newest last_seen, row count, …) read
        in the same snapshot as ``changed``; ``newest_sid`` is the session of the usage
        row at the rowid we last read as newest.
        """
        _, watermark, count, *_ = mark

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
            old = _load_rows(w, self.home, changed)
            rows = state.row_count + sum(1 for rid in changed if rid not in old)
            if rows != count:  # rows were deleted: their sums can't be found any more
                return False
            sessions = {row.sid for row in changed.values()} | {row.sid for row in old.values()}
            before = _session_rows(w, self.home, sessions)
            delta: dict[tuple, list[float]] = {}
            for rid, row in changed.items():
                previous = old.get(rid)
                if previous is not None and previous.day is not None:
                    _add(delta, _day_key(previous), previous.vector(), -1)
                if row.day is not None:
                    _add(delta, _day_key(row), row.vector(), 1)
            _apply_days(w, self.home, delta)
            w.executemany(
                "INSERT OR REPLACE INTO cost_row VALUES "
                f"({', '.join('?' * (len(ROW_COLUMNS) + 2))})",
                (_row_values(self.home, rid, row) for rid, row in changed.items()),
            )
            _apply_sessions(w, self.home, before, _session_rows(w, self.home, sessions))
            w.execute(
                "UPDATE cost_rollup_state SET watermark = ?, max_rid = ?, row_count = ?, "
                "fingerprint = ?, built_at = ? WHERE home = ?",
                (watermark, max([state.max_rid, *changed]), rows, repr(mark), time.time(),
                 self.home),
            )  # fmt: skip
            return True

        return self.core.write(write)

    def _state(self, conn: sqlite3.Connection | None = None) -> _State | None:
        def read(c: sqlite3.Connection) -> _State | None:
            row = c.execute(
                "SELECT version, zone, watermark, max_rid, row_count, fingerprint "
                "FROM cost_rollup_state WHERE home = ?",
                (self.home,),
            ).fetchone()
            return _State(*row) if row else None

        if conn is not None:
            return read(conn)
        with self.core.reading() as c:
            return read(c)


def _local_day(ts: object, zone: ZoneInfo) -> int | None:
    if not isinstance(ts, int | float):
        return None
    try:
        return datetime.fromtimestamp(ts, zone).date().toordinal()
    except (OverflowError, OSError, ValueError):
        return None


def _marks(values: list) -> str:
    return ",".join("?" * len(values))


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _day_key(row: Row) -> tuple:
    return (row.day, row.provider, row.model, row.source, row.task)


def _add(into: dict[tuple, list[float]], key: tuple, vector: list[float], sign: int) -> None:
    current = into.get(key)
    if current is None:
        into[key] = [sign * v for v in vector]
    else:
        for i, v in enumerate(vector):
            current[i] += sign * v


def _clean(vector: list[float]) -> list[float]:
    """Exact zeros where no row is left to sum (float subtraction leaves dust)."""
    out = list(vector)
    names = {name: i for i, name in enumerate(SUM_COLUMNS)}
    for total, count in (("e_sum", "e_n"), ("a_sum", "a_n"), ("eff_sum", "eff_n"),
                         ("pa_sum", "pair_n"), ("pe_sum", "pair_n")):  # fmt: skip
        if round(out[names[count]]) == 0:
            out[names[total]] = 0.0
    for name in SUM_COLUMNS:
        if name not in ("e_sum", "a_sum", "eff_sum", "pa_sum", "pe_sum"):
            out[names[name]] = int(round(out[names[name]]))
    return out


def _row_values(home: int, rid: int, row: Row) -> tuple:
    return (home, rid, row.sid, row.day, row.provider, row.model, row.source, row.task,
            row.status, row.e, row.a, *row.tokens, row.calls)  # fmt: skip


def _to_row(values: Iterable) -> Row:
    sid, day, provider, model, source, task, status, e, a, *rest = values
    return Row(sid, day, provider, model, source, task, status, e, a, tuple(rest[:-1]), rest[-1])


def _load_rows(w: sqlite3.Connection, home: int, rows: dict[int, Row]) -> dict[int, Row]:
    out: dict[int, Row] = {}
    ids = list(rows)
    for i in range(0, len(ids), CHUNK):
        chunk = ids[i : i + CHUNK]
        for rid, *values in w.execute(
            f"SELECT rid, {', '.join(ROW_COLUMNS)} FROM cost_row WHERE home = ? AND rid IN "
            f"({_marks(chunk)})",
            (home, *chunk),
        ):
            out[rid] = _to_row(values)
    return out


def _session_rows(
    w: sqlite3.Connection, home: int, sessions: set[str]
) -> dict[str, set[tuple[str, str, str, int]]]:
    out: dict[str, set[tuple[str, str, str, int]]] = {sid: set() for sid in sessions}
    ids = list(sessions)
    for i in range(0, len(ids), CHUNK):
        chunk = ids[i : i + CHUNK]
        for values in w.execute(
            f"SELECT {', '.join(ROW_COLUMNS)} FROM cost_row INDEXED BY idx_cost_row_sid "
            f"WHERE home = ? AND sid IN ({_marks(chunk)})",
            (home, *chunk),
        ):
            row = _to_row(values)
            out[row.sid] |= row.memberships()
    return out


def _apply_days(w: sqlite3.Connection, home: int, delta: dict[tuple, list[float]]) -> None:
    cols = ", ".join(SUM_COLUMNS)
    where = "home = ? AND day = ? AND provider = ? AND model = ? AND source = ? AND task = ?"
    for key, change in delta.items():
        found = w.execute(f"SELECT {cols} FROM cost_day WHERE {where}", (home, *key)).fetchone()
        total = [a + b for a, b in zip(found, change, strict=True)] if found else change
        if round(total[0]) <= 0:
            w.execute(f"DELETE FROM cost_day WHERE {where}", (home, *key))
        else:
            w.execute(
                f"INSERT OR REPLACE INTO cost_day VALUES ({', '.join('?' * (6 + len(total)))})",
                (home, *key, *_clean(total)),
            )


def _apply_sessions(
    w: sqlite3.Connection, home: int, before: dict[str, set], after: dict[str, set]
) -> None:
    change: dict[tuple[str, str, str, int], int] = defaultdict(int)
    for sid in before:
        for cell in before[sid] - after[sid]:
            change[cell] -= 1
        for cell in after[sid] - before[sid]:
            change[cell] += 1
        multi = len({cell[3] for cell in after[sid]}) > 1
        if multi:
            w.execute("INSERT OR IGNORE INTO cost_multi VALUES (?, ?)", (home, sid))
        else:
            w.execute("DELETE FROM cost_multi WHERE home = ? AND sid = ?", (home, sid))
    for (dim, key, source, day), n in change.items():
        if n == 0:
            continue
        w.execute(
            "INSERT INTO cost_day_sessions VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (home, dim, day, key, source) DO UPDATE SET sessions = sessions + ?",
            (home, dim, day, key, source, n, n),
        )
    w.execute("DELETE FROM cost_day_sessions WHERE home = ? AND sessions <= 0", (home,))


def _from_sums(period: str, key: str, values: tuple, sessions: int) -> Cell:
    v = dict(zip(SUM_COLUMNS, values, strict=True))
    est = v["e_sum"] if v["e_n"] else None
    act = v["a_sum"] if v["a_n"] else None
    eff = v["eff_sum"] if v["eff_n"] else None
    pa = v["pa_sum"] if v["pair_n"] else None
    pe = v["pe_sum"] if v["pair_n"] else None
    return make_cell(period, key, (est, act, eff, pa, pe,
                               *(v[f"n_{s}"] for s in STATUSES),
                               *(v[c] for c in TOKEN_COLUMNS), sessions, v["calls"]))  # fmt: skip
