"""The display filters: one money rule for every page (issue 14, item 12)."""

from __future__ import annotations

import pytest

from dashboard.web.format import usd


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        (None, "unknown"),
        (0, "$0.00"),
        (0.0, "$0.00"),
        (5.8249, "$5.82"),
        (1234.5, "$1,234.50"),
        (0.2693, "$0.27"),  # cents beside $5.82, not $0.2693
        (0.05, "$0.05"),
        (0.985, "$0.98"),
        (0.0049, "$0.0049"),
        (0.00999, "$0.01"),  # rounds up to a cent: shown in cents
        (0.0012, "$0.0012"),
        (0.000004, "$0.0000040"),  # never "$0.0000" for a non-zero amount
        (-0.25, "-$0.25"),
    ],
)
def test_one_money_rule(amount: float | None, shown: str) -> None:
    assert usd(amount) == shown


def test_a_non_zero_amount_never_reads_as_zero() -> None:
    for exponent in range(1, 12):
        text = usd(3 * 10**-exponent)
        assert text.strip("$0.") != "", text
