"""Usage rows read by the cost rules: their keys, figures and days; each session's cost."""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from dashboard.costs.book import current_book
from dashboard.costs.days import DayClock, Parts, apportion, fractions, row_parts
from dashboard.costs.overrides import SOURCE as OWN_SOURCE
from dashboard.costs.prices import PriceBook, Route
from dashboard.costs.reprice import INCLUDED, Call, Repriced, Tokens, reprice
from dashboard.costs.rules import (
    STATUSES,
    CostSummary,
    RowCost,
    combine,
    read_cost,
)
from dashboard.hermes.conventions import TOKEN_KINDS
from dashboard.hermes.model_names import model_family
from dashboard.store.logged_calls import priced_calls
from dashboard.store.schema import DERIVED_USAGE_PREFIX


def derived_usage_sql(alias: str) -> str:
    """True for a usage row the importer derived from a session row (a source without
    ``session_model_usage``): it sums the whole session, so it reads as that row did."""
    return f"coalesce({alias}.src_id LIKE '{DERIVED_USAGE_PREFIX}%', 0)"


def _label(expr: str) -> str:
    return f"coalesce(nullif({expr}, ''), 'unknown')"


TOKEN_SQL = tuple(f"u.{kind}_tokens" for kind in TOKEN_KINDS)
# The earliest and latest time of a usage row's calls.
ROW_FIRST = "coalesce(u.first_seen, u.last_seen)"


ROW_LAST = "coalesce(u.last_seen, u.first_seen)"


#: Each dimension's key of a usage row (``u``, its session ``s``): never NULL or ''.
KEY_SQL = {
    "provider": _label("u.billing_provider"),
    "model": _label("u.model"),
    "source": _label("s.source"),
    "task": "coalesce(nullif(u.task, ''), 'main')",
    "profile": _label("s.profile"),
}
# LEFT JOIN: a usage row whose session row is gone still cost money.
ROWS_FROM = "FROM session_model_usage u LEFT JOIN sessions s ON s.id = u.session_id"

#: A usage row's route as Hermes wrote it: what the price book looks up.
ROUTE_EXPRS = tuple(
    f"coalesce(u.{c}, '')" for c in ("model", "billing_provider", "billing_base_url")
)
ROUTE_SQL = ", ".join(ROUTE_EXPRS)

#: How a usage row is read. The raw sums here and Recall's per-day rollup both read
#: rows through :func:`read_rows`, so keys, tokens and time bounds live in one place:
#: rowid, session, first, last, the DIMENSIONS keys (never NULL or ''), status,
#: estimate, bill, TOKEN_KINDS, calls, and whether it sums a whole session.
ROW_SQL = (
    f"SELECT u.rowid, u.session_id, {ROW_FIRST}, {ROW_LAST}, "
    f"{', '.join(KEY_SQL[d] for d in ('provider', 'model', 'source', 'task', 'profile'))}, "
    f"u.cost_status, u.estimated_cost_usd, u.actual_cost_usd, {', '.join(TOKEN_SQL)}, "
    f"u.api_call_count, {derived_usage_sql('u')}, {ROUTE_SQL} {ROWS_FROM}"
)


@dataclass(frozen=True)
class Row:
    """One spend row, read by the rules, with the days it spent on."""

    sid: str
    provider: str
    model: str
    source: str
    task: str
    profile: str
    status: str  # costs.rules.STATUSES
    e: float | None
    a: float | None
    tokens: tuple[int, ...]
    calls: int
    parts: Parts  # (day ordinal, weight); empty: the row has no time
    # Recomputed from the price book (costs.reprice): the figure (None: not priced),
    # its status (PRICED, FREE, INCLUDED, UNPRICED), calls whose tier went unchecked.
    r: float | None = None
    r_status: str = INCLUDED
    unsized: int = 0
    r_own: bool = False  # priced by the user's prices.yaml, not the table

    def key(self, dim: str) -> str:
        return getattr(self, dim)

    @property
    def cost(self) -> RowCost:
        return RowCost(self.status, self.e, self.a)

    def recomputed(self, share: float, calls: int, unsized: int) -> list[float]:
        """This row's part (``share`` of it, ``calls`` of its calls) of the recomputed
        sums, in RECOMPUTED_SUMS order: the figure, then beside each of Hermes's figures
        the recomputation of the same calls (an estimate of every call, a bill of every
        call, a row Hermes priced unknown), then the calls Recall could not price and
        those whose tier it could not check."""
        r = self.r
        out = [0.0, 0, 0.0, 0.0, 0, 0.0, 0.0, 0, 0.0, 0, 0, unsized, 0.0, 0]
        if r is None:
            out[10] = calls if self.r_status != INCLUDED else 0
            return out
        out[0], out[1] = r * share, 1
        if self.r_own:
            out[12], out[13] = r * share, 1
        if self.status == "estimated" and self.e is not None:
            out[2], out[3], out[4] = self.e * share, r * share, 1
        elif self.status == "actual" and self.a is not None:
            out[5], out[6], out[7] = self.a * share, r * share, 1
        elif self.status == "unknown":
            out[8], out[9] = r * share, calls
        return out

    def vectors(self) -> Iterator[tuple[int, list[float]]]:
        """``(day, contribution)`` per day of the row, each in SUM_COLUMNS order."""
        if not self.parts:
            return
        cost = self.cost
        e, a, eff, paired = cost.estimated, cost.billed, cost.effective, cost.paired
        status = [self.calls if self.status == s else 0 for s in STATUSES]
        if len(self.parts) == 1:  # most rows: one day, nothing to split
            yield (
                self.parts[0][0],
                [
                    1,
                    0.0 if e is None else e,
                    e is not None,
                    0.0 if a is None else a,
                    a is not None,
                    0.0 if eff is None else eff,
                    eff is not None,
                    a if paired else 0.0,
                    e if paired else 0.0,
                    paired,
                    *status,
                    *self.tokens,
                    self.calls,
                    *self.recomputed(1.0, self.calls, self.unsized),
                ],
            )
            return
        weights = [w for _, w in self.parts]
        shares = fractions(weights)
        tokens = [apportion(t, weights) for t in self.tokens]
        calls = apportion(self.calls, weights)
        unsized = apportion(self.unsized, weights)
        for i, (day, _) in enumerate(self.parts):
            f = shares[i]
            yield (
                day,
                [
                    1,
                    0.0 if e is None else e * f,
                    e is not None,
                    0.0 if a is None else a * f,
                    a is not None,
                    0.0 if eff is None else eff * f,
                    eff is not None,
                    a * f if paired else 0.0,
                    e * f if paired else 0.0,
                    paired,  # type: ignore[operator]
                    *(calls[i] if self.status == s else 0 for s in STATUSES),
                    *(t[i] for t in tokens),
                    calls[i],
                    *self.recomputed(f, calls[i], unsized[i]),
                ],
            )


def read_rows(
    conn: sqlite3.Connection,
    clock: DayClock,
    where: str = "",
    params: Iterable[object] = (),
    book: PriceBook | None = None,
) -> dict[int, Row]:
    """Usage rows (by rowid) matching ``where``, read by the rules, spread over days and
    priced again from ``book`` (None: :func:`~dashboard.costs.book.current_book`)."""
    condition = f" WHERE {where}" if where else ""
    found = conn.execute(ROW_SQL + condition, list(params)).fetchall()
    day = clock.day
    # A row with no call found stays on the day of its last call (costs.days).
    bounds = [(day(first), day(last)) for _, _, first, last, *_ in found]
    # Only a row whose calls span several days needs its session's messages.
    spanning = {
        row[1]
        for row, (lo, hi) in zip(found, bounds, strict=True)
        if lo is not None and hi is not None and lo != hi
    }
    replies = _replies(conn, clock, spanning) if spanning else {}
    rows: dict[int, Row] = {}
    pricer = RowPricer(book)
    for (rid, sid, _, last, provider, model, source, task, profile, *rest), (lo, hi) in zip(
        found, bounds, strict=True
    ):
        status, est, act, *counts, merged, raw_model, raw_provider, url = rest
        cost = read_cost(status, est, act, usage=not merged)
        calls = max(counts[-1] if type(counts[-1]) is int else _count(counts[-1]), 1)
        tokens = tuple(t if type(t) is int else _count(t) for t in counts[:-1])
        parts = (
            row_parts(hi, lo, hi, replies.get(sid, ()))
            if lo != hi
            else (() if hi is None else ((hi, 1),))
        )
        pricing = Pricing(
            str(sid),
            Route(str(raw_model), str(raw_provider), str(url)),
            Tokens(*tokens),
            last,
            calls,
            cost.status == INCLUDED,
        )
        again = pricer.first(rid, pricing)
        rows[rid] = Row(
            str(sid),
            provider,
            model,
            source,
            task,
            profile,
            cost.status,
            cost.estimated,
            cost.billed,
            tokens,
            calls,
            parts,
            again.usd,
            again.status,
            again.unsized,
            again.source == OWN_SOURCE,
        )
    for rid, again in pricer.sized(conn).items():
        rows[rid] = replace(
            rows[rid],
            r=again.usd,
            r_status=again.status,
            unsized=again.unsized,
            r_own=again.source == OWN_SOURCE,
        )
    return rows


@dataclass(frozen=True)
class Pricing:
    """What pricing one usage row again needs."""

    sid: str
    route: Route
    tokens: Tokens
    at: object  # the time of its last call (epoch seconds; anything else: none)
    calls: int
    included: bool


class RowPricer:
    """Usage rows priced again, the one way every path does it: each from its totals
    first (:meth:`first`); then (:meth:`sized`) the few a long-context tier may apply to
    again, with the calls agent.log gave a size for, read in one statement."""

    def __init__(self, book: PriceBook | None = None) -> None:
        self.book = book if book is not None else current_book()
        self._tiered: dict[object, Pricing] = {}

    def first(self, key: object, p: Pricing) -> Repriced:
        at = p.at if isinstance(p.at, int | float) else 0.0
        again = reprice(self.book, p.route, p.tokens, at, calls=p.calls, included=p.included)
        if again.unsized:
            self._tiered[key] = p
        return again

    def sized(self, conn: sqlite3.Connection) -> dict[object, Repriced]:
        """The rows a tier may apply to, priced again with their logged calls."""
        if not self._tiered:
            return {}
        logged = logged_calls(conn, {p.sid for p in self._tiered.values()})
        out = {}
        for key, p in self._tiered.items():
            calls_of = logged.get((p.sid, model_family(p.route.model)), [])
            at = p.at if isinstance(p.at, int | float) else 0.0
            out[key] = reprice(self.book, p.route, p.tokens, at, calls=p.calls, logged=calls_of)
        self._tiered = {}
        return out


def logged_calls(conn: sqlite3.Connection, sessions: set[str]) -> dict[tuple[str, str], list[Call]]:
    """The calls agent.log sized for ``sessions``, by (session, model family): a usage
    row's model and a log line's are one spelling, but a family is safe either way."""
    out: dict[tuple[str, str], list[Call]] = defaultdict(list)
    try:
        found = priced_calls(conn, sorted(sessions))
    except sqlite3.OperationalError:  # a store older than the table (a read-only copy)
        return {}
    for (sid, model), calls in found.items():
        out[(sid, model_family(model))] += [
            Call(c.prompt, c.output, c.cache_read, c.cache_write) for c in calls
        ]
    return out


def session_costs(conn: sqlite3.Connection, ids: Iterable[str]) -> dict[str, CostSummary]:
    """What each archived session cost, by the rules: its usage rows where it has any,
    else its ``sessions`` row (a session of Recall's own store recorded without any)."""
    wanted = json.dumps(sorted(set(ids)))
    found: dict[str, dict[int, RowCost]] = defaultdict(dict)
    pricer = RowPricer()
    for rid, sid, last, status, est, act, *counts, merged, model, provider, url in conn.execute(
        f"SELECT u.rowid, u.session_id, {ROW_LAST}, u.cost_status, u.estimated_cost_usd, "
        f"u.actual_cost_usd, {', '.join(TOKEN_SQL)}, u.api_call_count, "
        f"{derived_usage_sql('u')}, {ROUTE_SQL} "
        "FROM session_model_usage u JOIN json_each(?) j ON u.session_id = j.value",
        (wanted,),
    ):
        cost = read_cost(status, est, act, usage=not merged)
        tokens = Tokens(*(t if type(t) is int else _count(t) for t in counts[:-1]))
        calls = max(counts[-1] if type(counts[-1]) is int else _count(counts[-1]), 1)
        route = Route(str(model), str(provider), str(url))
        pricing = Pricing(str(sid), route, tokens, last, calls, cost.status == INCLUDED)
        again = pricer.first((sid, rid), pricing)
        found[sid][rid] = replace(cost, recomputed=again.usd)
    for (sid, rid), again in pricer.sized(conn).items():  # type: ignore[misc]
        found[sid][rid] = replace(found[sid][rid], recomputed=again.usd)
    for sid, status, est, act in conn.execute(
        "SELECT s.id, s.cost_status, s.estimated_cost_usd, s.actual_cost_usd "
        "FROM sessions s JOIN json_each(?) j ON s.id = j.value",
        (wanted,),
    ):
        if sid not in found:  # a session of Recall's own store recorded without usage rows
            found[sid][0] = read_cost(status, est, act, usage=False)
    return {sid: combine(rows.values()) for sid, rows in found.items()}


def usage_spans(
    conn: sqlite3.Connection, ids: Iterable[str]
) -> dict[str, list[tuple[float | None, float | None, RowCost]]]:
    """Each usage row of the sessions named: ``(first_seen, last_seen, its cost)``.

    A row the importer derived from a session row sums the whole session: its times
    are None, so it is never placed inside part of one (epochs.usage_epoch).
    """
    out: dict[str, list[tuple[float | None, float | None, RowCost]]] = defaultdict(list)
    for sid, first, last, status, est, act, merged in conn.execute(
        "SELECT u.session_id, u.first_seen, u.last_seen, u.cost_status, u.estimated_cost_usd,"
        f" u.actual_cost_usd, {derived_usage_sql('u')} "
        "FROM session_model_usage u JOIN json_each(?) j ON u.session_id = j.value",
        (json.dumps(sorted(set(ids))),),
    ):
        cost = read_cost(status, est, act, usage=not merged)
        out[sid].append((None, None, cost) if merged else (first, last, cost))
    return dict(out)


def _replies(
    conn: sqlite3.Connection, clock: DayClock, sessions: set[str]
) -> dict[str, list[tuple[int, int | None]]]:
    """``(day, token_count)`` of every assistant message of ``sessions``."""
    out: dict[str, list[tuple[int, int | None]]] = defaultdict(list)
    day = clock.day
    for sid, ts, count in conn.execute(
        "SELECT m.session_id, m.timestamp, m.token_count FROM messages m "
        "JOIN json_each(?) j ON m.session_id = j.value WHERE m.role = 'assistant'",
        (json.dumps(sorted(sessions)),),
    ):
        local = day(ts)
        if local is not None:
            out[sid].append((local, count if isinstance(count, int) else None))
    return out


def _count(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
