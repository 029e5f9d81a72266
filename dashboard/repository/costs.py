"""Spend by period and dimension: estimated against actual, never unknown as $0.

Hermes stores a local estimate (price table) beside the billed figure when the
provider reports one (HERMES_FACTS, "Costs"). The rules this module keeps:

* **Effective spend** of a row is its actual figure where known, else its
  estimate; a row with neither is *unknown* and adds nothing to a sum, and a cell
  made only of unknown rows shows ``None``, never ``0``.
* **Drift** (actual ÷ estimated) uses only usage rows that carry both figures for
  the same calls (status ``actual``); a ``sessions`` row mixes calls and is never
  paired, and included (subscription) rows bill 0 by design.
* ``session_model_usage`` (newer files; one row per model/provider/task, with
  auxiliary tasks) is used when present, else ``sessions``. Its cost columns are
  ``NOT NULL DEFAULT 0`` in Hermes, so a 0 there is read through ``cost_status``:
  an ``actual`` row's 0 estimate means "no estimate was made", not "free".
* Every session or usage row is counted once: a continued chain's segments
  each carry their own calls, so summing segments never double counts.
* Periods follow the user's timezone (DST included): boundaries are computed
  with ``zoneinfo`` and rows are bucketed in SQL with one ``CASE``.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from dashboard.repository.errors import ValidationError
from dashboard.repository.layout import Layout

PERIODS = ("month", "week", "day")
DIMENSIONS = ("provider", "model", "source", "task")
STATUSES = ("actual", "estimated", "included", "unknown")
TOKEN_KINDS = ("input", "output", "cache_read", "cache_write", "reasoning")
MONEY_DIGITS = 10  # dollars are summed then rounded here (see _money)
DRIFT_FLAG = 1.5  # actual/estimated beyond this (or below its inverse) is flagged


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

    @property
    def drift_flagged(self) -> bool:
        return self.drift is not None and (self.drift > DRIFT_FLAG or self.drift < 1 / DRIFT_FLAG)

    def to_json(self) -> dict[str, object]:
        return {
            "period": self.period, "key": self.key, "estimated_usd": self.estimated_usd,
            "actual_usd": self.actual_usd, "effective_usd": self.effective_usd,
            "drift": self.drift, "drift_flagged": self.drift_flagged,
            "status_mix": self.status_mix, "actual_share": self.actual_share,
            "tokens": self.tokens, "sessions": self.sessions, "api_calls": self.api_calls,
        }  # fmt: skip


@dataclass
class Spend:
    period: str
    by: str
    start: date
    end: date  # exclusive
    timezone: str
    source_table: str  # "session_model_usage" or "sessions"
    periods: list[str]
    rows: list[Cell]
    totals: Cell

    def to_json(self) -> dict[str, object]:
        return {
            "period": self.period, "by": self.by, "from": self.start.isoformat(),
            "to": self.end.isoformat(), "timezone": self.timezone,
            "source_table": self.source_table, "periods": self.periods,
            "rows": [r.to_json() for r in self.rows], "totals": self.totals.to_json(),
        }  # fmt: skip


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

    @property
    def edges(self) -> list[float]:
        """Epoch seconds of every period start, then of the range's end."""
        return [_epoch(d, self.zone) for d in self.starts] + [_epoch(self.end, self.zone)]

    def result(self, layout: Layout, cells: list[Cell]) -> Spend:
        rows = sorted(cells, key=lambda c: (c.period, -(c.effective_usd or 0), c.key))
        return Spend(
            period=self.period, by=self.by, start=self.start, end=self.end,
            timezone=_zone_label(self.zone),
            source_table="session_model_usage" if layout.has_model_usage else "sessions",
            periods=self.labels, rows=rows, totals=_sum_cells(rows),
        )  # fmt: skip


def plan(
    layout: Layout, *, period: str = "month", by: str = "provider", start: date, end: date,
    timezone: str | None = None, sources: tuple[str, ...] = (),
) -> Plan:  # fmt: skip
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
    if by == "task" and not layout.has_model_usage:
        raise ValidationError("this file has no per-task usage (no session_model_usage table)")
    labels = [period_label(period, d) for d in starts]
    return Plan(period, by, start, end, zone, starts, labels, tuple(sources))


def spend(conn: sqlite3.Connection, layout: Layout, **options: object) -> Spend:
    """Spend per (period, key) over [start, end) in ``timezone`` (default: the machine's).

    Options as :func:`plan`. This sums the raw rows; :mod:`cost_rollup` answers the
    same question from Recall's per-day sums.
    """
    question = plan(layout, **options)  # type: ignore[arg-type]
    sql, params = _query(layout, question.by, question.edges, question.sources)
    cells: dict[tuple[str, str], Cell] = {}
    for row in conn.execute(sql, params):
        index, key = row[0], row[1]
        if index is None or index < 0 or index >= len(question.labels):
            continue
        cell = make_cell(question.labels[index], key, row[2:])
        cells[(cell.period, cell.key)] = cell
    return question.result(layout, list(cells.values()))


def fingerprint(conn: sqlite3.Connection, layout: Layout) -> tuple[object, ...]:
    """Cheap values that change whenever spend could have: a cache key for :func:`spend`.

    Every recorded call moves ``last_seen`` (usage rows) or a session's activity;
    a new row moves the count; the newest row's session tells a file restored from
    elsewhere with the same count apart. Separate statements: ``max()`` alone is
    one index seek where an index exists.

    Returns ``(table, newest activity, row count, newest session rowid, newest row's
    session)``.
    """
    if layout.has_model_usage:
        table, moving, owner = "session_model_usage", "last_seen", "session_id"
    else:
        table, owner = "sessions", "id"
        moving = "last_activity_at" if "last_activity_at" in layout.session_columns else "rowid"
    latest = conn.execute(f"SELECT max({moving}) FROM {table}").fetchone()[0]
    count = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    sessions = conn.execute("SELECT max(rowid) FROM sessions").fetchone()[0]
    newest = conn.execute(f"SELECT {owner} FROM {table} ORDER BY rowid DESC LIMIT 1").fetchone()
    return (table, latest, count, sessions, newest[0] if newest else None)


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


@dataclass(frozen=True)
class RowSql:
    """SQL expressions reading one spend row (a usage row, or a session on older files).

    Both the direct sums here and Recall's per-day rollup read rows through these,
    so the rules (a Hermes 0 read through the status, keys, tokens) live in one place.
    """

    table: str  # "u" (session_model_usage) or "s" (sessions)
    ts: str
    keys: dict[str, str]  # dimension -> expression; never NULL or ''
    status: str
    est: str
    act: str
    tokens: tuple[str, ...]  # one per TOKEN_KINDS
    sid: str
    calls: str

    def source_from(self, join_sessions: bool) -> str:
        if self.table == "s":
            return "sessions s"
        # LEFT JOIN: a usage row whose session row is gone still cost money.
        return "session_model_usage u" + (
            " LEFT JOIN sessions s ON s.id = u.session_id" if join_sessions else ""
        )


def row_sql(layout: Layout) -> RowSql:
    """How to read spend rows from this file's layout."""
    cols = layout.session_columns
    usage = layout.has_model_usage
    t = "u" if usage else "s"

    def column(name: str) -> str:
        return f"{t}.{name}" if usage or name in cols else "NULL"

    def label(expr: str) -> str:
        return f"coalesce(nullif({expr}, ''), 'unknown')"

    if usage:
        keys = {
            "provider": label("u.billing_provider"), "model": label("u.model"),
            "source": label("s.source"), "task": "coalesce(nullif(u.task, ''), 'main')",
        }  # fmt: skip
        ts, sid, calls = "coalesce(u.last_seen, u.first_seen)", "u.session_id", "u.api_call_count"
    else:
        pairs = (("provider", "billing_provider"), ("model", "model"), ("source", "source"))
        keys = {dim: label(column(col)) for dim, col in pairs}
        ts, sid, calls = "s.started_at", "s.id", column("api_call_count")
    status = f"coalesce({column('cost_status')}, 'unknown')"
    est_col, act_col = column("estimated_cost_usd"), column("actual_cost_usd")
    # Read figures through the status: Hermes's usage table stores 0 for "none".
    est = (
        f"CASE WHEN {status} = 'unknown' THEN NULL "
        f"WHEN {status} <> 'estimated' AND {est_col} = 0 THEN NULL ELSE {est_col} END"
    )
    act = (
        f"CASE WHEN {status} = 'unknown' THEN NULL "
        f"WHEN {status} IN ('actual', 'included') THEN {act_col} "
        f"WHEN {act_col} > 0 THEN {act_col} ELSE NULL END"
    )
    tokens = tuple(f"coalesce({column(f'{k}_tokens')}, 0)" for k in TOKEN_KINDS)
    return RowSql(t, ts, keys, status, est, act, tokens, sid, f"coalesce({calls}, 0)")


def _query(
    layout: Layout, by: str, edges: list[float], sources: tuple[str, ...]
) -> tuple[str, list[object]]:
    """One statement: normalise each row once (inner), then bucket and sum (outer)."""
    r = row_sql(layout)
    frm = r.source_from(join_sessions=by == "source" or bool(sources))
    tokens = ", ".join(f"{expr} AS t_{k}" for expr, k in zip(r.tokens, TOKEN_KINDS, strict=True))
    where = f"{r.ts} >= ? AND {r.ts} < ?"
    inner_params: list[object] = [edges[0], edges[-1]]
    if sources:
        where += f" AND s.source IN ({','.join('?' * len(sources))})"
        inner_params.extend(sources)
    # LIMIT -1 keeps SQLite from flattening the inner query into the outer one,
    # which would evaluate each CASE once per aggregate instead of once per row.
    inner = (
        f"SELECT {r.ts} AS ts, {r.keys[by]} AS key, {r.status} AS st, {r.est} AS e, "
        f"{r.act} AS a, {tokens}, {r.sid} AS sid, {r.calls} AS calls "
        f"FROM {frm} WHERE {where} LIMIT -1"
    )
    steps = " ".join(f"WHEN ts < ? THEN {i - 1}" for i in range(1, len(edges)))
    params = [*edges[1:], *inner_params]
    # Drift compares a bill with the estimate of the same calls. A usage row is one
    # (model, provider, task) of a session, both figures about its calls; a
    # sessions row mixes calls (a billed main loop beside an estimated title call),
    # so it is never paired. Included (subscription) rows bill 0 by design.
    paired = "st = 'actual' AND a IS NOT NULL AND e IS NOT NULL" if r.table == "u" else "0"
    sums = ", ".join(f"sum(t_{k})" for k in TOKEN_KINDS)
    sql = f"""
        SELECT CASE {steps} END AS bucket, key,
               sum(e), sum(a), sum(coalesce(a, e)),
               sum(CASE WHEN {paired} THEN a END), sum(CASE WHEN {paired} THEN e END),
               sum(st = 'actual'), sum(st = 'estimated'), sum(st = 'included'),
               sum(st NOT IN ('actual', 'estimated', 'included')),
               {sums}, count(DISTINCT sid), sum(calls)
        FROM ({inner}) GROUP BY bucket, key
    """
    return sql, params


def _money(value: float | None) -> float | None:
    """A sum of dollars rounded to 1e-10: the raw sums and the rollup add the same
    figures in different orders, and float dust must not make them disagree."""
    return None if value is None else round(value, MONEY_DIGITS)


def make_cell(period: str, key: str, values: tuple) -> Cell:
    est, act, eff, both_act, both_est = (_money(v) for v in values[0:5])
    mix = dict(zip(STATUSES, (int(v or 0) for v in values[5:9]), strict=True))
    tokens = dict(zip(TOKEN_KINDS, (int(v or 0) for v in values[9:14]), strict=True))
    return Cell(
        period=period, key=str(key), estimated_usd=est, actual_usd=act, effective_usd=eff,
        drift=(both_act / both_est) if both_act is not None and both_est else None,
        status_mix=mix, actual_share=(act or 0.0) / eff if eff else None, tokens=tokens,
        sessions=int(values[14] or 0), api_calls=int(values[15] or 0),
    )  # fmt: skip


def _sum_cells(cells: list[Cell]) -> Cell:
    def total(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return _money(sum(known)) if known else None

    est = total([c.estimated_usd for c in cells])
    act = total([c.actual_usd for c in cells])
    eff = total([c.effective_usd for c in cells])
    return Cell(
        period="total", key="all", estimated_usd=est, actual_usd=act, effective_usd=eff,
        drift=None,  # not derivable from cell sums without the paired rows; see rows
        status_mix={s: sum(c.status_mix.get(s, 0) for c in cells) for s in STATUSES},
        actual_share=(act or 0.0) / eff if eff else None,
        tokens={k: sum(c.tokens.get(k, 0) for c in cells) for k in TOKEN_KINDS},
        sessions=sum(c.sessions for c in cells), api_calls=sum(c.api_calls for c in cells),
    )  # fmt: skip
