"""What the archive holds at a glance (counts, date range, size, recent activity), and
its source's state and layout (the one page where a Hermes layout is shown)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dashboard.repository.conventions import visible_sql
from dashboard.repository.cost_days import DayClock
from dashboard.repository.cost_rules import known_spend, total
from dashboard.repository.costs import Cell, plan
from dashboard.repository.errors import StoreUnavailableError
from dashboard.repository.layout import Layout, detect_layout
from dashboard.repository.model_names import model_family
from dashboard.repository.readonly import classify, open_readonly

if TYPE_CHECKING:  # the reader imports this module for store_overview
    from dashboard.repository.cost_rollup import CostRollup
    from dashboard.repository.reader import StateReader


def archive_overview(
    conn: sqlite3.Connection, path: str | Path, by_profile: bool = False
) -> dict[str, Any]:
    """What the archive holds: counts of sessions and visible messages, first and last
    activity, file sizes, and its own indexes' state (its layout, as the overview shows).

    ``by_profile``: the same figures per profile too (``profiles``: name -> figures),
    their sums the totals (the one pass over the messages counts both).
    """
    out: dict[str, Any] = {"layout": detect_layout(conn, path).summary()}
    if by_profile:
        out["profiles"] = profile_figures(conn)
        out.update(_counts(conn, visible_sql("m"), messages=False))
        out["messages"] = sum(p["messages"] for p in out["profiles"].values())
    else:
        out.update(_counts(conn, visible_sql("m")))
    out["files"] = _files(Path(path))
    return out


def profile_figures(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """Per profile: sessions, visible messages, first and last activity (as :func:`_counts`
    reads them for the whole archive), in one pass over the messages."""
    out: dict[str, dict[str, Any]] = {}
    for name, sessions, first, last in conn.execute(
        "SELECT profile, count(*), min(started_at), max(coalesce(ended_at, started_at))"
        " FROM sessions GROUP BY profile ORDER BY profile"
    ):
        out[name] = {"sessions": sessions, "messages": 0, "first_activity": first,
                     "last_activity": last}  # fmt: skip
    # Grouped by session first (its index), then by profile: 2 s against 3.5 s for a
    # join of every message to its session at 1M messages.
    for name, messages, last in conn.execute(
        f"SELECT s.profile, sum(x.visible), max(x.last) FROM (SELECT m.session_id AS sid,"
        f" sum(CASE WHEN {visible_sql('m')} THEN 1 ELSE 0 END) AS visible,"
        " max(m.timestamp) AS last FROM messages m GROUP BY m.session_id) x"
        " JOIN sessions s ON s.id = x.sid GROUP BY s.profile"
    ):
        figures = out[name]
        figures["messages"] = messages or 0
        if last and (figures["last_activity"] or 0) < last:
            figures["last_activity"] = last
    return out


def _counts(conn: sqlite3.Connection, visible: str, messages: bool = True) -> dict[str, Any]:
    row = conn.execute(
        "SELECT count(*), min(started_at), max(coalesce(ended_at, started_at)) FROM sessions"
    ).fetchone()
    out: dict[str, Any] = {"sessions": row[0], "first_activity": row[1], "last_activity": row[2]}
    out["sources"] = {
        r[0]: r[1]
        for r in conn.execute(
            "SELECT source, count(*) FROM sessions GROUP BY source ORDER BY 2 DESC"
        )
    }
    if messages:
        count = conn.execute(f"SELECT count(*) FROM messages m WHERE {visible}")
        out["messages"] = count.fetchone()[0]
    last = conn.execute("SELECT max(timestamp) FROM messages").fetchone()[0]
    if last and (out.get("last_activity") or 0) < last:
        out["last_activity"] = last
    return out


def _files(path: Path) -> dict[str, int]:
    return {
        suffix or "db": Path(f"{path}{suffix}").stat().st_size
        for suffix in ("", "-wal")
        if Path(f"{path}{suffix}").is_file()
    }


def store_overview(conn: sqlite3.Connection, layout: Layout) -> dict[str, Any]:
    """A source file's counts and layout (any shape Hermes wrote: :mod:`layout`)."""
    out: dict[str, Any] = {"layout": layout.summary()}
    if {"sessions", "messages"} <= layout.tables:
        out.update(_counts(conn, layout.visible_messages_sql("m")))
    out["files"] = _files(Path(layout.path))
    return out


def archive_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """What Recall's archive keeps: sessions, messages, and how many exist only here
    (``gone_from_source_at`` set: Hermes pruned or lost them)."""
    sessions, gone = conn.execute(
        "SELECT count(*), count(gone_from_source_at) FROM sessions"
    ).fetchone()
    messages = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    gone_messages = conn.execute(
        "SELECT count(*) FROM messages WHERE gone_from_source_at IS NOT NULL"
    ).fetchone()[0]
    return {"sessions": sessions, "messages": messages, "gone_sessions": gone,
            "gone_messages": gone_messages}  # fmt: skip


def source_overview(path: Path) -> dict[str, Any]:
    """The source's state for the overview: its layout and counts, or why it cannot be read."""
    try:
        conn = open_readonly(path, timeout=0, io_retries=0)
    except StoreUnavailableError as exc:
        return {"path": str(path), "reachable": False, "reason": exc.reason, "detail": exc.detail}
    try:
        return {"path": str(path), "reachable": True,
                **store_overview(conn, detect_layout(conn, path))}  # fmt: skip
    except sqlite3.Error as exc:
        error = classify(exc, path)
        return {"path": str(path), "reachable": False, "reason": error.reason,
                "detail": error.detail}  # fmt: skip
    finally:
        conn.close()


# -- activity of the last days ---------------------------------------------------------

ACTIVITY_DAYS = 30
TOP_MODELS = 5
TOP_TOOLS = 8


@dataclass(frozen=True)
class DayActivity:
    """One local day: sessions started, tokens and spend (by the cost rules)."""

    day: date
    sessions: int
    tokens: int
    spend: float  # effective spend known (cost_rules.known_spend: $0 with no priced call)
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
    reader: StateReader, rollup: CostRollup | None, *, today: date,
    timezone: str | None = None, days: int = ACTIVITY_DAYS,
) -> Activity:  # fmt: skip
    """Sessions, tokens and spend per local day for the ``days`` days up to ``today``, the
    models that started the most sessions and the tools called most in them.

    Spend and tokens are :meth:`StateReader.spend` (the rollup once built, the cost
    rules of :mod:`cost_rules`): the same figures as the costs page. Sessions, models
    and tools are read for the sessions that started in the range, through the
    ``started_at`` and ``(session_id, …)`` indexes, so the page stays bounded by the
    range's sessions, not the home's size.
    """
    start, end = today - timedelta(days=days - 1), today + timedelta(days=1)
    by_day = reader.spend(rollup, period="day", by="source", start=start, end=end,
                          timezone=timezone)  # fmt: skip
    by_model = reader.spend(rollup, period="month", by="model", start=start, end=end,
                            timezone=timezone)  # fmt: skip
    with reader.snapshot() as snap:
        question = plan(period="day", start=start, end=end, timezone=timezone)
        edges = question.edges
        started, models, tools = _started_sessions(snap.conn, edges[0], edges[-1])
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
            day=first, sessions=counts[i],
            tokens=sum(sum(c.tokens.values()) for c in cells.get(label, [])),
            spend=known_spend(total(c.effective_usd for c in cells.get(label, []))),
            unknown_calls=sum(c.status_mix.get("unknown", 0) for c in cells.get(label, [])),
        )
        for i, (first, label) in enumerate(zip(question.starts, question.labels, strict=True))
    ]  # fmt: skip
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
        start=start, end=end, timezone=by_day.timezone, days=day_rows,
        sessions=sum(counts), tokens=sum(d.tokens for d in day_rows),
        spend=known_spend(by_day.totals.effective_usd),
        unknown_calls=by_day.totals.status_mix.get("unknown", 0),
        models=[(label, n, total(model_spend.get(key, []))) for key, (label, n) in top],
        tools=tools,
    )  # fmt: skip


def _started_sessions(
    conn: sqlite3.Connection, since: float, until: float
) -> tuple[list[float], list[tuple[str, int]], list[tuple[str, int]]]:
    """Start times of the sessions started in [since, until), their top models and the
    tools called most in them (visible rows only: a compacted copy is not a second call)."""
    window = "s.started_at >= ? AND s.started_at < ?"
    started = [
        r[0] for r in conn.execute(f"SELECT s.started_at FROM sessions s WHERE {window}",
                                   (since, until))
    ]  # fmt: skip
    models = [
        (r[0], r[1]) for r in conn.execute(
            # Every model of the range (a few dozen at most): spellings are grouped after.
            f"SELECT s.model, count(*) FROM sessions s WHERE {window} AND s.model IS NOT NULL"
            " AND s.model != '' GROUP BY s.model ORDER BY 2 DESC, 1",
            (since, until),
        )
    ]  # fmt: skip
    tools = [
        (r[0], r[1]) for r in conn.execute(
            f"SELECT m.tool_name, count(*) FROM sessions s JOIN messages m"
            f" ON m.session_id = s.id WHERE {window} AND m.tool_name IS NOT NULL"
            f" AND m.tool_name != '' AND {visible_sql('m')}"
            " GROUP BY m.tool_name ORDER BY 2 DESC, 1 LIMIT ?",
            (since, until, TOP_TOOLS),
        )
    ]  # fmt: skip
    return started, models, tools
