"""One blueprint per screen. ``NAVIGATION`` lists the screens that exist, in menu order."""

from __future__ import annotations

from flask import Flask

from dashboard.views import (
    api,
    approvals,
    archive,
    chains,
    costs,
    health,
    memory,
    overview,
    preview,
    prices,
    search,
    sessions,
)

# (endpoint, label): the menu shows only screens that are registered.
NAVIGATION: list[tuple[str, str]] = [
    ("search.index", "Search"),
    ("chains.index", "Chains"),
    ("costs.index", "Costs"),
    ("memory.index", "Memory"),
    ("preview.index", "Preview"),
    ("archive.index", "Archive"),
    ("overview.index", "Overview"),
]


def register_blueprints(app: Flask) -> None:
    app.register_blueprint(search.bp)
    app.register_blueprint(preview.bp)
    app.register_blueprint(overview.bp)
    app.register_blueprint(api.bp)
    app.register_blueprint(health.bp)
    app.register_blueprint(sessions.bp)
    app.register_blueprint(chains.bp)
    app.register_blueprint(costs.bp)
    app.register_blueprint(prices.bp)
    app.register_blueprint(memory.bp)
    app.register_blueprint(approvals.bp)
    app.register_blueprint(archive.bp)
    app.jinja_env.globals["navigation"] = NAVIGATION
