"""The overview's last 30 days: sessions, tokens and spend per day, top models and tools."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

from dashboard.costs.days import DayClock
from dashboard.costs.rules import known_spend, total
from dashboard.costs.spend import Cell, Spend, plan
from dashboard.hermes.conventions import visible_sql
from dashboard.hermes.model_names import model_family

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
    models: list[tuple[str, int, float | None]]  # (model, sessions started, its spend)
    tools: list[tuple[str, int]]  # (tool name, calls)

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
    for cell in by_model.rows:
        model_spend.setdefault(model_family(cell.key), []).append(cell.effective_usd)
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
        models=[(label, n, total(model_spend.get(key, []))) for key, (label, n) in top],
        tools=tools,
    )


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
    tools = [
        (r[0], r[1])
        for r in conn.execute(
            f"SELECT m.tool_name, count(*) FROM sessions s JOIN messages m"
            f" ON m.session_id = s.id WHERE {window} AND m.tool_name IS NOT NULL"
            f" AND m.tool_name != '' AND {visible_sql('m')}"
            " GROUP BY m.tool_name ORDER BY 2 DESC, 1 LIMIT ?",
            (since, until, TOP_TOOLS),
        )
    ]
    return started, models, tools
