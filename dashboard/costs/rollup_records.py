"""The rollup's records in recall.db: usage rows as cost_row records, sums applied by difference."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable

from dashboard.costs.spend import DIMENSIONS, MONEY_SUMS, SUM_COLUMNS, TOKEN_COLUMNS
from dashboard.costs.usage import Row

EVERY = ("all", "all")  # the (dimension, key) every session counts in: the total's sessions

# Chunks of ids per IN (...): below SQLite's variable limit. Lookups by session name
# the index: without statistics the planner would scan the table by its home prefix.
CHUNK = 500

ROW_COLUMNS = (
    "day",
    "weight",
    "sid",
    *DIMENSIONS,
    "status",
    "e",
    "a",
    *TOKEN_COLUMNS,
    "calls",
    "r",
    "r_status",
    "unsized",
    "r_own",
)

NO_DAY = 0  # cost_row.day of a row with no time (ordinals start at 1)

#: A cell a session counts in: (dimension, key, source, profile, day).
Membership = tuple[str, str, str, str, int]


def memberships(row: Row) -> set[Membership]:
    """The cells this row makes its session count in."""
    return {
        (dim, key, row.source, row.profile, day)
        for day, _ in row.parts
        for dim, key in (*((d, row.key(d)) for d in DIMENSIONS), EVERY)
    }


def days_of(cells: Iterable[Membership]) -> set[int]:
    return {cell[-1] for cell in cells}


def marks(values: list) -> str:
    return ",".join("?" * len(values))


def session_key(row: Row, day: int) -> tuple:
    return (day, row.sid, row.source, row.profile)


def day_key(row: Row, day: int) -> tuple:
    return (day, *(row.key(d) for d in DIMENSIONS))


def clean_sums(vector: list[float]) -> list[float]:
    """Exact zeros where no row is left to sum (float subtraction leaves dust)."""
    out = list(vector)
    names = {name: i for i, name in enumerate(SUM_COLUMNS)}
    for total, count in (
        ("e_sum", "e_n"),
        ("a_sum", "a_n"),
        ("eff_sum", "eff_n"),
        ("pa_sum", "pair_n"),
        ("pe_sum", "pair_n"),
        ("r_sum", "r_n"),
        ("er_sum", "er_n"),
        ("re_sum", "er_n"),
        ("br_sum", "br_n"),
        ("rb_sum", "br_n"),
        ("ur_sum", "n_ur"),
        ("own_sum", "own_n"),
    ):
        if round(out[names[count]]) == 0:
            out[names[total]] = 0.0
    for name in SUM_COLUMNS:
        if name not in MONEY_SUMS:
            out[names[name]] = int(round(out[names[name]]))
    return out


def row_values(home: int, rid: int, row: Row) -> list[tuple]:
    """The cost_row records of one row: one per day, or one on NO_DAY with no weight."""
    figures = (
        *(row.key(d) for d in DIMENSIONS),
        row.status,
        row.e,
        row.a,
        *row.tokens,
        row.calls,
        row.r,
        row.r_status,
        row.unsized,
        int(row.r_own),
    )
    parts = row.parts or ((NO_DAY, 0),)
    return [(home, rid, day, weight, row.sid, *figures) for day, weight in parts]


def to_rows(records: Iterable[tuple]) -> dict[int, Row]:
    """Rows from their cost_row records ``(rid, *ROW_COLUMNS)``."""
    grouped: dict[int, list[tuple]] = defaultdict(list)
    for record in records:
        grouped[record[0]].append(record)
    out: dict[int, Row] = {}
    for rid, found in grouped.items():
        _, _, _, sid, provider, model, source, task, profile, status, e, a, *rest = found[0]
        parts = tuple(sorted((r[1], r[2]) for r in found if r[2] > 0))
        out[rid] = Row(
            sid,
            provider,
            model,
            source,
            task,
            profile,
            status,
            e,
            a,
            tuple(rest[:-5]),
            rest[-5],
            parts,
            rest[-4],
            rest[-3],
            rest[-2],
            bool(rest[-1]),
        )
    return out


def load_rows(w: sqlite3.Connection, home: int, rows: dict[int, Row]) -> dict[int, Row]:
    records: list[tuple] = []
    ids = list(rows)
    for i in range(0, len(ids), CHUNK):
        chunk = ids[i : i + CHUNK]
        records += w.execute(
            f"SELECT rid, {', '.join(ROW_COLUMNS)} FROM cost_row WHERE home = ? AND rid IN "
            f"({marks(chunk)})",
            (home, *chunk),
        ).fetchall()
    return to_rows(records)


def session_memberships(
    w: sqlite3.Connection, home: int, sessions: set[str]
) -> dict[str, set[Membership]]:
    out: dict[str, set[Membership]] = {sid: set() for sid in sessions}
    ids = list(sessions)
    records: list[tuple] = []
    for i in range(0, len(ids), CHUNK):
        chunk = ids[i : i + CHUNK]
        records += w.execute(
            f"SELECT rid, {', '.join(ROW_COLUMNS)} FROM cost_row INDEXED BY idx_cost_row_sid "
            f"WHERE home = ? AND sid IN ({marks(chunk)})",
            (home, *chunk),
        ).fetchall()
    for row in to_rows(records).values():
        out[row.sid] |= memberships(row)
    return out


DAY_KEYS = ("day", *DIMENSIONS)  # cost_day's key after home

SESSION_KEYS = ("day", "sid", "source", "profile")  # cost_session_day's


def apply_sums(
    w: sqlite3.Connection,
    table: str,
    keys: tuple[str, ...],
    home: int,
    delta: dict[tuple, list[float]],
) -> None:
    """Add ``delta`` (per key, SUM_COLUMNS vectors) to ``table``; a sum of no rows goes."""
    cols = ", ".join(SUM_COLUMNS)
    where = " AND ".join(f"{k} = ?" for k in ("home", *keys))
    marks = ", ".join("?" * (1 + len(keys) + len(SUM_COLUMNS)))
    for key, change in delta.items():
        found = w.execute(f"SELECT {cols} FROM {table} WHERE {where}", (home, *key)).fetchone()
        total = [a + b for a, b in zip(found, change, strict=True)] if found else change
        if round(total[0]) <= 0:
            w.execute(f"DELETE FROM {table} WHERE {where}", (home, *key))
        else:
            w.execute(
                f"INSERT OR REPLACE INTO {table} VALUES ({marks})", (home, *key, *clean_sums(total))
            )


def apply_sessions(
    w: sqlite3.Connection, home: int, before: dict[str, set], after: dict[str, set]
) -> None:
    change: dict[Membership, int] = defaultdict(int)
    for sid in before:
        for cell in before[sid] - after[sid]:
            change[cell] -= 1
        for cell in after[sid] - before[sid]:
            change[cell] += 1
        multi = len(days_of(after[sid])) > 1
        if multi:
            w.execute("INSERT OR IGNORE INTO cost_multi VALUES (?, ?)", (home, sid))
        else:
            w.execute("DELETE FROM cost_multi WHERE home = ? AND sid = ?", (home, sid))
    for (dim, key, source, profile, day), n in change.items():
        if n == 0:
            continue
        w.execute(
            "INSERT INTO cost_day_sessions VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT "
            "(home, dim, day, key, source, profile) DO UPDATE SET sessions = sessions + ?",
            (home, dim, day, key, source, profile, n, n),
        )
    w.execute("DELETE FROM cost_day_sessions WHERE home = ? AND sessions <= 0", (home,))
