"""The costs screen as one object: what the page, its CSV and the JSON API render."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from dashboard.costs.costly import CostlySessions
from dashboard.costs.headlines import Headlines, headlines
from dashboard.costs.request import CostsRequest, Shortcut, range_shortcuts
from dashboard.costs.spend import Spend, first_activity
from dashboard.errors import ValidationError
from dashboard.reader.spending import SpendReading
from dashboard.search.sessions import session_facets


@dataclass(frozen=True)
class CostsReport:
    """Everything /costs shows, read in one snapshot of the archive.

    ``request`` is None when the query string could not be read (the page then shows
    the form and the error alone); ``error`` says why a request was refused by the
    spend rules (a range backwards or too long, an unknown timezone), and then the
    figures are None too.
    """

    request: CostsRequest | None
    shortcuts: list[Shortcut]  # ranges one click away, "all time" from the first session
    sources: list[str]  # the sources present, for the form
    spend: Spend | None = None  # the charts, the tables, the CSV and the JSON
    sessions: CostlySessions | None = None  # the costliest sessions of the range (page)
    headlines: Headlines | None = None  # this month's cards (page)
    error: str | None = None

    def checked(self) -> CostsReport:
        """This report, or the :class:`ValidationError` its request met (the CSV and the
        JSON answer 400 where the page shows the form and the error)."""
        if self.error is not None:
            raise ValidationError(self.error)
        return self

    @property
    def last_day(self) -> date | None:
        return None if self.request is None else self.request.last_day


def costs_report(
    conn: sqlite3.Connection,
    spending: SpendReading,
    asked: CostsRequest | None,
    *,
    now: datetime,
    card_profiles: Sequence[str] = (),
    cards: bool = True,
) -> CostsReport:
    """The :class:`CostsReport` of ``asked`` as of ``now`` (aware, the user's timezone),
    every figure from ``conn``'s one state (``spending`` asks its spend questions of it).

    ``card_profiles``: the profiles given a headline card of their own. ``cards=False``:
    the spend alone (``sessions`` and ``headlines`` None): the CSV and the JSON show
    neither, and they cost five more questions.
    """
    first = first_activity(conn)
    first_day = None if first is None else datetime.fromtimestamp(first, now.tzinfo).date()
    shortcuts = range_shortcuts(now.date(), first_day)
    sources = session_facets(conn).get("sources", [])
    if asked is None:
        return CostsReport(None, shortcuts, sources)
    asked = asked.from_first(first_day)
    try:
        found = spending.spend(**asked.options())
        if not cards:
            return CostsReport(asked, shortcuts, sources, found)
        sessions = spending.costly_sessions(
            sort=asked.sort, descending=asked.descending, **asked.options()
        )
    except ValidationError as exc:
        return CostsReport(asked, shortcuts, sources, error=str(exc))
    top = headlines(
        spending.spend,
        now=now,
        timezone=asked.timezone,
        sources=asked.sources,
        profiles=card_profiles,
    )
    return CostsReport(asked, shortcuts, sources, found, sessions, top)
