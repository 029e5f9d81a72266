"""The sessions that cost the most in a range, summed like every other figure of /costs.

A session's spend in the range is the sum of its spend rows' contributions on the days
inside the range: the rows are read by :mod:`costs.rules` and spread over days by
:mod:`costs.days` exactly as the period sums are (:meth:`costs.usage.Row.vectors`), so the
sessions of a month add up to that month's total. Each entry is one distinct session.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from dashboard.costs.spend import (
    SUM_COLUMNS,
    TOKEN_COLUMNS,
    Cell,
    Plan,
    add_vector,
    cell_from_sums,
    one_day_sums,
)
from dashboard.costs.usage import Row
from dashboard.params import table_sort
from dashboard.store.names import session_names
from dashboard.store.presence import gone_sql

SORTS = ("cost", "tokens", "calls")
TOP_SESSIONS = 25  # a screen of rows; the CSV and the tables above hold every figure


class Families(Protocol):
    """What the costliest sessions ask of the lineage (``lineage.graph.Lineage``): the
    lineage sits above costs, since a chain's figures are summed by the cost rules."""

    def root(self, session_id: str) -> str: ...

    def family(self, root: str) -> list[str]: ...


@dataclass(frozen=True)
class SessionSpend:
    """One session and what it spent in the range."""

    session_id: str
    title: str | None
    source: str | None
    model: str | None
    started_at: float | None
    in_chain: bool  # part of a compaction chain (its chain page is worth a link)
    spend: Cell  # its figures in the range (period "range", key its id)
    gone_at: float | None = None  # when it left Hermes (store/presence.py), else None
    name: str = ""  # what a person calls it (store/names.py); "" when not read
    profile: str | None = None  # the Hermes profile it belongs to

    @property
    def label(self) -> str:
        """What a person calls the session: its title, else its first words, else its id."""
        return self.name or self.title or self.session_id

    @property
    def tokens(self) -> int:
        return sum(self.spend.tokens.values())


@dataclass(frozen=True)
class CostlySessions:
    sort: str  # one of SORTS
    descending: bool
    total: int  # distinct sessions that spent in the range
    sessions: list[SessionSpend]


def check_sort(sort: str | None, direction: str | None) -> tuple[str, bool]:
    """``(sort, descending)`` from the query string; :class:`ValidationError` if unknown."""
    return table_sort(sort, direction, SORTS, "cost")


def session_sums(rows: Iterable[Row], question: Plan) -> dict[str, list[float]]:
    """Each session's summed contributions (SUM_COLUMNS) on the days of the range."""
    sums: dict[str, list[float]] = {}
    for row in rows:
        if question.sources and row.source not in question.sources:
            continue
        for day, vector in row.vectors():
            if question.bucket(day) is not None:
                add_vector(sums, row.sid, vector)
    return sums


def raw_session_sums(conn: sqlite3.Connection, question: Plan) -> dict[str, list[float]]:
    """:func:`session_sums` of every raw row of ``question``: the rows that spent on one
    day summed by SQLite per session (:func:`costs.spend.one_day_sums`), the rest here."""
    summed, others = one_day_sums(conn, question, "u.session_id", count_sessions=False)
    sums: dict[str, list[float]] = {}
    for (_, sid), vector in summed.vectors():
        add_vector(sums, str(sid), vector)  # as Row.sid
    for sid, vector in session_sums(others.values(), question).items():
        add_vector(sums, sid, vector)
    return sums


def rank_sessions(
    sums: dict[str, list[float]],
    *,
    sort: str = "cost",
    descending: bool = True,
    limit: int = TOP_SESSIONS,
) -> list[tuple[str, list[float]]]:
    """The first ``limit`` sessions by ``sort``: ``cost`` is effective spend (an unknown
    price sorts below every known one, either way), ``tokens`` every kind together,
    ``calls`` API calls; ties by id. :meth:`CostRollup.session_sums` orders the same."""
    columns = {name: i for i, name in enumerate(SUM_COLUMNS)}
    sign = -1 if descending else 1
    tokens = [columns[c] for c in TOKEN_COLUMNS]

    def order(sid: str) -> tuple:
        v = sums[sid]
        if sort == "cost":
            return (v[columns["eff_n"]] == 0, sign * v[columns["eff_sum"]], sid)
        if sort == "tokens":
            return (sign * sum(v[i] for i in tokens), sid)
        return (sign * v[columns["calls"]], sid)

    return [(sid, sums[sid]) for sid in sorted(sums, key=order)[:limit]]


def costly_sessions(
    conn: sqlite3.Connection,
    lineage: Families,
    total: int,
    ranked: list[tuple[str, list[float]]],
    *,
    sort: str = "cost",
    descending: bool = True,
) -> CostlySessions:
    """The ranked sessions (``(id, SUM_COLUMNS sums)``, from :func:`rank_sessions` or the
    rollup) with their titles and whether each is part of a chain."""
    details = _details(conn, [sid for sid, _ in ranked])
    names = session_names(conn, {sid: d[1] for sid, d in details.items()})
    out = []
    for sid, vector in ranked:
        started, title, source, model, gone, profile = details.get(sid, (None,) * 6)
        family = lineage.family(lineage.root(sid))
        cell = cell_from_sums("range", sid, vector, 1)
        in_chain = len(family) > 1
        name = names.get(sid, sid)
        out.append(
            SessionSpend(sid, title, source, model, started, in_chain, cell, gone, name, profile)
        )
    return CostlySessions(sort, descending, total, out)


def _details(
    conn: sqlite3.Connection, ids: Iterable[str]
) -> dict[str, tuple[float | None, str | None, str | None, str | None, float | None, str | None]]:
    """``(started_at, title, source, model, gone_at, profile)`` of each session (absent:
    row gone)."""
    wanted = sorted(ids)
    if not wanted:
        return {}
    found = conn.execute(
        f"SELECT s.id, s.started_at, s.title, s.source, s.model, {gone_sql('s')}, s.profile "
        "FROM sessions s JOIN json_each(?) j ON s.id = j.value",
        (json.dumps(wanted),),
    )
    return {
        sid: (started, title or None, source, model, gone, profile)
        for sid, started, title, source, model, gone, profile in found
    }
