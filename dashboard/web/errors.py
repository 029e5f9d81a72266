"""Error pages: a clear page for every failure a person can meet, never a stack trace."""

from __future__ import annotations

from flask import Flask, render_template
from werkzeug.exceptions import HTTPException

from dashboard.repository.errors import NotFoundError, StoreUnavailableError, ValidationError

STORE_ADVICE = {
    "missing": "There is no state.db at this path yet. Start the agent once, or point "
    "Recall at another home with --home.",
    "corrupt": "SQLite cannot read this file: it is not a database or it is damaged. "
    "Recall never writes to it; run `sqlite3 state.db 'PRAGMA integrity_check'` to see more.",
    "locked": "Another program holds an exclusive lock on the database. This usually "
    "passes in a moment: reload the page.",
    "io": "The disk reported an I/O error while reading the database. Reload to try again.",
    "readonly": "Recall could not open the database read-only (permissions on the file or "
    "its folder).",
}


def init_app(app: Flask) -> None:
    @app.errorhandler(StoreUnavailableError)
    def store_unavailable(exc: StoreUnavailableError):
        status = 503 if exc.reason in ("locked", "io") else 500
        advice = STORE_ADVICE.get(exc.reason, "")
        body = render_template("errors/store.html", error=exc, advice=advice)
        return body, status, {"Retry-After": "2"} if status == 503 else {}

    @app.errorhandler(NotFoundError)
    def not_found(exc: NotFoundError):
        return render_template("errors/http.html", code=404, title="Not found",
                               message=str(exc)), 404  # fmt: skip

    @app.errorhandler(ValidationError)
    def invalid(exc: ValidationError):
        return render_template("errors/http.html", code=400, title="Bad request",
                               message=str(exc)), 400  # fmt: skip

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        return render_template(
            "errors/http.html", code=exc.code, title=exc.name, message=exc.description
        ), exc.code or 500
