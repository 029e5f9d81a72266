"""What each screen shows, as one object read in one snapshot (StateReader's ``*_page``
methods): the HTML page, its HTMX partial and the JSON API render the same object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dashboard.costs.rules import CostSummary
from dashboard.errors import ValidationError
from dashboard.lineage.chains import Chain, totals
from dashboard.reader.activity import Activity
from dashboard.search.sessions import SearchRequest, SearchResult
from dashboard.sessions.stitched import StitchedPage
from dashboard.sessions.transcript import MatchEntry, Transcript


@dataclass(frozen=True)
class SearchPage:
    """The search screen: the filters' choices and, for a request that could be read,
    its results (``request`` None: the page shows the form and the error alone;
    ``error``: why the query cannot be searched, e.g. only NOT terms)."""

    facets: dict[str, Any]  # sources and models present (search.facets.session_facets)
    request: SearchRequest | None = None
    result: SearchResult | None = None
    error: str | None = None

    def checked(self) -> SearchResult:
        """The results, or the :class:`ValidationError` the query met (the JSON's 400)."""
        if self.error is not None:
            raise ValidationError(self.error)
        assert self.result is not None, "a request was asked"
        return self.result


@dataclass(frozen=True)
class SessionPage:
    """What the session page shows: one page of the transcript, the query's matches, and
    the chain the session belongs to (its part, its relatives, its cost)."""

    session_id: str  # as asked (the URL's)
    transcript: Transcript
    terms: list[str]  # to mark in the text: the query's positive terms
    match_count: int | None  # messages the query matches on any page; None without a query
    matches: list[MatchEntry]  # the first MATCHES_LISTED of them
    chain: Chain | None = None

    @property
    def chain_part(self) -> tuple[int, int] | None:
        """``(part, of)`` on the chain's line, when the page names it."""
        return None if self.chain is None else self.chain.shown_part(self.session_id)

    @property
    def related(self) -> int:
        """Other sessions of the family: branches, delegations or damaged links still
        make a family worth a look."""
        return 0 if self.chain is None else len(self.chain.segments) - 1

    @property
    def chain_damaged(self) -> bool:
        return self.chain is not None and bool(self.chain.warnings)

    @property
    def cost(self) -> CostSummary | None:
        """The session's spend: the chain table's figure, by the same rules."""
        found = None if self.chain is None else self.chain.segment(self.session_id)
        return None if found is None else found.cost


@dataclass(frozen=True)
class OverviewPage:
    """The overview screen: the last days of activity, then what the archive holds.

    ``info``: :meth:`StateReader.overview`'s figures; ``activity`` None with
    ``activity_problem`` saying why (a bad timezone: the diagnostics still help).
    """

    info: dict[str, Any]
    activity: Activity | None
    activity_problem: str | None = None


@dataclass(frozen=True)
class ChainPage:
    """A session's chain with every segment's epochs, and the family's totals."""

    chain: Chain

    @property
    def family_totals(self) -> dict[str, Any]:
        return totals(list(self.chain.segments))


@dataclass(frozen=True)
class StitchedScreen:
    """One page of a chain's line as one conversation, the terms of ``q`` marked."""

    chain: Chain
    page: StitchedPage
    terms: list[str]
