"""The costs screens' reads of the archive: spend by period, the costliest sessions, what
prices each route, and /costs whole. A part of :class:`reader.StateReader` (its snapshot,
scope, caches and the whole archive's connection), kept here so the reader stays one job
a module."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from dashboard.costs.costly import CostlySessions
from dashboard.costs.prices import PriceBook
from dashboard.costs.request import CostsRequest
from dashboard.costs.rollup import CostRollup
from dashboard.costs.routes import RoutePrice, route_prices
from dashboard.costs.spend import Spend
from dashboard.reader.costs_report import CostsReport, costs_report
from dashboard.reader.spending import SpendReading, spend_reading


class CostsReading:
    """StateReader's costs methods (it provides ``snapshot``, ``scope``, ``_lineage``,
    ``_spend_cache`` and ``_open_whole``)."""

    def costly_sessions(
        self,
        rollup: CostRollup | None = None,
        *,
        sort: str = "cost",
        descending: bool = True,
        **options: Any,
    ) -> CostlySessions:
        """The sessions that cost the most in a spend question's range (options as
        :meth:`spend`), from the rollup's rows once built, else the raw rows; kept while
        the spend fingerprint is unchanged."""
        with self.snapshot() as snap, self._spending(snap, rollup) as spending:
            return spending.costly_sessions(sort=sort, descending=descending, **options)

    def spend(self, rollup: CostRollup | None = None, **options: Any) -> Spend:
        """Spend by period and dimension (options: :func:`costs.plan`), from the
        ``rollup`` once built, else the raw rows; kept while the spend fingerprint holds."""
        with self.snapshot() as snap, self._spending(snap, rollup) as spending:
            return spending.spend(**options)

    def route_prices(self, book: PriceBook) -> list[RoutePrice]:
        """Every route the calls took and what prices it (the prices page), one snapshot."""
        with self.snapshot() as snap:
            return route_prices(snap.conn, book)

    def costs_report(
        self,
        asked: CostsRequest | None,
        *,
        now: datetime,
        rollup: CostRollup | None = None,
        card_profiles: Sequence[str] = (),
        cards: bool = True,
    ) -> CostsReport:
        """Everything /costs shows for ``asked`` as of ``now`` (its CSV and JSON render
        the same report; ``cards=False``: the spend alone), in one snapshot. The rollup's
        sums live in Recall's own file and are brought up to date from this snapshot's
        state (a scoped reader's: from one read of the whole archive) before each answer,
        so a sync landing meanwhile can only make them newer than the snapshot."""
        with self.snapshot() as snap, self._spending(snap, rollup) as spending:
            return costs_report(
                snap.conn, spending, asked, now=now, card_profiles=card_profiles, cards=cards
            )

    @contextmanager
    def _spending(self, snap: Any, rollup: CostRollup | None) -> Iterator[SpendReading]:
        """Spend questions about ``snap`` (see :class:`SpendReading`).

        The rollup sums every profile and must be brought up to date from all of them,
        so a scoped reader, whose own connection sees one profile's rows, asks it through
        a connection to the whole archive and filters the answer to its profiles; a
        reader of every profile asks through its own.
        """
        scoped = not self.scope.everything
        with spend_reading(
            snap.conn,
            rollup,
            self._spend_cache,
            lambda: self._lineage.get(snap.conn, snap.state, snap.version()),
            profiles=tuple(sorted(self.scope.names)) if scoped else None,
            open_whole=self._open_whole if scoped else None,
        ) as spending:
            yield spending
