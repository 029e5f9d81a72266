"""Spend by period and dimension: estimated against actual, never unknown as $0.

Hermes stores a local estimate (price table) beside the billed figure when the
provider reports one (HERMES_FACTS, "Costs"). How a row's figures are read —
status, partial bills, effective spend — is :mod:`costs.rules`; on which days a row
spent is :mod:`costs.days`. This module reads the rows and sums them:

* The rows are the archive's ``session_model_usage`` (one per session, model,
  provider and task, auxiliary tasks included). For a source without that table the
  importer derived one row per session (``src_id`` prefixed ``DERIVED_USAGE_PREFIX``);
  such a row sums the whole session and is read as a session row
  (:func:`costs.rules.read_cost` ``usage=False``).
* **Drift** (actual ÷ estimated) uses only usage rows that carry both figures for
  the same calls (status ``actual``); a derived row mixes calls and is never
  paired, and included (subscription) rows bill 0 by design.
* Every usage row is counted once: a continued chain's segments
  each carry their own calls, so summing segments never double counts. A cell's
  ``sessions`` and the total's are distinct sessions.
* ``status_mix`` counts calls per status (a row's ``api_call_count``, at least one),
  split over days like its tokens.
* Periods follow the user's timezone (DST included): days are local calendar days.
* ``profile`` (issue 17) is the profile a row's session was archived under; a session
  belongs to one profile, so the profiles' cells add up to the total, sessions too.
  ``profiles=`` asks about some profiles only (the rollup's answer to a scoped reader,
  whose own connection already sees its rows alone).
"""

from __future__ import annotations

import bisect
import functools
import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import ClassVar, NamedTuple
from zoneinfo import ZoneInfo

from dashboard.costs.book import current_book
from dashboard.costs.day_sums import DaySums, day_sums
from dashboard.costs.days import DayClock
from dashboard.costs.rules import (
    STATUSES,
    billed_share,
    money,
    total,
)
from dashboard.costs.usage import KEY_SQL, ROW_FIRST, ROW_LAST, Row, read_rows
from dashboard.errors import ValidationError
from dashboard.hermes.conventions import TOKEN_KINDS

PERIODS = ("month", "week", "day")
DIMENSIONS = ("provider", "model", "source", "task", "profile")
DRIFT_FLAG = 1.5  # actual/estimated beyond this (or below its inverse) is flagged
TOKEN_COLUMNS = tuple(f"t_{k}" for k in TOKEN_KINDS)
# The recomputed figures (issue 28; usage.Row.recomputed): the sum and its rows; Hermes's
# estimate and the recomputation of rows both priced whole; the bill and the
# recomputation of rows billed whole; the recomputation of rows Hermes priced unknown and
# their calls; the calls Recall could not price; the calls whose tier went unchecked.
RECOMPUTED_SUMS = (
    "r_sum",
    "r_n",
    "er_sum",
    "re_sum",
    "er_n",
    "br_sum",
    "rb_sum",
    "br_n",
    "ur_sum",
    "n_ur",
    "n_unpriced",
    "n_unsized",
    "own_sum",  # Recall's figure of the rows the user's prices.yaml priced
    "own_n",
)
# One vector per (row, day); sums of these make a cell (and a rollup day-cell).
SUM_COLUMNS = (
    "rows",
    "e_sum",
    "e_n",
    "a_sum",
    "a_n",
    "eff_sum",
    "eff_n",
    "pa_sum",
    "pe_sum",
    "pair_n",
    *(f"n_{s}" for s in STATUSES),
    *TOKEN_COLUMNS,
    "calls",
    *RECOMPUTED_SUMS,
)
MONEY_SUMS = (
    "e_sum",
    "a_sum",
    "eff_sum",
    "pa_sum",
    "pe_sum",
    "r_sum",
    "er_sum",
    "re_sum",
    "br_sum",
    "rb_sum",
    "ur_sum",
    "own_sum",
)


@dataclass(frozen=True)
class Recomputed:
    """A cell's spend priced again by Recall, beside Hermes's figures (issue 28)."""

    usd: float | None = None  # None: no call of it could be priced
    # Hermes's estimate and Recall's figure of the rows both priced whole (None: none)
    estimated_pair: tuple[float, float] | None = None
    # the bill and Recall's figure of the rows billed whole
    billed_pair: tuple[float, float] | None = None
    recovered_usd: float | None = None  # Recall's price of the calls Hermes called unknown
    recovered_calls: int = 0
    unpriced_calls: int = 0  # calls Recall could not price (included ones are not counted)
    unsized_calls: int = 0  # calls a long-context tier may apply to, left unchecked
    own_usd: float | None = None  # the part of ``usd`` the user's prices.yaml priced

    @property
    def estimate_ratio(self) -> float | None:
        """Hermes's estimate ÷ Recall's over the same calls: 0.62 is "under by 38%"."""
        return _ratio(self.estimated_pair)

    @property
    def billed_ratio(self) -> float | None:
        """The bill ÷ Recall's figure over the same calls."""
        return _ratio(self.billed_pair)

    def to_json(self) -> dict[str, object]:
        return {
            "usd": self.usd,
            "estimate_ratio": self.estimate_ratio,
            "billed_ratio": self.billed_ratio,
            "estimated_pair": self.estimated_pair,
            "billed_pair": self.billed_pair,
            "recovered_usd": self.recovered_usd,
            "recovered_calls": self.recovered_calls,
            "unpriced_calls": self.unpriced_calls,
            "unsized_calls": self.unsized_calls,
            "own_usd": self.own_usd,
        }

    @staticmethod
    def combine(parts: list[Recomputed]) -> Recomputed:
        """Several cells' recomputations as one (the total row)."""

        def pair(pairs: list[tuple[float, float] | None]) -> tuple[float, float] | None:
            known = [p for p in pairs if p is not None]
            if not known:
                return None
            return (money(sum(p[0] for p in known)), money(sum(p[1] for p in known)))

        return Recomputed(
            usd=total([p.usd for p in parts]),
            estimated_pair=pair([p.estimated_pair for p in parts]),
            billed_pair=pair([p.billed_pair for p in parts]),
            recovered_usd=total([p.recovered_usd for p in parts]),
            recovered_calls=sum(p.recovered_calls for p in parts),
            unpriced_calls=sum(p.unpriced_calls for p in parts),
            unsized_calls=sum(p.unsized_calls for p in parts),
            own_usd=total([p.own_usd for p in parts]),
        )


def _ratio(pair: tuple[float, float] | None) -> float | None:
    return pair[0] / pair[1] if pair is not None and pair[1] else None


@dataclass
class Cell:
    """One (period, key) of the table."""

    period: str
    key: str
    estimated_usd: float | None = None
    actual_usd: float | None = None
    effective_usd: float | None = None
    drift: float | None = None
    status_mix: dict[str, int] = field(default_factory=dict)
    actual_share: float | None = None  # share of effective spend backed by billed figures
    tokens: dict[str, int] = field(default_factory=dict)
    sessions: int = 0
    api_calls: int = 0
    recomputed: Recomputed = field(default_factory=Recomputed)

    @property
    def drift_flagged(self) -> bool:
        return self.drift is not None and (self.drift > DRIFT_FLAG or self.drift < 1 / DRIFT_FLAG)

    def to_json(self) -> dict[str, object]:
        return {
            "period": self.period,
            "key": self.key,
            "estimated_usd": self.estimated_usd,
            "actual_usd": self.actual_usd,
            "effective_usd": self.effective_usd,
            "drift": self.drift,
            "drift_flagged": self.drift_flagged,
            "status_mix": self.status_mix,
            "actual_share": self.actual_share,
            "tokens": self.tokens,
            "sessions": self.sessions,
            "api_calls": self.api_calls,
            "recomputed": self.recomputed.to_json(),
        }


@dataclass
class Spend:
    period: str
    by: str
    start: date
    end: date  # exclusive
    timezone: str
    periods: list[str]
    rows: list[Cell]
    totals: Cell
    price_table: str = ""  # the price book every recomputed figure came from (its version)
    price_problem: str = ""  # why the user's prices.yaml is not in use, if it is not
    source_table: ClassVar[str] = "session_model_usage"  # what the sums read (page, JSON)

    def period_ranges(self) -> list[tuple[str, date, date]]:
        """``(label, first day, end)`` of each period, clipped to the range (end exclusive)."""
        starts = [max(d, self.start) for d in period_starts(self.period, self.start, self.end)]
        ends = [*starts[1:], self.end]
        return list(zip(self.periods, starts, ends, strict=True))

    def to_json(self) -> dict[str, object]:
        return {
            "period": self.period,
            "by": self.by,
            "from": self.start.isoformat(),
            "to": self.end.isoformat(),
            "timezone": self.timezone,
            "source_table": self.source_table,
            "periods": self.periods,
            "rows": [r.to_json() for r in self.rows],
            "totals": self.totals.to_json(),
            "price_table": self.price_table,
            "price_problem": self.price_problem,
        }


def period_starts(period: str, start: date, end: date) -> list[date]:
    """First days of every period touching [start, end)."""
    if period == "month":
        first = start.replace(day=1)
    elif period == "week":
        first = start - timedelta(days=start.weekday())  # ISO weeks start on Monday
    else:
        first = start
    out = []
    current = first
    while current < end:
        out.append(current)
        if period == "month":
            current = (current.replace(day=28) + timedelta(days=4)).replace(day=1)
        elif period == "week":
            current += timedelta(days=7)
        else:
            current += timedelta(days=1)
    return out


def period_label(period: str, first: date) -> str:
    if period == "month":
        return first.strftime("%Y-%m")
    if period == "week":
        year, week, _ = first.isocalendar()
        return f"{year}-W{week:02d}"
    return first.isoformat()


@dataclass(frozen=True)
class Plan:
    """A validated spend question: its periods (first days) in one timezone."""

    period: str
    by: str
    start: date
    end: date  # exclusive
    zone: ZoneInfo
    starts: list[date]
    labels: list[str]
    sources: tuple[str, ...]
    profiles: tuple[str, ...] = ()  # empty: every profile the connection sees

    @property
    def edges(self) -> list[float]:
        """Epoch seconds of every period start, then of the range's end."""
        return [_epoch(d, self.zone) for d in self.starts] + [_epoch(self.end, self.zone)]

    @functools.cached_property
    def days(self) -> list[int]:
        """Day ordinals of every period start, then of the range's end (exclusive)."""
        return [d.toordinal() for d in self.starts] + [self.end.toordinal()]

    def bucket(self, day: int) -> int | None:
        """The index of the period ``day`` (an ordinal) falls in; None outside the range."""
        days = self.days
        if not days[0] <= day < days[-1]:
            return None
        return bisect.bisect_right(days, day) - 1

    def result(self, cells: list[Cell], sessions: int) -> Spend:
        """The answer: ``cells`` sorted, and a total of ``sessions`` distinct sessions."""
        rows = sorted(cells, key=lambda c: (c.period, -(c.effective_usd or 0), c.key))
        book = current_book()
        return Spend(
            period=self.period,
            by=self.by,
            start=self.start,
            end=self.end,
            timezone=_zone_label(self.zone),
            periods=self.labels,
            rows=rows,
            totals=_sum_cells(rows, sessions),
            price_table=book.version,
            price_problem=book.problem,
        )


def plan(
    *,
    period: str = "month",
    by: str = "provider",
    start: date,
    end: date,
    timezone: str | None = None,
    sources: tuple[str, ...] = (),
    profiles: tuple[str, ...] = (),
) -> Plan:
    """Check a spend question; :class:`ValidationError` names what is wrong."""
    if period not in PERIODS:
        raise ValidationError(f"period must be one of {', '.join(PERIODS)}")
    if by not in DIMENSIONS:
        raise ValidationError(f"by must be one of {', '.join(DIMENSIONS)}")
    if end <= start:
        raise ValidationError("the range must end after it starts")
    if (end - start).days > 3660:
        raise ValidationError("the range is limited to ten years")
    zone = resolve_zone(timezone)
    starts = period_starts(period, start, end)
    if len(starts) > 800:
        raise ValidationError("too many periods: choose a coarser period or a shorter range")
    labels = [period_label(period, d) for d in starts]
    return Plan(
        period, by, start, end, zone, starts, labels, tuple(sources), tuple(sorted(set(profiles)))
    )


def spend(conn: sqlite3.Connection, **options: object) -> Spend:
    """Spend per (period, key) over [start, end) in ``timezone`` (default: the machine's).

    Options as :func:`plan`. This sums the raw rows: SQLite sums the rows that spent on
    one day (:mod:`costs.day_sums`), the rest are read one by one here;
    :mod:`costs.rollup` answers the same question from Recall's per-day sums.
    """
    question = plan(**options)  # type: ignore[arg-type]
    summed, others = one_day_sums(conn, question, KEY_SQL[question.by])
    sums: dict[tuple[int, str], list[float]] = {}
    for cell, vector in summed.vectors():
        add_vector(sums, cell, vector)
    members: dict[tuple[int, str], set[str]] = defaultdict(set)
    everyone: set[str] = set()
    for row in others.values():
        key = row.key(question.by)
        for day, vector in row.vectors():
            index = question.bucket(day)
            if index is None:
                continue
            add_vector(sums, (index, key), vector)
            if (index, key) not in summed.shared.get(row.sid, ()):
                members[(index, key)].add(row.sid)
            if row.sid not in summed.shared:
                everyone.add(row.sid)
    cells = [
        cell_from_sums(
            question.labels[index],
            key,
            vector,
            summed.cell_sessions.get((index, key), 0) + len(members[(index, key)]),
        )
        for (index, key), vector in sums.items()
    ]
    return question.result(cells, summed.sessions + len(everyone))


def one_day_sums(
    conn: sqlite3.Connection, question: Plan, key: str, *, count_sessions: bool = True
) -> tuple[DaySums, dict[int, Row]]:
    """The rows of ``question`` that spent on one day summed by SQLite per period and
    ``key`` (SQL over ``u`` and ``s``), and the other rows (by rowid), read one by one.
    ``count_sessions`` as :func:`costs.day_sums.day_sums`."""
    clock = DayClock(question.zone)
    where, params = _range_condition(question)
    summed = day_sums(
        conn,
        clock,
        key=key,
        days=question.days,
        uniform={"day": 1, "week": 7}.get(question.period),
        edges=question.edges,
        where=where,
        params=params,
        count_sessions=count_sessions,
    )
    others = read_rows(
        conn, clock, "u.rowid IN (SELECT value FROM json_each(?))", [json.dumps(summed.others)]
    )
    return summed, others


def _range_condition(question: Plan) -> tuple[str, list[object]]:
    """The usage rows (``u``, their session ``s``) that can fall in ``question``'s range,
    sources and profiles, as a condition and its parameters."""
    edges = question.edges
    where, params = f"{ROW_LAST} >= ? AND {ROW_FIRST} < ?", [edges[0], edges[-1]]
    if question.sources:
        where += f" AND s.source IN ({','.join('?' * len(question.sources))})"
        params.extend(question.sources)
    if question.profiles:
        where += f" AND s.profile IN ({','.join('?' * len(question.profiles))})"
        params.extend(question.profiles)
    return where, params


def first_activity(conn: sqlite3.Connection) -> float | None:
    """When the home's first session started (epoch seconds); None for an empty home.

    The start of "all time" on the costs page: one seek on ``idx_sessions_started``.
    """
    return conn.execute("SELECT min(started_at) FROM sessions").fetchone()[0]


class SpendMark(NamedTuple):
    """Cheap values that change whenever spend could have (:func:`fingerprint`)."""

    last_seen: float | None  # the newest activity of any usage row
    rows: int  # usage rows
    newest_session: int | None  # the newest session's rowid
    newest_owner: object  # the session of the newest usage row
    newest_message: int | None  # the newest message's rowid


def fingerprint(conn: sqlite3.Connection) -> SpendMark:
    """A cache key for :func:`spend`, and what Recall's rollup compares to its state.

    Every recorded call moves ``last_seen``; a new row moves the count; the newest
    row's session tells a file restored from elsewhere with the same count apart; a
    new message can move a row's days (:mod:`costs.days`). Separate statements: each
    ``max()`` alone is one index seek.
    """
    latest = conn.execute("SELECT max(last_seen) FROM session_model_usage").fetchone()[0]
    count = conn.execute("SELECT count(*) FROM session_model_usage").fetchone()[0]
    sessions = conn.execute("SELECT max(rowid) FROM sessions").fetchone()[0]
    newest = conn.execute(
        "SELECT session_id FROM session_model_usage ORDER BY rowid DESC LIMIT 1"
    ).fetchone()
    message = conn.execute("SELECT max(rowid) FROM messages").fetchone()[0]
    return SpendMark(latest, count, sessions, newest[0] if newest else None, message)


def resolve_zone(name: str | None) -> ZoneInfo:
    """The IANA zone ``name``, else the machine's; :class:`ValidationError` if unknown."""
    if name:
        try:
            return ZoneInfo(name)
        except (KeyError, ValueError) as exc:
            raise ValidationError(f"unknown timezone {name!r}") from exc
    local = datetime.now().astimezone().tzinfo
    key = getattr(local, "key", None)
    try:
        return ZoneInfo(key) if key else ZoneInfo("localtime")
    except (KeyError, ValueError):
        return ZoneInfo("UTC")


def _zone_label(zone: ZoneInfo) -> str:
    if zone.key == "localtime":  # the machine's zone has no IANA name here
        return datetime.now().astimezone().tzname() or "local time"
    return zone.key


def _epoch(day: date, zone: ZoneInfo) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=zone).timestamp()


def add_vector(into: dict, key: object, vector: list[float], sign: int = 1) -> None:
    """Add (or with ``sign=-1`` take back) one contribution to the sums at ``key``."""
    current = into.get(key)
    if current is None:
        into[key] = vector if sign == 1 else [-v for v in vector]
    elif sign == 1:
        into[key] = [c + v for c, v in zip(current, vector, strict=True)]
    else:
        into[key] = [c - v for c, v in zip(current, vector, strict=True)]


def cell_from_sums(period: str, key: str, values: Iterable[float], sessions: int) -> Cell:
    """A table cell from summed vectors (SUM_COLUMNS) and its distinct session count."""
    v = dict(zip(SUM_COLUMNS, values, strict=True))

    def known(total: str, count: str) -> float | None:
        return money(v[total]) if v[count] else None

    est, act, eff = known("e_sum", "e_n"), known("a_sum", "a_n"), known("eff_sum", "eff_n")
    pa, pe = known("pa_sum", "pair_n"), known("pe_sum", "pair_n")
    return Cell(
        period=period,
        key=str(key),
        estimated_usd=est,
        actual_usd=act,
        effective_usd=eff,
        drift=(pa / pe) if pa is not None and pe else None,
        status_mix={s: int(round(v[f"n_{s}"])) for s in STATUSES},
        actual_share=billed_share(act, eff),
        tokens={k: int(round(v[f"t_{k}"])) for k in TOKEN_KINDS},
        sessions=sessions,
        api_calls=int(round(v["calls"])),
        recomputed=_recomputed(v),
    )


def _recomputed(v: dict[str, float]) -> Recomputed:
    """A cell's :class:`Recomputed` from its sums."""

    def pair(top: str, bottom: str, count: str) -> tuple[float, float] | None:
        return (money(v[top]), money(v[bottom])) if v[count] else None  # type: ignore[return-value]

    return Recomputed(
        usd=money(v["r_sum"]) if v["r_n"] else None,
        estimated_pair=pair("er_sum", "re_sum", "er_n"),
        billed_pair=pair("br_sum", "rb_sum", "br_n"),
        recovered_usd=money(v["ur_sum"]) if v["n_ur"] else None,
        recovered_calls=int(round(v["n_ur"])),
        unpriced_calls=int(round(v["n_unpriced"])),
        unsized_calls=int(round(v["n_unsized"])),
        own_usd=money(v["own_sum"]) if v["own_n"] else None,
    )


def _sum_cells(cells: list[Cell], sessions: int) -> Cell:
    est = total([c.estimated_usd for c in cells])
    act = total([c.actual_usd for c in cells])
    eff = total([c.effective_usd for c in cells])
    return Cell(
        period="total",
        key="all",
        estimated_usd=est,
        actual_usd=act,
        effective_usd=eff,
        drift=None,  # not derivable from cell sums without the paired rows; see rows
        status_mix={s: sum(c.status_mix.get(s, 0) for c in cells) for s in STATUSES},
        actual_share=billed_share(act, eff),
        tokens={k: sum(c.tokens.get(k, 0) for c in cells) for k in TOKEN_KINDS},
        sessions=sessions,
        api_calls=sum(c.api_calls for c in cells),
        recomputed=Recomputed.combine([c.recomputed for c in cells]),
    )
