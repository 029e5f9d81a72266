"""The costs tables, cell by cell: one place decides what the page and the CSV show.

The page renders :attr:`Shown.text`; ``/costs.csv`` writes the same rows with each
figure at full precision in a numeric column and the status in columns of its own
(:meth:`CostTable.csv_text`). Unknown money is the word ``unknown`` on the page and an
empty cell in the CSV, never ``0``.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from dashboard.costs.rules import (
    STATUS_LABELS,
    STATUSES,
    CostSummary,
    overall_status,
)
from dashboard.costs.rules import (
    money as round_money,
)
from dashboard.costs.spend import DRIFT_FLAG, Cell, Spend
from dashboard.hermes.conventions import TOKEN_KINDS
from dashboard.web.format import usd

DIMENSION_LABELS = {
    "provider": "Provider",
    "model": "Model",
    "source": "Source",
    "task": "Task",
    "profile": "Profile",
}
TOKEN_LABELS = {
    "input": "Input",
    "output": "Output",
    "cache_read": "Cache read",
    "cache_write": "Cache write",
    "reasoning": "Reasoning",
}
CHART_KEYS = 8  # the chart draws this many keys and folds the rest into "other"


@dataclass(frozen=True)
class Column:
    label: str  # the table heading
    numeric: bool = True


@dataclass(frozen=True)
class Shown:
    """One table cell: what the page shows and how it is styled."""

    text: str
    classes: str = ""
    title: str = ""


@dataclass(frozen=True)
class Row:
    cell: Cell
    spend: list[Shown]
    tokens: list[Shown]


@dataclass(frozen=True)
class CostTable:
    spend_columns: list[Column]
    token_columns: list[Column]
    rows: list[Row]
    total: Row
    price_table: str = ""  # the price book's version: every recomputed figure's source

    def csv_text(self, by: str) -> str:
        """The CSV: the rows of the tables, each figure in a column of its own.

        Numeric columns hold only numbers, at full precision (empty when unknown); the
        status of a row is its own columns (``coverage``, calls per status). Text cells
        a spreadsheet would run as a formula are neutralised (:func:`csv_text_cell`).
        """
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow(
            [
                "period",
                by,
                "estimated_usd",
                "recomputed_usd",
                "actual_usd",
                "effective_usd",
                "drift",
                "estimate_ratio",
                "billed_ratio",
                "billed_share",
                "coverage",
                *(f"calls_{s}" for s in STATUSES),
                "sessions",
                "api_calls",
                *(f"{k}_tokens" for k in TOKEN_KINDS),
                "recovered_usd",
                "recovered_calls",
                "unpriced_calls",
                "unsized_calls",
                "recomputed_by_prices_yaml_usd",
                "price_table",
            ]
        )
        for row in [*self.rows, self.total]:
            c = row.cell
            again = c.recomputed
            writer.writerow(
                [
                    csv_text_cell(row.spend[0].text),
                    csv_text_cell(row.spend[1].text),
                    *(
                        _number(v)
                        for v in (
                            c.estimated_usd,
                            again.usd,
                            c.actual_usd,
                            c.effective_usd,
                            c.drift,
                            again.estimate_ratio,
                            again.billed_ratio,
                            c.actual_share,
                        )
                    ),
                    STATUS_LABELS[overall_status(c.status_mix)],
                    *(c.status_mix.get(s, 0) for s in STATUSES),
                    c.sessions,
                    c.api_calls,
                    *(c.tokens.get(k, 0) for k in TOKEN_KINDS),
                    _number(again.recovered_usd),
                    again.recovered_calls,
                    again.unpriced_calls,
                    again.unsized_calls,
                    _number(again.own_usd),
                    self.price_table,
                ]
            )
        return out.getvalue()


def csv_text_cell(text: str) -> str:
    """A text cell a spreadsheet will not run: a leading ``= + - @``, tab or CR gets a
    single quote before it (OWASP, "CSV Injection")."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _number(value: float | None) -> str:
    """A figure at full precision (the shortest text that reads back the same float)."""
    return "" if value is None else repr(float(value))


def cost_table(spend: Spend) -> CostTable:
    """The two tables under the charts for ``spend`` (same rows, then a total row)."""
    key = DIMENSION_LABELS[spend.by]
    spend_columns = [
        Column("Period", numeric=False),
        Column(key, numeric=False),
        Column("Estimated"),
        Column("Recomputed"),
        Column("Billed"),
        Column("Effective"),
        Column("Drift"),
        Column("Estimate vs recomputed"),
        Column("Bill vs recomputed"),
        Column("Billed share"),
        Column("Calls by status", numeric=False),
        Column("Sessions"),
        Column("API calls"),
    ]
    token_columns = [
        Column("Period", numeric=False),
        Column(key, numeric=False),
        *(Column(TOKEN_LABELS[k]) for k in TOKEN_KINDS),
    ]
    rows = [_row(c, c.period, c.key) for c in spend.rows]
    total = _row(spend.totals, "Total", "all")
    return CostTable(spend_columns, token_columns, rows, total, spend.price_table)


def _row(cell: Cell, period: str, key: str) -> Row:
    included = _included_only(cell)
    labels = [Shown(period, "label"), Shown(key, "label")]
    again = cell.recomputed
    spend = [
        *labels,
        money(cell.estimated_usd, included),
        recomputed(cell, included),
        money(cell.actual_usd, included),
        money(cell.effective_usd, included),
        drift(cell),
        versus(again.estimate_ratio, "Hermes's estimate"),
        versus(again.billed_ratio, "the bill"),
        share(cell.actual_share),
        status_mix(cell.status_mix),
        count(cell.sessions),
        count(cell.api_calls),
    ]
    tokens = [*labels, *(count(cell.tokens.get(k, 0)) for k in TOKEN_KINDS)]
    return Row(cell, spend, tokens)


def _included_only(cell: Cell) -> bool:
    mix = cell.status_mix
    return mix.get("included", 0) > 0 and all(
        mix.get(s, 0) == 0 for s in STATUSES if s != "included"
    )


def recomputed(cell: Cell, included: bool = False) -> Shown:
    """Recall's own price of a cell's calls, and what it could not price or size."""
    again = cell.recomputed
    caveats = []
    if again.unpriced_calls:
        n = again.unpriced_calls
        caveats.append(f"{n:,} call{'s' if n != 1 else ''} of a model no price list has")
    if again.unsized_calls:
        n = again.unsized_calls
        caveats.append(
            f"long-context tier not applied to {n:,} call{'s' if n != 1 else ''} "
            "(no call size logged)"
        )
    if again.own_usd is not None:
        caveats.append(f"{usd(again.own_usd)} of it priced by your prices.yaml")
    if again.recovered_calls:
        n = again.recovered_calls
        caveats.append(f"{usd(again.recovered_usd)} of it for {n:,} calls Hermes priced unknown")
    if again.usd is None:
        if included and not again.unpriced_calls:
            return Shown("included", "muted", "Covered by a subscription or plan")
        return Shown("unknown", "muted", "; ".join(caveats) or "No price is known for these calls")
    text = usd(again.usd) + ("*" if again.unpriced_calls or again.unsized_calls else "")
    return Shown(text, "recomputed", "; ".join(caveats))


def versus(ratio: float | None, what: str) -> Shown:
    """How far one of Hermes's figures is from Recall's over the same calls: "−38%" when
    it is 38% below. Flagged beyond DRIFT_FLAG either way, as drift is."""
    if ratio is None:
        return Shown("—", "muted")
    percent = (ratio - 1) * 100
    text = "0%" if round(percent) == 0 else f"{'+' if percent > 0 else '−'}{abs(percent):.0f}%"
    flagged = ratio > DRIFT_FLAG or ratio < 1 / DRIFT_FLAG
    title = f"{what} is {ratio:.2f}× Recall's price of the same calls"
    return Shown(text, "drift-flagged" if flagged else "", title)


def money(amount: float | None, included: bool = False) -> Shown:
    """Dollars as the ``usd`` filter shows them; ``unknown`` (muted) when no price is known."""
    if included and not amount:
        return Shown("included", "muted", "Covered by a subscription or plan")
    if amount is None:
        return Shown("unknown", "muted", "No price is known for these calls")
    text = usd(amount)
    return Shown(text)


def cost_html(
    amount: float | CostSummary | None, unknown_calls: int = 0, included: bool = False
) -> Markup:
    """Money on every page (the ``cost`` filter): unknown is the word, never $0.

    ``unknown_calls`` names the calls whose price is unknown beside the known amount
    ("$2.10 + 3 calls of unknown price"). A :class:`CostSummary` (a session, a
    segment) shows its effective spend and how it is known ("$0.1050 partly billed").
    """
    if isinstance(amount, CostSummary):
        html = cost_html(amount.effective)
        if amount.effective is not None:
            label = STATUS_LABELS[amount.status]
            if amount.status == "partial":  # never the partial bill as the whole's
                label += f" · {usd(amount.billed)} billed"
            html += Markup(' <span class="muted cost-status">{}</span>').format(label)
        if amount.recomputed is not None:  # Recall's own price of the same calls
            html += Markup(
                ' <span class="muted cost-recomputed" title="Recall\'s price of these calls '
                'from the price table and prices.yaml">· recomputed {}</span>'
            ).format(usd(amount.recomputed))
        return html
    shown = money(amount, included)
    html = escape(shown.text)
    if shown.classes:
        html = Markup('<span class="{}" title="{}">{}</span>').format(
            shown.classes, shown.title, shown.text
        )
    if unknown_calls and amount is not None:
        calls = "call" if unknown_calls == 1 else "calls"
        html += Markup(
            ' <span class="muted unknown-calls">+ {:,} {} of unknown price</span>'
        ).format(unknown_calls, calls)
    return Markup(html)


def drift(cell: Cell) -> Shown:
    """Billed ÷ estimated over the calls that carry both; flagged beyond ``DRIFT_FLAG``."""
    if cell.drift is None:
        return Shown("—", "muted", "Needs calls with both an estimate and a billed figure")
    figure = f"{cell.drift:.2f}"
    if cell.drift_flagged:
        return Shown(
            f"{figure}×",
            "drift-flagged",
            f"The bill differs from the local estimate by more than {DRIFT_FLAG:g}×",
        )
    return Shown(f"{figure}×")


def share(fraction: float | None) -> Shown:
    if fraction is None:
        return Shown("—", "muted")
    figure = f"{fraction * 100:.0f}"
    return Shown(f"{figure}%")


def status_mix(mix: dict[str, int]) -> Shown:
    """Calls per status: ``10 partly billed, 2 estimated``."""
    text = ", ".join(f"{mix[s]:,} {STATUS_LABELS[s]}" for s in STATUSES if mix.get(s))
    return Shown(text or "—", "status")


def count(n: int) -> Shown:
    return Shown(f"{n:,}")


def chart_data(spend: Spend) -> dict[str, Any]:
    """What ``static/costs.js`` draws: per-key spend series and per-kind token series.

    One column per period, as high as its effective spend, stacked by key; each key's
    slice is split into its billed part (solid) and its estimated part (striped), so
    the chart never sets a bill beside an estimate of other calls. Unknown stays
    ``null`` (a gap, not a zero bar). Keys beyond the ``CHART_KEYS`` largest are
    summed into ``other``; the tables list every key. ``totals`` per period feed the
    tooltips.
    """
    ranking: dict[str, float] = {}
    for c in spend.rows:
        ranking[c.key] = ranking.get(c.key, 0.0) + (c.effective_usd or 0.0)
    ranked = sorted(ranking, key=lambda k: (-ranking[k], k))
    keys = ranked[:CHART_KEYS]
    if len(ranked) > CHART_KEYS:
        keys.append("other")
    index = {p: i for i, p in enumerate(spend.periods)}
    empty = [None] * len(spend.periods)
    series: dict[str, dict[str, list[float | None]]] = {
        part: {k: list(empty) for k in keys} for part in ("billed", "estimated")
    }
    totals: dict[str, list[Any]] = {
        "effective": list(empty),
        "billed": list(empty),
        "unknown_calls": [0] * len(empty),
    }
    tokens = {k: [0] * len(spend.periods) for k in TOKEN_KINDS}
    for c in spend.rows:
        i = index[c.period]
        key = c.key if c.key in keys else "other"
        if c.effective_usd is not None:
            billed = c.actual_usd or 0.0
            for part, value in (("billed", billed), ("estimated", c.effective_usd - billed)):
                series[part][key][i] = round_money((series[part][key][i] or 0.0) + value)
            for name, value in (("effective", c.effective_usd), ("billed", billed)):
                totals[name][i] = round_money((totals[name][i] or 0.0) + value)
        totals["unknown_calls"][i] += c.status_mix.get("unknown", 0)
        for k in TOKEN_KINDS:
            tokens[k][i] += c.tokens.get(k, 0)
    # Tooltip money as the page shows it: the rule is usd(), never a copy in JavaScript.
    texts = {
        "spend": {
            part: {k: [_text(v) for v in values] for k, values in by_key.items()}
            for part, by_key in series.items()
        },
        "totals": {name: [_text(v) for v in totals[name]] for name in ("effective", "billed")},
    }
    return {
        "by": spend.by,
        "period": spend.period,
        "periods": spend.periods,
        "keys": keys,
        "spend": series,
        "totals": totals,
        "texts": texts,
        "tokens": tokens,
        "token_labels": [TOKEN_LABELS[k] for k in TOKEN_KINDS],
        "token_kinds": list(TOKEN_KINDS),
    }


def _text(amount: float | None) -> str | None:
    return None if amount is None else usd(amount)
