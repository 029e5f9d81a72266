"""The app's cost rollup: Recall's per-day spend sums for the home it shows."""

from __future__ import annotations

from flask import Flask, current_app

from dashboard.costs.rollup import CostRollup
from dashboard.costs.spend import resolve_zone
from dashboard.errors import NotWritableError, ValidationError
from dashboard.web.reader import base_reader
from dashboard.web.resources import app_resource
from dashboard.web.summaries import get_recall_data


def get_cost_rollup() -> CostRollup | None:
    """One rollup per app, built in the background on first use; None when turned off, or
    while Recall's own file cannot be opened (its folder read-only, full or gone): the
    costs are then summed from the archive's rows, as before the rollup is built."""
    if str(current_app.config.get("COST_ROLLUP", "on")).lower() in ("off", "0", "false", "no"):
        return None

    def build(app: Flask) -> CostRollup:
        reader = base_reader()
        return CostRollup(get_recall_data().core, str(reader.path), connect=reader.open_for_rollup)

    try:
        return app_resource("recall.cost_rollup", build)
    except NotWritableError:
        return None


def prepare_cost_rollup() -> None:
    """Start building the rollup for the configured timezone (at server start)."""
    rollup = get_cost_rollup()
    if rollup is None:
        return
    try:
        rollup.prepare(resolve_zone(current_app.config.get("TIMEZONE") or None))
    except ValidationError:
        pass  # a bad TIMEZONE is reported by the costs page itself
