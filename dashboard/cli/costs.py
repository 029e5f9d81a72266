"""``recall costs``: the costs page in the terminal, in the style of ccusage.

The same report as ``/costs`` (reader.costs_report over the archive, the same request
parser and defaults), the same cells as its table (web/costs_table: Hermes's estimate,
Recall's recomputation, the bill, how far they part), then where they part in words
(costs/reconcile) and the price table every recomputed figure came from.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime

from dashboard.cli.homes import homes_of, reader_for

SHORT = {"Estimate vs recomputed": "Est. vs recomp.", "Recomputed": "Recomputed"}
PERIOD_FLAGS = {"daily": "day", "weekly": "week", "monthly": "month"}


def add_costs_parser(commands: argparse._SubParsersAction, add_source) -> None:  # type: ignore[type-arg]
    """``recall costs`` and its options."""
    costs = commands.add_parser(
        "costs", help="spend per month (week, day): Hermes's estimate, Recall's, the bill"
    )
    when = costs.add_mutually_exclusive_group()
    for flag, period in PERIOD_FLAGS.items():
        when.add_argument(
            f"--{flag}", dest="period", action="store_const", const=period, help=f"by {period}"
        )
    costs.add_argument(
        "--by",
        default="model",
        help="model (default), provider, source, task, or profile (several profiles)",
    )
    costs.add_argument("--from", dest="start", help="first day, YYYY-MM-DD (default: as the page)")
    costs.add_argument("--to", dest="end", help="the first day not included, YYYY-MM-DD")
    costs.add_argument("--source", action="append", default=[], help="cli, telegram, cron, …")
    costs.add_argument("--json", action="store_true", help="the /api/costs JSON")
    add_source(costs)
    costs.set_defaults(run=run_costs, period="month")


class _Params:
    """The options as the costs request parser reads a query string."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._one = {"period": args.period, "by": args.by, "from": args.start, "to": args.end}
        self._many = {"source": args.source}

    def get(self, key: str, default: object = None) -> object:
        return self._one.get(key) or default

    def getlist(self, key: str) -> list[str]:
        return list(self._many.get(key, []))


def run_costs(args: argparse.Namespace) -> int:
    from dashboard.costs import book
    from dashboard.costs.reconcile import recovered_sentence, verdicts
    from dashboard.costs.request import CostsRequest
    from dashboard.costs.spend import DIMENSIONS
    from dashboard.store.datadir import recall_data_dir

    homes = homes_of(args)
    folder, _ = recall_data_dir(homes[0])
    book.configure(folder)  # its prices.yaml, as `recall serve` reads it
    reader = reader_for(args)
    dimensions = [d for d in DIMENSIONS if d != "profile" or reader.spans_profiles]
    now = datetime.now().astimezone()
    timezone = os.environ.get("RECALL_TIMEZONE") or None
    asked = CostsRequest.from_params(
        _Params(args), today=now.date(), timezone=timezone, dimensions=dimensions
    )
    report = reader.costs_report(asked, now=now, cards=False).checked()
    found = report.spend
    assert found is not None and report.request is not None
    said = verdicts(found)
    if args.json:
        body = {**found.to_json(), "verdicts": [v.to_json() for v in said]}
        print(json.dumps(body, ensure_ascii=False, indent=2))
        return 0
    _print_table(found, report.request.by)
    for line in [*(v.sentence for v in said[:3]), recovered_sentence(found.totals.recomputed)]:
        if line:
            print(line)
    print(f"Recomputed from {found.price_table}; * some calls unpriced or their tier unchecked.")
    if found.price_problem:
        print(f"recall: prices.yaml: {found.price_problem}", file=sys.stderr)
    return 0


def _print_table(found, by: str) -> None:  # noqa: ANN001 (a costs.spend.Spend)
    from rich.console import Console
    from rich.table import Table

    from dashboard.web.costs_table import DIMENSION_LABELS, cost_table

    shown = cost_table(found)
    wanted = (
        "Period",
        DIMENSION_LABELS[by],
        "Estimated",
        "Recomputed",
        "Billed",
        "Effective",
        "Estimate vs recomputed",
        "API calls",
    )
    where = [i for i, c in enumerate(shown.spend_columns) if c.label in wanted]
    table = Table(
        title=f"Spend by {found.period} and {by}, {found.start} to {found.end} (not included)"
    )
    for i in where:
        column = shown.spend_columns[i]
        label = SHORT.get(column.label, column.label)
        table.add_column(label, justify="right" if column.numeric else "left", no_wrap=True)
    table.add_column("Tokens", justify="right", no_wrap=True)
    for row in [*shown.rows, shown.total]:
        tokens = f"{sum(row.cell.tokens.values()):,}"
        table.add_row(
            *(row.spend[i].text for i in where), tokens, end_section=row is shown.rows[-1]
        )
    # Piped or redirected, rich would cut every cell to $COLUMNS or 80: a report written
    # to a file or read by a script keeps every figure whole.
    width = None if sys.stdout.isatty() else 1_000
    Console(width=width).print(table)
