"""Where Hermes's figures and Recall's part, in words: what the costs page leads with.

Over the calls both priced whole (Hermes's estimate beside Recall's recomputation of the
same rows), a period whose estimate is off by :data:`NOTABLE` or more is named: "Hermes
under-estimated October 2026 by 38%". The calls Hermes could not price and Recall could
are counted with their sum. Both read :class:`~dashboard.costs.spend.Recomputed` sums, so
the page, the terminal report and the JSON say the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from dashboard.costs.spend import Recomputed, Spend

NOTABLE = 0.10  # an estimate this far from Recall's price, either way, is said
MIN_USD = 0.01  # below a cent of calls, a percentage says nothing


@dataclass(frozen=True)
class Verdict:
    """One period where Hermes's estimate and Recall's price part."""

    period: str  # the period's label ("2026-10")
    name: str  # how a person says it ("October 2026")
    ratio: float  # Hermes's estimate ÷ Recall's price, over the same calls
    estimated: float
    recomputed: float

    @property
    def sentence(self) -> str:
        way = "under" if self.ratio < 1 else "over"
        return (
            f"Hermes {way}-estimated {self.name} by {abs(1 - self.ratio) * 100:.0f}%: "
            f"its estimate of calls Recall also priced is ${self.estimated:,.2f}, "
            f"Recall's price of them ${self.recomputed:,.2f}."
        )

    def to_json(self) -> dict[str, object]:
        return {
            "period": self.period,
            "ratio": self.ratio,
            "estimated_usd": self.estimated,
            "recomputed_usd": self.recomputed,
            "sentence": self.sentence,
        }


def by_period(spend: Spend) -> dict[str, Recomputed]:
    """Each period's recomputation, every key together."""
    cells: dict[str, list[Recomputed]] = {}
    for cell in spend.rows:
        cells.setdefault(cell.period, []).append(cell.recomputed)
    return {label: Recomputed.combine(parts) for label, parts in cells.items()}


def verdicts(spend: Spend) -> list[Verdict]:
    """The periods (newest first) whose estimate is :data:`NOTABLE` off Recall's price."""
    out = []
    starts = {label: first for label, first, _ in spend.period_ranges()}
    for label, again in by_period(spend).items():
        pair, ratio = again.estimated_pair, again.estimate_ratio
        if pair is None or ratio is None or pair[1] < MIN_USD:
            continue
        if abs(1 - ratio) >= NOTABLE:
            out.append(Verdict(label, _name(spend.period, starts[label]), ratio, *pair))
    return sorted(out, key=lambda v: v.period, reverse=True)


def recovered_sentence(again: Recomputed) -> str | None:
    """The calls Hermes priced unknown that Recall priced, in words (None: none)."""
    if not again.recovered_calls or again.recovered_usd is None:
        return None
    n = again.recovered_calls
    return (
        f"{n:,} call{'s' if n != 1 else ''} Hermes priced as unknown cost "
        f"${again.recovered_usd:,.2f} at list prices."
    )


def _name(period: str, first: date) -> str:
    if period == "month":
        return first.strftime("%B %Y")
    if period == "week":
        return f"the week of {first.isoformat()}"
    return first.isoformat()
