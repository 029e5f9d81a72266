"""The app's reader of the Hermes home it shows."""

from __future__ import annotations

from flask import Flask, current_app

from dashboard.repository.home import resolve_home
from dashboard.repository.reader import StateReader


def init_app(app: Flask) -> None:
    home = resolve_home(app.config.get("HERMES_HOME"))
    reader = StateReader(home)
    app.extensions["recall.reader"] = reader

    @app.context_processor
    def inject_home() -> dict[str, object]:
        # is_demo never waits on the file's lock: pages without database work stay fast.
        return {"hermes_home": home, "demo_data": bool(app.config.get("DEMO")) or reader.is_demo()}


def get_reader() -> StateReader:
    return current_app.extensions["recall.reader"]
