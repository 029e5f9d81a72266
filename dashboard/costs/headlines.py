"""This month's headline figures: spend so far, last month at the same point, projection.

Built only from :func:`dashboard.costs.spend.spend` results, through whatever
callable returns them (``StateReader.spend`` in the app, a lambda over a connection in
tests), so this module holds no SQL and opens nothing itself.
"""

from __future__ import annotations

from calendar import monthrange
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from dashboard.costs.rules import known_spend, total
from dashboard.costs.spend import Cell, Spend

SpendFunction = Callable[..., Spend]


@dataclass(frozen=True)
class Leader:
    """The key with the most effective spend, and that spend."""

    key: str
    effective_usd: float


@dataclass(frozen=True)
class ProfileSpend:
    """One profile's month so far, beside the total of every profile (issue 17)."""

    name: str
    spend_so_far: float  # known spend, as the total's card
    unknown_calls: int  # its calls this month whose price is unknown


@dataclass(frozen=True)
class Headlines:
    """What the cards above the costs charts show.

    Spend figures are what is known to have been spent ($0 for a month without a
    priced call); the calls of unknown price are counted beside them, never as $0.
    """

    month: str  # "2026-11"
    day: int  # day of month of ``now`` (the "same point" of last month)
    elapsed_fraction: float  # of this month, by the clock
    spend_so_far: float
    unknown_calls: int  # calls this month whose price is unknown
    last_month_same_point: float
    last_month_unknown_calls: int
    projection: float | None  # spend so far ÷ elapsed fraction
    top_provider: Leader | None
    top_model: Leader | None
    actual_share: float | None  # share of this month's spend backed by billed figures
    by_profile: tuple[ProfileSpend, ...] = ()  # each profile's, when every one is shown
    recomputed_so_far: float | None = None  # Recall's price of this month's calls so far

    def to_json(self) -> dict[str, Any]:
        def leader(found: Leader | None) -> dict[str, Any] | None:
            return (
                None if found is None else {"key": found.key, "effective_usd": found.effective_usd}
            )

        return {
            "month": self.month,
            "day": self.day,
            "elapsed_fraction": self.elapsed_fraction,
            "spend_so_far": self.spend_so_far,
            "unknown_calls": self.unknown_calls,
            "last_month_same_point": self.last_month_same_point,
            "last_month_unknown_calls": self.last_month_unknown_calls,
            "projection": self.projection,
            "top_provider": leader(self.top_provider),
            "top_model": leader(self.top_model),
            "actual_share": self.actual_share,
            "recomputed_so_far": self.recomputed_so_far,
            "by_profile": [
                {
                    "profile": p.name,
                    "spend_so_far": p.spend_so_far,
                    "unknown_calls": p.unknown_calls,
                }
                for p in self.by_profile
            ],
        }


def headlines(
    spend: SpendFunction,
    *,
    now: datetime,
    timezone: str | None = None,
    sources: tuple[str, ...] = (),
    profiles: Sequence[str] = (),
) -> Headlines:
    """This month's figures as of ``now`` (an aware datetime in the user's timezone).

    ``spend`` is called like :func:`costs.spend` without the connection. ``profiles``:
    the profiles ``spend`` sums together (every one shown), each given its own month so
    far, in that order; a profile without calls is $0 like an empty month.
    Days are whole: "so far" runs to the end of today, and last month is cut at the end
    of the same day of the month (or its last day, when it is shorter).
    """
    today = now.date()
    first = today.replace(day=1)
    following = _next_month(first)
    tomorrow = today + timedelta(days=1)
    options: dict[str, Any] = {"period": "month", "timezone": timezone, "sources": sources}
    by_provider = spend(by="provider", start=first, end=tomorrow, **options)
    by_model = spend(by="model", start=first, end=tomorrow, **options)

    last_first = (first - timedelta(days=1)).replace(day=1)
    last_day = min(today.day, monthrange(last_first.year, last_first.month)[1])
    last = spend(
        by="provider",
        start=last_first,
        end=last_first.replace(day=last_day) + timedelta(days=1),
        **options,
    )

    month_start = datetime(first.year, first.month, first.day, tzinfo=now.tzinfo)
    month_end = datetime(following.year, following.month, following.day, tzinfo=now.tzinfo)
    elapsed = (now - month_start).total_seconds() / (month_end - month_start).total_seconds()
    elapsed = min(max(elapsed, 0.0), 1.0)
    so_far = known_spend(by_provider.totals.effective_usd)
    projection = so_far / elapsed if elapsed > 0 else None
    return Headlines(
        month=first.strftime("%Y-%m"),
        day=today.day,
        elapsed_fraction=elapsed,
        spend_so_far=so_far,
        unknown_calls=by_provider.totals.status_mix["unknown"],
        last_month_same_point=known_spend(last.totals.effective_usd),
        last_month_unknown_calls=last.totals.status_mix["unknown"],
        projection=projection,
        top_provider=_leader(by_provider.rows),
        top_model=_leader(by_model.rows),
        actual_share=by_provider.totals.actual_share,
        by_profile=_by_profile(spend, profiles, first, tomorrow, options),
        recomputed_so_far=_recomputed_so_far(by_provider),
    )


def _recomputed_so_far(found: Spend) -> float | None:
    """Recall's price of the month's calls: $0 for a month without a call (as the spend
    card), unknown only when some call was made and none could be priced."""
    again = found.totals.recomputed
    if again.usd is None and not again.unpriced_calls:
        return 0.0
    return again.usd


def _by_profile(
    spend: SpendFunction,
    profiles: Sequence[str],
    start: date,
    end: date,
    options: dict[str, Any],
) -> tuple[ProfileSpend, ...]:
    """Each profile's spend so far: one by-profile question, its cells summed per key."""
    if not profiles:
        return ()
    found = spend(by="profile", start=start, end=end, **options)
    cells: dict[str, list[Cell]] = {}
    for cell in found.rows:
        cells.setdefault(cell.key, []).append(cell)
    return tuple(
        ProfileSpend(
            name,
            known_spend(total([c.effective_usd for c in cells.get(name, [])])),
            sum(c.status_mix["unknown"] for c in cells.get(name, [])),
        )
        for name in profiles
    )


def _next_month(first: date) -> date:
    return (first.replace(day=28) + timedelta(days=4)).replace(day=1)


def _leader(rows: list[Cell]) -> Leader | None:
    known = [c for c in rows if c.effective_usd]
    if not known:
        return None
    best = min(known, key=lambda c: (-(c.effective_usd or 0.0), c.key))
    return Leader(best.key, best.effective_usd or 0.0)
