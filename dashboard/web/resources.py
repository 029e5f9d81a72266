"""Per-app objects built on first use (most requests never need them), one of each per app."""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from typing import TypeVar

from flask import Flask, current_app

T = TypeVar("T")
_LOCK = "recall.resources.lock"


def init_app(app: Flask) -> None:
    # Re-entrant: a builder may ask for another resource (the summaries need recall.db).
    app.extensions[_LOCK] = threading.RLock()


def app_resource(
    key: str, build: Callable[[Flask], T], close: Callable[[T], object] | None = None
) -> T:
    """The app's ``key`` object, built once by ``build(app)``; ``close`` runs at exit."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    found = app.extensions.get(key)
    if found is not None:
        return found
    with app.extensions[_LOCK]:
        found = app.extensions.get(key)
        if found is None:
            found = build(app)
            app.extensions[key] = found
            if close is not None:
                atexit.register(close, found)
    return found
