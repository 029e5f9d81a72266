"""Where Hermes's figures and Recall's part, in words (costs/reconcile.py)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from dashboard.costs import book as price_book
from dashboard.costs.reconcile import NOTABLE, by_period, recovered_sentence, verdicts
from dashboard.costs.spend import Cell, Recomputed, Spend
from tests.support.cost_homes import long_context_home, months_by_model


@pytest.fixture(autouse=True)
def table_only() -> None:
    price_book.configure(None)


def november(db: Path) -> Spend:
    return months_by_model(db, date(2026, 10, 1), date(2026, 12, 1))


def test_a_month_hermes_under_estimated_is_named_with_both_figures(tmp_path: Path) -> None:
    found = november(long_context_home(tmp_path / "home"))
    (said,) = verdicts(found)
    again = by_period(found)["2026-11"]
    estimated, recomputed = again.estimated_pair
    assert said.period == "2026-11" and said.ratio == pytest.approx(estimated / recomputed)
    percent = round((1 - estimated / recomputed) * 100)
    assert said.sentence.startswith(f"Hermes under-estimated November 2026 by {percent}%: ")
    assert f"${estimated:,.2f}" in said.sentence and f"${recomputed:,.2f}" in said.sentence


def test_an_estimate_close_to_recall_s_price_says_nothing(tmp_path: Path) -> None:
    """Without the log, Recall prices at the base rate too: the same figure."""
    found = november(long_context_home(tmp_path / "home", logged=False))
    assert verdicts(found) == []


def cell(period: str, estimated: float, recomputed: float) -> Cell:
    return Cell(period, "m", recomputed=Recomputed(recomputed, (estimated, recomputed)))


def test_the_threshold_and_the_newest_first() -> None:
    spend_ = Spend(
        "month",
        "model",
        date(2026, 8, 1),
        date(2026, 11, 1),
        "UTC",
        ["2026-08", "2026-09", "2026-10"],
        [
            cell("2026-08", 1.2, 1.0),
            cell("2026-09", 1.0 - NOTABLE / 2, 1.0),
            cell("2026-10", 0.5, 1.0),
        ],
        Cell("total", "all"),
    )
    said = verdicts(spend_)
    assert [v.period for v in said] == ["2026-10", "2026-08"]
    assert said[1].sentence.startswith("Hermes over-estimated August 2026 by 20%")


def test_calls_hermes_could_not_price_are_said_with_their_sum(tmp_path: Path) -> None:
    found = november(long_context_home(tmp_path / "home", hermes_unknown=True))
    again = found.totals.recomputed
    assert recovered_sentence(again) == (
        f"3 calls Hermes priced as unknown cost ${again.recovered_usd:,.2f} at list prices."
    )
    assert recovered_sentence(Recomputed()) is None
