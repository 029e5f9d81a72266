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
plain number. That last test costs a third of the statement when made on every row
(nine ``typeof()`` calls), and such figures are rare (a file written by hand), so it is
made per group first (:func:`_sums`) and on every row only when a group fails it.
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from dashboard.costs.book import current_book
from dashboard.costs.days import EPOCH_DAY, DayClock, one_day_sql
from dashboard.costs.overrides import SOURCE as OWN_SOURCE
from dashboard.costs.prices import PriceBook, Route
from dashboard.costs.reprice import INCLUDED, UNPRICED, Repriced, Tokens, reprice
from dashboard.costs.rules import STATUSES, read_cost
from dashboard.costs.usage import (
    ROUTE_EXPRS,
    ROW_FIRST,
    ROW_LAST,
    ROWS_FROM,
    TOKEN_SQL,
    derived_usage_sql,
)

_TOKENS = tuple(f"t{i}" for i, _ in enumerate(TOKEN_SQL))
# What the rules read of a row besides its status, as one number (one sort key, not
# three): the estimate and the bill each missing, zero or not (0, 1, 2), and whether
# the row was derived from a session (0, 1); ``x <> 0`` is NULL, 0 or 1.
_KIND_SQL = "(coalesce((e <> 0) + 1, 0) * 3 + coalesce((a <> 0) + 1, 0)) * 2 + m"
_STAND_IN = (None, 0.0, 1.0)  # an estimate or a bill of each kind, for read_cost
# A row's route as Hermes wrote it (what the price book looks up), as named columns.
ROUTE_COLUMNS = ", ".join(
    f"{x} AS {n}" for x, n in zip(ROUTE_EXPRS, ("rm", "rp", "ru"), strict=True)
)


@dataclass
class DaySums:
    """What the statement summed, and the rows it left for the caller."""

    # (bucket, key, status, kind (_KIND_SQL), count, sums…, then the statement's others)
    groups: list[tuple] = field(default_factory=list)
    cell_sessions: dict[tuple[int, str], int] = field(default_factory=dict)
    sessions: int = 0  # distinct sessions of the rows summed
    others: list[int] = field(default_factory=list)  # rowids left for the caller
    # Sessions that also have rows left over: the cells their summed rows fell in.
    shared: dict[str, set[tuple[int, str]]] = field(default_factory=dict)
    book: PriceBook | None = None  # what the groups are priced from (None: current_book)

    def vectors(self) -> Iterator[tuple[tuple[int, str], list[float]]]:
        """``((bucket, key), contribution)`` per group, in SUM_COLUMNS order."""
        read = functools.cache(_read)  # a few kinds of rows, many groups
        book = self.book if self.book is not None else current_book()
        for (
            bucket,
            key,
            status,
            kind,
            model,
            provider,
            url,
            utc_day,
            n,
            e_sum,
            a_sum,
            calls,
            *rest,
        ) in self.groups:
            tokens = rest[: len(_TOKENS)]
            reasoning = rest[len(_TOKENS)]
            has_e, has_a, partial, paired, at = read(status, kind)
            e = float(e_sum or 0) if has_e else 0.0
            a = float(a_sum or 0) if has_a else 0.0
            if partial:
                eff, has_eff = a + e, True
            else:
                eff, has_eff = (a, True) if has_a else (e, has_e)
            mix = [0] * len(STATUSES)
            mix[at] = calls
            # A group's rows share a route and a UTC day: one price, and the arithmetic
            # is linear in the tokens, so the group's sums priced once are its rows'.
            used = Tokens(tokens[0], tokens[1], tokens[2], tokens[3], reasoning)
            when = utc_day * 86_400 + 43_200 if isinstance(utc_day, int) else 0.0
            route = Route(model, provider, url)
            again = reprice(book, route, used, when, included=STATUSES[at] == INCLUDED)
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
                    *_recomputed(STATUSES[at], has_e, again, n, e, a, calls),
                ],
            )


def _recomputed(
    status: str, has_e: bool, again: Repriced, rows: int, e: float, a: float, calls: int
) -> list[float]:
    """A group's part of the recomputed sums (spend.RECOMPUTED_SUMS), as
    usage.Row.recomputed makes a row's: its status decides which of Hermes's figures
    the recomputation stands beside."""
    out = [0.0, 0, 0.0, 0.0, 0, 0.0, 0.0, 0, 0.0, 0, 0, 0, 0.0, 0]
    if again.usd is None:
        out[10] = calls if again.status == UNPRICED else 0
        return out
    r = again.usd
    out[0], out[1] = r, rows
    if again.source == OWN_SOURCE:
        out[12], out[13] = r, rows
    if status == "estimated" and has_e:
        out[2], out[3], out[4] = e, r, rows
    elif status == "actual":
        out[5], out[6], out[7] = a, r, rows
    elif status == "unknown":
        out[8], out[9] = r, calls
    return out


def _below_tiers_sql(
    conn: sqlite3.Connection, book: PriceBook, where: str, params: Sequence[object]
) -> str:
    """An SQL test of a usage row ``u``: true when its whole prompt is at or below its
    route's first tier (or the route has none), so no call of it can pass a tier.

    The routes (a model, a provider, a base URL) are those of the rows ``where`` picks,
    a few; each with a tier is written
    into the statement as quoted literals (SQLite's quoting: a quote doubled; the
    names are untrusted text)."""
    prompt = f"({TOKEN_SQL[0]} + {TOKEN_SQL[2]} + {TOKEN_SQL[3]})"
    cases = []
    routes = f"SELECT DISTINCT {', '.join(ROUTE_EXPRS)} {_rows_from(where)} WHERE {where}"
    for route in conn.execute(routes, list(params)):
        start = book.tier_start_of(Route(*(str(v) for v in route)))
        if start is not None:
            same = " AND ".join(
                f"{x} = {_literal(str(v))}" for x, v in zip(ROUTE_EXPRS, route, strict=True)
            )
            cases.append(f"WHEN {same} THEN {prompt} <= {int(start)}")
    return f"(CASE {' '.join(cases)} ELSE 1 END)" if cases else "1"


def _rows_from(sql: str) -> str:
    """The usage rows ``u``, joined to their session ``s`` only when ``sql`` reads it."""
    return ROWS_FROM if re.search(r"\bs\.", sql) else "FROM session_model_usage u"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _read(status: object, kind: int) -> tuple[bool, bool, bool, bool, int]:
    """How :func:`read_cost` reads a kind of row (``kind`` as :data:`_KIND_SQL`): whether
    it keeps the estimate and the bill, whether the row is partly billed and paired, and
    its status's index."""
    figures, merged = divmod(kind, 2)
    e_kind, a_kind = divmod(figures, 3)
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
    book: PriceBook | None = None,
) -> DaySums:
    """Sum the one-day rows matching ``where`` by period and ``key`` (both SQL over the
    usage row ``u`` and its session ``s``).

    ``days`` are the periods' first days (ordinals) then the range's end; ``uniform``
    the days of every period but the last when they are all alike (day, week), so a
    period is found by arithmetic; ``edges`` the periods' first instants then the
    range's end, in epoch seconds. ``count_sessions=False``: no distinct sessions
    (``cell_sessions``, ``sessions``, ``shared`` stay empty), for a key that is the session.
    """
    book = book if book is not None else current_book()
    small = _below_tiers_sql(conn, book, where, params)  # the routes of the question's rows
    lo, hi = edges[0] - 86400, edges[-1] + 86400  # a one-day row in range starts here
    stretches = clock.steady(lo, hi)
    for checked in (False, True):
        rows = functools.partial(
            _rows_sql,
            clock,
            stretches,
            key,
            days,
            uniform,
            edges,
            checked=checked,
            small=small,
        )
        found = _sums(conn, rows, where, list(params), count_sessions)
        if found is not None:
            found.book = book
            return found
    raise AssertionError("every row is checked on the second pass")  # pragma: no cover


def _rows_sql(
    clock: DayClock,
    stretches: Sequence[tuple[float, float, float]],
    key: str,
    days: Sequence[int],
    uniform: int | None,
    edges: Sequence[float],
    where: str,
    *,
    checked: bool,
    small: str = "1",
) -> str:
    """A SELECT of each usage row matching ``where``: its key and figures, and its cell
    ``b``: the period's index for a row summed here, -1 for a row left to the caller,
    NULL for a one-day row outside the range. ``checked``: rows with a figure or a count
    that is not a plain number are left to the caller too."""
    tokens = ", ".join(f"{t} AS {name}" for t, name in zip(TOKEN_SQL, _TOKENS, strict=True))
    # The session's row only when the key or the condition reads it.
    source = _rows_from(f"{key} {where}")
    plain = " AND ".join(
        [
            "typeof(u.estimated_cost_usd) IN ('integer', 'real', 'null')",
            "typeof(u.actual_cost_usd) IN ('integer', 'real', 'null')",
            "typeof(u.api_call_count) = 'integer'",
            *(f"typeof({t}) = 'integer'" for t in TOKEN_SQL),
        ]
    )
    # Each row's local times once (LIMIT -1: kept a subquery, not flattened into the
    # expressions below, which read each several times).
    # A row whose whole prompt may pass a long-context tier (``small`` false) is the
    # caller's: its calls' sizes are read with it. Every other row is priced by its group.
    inner = (
        f"SELECT u.rowid AS rid, u.session_id AS sid, {key} AS k, u.cost_status AS st, "
        "u.estimated_cost_usd AS e, u.actual_cost_usd AS a, "
        f"{derived_usage_sql('u')} AS m, max(u.api_call_count, 1) AS c, {tokens}, "
        f"min({TOKEN_SQL[4]}, {TOKEN_SQL[1]}) AS rz, {ROUTE_COLUMNS}, "
        f"CAST({ROW_LAST} / 86400 AS INTEGER) AS rd, {small} AS small, "
        f"{ROW_LAST} AS y, {clock.local_sql(ROW_FIRST, stretches)} AS lf, "
        f"{clock.local_sql(ROW_LAST, stretches)} AS ll, {plain if checked else 1} AS p "
        f"{source} WHERE {where} LIMIT -1"
    )
    one_day = one_day_sql("lf", "ll")
    bucket = _bucket_sql("y", "ll", days, edges, uniform)
    return (
        f"SELECT rid, sid, k, st, e, a, m, c, {', '.join(_TOKENS)}, rz, rm, rp, ru, rd, "
        f"CASE WHEN p AND small AND {one_day} THEN {bucket} ELSE -1 END AS b FROM ({inner})"
    )


def _sums(
    conn: sqlite3.Connection,
    rows: Callable[[str], str],
    where: str,
    params: list[object],
    count_sessions: bool,
) -> DaySums | None:
    """Run the statement over ``rows(where)`` (:func:`_rows_sql`); None when a group
    summed a figure that is not a plain number (then ask again with every row checked).

    One ``GROUP BY`` (one sort) answers it all: the sums of each group, its sessions
    (distinct, as JSON: a session in two groups of a cell counts once there) and the
    rows left over (the groups of cell -1, by rowid). Sums and sessions apart took
    three sorts of the rows and a materialized copy of them, 40% more time.
    """
    sums = [
        "count(*)",
        "sum(e)",
        "sum(a)",
        "sum(c)",
        *(f"sum({t})" for t in _TOKENS),
        "sum(rz)",
    ]
    # Figures and counts that are plain numbers, read by SQLite once a group: no
    # estimate or bill of text or a blob (they sort above every number), counts that
    # sum to an integer (a real, text or a blob makes the sum a real; NULL cannot be
    # there: every store's usage table has them NOT NULL, store/schema.py).
    plain = " AND ".join(
        [
            *(f"typeof(max({x})) NOT IN ('text', 'blob')" for x in ("e", "a")),
            *(f"typeof(sum({x})) = 'integer'" for x in ("c", *_TOKENS)),
        ]
    )
    sessions = "json_group_array(DISTINCT sid)" if count_sessions else "NULL"
    columns = ["b", "k", "st", _KIND_SQL, "rm", "rp", "ru", "rd", *sums, plain, sessions]
    # LIMIT -1: the rows stay a subquery; flattened, ``b`` would be computed thrice.
    sql = (
        f"SELECT {', '.join(columns)}, group_concat(CASE WHEN b < 0 THEN rid END) "
        f"FROM ({rows(where)} LIMIT -1) WHERE b IS NOT NULL GROUP BY b, k, st, 4, 5, 6, 7, 8"
    )
    found = DaySums()
    cells: dict[tuple[int, str], list[list[object]]] = {}
    checked = len(columns) - 2
    for group in conn.execute(sql, params):
        if group[0] < 0:
            found.others.extend(int(rid) for rid in group[-1].split(","))
            continue
        if not group[checked]:
            return None
        found.groups.append(group)
        if count_sessions:
            cells.setdefault((group[0], group[1]), []).append(json.loads(group[-2]))
    if count_sessions:
        found.cell_sessions = {cell: _distinct(ids) for cell, ids in cells.items()}
        found.sessions = _distinct([ids for groups in cells.values() for ids in groups])
        if found.others:
            found.shared = _shared(conn, rows, where, params, found.others)
    return found


def _distinct(groups: list[list[object]]) -> int:
    """Distinct sessions of some groups, each a list of distinct ids (NULL is none, as
    for ``count(DISTINCT …)``)."""
    if len(groups) == 1:
        return len(groups[0]) - (None in groups[0])
    return len(set().union(*groups) - {None})


def _shared(
    conn: sqlite3.Connection,
    rows: Callable[[str], str],
    where: str,
    params: list[object],
    others: list[int],
) -> dict[str, set[tuple[int, str]]]:
    """The cells of the summed rows of each session that has a row left over: a few
    sessions, their rows found through the usage table's key (its session first)."""
    mine = (
        f"({where}) AND u.session_id IN (SELECT session_id FROM session_model_usage "
        "WHERE rowid IN (SELECT value FROM json_each(?)))"
    )
    shared: dict[str, set[tuple[int, str]]] = {}
    for bucket, key, sid in conn.execute(
        f"SELECT b, k, sid FROM ({rows(mine)}) WHERE b >= 0 GROUP BY b, k, sid",
        [*params, json.dumps(others)],
    ):
        shared.setdefault(str(sid), set()).add((bucket, key))
    return shared


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
    return f"CASE WHEN {inside} THEN {_search_sql(at, edges, 0, len(edges) - 1)} END"


def _search_sql(at: str, edges: Sequence[float], lo: int, hi: int) -> str:
    """SQL for the index ``i`` in [lo, hi) with ``edges[i] <= at < edges[i + 1]``, for an
    ``at`` inside [edges[lo], edges[hi]): halving, a dozen months in four comparisons."""
    if hi - lo == 1:
        return str(lo)
    mid = (lo + hi) // 2
    below, above = _search_sql(at, edges, lo, mid), _search_sql(at, edges, mid, hi)
    return f"CASE WHEN {at} < {edges[mid]!r} THEN {below} ELSE {above} END"
