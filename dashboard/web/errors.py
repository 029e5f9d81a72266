"""Error pages: a clear page for every failure a person can meet, never a stack trace."""

from __future__ import annotations

from flask import Flask, render_template
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from dashboard.errors import (
    ConflictError,
    NotFoundError,
    StoreUnavailableError,
    ValidationError,
)

STORE_ADVICE = {
    "missing": "There is no state.db at this path yet. Start the agent once, or point "
    "Recall at another home with --home.",
    "corrupt": "SQLite cannot read this file: it is not a database or it is damaged. "
    "Recall never writes to it; run `sqlite3 state.db 'PRAGMA integrity_check'` to see more.",
    "locked": "Another program holds an exclusive lock on the database. This usually "
    "passes in a moment: reload the page.",
    "io": "The disk reported an I/O error while reading the database. Reload to try again.",
    "readonly": "The file is fine, but it cannot be opened read-only by the user Recall runs "
    "as: a WAL-mode database needs its state.db-shm file beside it even to be read, and the "
    "folder or that file is not writable for this user (or the disk is read-only). Run Recall "
    "as the agent's user, or give this user write access to the folder.",
    "not-archive": "This file is not Recall's archive at the schema this version reads "
    "(a Hermes state.db given as --archive, or an archive written by another Recall). "
    "Point --archive at Recall's own archive, or leave it out: Recall then keeps one in its "
    "data directory.",
    "rollback": "The file is not damaged: a write by the agent was interrupted (a crash or a "
    "power cut) and left state.db-journal beside it, which must be rolled back before anyone "
    "can read the file. Recall opens your database read-only and never writes to it, so it "
    "cannot roll it back itself. Start the agent once (Hermes rolls back when it opens the "
    "file), then reload.",
}


def init_app(app: Flask) -> None:
    @app.errorhandler(StoreUnavailableError)
    def store_unavailable(exc: StoreUnavailableError):
        transient = exc.reason in ("locked", "io", "readonly", "rollback")
        # A file that is not Recall's archive is a setting to change, not a server bug and
        # nothing that passes by retrying: unavailable, without Retry-After.
        status = 503 if transient or exc.reason == "not-archive" else 500
        advice = STORE_ADVICE.get(exc.reason, "")
        body = render_template("errors/store.html", error=exc, advice=advice)
        return body, status, {"Retry-After": "2"} if transient else {}

    @app.errorhandler(NotFoundError)
    def not_found(exc: NotFoundError):
        return render_template(
            "errors/http.html", code=404, title="Not found", message=str(exc)
        ), 404

    @app.errorhandler(ConflictError)
    def conflict(exc: ConflictError):
        return render_template(
            "errors/http.html", code=409, title="Conflict", message=str(exc)
        ), 409

    @app.errorhandler(ValidationError)
    def invalid(exc: ValidationError):
        return render_template(
            "errors/http.html", code=400, title="Bad request", message=str(exc)
        ), 400

    @app.errorhandler(RequestEntityTooLarge)
    def too_large(exc: RequestEntityTooLarge):
        limit = app.config.get("MAX_CONTENT_LENGTH") or 0
        message = (
            f"What was sent is too large: Recall accepts at most {limit / 1e6:.1f} MB per "
            "request, and a memory file at most a few hundred KB. Nothing was saved."
        )
        return render_template(
            "errors/http.html", code=413, title="Too large", message=message
        ), 413

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        return render_template(
            "errors/http.html", code=exc.code, title=exc.name, message=exc.description
        ), exc.code or 500
