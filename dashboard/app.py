"""The Flask application: ``create_app`` builds it from defaults, environment and config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Flask

from dashboard.costs import book as price_book
from dashboard.hermes.home import resolve_home
from dashboard.store.datadir import recall_data_dir
from dashboard.views import register_blueprints
from dashboard.web import errors as error_pages
from dashboard.web import (
    filters,
    htmx,
    profiles,
    reader,
    resources,
    security,
    summaries,
    template_cache,
)

ROOT = Path(__file__).resolve().parent.parent


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """Build the app: defaults, then ``RECALL_*`` environment, then ``config``."""
    app = Flask(
        __name__,
        template_folder=str(ROOT / "templates"),
        static_folder=str(ROOT / "static"),
    )
    app.config.from_mapping(
        HERMES_HOME=None,  # the home whose state.db is shown (read-only)
        EXTRA_HOMES=[],  # more Hermes homes whose profiles share the first one's archive
        PROFILE=None,  # serve this one profile only (recall serve --profile)
        DATA_DIR=None,  # Recall's own files: secret key, recall.db (default: datadir)
        ARCHIVE=None,  # the home's archive file (default: archive.db in its data directory)
        TEMPLATE_CACHE=None,  # compiled templates' folder (default: Jinja's, in the temp dir)
        BIND_HOST="127.0.0.1",
        BIND_PORT=None,  # with DATA_DIR, names the session cookie of this instance
        ALLOWED_HOSTS=[],  # extra Host names accepted besides loopback and BIND_HOST
        SESSION_COOKIE_SAMESITE="Strict",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_NAME=None,  # per instance: security.session_cookie_name
        MAX_CONTENT_LENGTH=2 * 1024 * 1024,
        TEMPLATES_AUTO_RELOAD=False,
    )
    app.config.from_prefixed_env("RECALL")
    if config:
        app.config.update(config)
    if not app.config.get("DATA_DIR"):  # never inside the home: the user's data directory
        folder, _ = recall_data_dir(resolve_home(app.config.get("HERMES_HOME")))
        app.config["DATA_DIR"] = str(folder)
    # Recomputed costs read this folder's prices.yaml (one book a process: a server
    # serves one data directory).
    price_book.configure(Path(app.config["DATA_DIR"]))

    security.init_app(app)
    filters.init_app(app)
    template_cache.init_app(app)
    htmx.init_app(app)
    reader.init_app(app)
    profiles.init_app(app)
    resources.init_app(app)
    summaries.init_app(app)
    error_pages.init_app(app)
    register_blueprints(app)
    return app
