"""Every route the archive's calls took, and what priced it: the prices page's lists.

A route is a usage row's model, provider and base URL as Hermes wrote them. Each is
looked up in the price book as its newest row would be (:mod:`costs.prices`): priced
by the table (which entry), by prices.yaml, free, or not at all and why. Rows a plan
covered (``included``) are left out: nothing to price.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from dashboard.costs.prices import NoPrice, PriceBook, Route

_ROUTES_SQL = (
    "SELECT coalesce(model, ''), coalesce(billing_provider, ''), "
    "coalesce(billing_base_url, ''), count(*), sum(max(coalesce(api_call_count, 1), 1)), "
    "max(coalesce(last_seen, first_seen)) FROM session_model_usage "
    "WHERE coalesce(cost_status, '') <> 'included' GROUP BY 1, 2, 3"
)


@dataclass(frozen=True)
class RoutePrice:
    """One route, how much it was used, and what prices it."""

    route: Route
    rows: int
    calls: int
    last_seen: float | None
    priced: bool  # False: no price (free routes are priced: $0)
    by: str  # "genai-prices 0.2.3", "prices.yaml", "free", or "" when not priced
    matched: str  # the entry that priced it, or why nothing did

    def to_json(self) -> dict[str, object]:
        return {
            "model": self.route.model,
            "provider": self.route.provider,
            "base_url": self.route.base_url,
            "rows": self.rows,
            "calls": self.calls,
            "last_seen": self.last_seen,
            "priced": self.priced,
            "by": self.by,
            "matched": self.matched,
        }


def route_prices(conn: sqlite3.Connection, book: PriceBook) -> list[RoutePrice]:
    """Every route ``conn`` sees, the most used first, looked up at its newest call."""
    out = []
    for model, provider, url, rows, calls, last in conn.execute(_ROUTES_SQL):
        route = Route(str(model), str(provider), str(url))
        rates = book.rates(route, last if isinstance(last, int | float) else 0.0)
        if isinstance(rates, NoPrice):
            free = rates.kind == "free"
            by = "free" if free else ""
            out.append(RoutePrice(route, rows, calls or 0, last, free, by, rates.reason))
        else:
            out.append(RoutePrice(route, rows, calls or 0, last, True, rates.source, rates.matched))
    return sorted(out, key=lambda r: (-r.calls, r.route.model, r.route.provider))
