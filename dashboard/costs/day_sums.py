"""The usage rows whose calls fall on one local day, summed by SQLite by the cost rules.

Most usage rows spent on one local day: such a row adds its whole figures to one period.
Reading each in Python (its figures through :func:`costs.rules.read_cost`, its days
through :mod:`costs.days`) cost ~20 µs a row: 400–900 ms for the 17,952 rows of the 1M
demo archive, against ~26 ms for a plain ``GROUP BY`` over them. Here one statement
groups those rows by what the rules read of them: the status as written, whether the
estimate and the bill are missing, zero or not, and whether the row was derived from a
session. :func:`read_cost` then reads each group once; it keeps or drops a figure and
never computes one, so a group's sums are its rows' figures summed (in another order:
:func:`costs.rules.money` rounds the dust away, as for the rollup).

The statement leaves to the caller, by rowid, every row it cannot be sure of: calls on
several days (their messages weigh the days), a time near a local midnight or a change
of the zone's offset (:meth:`DayClock.local_sql`), a figure or a count that is not a
plain number.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from dashboard.costs.days import EPOCH_DAY, DayClock, one_day_sql
from dashboard.costs.rules import STATUSES, read_cost
from dashboard.costs.usage import (
    ROW_FIRST,
    ROW_LAST,
    ROWS_FROM,
    TOKEN_SQL,
    derived_usage_sql,
)

_TOKENS = tuple(f"t{i}" for i, _ in enumerate(TOKEN_SQL))
_WIDTH = 11 + len(_TOKENS)  # columns of every part of the statement (part 0's)
# How the rules read a figure: missing (or not a number: such rows are left out), zero,
# or not zero; and a stand-in of each for read_cost.
_KIND_SQL = "CASE WHEN {0} IS NULL THEN 0 WHEN {0} = 0 THEN 1 ELSE 2 END"
_STAND_IN = (None, 0.0, 1.0)


@dataclass
class DaySums:
    """What the statement summed, and the rows it left for the caller."""

    groups: list[tuple] = field(default_factory=list)  # (bucket, key, status, kinds, sums…)
    cell_sessions: dict[tuple[int, str], int] = field(default_factory=dict)
    sessions: int = 0  # distinct sessions of the rows summed
    others: list[int] = field(default_factory=list)  # rowids left for the caller
    # Sessions that also have rows left over: the cells their summed rows fell in.
    shared: dict[str, set[tuple[int, str]]] = field(default_factory=dict)

    def vectors(self) -> Iterator[tuple[tuple[int, str], list[float]]]:
        """``((bucket, key), contribution)`` per group, in SUM_COLUMNS order."""
        read = functools.cache(_read)  # a few kinds of rows, many groups
        for (
            bucket,
            key,
            status,
            e_kind,
            a_kind,
            merged,
            n,
            e_sum,
            a_sum,
            calls,
            *tokens,
        ) in self.groups:
            has_e, has_a, partial, paired, at = read(status, e_kind, a_kind, merged)
            e = float(e_sum or 0) if has_e else 0.0
            a = float(a_sum or 0) if has_a else 0.0
            if partial:
                eff, has_eff = a + e, True
            else:
                eff, has_eff = (a, True) if has_a else (e, has_e)
            mix = [0] * len(STATUSES)
            mix[at] = calls
            yield (
                (bucket, key),
                [
                    n,
                    e,
                    n if has_e else 0,
                    a,
                    n if has_a else 0,
                    eff,
                    n if has_eff else 0,
                    a if paired else 0.0,
                    e if paired else 0.0,
                    n if paired else 0,
                    *mix,
                    *tokens,
                    calls,
                ],
            )


def _read(
    status: object, e_kind: int, a_kind: int, merged: int
) -> tuple[bool, bool, bool, bool, int]:
    """How :func:`read_cost` reads a kind of row: whether it keeps the estimate and the
    bill, whether the row is partly billed and paired, and its status's index."""
    cost = read_cost(status, _STAND_IN[e_kind], _STAND_IN[a_kind], usage=not merged)
    return (
        cost.estimated is not None,
        cost.billed is not None,
        cost.status == "partial",
        cost.paired,
        STATUSES.index(cost.status),
    )


def day_sums(
    conn: sqlite3.Connection,
    clock: DayClock,
    *,
    key: str,
    days: Sequence[int],
    uniform: int | None,
    edges: Sequence[float],
    where: str,
    params: Sequence[object],
    count_sessions: bool = True,
) -> DaySums:
    """Sum the one-day rows matching ``where`` by period and ``key`` (both SQL over the
    usage row ``u`` and its session ``s``).

    ``days`` are the periods' first days (ordinals) then the range's end; ``uniform``
    the days of every period but the last when they are all alike (day, week), so a
    period is found by arithmetic; ``edges`` the periods' first instants then the
    range's end, in epoch seconds. ``count_sessions=False``: no distinct sessions
    (``cell_sessions``, ``sessions``, ``shared`` stay empty), for a key that is the session.
    """
    lo, hi = edges[0] - 86400, edges[-1] + 86400  # a one-day row in range starts here
    stretches = clock.steady(lo, hi)
    first, last = clock.local_sql(ROW_FIRST, stretches), clock.local_sql(ROW_LAST, stretches)
    plain = " AND ".join(
        [
            "typeof(u.estimated_cost_usd) IN ('integer', 'real', 'null')",
            "typeof(u.actual_cost_usd) IN ('integer', 'real', 'null')",
            "typeof(u.api_call_count) = 'integer'",
            *(f"typeof({t}) = 'integer'" for t in TOKEN_SQL),
        ]
    )
    tokens = ", ".join(f"{t} AS {name}" for t, name in zip(TOKEN_SQL, _TOKENS, strict=True))
    # The session's row only when the key or the condition reads it.
    needs_session = re.search(r"\bs\.", f"{key} {where}") is not None
    source = ROWS_FROM if needs_session else "FROM session_model_usage u"
    # d: each row read once, its key and figures, whether it spent on one day (s) and
    # its period (b); kept (MATERIALIZED) for the five parts below.
    rows = (
        f"SELECT u.rowid AS rid, u.session_id AS sid, {key} AS k, u.cost_status AS st, "
        "u.estimated_cost_usd AS e, u.actual_cost_usd AS a, "
        f"{derived_usage_sql('u')} AS m, max(u.api_call_count, 1) AS c, {tokens}, "
        f"coalesce({plain} AND {one_day_sql(first, last)}, 0) AS s, "
        f"{_bucket_sql(ROW_LAST, last, days, edges, uniform)} AS b {source} WHERE {where}"
    )
    summed = "s AND b IS NOT NULL"
    kinds = [_KIND_SQL.format(x) for x in ("e", "a")]
    sums = ["count(*)", "sum(e)", "sum(a)", "sum(c)", *(f"sum({t})" for t in _TOKENS)]
    counts = [
        _part(1, ["b", "k", "count(DISTINCT sid)"], f"{summed} GROUP BY b, k"),
        _part(2, ["count(DISTINCT sid)"], summed),
        _part(
            4,
            ["b", "k", "sid"],
            f"{summed} AND sid IN (SELECT sid FROM d WHERE NOT s) GROUP BY b, k, sid",
        ),
    ]
    parts = [
        _part(0, ["b", "k", "st", *kinds, "m", *sums], f"{summed} GROUP BY b, k, st, 5, 6, m"),
        _part(3, ["rid"], "NOT s"),
        *(counts if count_sessions else []),
    ]
    sql = f"WITH d AS MATERIALIZED ({rows}) " + " UNION ALL ".join(parts)
    found = DaySums()
    for part, *values in conn.execute(sql, list(params)):
        if part == 0:
            found.groups.append(tuple(values))
        elif part == 1:
            found.cell_sessions[(values[0], values[1])] = values[2]
        elif part == 2:
            found.sessions = values[0]
        elif part == 3:
            found.others.append(values[0])
        else:
            found.shared.setdefault(str(values[2]), set()).add((values[0], values[1]))
    return found


def _part(number: int, columns: list[str], condition: str) -> str:
    """One SELECT of the statement, padded to one width (UNION ALL needs one)."""
    padded = [str(number), *columns, *["NULL"] * (_WIDTH - 1 - len(columns))]
    return f"SELECT {', '.join(padded)} FROM d WHERE {condition}"


def _bucket_sql(
    at: str, local: str, days: Sequence[int], edges: Sequence[float], uniform: int | None
) -> str:
    """SQL for the period index of a one-day row (its time ``at`` in epoch seconds, in
    local seconds ``local``); NULL outside the range.

    Such a row is a day or more from any change of offset and a second from midnight,
    so its time falls before a period's first instant exactly when its day falls before
    that period's first day.
    """
    inside = f"{at} >= {edges[0]!r} AND {at} < {edges[-1]!r}"
    if uniform is not None:  # days and weeks: arithmetic on the local day
        first = (days[0] - EPOCH_DAY) * 86400
        return (
            f"CASE WHEN {inside} THEN CAST(({local} - {first}) / {86400 * uniform} AS INTEGER) END"
        )
    steps = " ".join(f"WHEN {at} < {edge!r} THEN {i}" for i, edge in enumerate(edges[1:]))
    return f"CASE WHEN {inside} THEN CASE {steps} END END"
