"""The cost rules, once: what a usage row spent, how much of it is billed, how it adds up.

Every path that shows money calls these functions: the raw sums and the per-day
rollup of /costs, the headline cards, chain totals and the chain index, the session
page, the CSV and the JSON. The rules (README, "Costs"):

* **Status.** Hermes's ``cost_status`` is ``actual``, ``estimated``, ``included`` or
  ``unknown``. A NULL (or unrecognised) status is read from the figures: a positive
  estimate makes the row *estimated* (Hermes writes auxiliary calls — compression,
  title generation — with a real estimate and a NULL status), a positive bill makes it
  *actual*, and nothing makes it *unknown*.
* **Partly billed.** A usage row accumulates many calls and keeps the last call's
  status, so an ``estimated`` row that carries a positive ``actual_cost_usd`` is
  *partial*: the bill covers some of its calls and the estimate the others (Hermes
  adds no estimate for a call the provider billed). It spent bill + estimate, and its
  bill is never shown as the whole row's bill.
* **Zeros.** Hermes's usage columns are ``NOT NULL DEFAULT 0``: a 0 estimate on a
  billed or included row means "no estimate was made", not "free".
* **Effective spend** is the bill where known, else the estimate (bill + estimate for
  a partial row); a row with neither is *unknown* and adds nothing to a sum. Unknown
  is never $0: a total of nothing known is ``None``.
* **Drift** pairs only ``actual`` usage rows that carry both figures (for the same
  calls). A ``sessions`` row (or a usage row derived from one) sums all the session's
  calls: a bill beside an estimate there is partial.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: Statuses as Recall reads them, in display order.
STATUSES = ("actual", "partial", "estimated", "included", "unknown")
STATUS_LABELS = {
    "actual": "billed",
    "partial": "partly billed",
    "estimated": "estimated",
    "included": "included",
    "unknown": "unknown price",
}
MONEY_DIGITS = 10  # dollars are summed then rounded here (see money)
_HERMES_STATUSES = frozenset(("actual", "estimated", "included", "unknown"))


@dataclass(frozen=True)
class RowCost:
    """One usage row (or one session row), read by the rules."""

    status: str  # one of STATUSES
    estimated: float | None  # the local estimate; None: none was made
    billed: float | None  # the provider's bill; None: none was reported
    recomputed: float | None = None  # Recall's own price of the calls (costs.reprice)

    @property
    def effective(self) -> float | None:
        """What the row spent: bill where known, else estimate; a partial row both."""
        if self.status == "partial":
            return (self.billed or 0.0) + (self.estimated or 0.0)
        return self.billed if self.billed is not None else self.estimated

    @property
    def paired(self) -> bool:
        """True when the bill and the estimate are of the same calls (drift can use them)."""
        return self.status == "actual" and self.billed is not None and self.estimated is not None


UNKNOWN = RowCost("unknown", None, None)


def read_cost(status: object, estimated: object, actual: object, *, usage: bool = True) -> RowCost:
    """A row's ``cost_status``, ``estimated_cost_usd`` and ``actual_cost_usd`` by the rules.

    ``usage=False`` reads a ``sessions`` row: it sums every call of the session (a
    billed main loop beside an estimated title call), so a bill beside an estimate is
    partial there, never a pair.
    """
    est, act = _number(estimated), _number(actual)
    if status not in _HERMES_STATUSES:  # NULL: read the figures (auxiliary rows, item 1)
        status = "estimated" if est else "actual" if act else "unknown"
    if status == "unknown":
        return UNKNOWN
    if status == "estimated":
        billed = act if act else None  # a positive bill on an estimated row: partly billed
        if billed is not None:
            return RowCost("partial", est if est else None, billed)
        return RowCost("estimated", est, None) if est is not None else UNKNOWN
    # actual / included: a 0 estimate is "none made"
    est = est if est else None
    if act is None:
        return RowCost("estimated", est, None) if est is not None else UNKNOWN
    if not usage and est is not None and status == "actual":
        return RowCost("partial", est, act)
    return RowCost(str(status), est, act)


@dataclass(frozen=True)
class CostSummary:
    """Several rows together (a session, a chain): sums and how much of it is billed."""

    estimated: float | None
    billed: float | None
    effective: float | None
    counts: dict[str, int]  # rows (or segments) per status
    recomputed: float | None = None  # Recall's own price of the calls, where known

    @property
    def billed_share(self) -> float | None:
        """Share of effective spend backed by billed figures; None when nothing is known."""
        return billed_share(self.billed, self.effective)

    @property
    def status(self) -> str:
        """One word for the whole (see :func:`overall_status`)."""
        return overall_status(self.counts)

    @property
    def unknown(self) -> int:
        return self.counts.get("unknown", 0)


def overall_status(counts: dict[str, int]) -> str:
    """One status for many rows (or calls) counted per status: ``actual`` when all are
    billed, ``partial`` when some are, ``estimated`` or ``included`` when all are, else
    ``unknown`` (nothing priced)."""
    known = {s for s, n in counts.items() if n and s != "unknown"}
    if not known:
        return "unknown"
    if known <= {"actual", "included"}:
        return "actual" if "actual" in known else "included"
    if known & {"actual", "partial", "included"}:
        return "partial"
    return "estimated"


def combine(costs: Iterable[RowCost | CostSummary]) -> CostSummary:
    """Sum rows (or summaries, each counted as one by its own status) by the rules."""
    est: list[float] = []
    billed: list[float] = []
    eff: list[float] = []
    again: list[float] = []
    counts = dict.fromkeys(STATUSES, 0)
    for cost in costs:
        parts = (cost.estimated, cost.billed, cost.effective, cost.recomputed)
        for into, value in zip((est, billed, eff, again), parts, strict=True):
            if value is not None:
                into.append(value)
        counts[cost.status] += 1
    return CostSummary(total(est), total(billed), total(eff), counts, total(again))


NO_COST = CostSummary(None, None, None, dict.fromkeys(STATUSES, 0))


def coverage(counts: dict[str, int], noun: str = "segments") -> str:
    """How much of a whole is billed, in words: "billed for 2 of 10 segments, partly for 7,
    no price for 1" (``counts``: parts per status, as :func:`combine` counts them)."""
    whole = sum(counts.values())
    words = [f"billed for {counts.get('actual', 0)} of {whole} {noun}"]
    for status, phrase in (
        ("partial", "partly for"),
        ("included", "included in a plan for"),
        ("unknown", "no price for"),
    ):
        if counts.get(status):
            words.append(f"{phrase} {counts[status]}")
    return ", ".join(words)


def known_spend(effective: float | None) -> float:
    """What a period is known to have spent: $0 when it had no priced call.

    The calls of unknown price are told apart by their count beside it ("$2.10 + 3
    calls of unknown price"), never folded into the figure.
    """
    return effective if effective is not None else 0.0


def total(values: Iterable[float | None]) -> float | None:
    """Sum of the known values, rounded as :func:`money`; None when none is known."""
    known = [v for v in values if v is not None]
    return money(sum(known)) if known else None


def billed_share(billed: float | None, effective: float | None) -> float | None:
    """Billed ÷ effective spend; None when no spend is known."""
    return (billed or 0.0) / effective if effective else None


def money(value: float | None) -> float | None:
    """A sum of dollars rounded to 1e-10: the raw sums and the rollup add the same
    figures in different orders, and float dust must not make them disagree."""
    return None if value is None else round(value, MONEY_DIGITS)


def _number(value: object) -> float | None:
    if type(value) is float:
        return value  # type: ignore[return-value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
