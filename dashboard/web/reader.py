"""The app's reader of the Hermes home it shows."""

from __future__ import annotations

import sqlite3

from flask import Flask, current_app

from dashboard.repository.errors import StoreUnavailableError
from dashboard.repository.home import resolve_home
from dashboard.repository.layout import detect_layout
from dashboard.repository.reader import StateReader
from dashboard.repository.readonly import open_readonly


class DemoBanner:
    """Whether the shown home was built by ``recall demo``: the banner on every page.

    Learned from the file without ever waiting on its lock. Most pages (the memory
    editor, error pages) need no database; while Hermes holds an EXCLUSIVE lock on a
    DELETE-journal home, a reader waits out the 5 s busy timeout, so a banner check
    that waited would hold every page up. Until the file answers, no banner.
    """

    def __init__(self, reader: StateReader) -> None:
        self._reader = reader
        self._demo: bool | None = None

    def shown(self) -> bool:
        if self._demo is None:
            self._demo = self._look()
        return bool(self._demo)

    def _look(self) -> bool | None:
        """The file's demo marker; None while it cannot be read at once (ask again later)."""
        try:
            conn = open_readonly(self._reader.path, timeout=0, io_retries=0)
        except StoreUnavailableError:
            return None
        try:
            return detect_layout(conn, self._reader.path).demo_seed is not None
        except sqlite3.Error:
            return None
        finally:
            conn.close()


def init_app(app: Flask) -> None:
    home = resolve_home(app.config.get("HERMES_HOME"))
    reader = StateReader(home)
    banner = DemoBanner(reader)
    app.extensions["recall.reader"] = reader

    @app.context_processor
    def inject_home() -> dict[str, object]:
        return {"hermes_home": home, "demo_data": bool(app.config.get("DEMO")) or banner.shown()}


def get_reader() -> StateReader:
    return current_app.extensions["recall.reader"]
