"""The overview's last 30 days: sessions, tokens and spend per day, top models and tools."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

from dashboard.costs.days import DayClock
from dashboard.costs.rules import known_spend, total
from dashboard.costs.spend import Cell, Spend, plan
from dashboard.hermes.model_names import model_family
from dashboard.reader.overview import LEFT_OUT
from dashboard.store.schema import TOOL_ROWS

ACTIVITY_DAYS = 30


TOP_MODELS = 5


TOP_TOOLS = 8


@dataclass(frozen=True)
class DayActivity:
    """One local day: sessions started, tokens and spend (by the cost rules)."""

    day: date
    sessions: int
    tokens: int
    spend: float  # effective spend known (costs.rules.known_spend: $0 with no priced call)
    unknown_calls: int  # calls of unknown price (never counted as $0)


@dataclass(frozen=True)
class ModelUse:
    """One of the top models: the sessions it started and what it spent."""

    name: str
    sessions: int
    spend: float | None  # effective spend known; None: only calls of unknown price
    included: bool  # every call it made was covered by a plan: "included", not $0.00


@dataclass(frozen=True)
class Activity:
    """What a Hermes dashboard shows first: the last days, the top models and tools."""

    start: date
    end: date  # exclusive
    timezone: str
    days: list[DayActivity]
    sessions: int
    tokens: int
    spend: float
    unknown_calls: int
    models: list[ModelUse]  # most sessions started first
    tools: list[tuple[str, int]]  # (tool name, calls)
    recomputed: float | None = None  # Recall's price of the range's calls (issue 28)

    @property
    def busiest(self) -> int:
        """The most sessions of one day (the chart's scale; at least 1)."""
        return max([d.sessions for d in self.days] + [1])


def recent_activity(
    conn: sqlite3.Connection,
    spend: Callable[..., Spend],
    *,
    today: date,
    timezone: str | None = None,
    days: int = ACTIVITY_DAYS,
) -> Activity:
    """Sessions, tokens and spend per local day for the ``days`` days up to ``today``, the
    models that started the most sessions and the tools called most in them.

    Spend and tokens are asked of ``spend`` (``SpendReading.spend`` of the same
    snapshot as ``conn``: the rollup once built, the cost rules of :mod:`costs.rules`):
    the same figures as the costs page. Sessions, models
    and tools are read for the sessions that started in the range, through the
    ``started_at`` and ``(session_id, …)`` indexes, so the page stays bounded by the
    range's sessions, not the home's size.
    """
    start, end = today - timedelta(days=days - 1), today + timedelta(days=1)
    by_day = spend(period="day", by="source", start=start, end=end, timezone=timezone)
    by_model = spend(period="month", by="model", start=start, end=end, timezone=timezone)
    question = plan(period="day", start=start, end=end, timezone=timezone)
    edges = question.edges
    started, models, tools = _started_sessions(conn, edges[0], edges[-1])
    counts = [0] * len(question.labels)
    clock = DayClock(question.zone)
    for when in started:
        index = question.bucket(clock.day(when) or 0)
        if index is not None:
            counts[index] += 1
    cells: dict[str, list[Cell]] = {}
    for cell in by_day.rows:
        cells.setdefault(cell.period, []).append(cell)
    day_rows = [
        DayActivity(
            day=first,
            sessions=counts[i],
            tokens=sum(sum(c.tokens.values()) for c in cells.get(label, [])),
            spend=known_spend(total(c.effective_usd for c in cells.get(label, []))),
            unknown_calls=sum(c.status_mix.get("unknown", 0) for c in cells.get(label, [])),
        )
        for i, (first, label) in enumerate(zip(question.starts, question.labels, strict=True))
    ]
    # One model under several spellings is one entry (named by its most used spelling).
    model_spend: dict[str, list[float | None]] = {}
    model_mix: dict[str, Counter[str]] = {}
    for cell in by_model.rows:
        model_spend.setdefault(model_family(cell.key), []).append(cell.effective_usd)
        model_mix.setdefault(model_family(cell.key), Counter()).update(cell.status_mix)
    families: dict[str, tuple[str, int]] = {}
    for name, count in models:  # most sessions first
        key = model_family(name)
        label, seen = families.get(key, (name, 0))
        families[key] = (label, seen + count)
    top = sorted(families.items(), key=lambda item: (-item[1][1], item[1][0]))[:TOP_MODELS]
    return Activity(
        start=start,
        end=end,
        timezone=by_day.timezone,
        days=day_rows,
        sessions=sum(counts),
        tokens=sum(d.tokens for d in day_rows),
        spend=known_spend(by_day.totals.effective_usd),
        unknown_calls=by_day.totals.status_mix.get("unknown", 0),
        recomputed=by_day.totals.recomputed.usd,
        models=[
            ModelUse(label, n, total(model_spend.get(key, [])), _included(model_mix.get(key)))
            for key, (label, n) in top
        ],
        tools=tools,
    )


def _included(mix: Counter[str] | None) -> bool:
    """True when every call counted in ``mix`` (calls per status) was included in a plan."""
    return bool(mix) and mix["included"] > 0 and sum(mix.values()) == mix["included"]


def _started_sessions(
    conn: sqlite3.Connection, since: float, until: float
) -> tuple[list[float], list[tuple[str, int]], list[tuple[str, int]]]:
    """Start times of the sessions started in [since, until), their top models and the
    tools called most in them (visible rows only: a compacted copy is not a second call)."""
    window = "s.started_at >= ? AND s.started_at < ?"
    started = [
        r[0]
        for r in conn.execute(f"SELECT s.started_at FROM sessions s WHERE {window}", (since, until))
    ]
    models = [
        (r[0], r[1])
        for r in conn.execute(
            # Every model of the range (a few dozen at most): spellings are grouped after.
            f"SELECT s.model, count(*) FROM sessions s WHERE {window} AND s.model IS NOT NULL"
            " AND s.model != '' GROUP BY s.model ORDER BY 2 DESC, 1",
            (since, until),
        )
    ]
    return started, models, top_tools(conn, since, until)


def top_tools(conn: sqlite3.Connection, since: float, until: float) -> list[tuple[str, int]]:
    """The tools called most in the sessions started in [since, until): (name, calls),
    most calls first, then by name; visible rows only (a compacted copy is not a second
    call)."""
    # Every tool row of the range's sessions from the partial index of (session, tool)
    # alone, less the rows the visible-row rule leaves out (a few, through their own
    # index; asked by name without the tool filter, which would steer the planner to
    # the tools index): reading each row's flags went past its text (~67 ms at 1M).
    # CROSS JOIN keeps the range's sessions the outer loop: the planner otherwise may
    # scan every tool row of the archive and look up each one's session (160 ms).
    sessions = (
        "FROM sessions s CROSS JOIN messages ON messages.session_id = s.id"
        " WHERE s.started_at >= ? AND s.started_at < ?"
    )
    calls: Counter[str] = Counter()
    for name, count in conn.execute(
        f"SELECT tool_name, count(*) {sessions} AND {TOOL_ROWS} GROUP BY 1", (since, until)
    ):
        calls[name] += count
    for name, count in conn.execute(
        f"SELECT tool_name, count(*) {sessions} AND {LEFT_OUT} GROUP BY 1", (since, until)
    ):
        if name in calls:  # a tool row (the others were never counted)
            calls[name] -= count
    shown = [(name, count) for name, count in calls.items() if count > 0]
    return sorted(shown, key=lambda item: (-item[1], item[0]))[:TOP_TOOLS]
