"""Error pages: a clear page for every failure a person can meet, never a stack trace.

Which HTTP status an exception answers is decided once, by :data:`STATUS_FOR` (and
:data:`STORE_STATUS` for an unreadable store, by reason): the HTML pages and the JSON
API (:func:`answer_json`) say the same status for the same failure.
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, jsonify, render_template
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from dashboard.errors import (
    ConflictError,
    NotFoundError,
    NotWritableError,
    RecallError,
    StoreUnavailableError,
    ValidationError,
)
from dashboard.memory.files import MemoryLockTimeout

#: Exception -> (status, title of the error page); the nearest class in an exception's
#: MRO wins (a MemoryConflict is a ConflictError: 409).
STATUS_FOR: dict[type[RecallError], tuple[int, str]] = {
    ValidationError: (400, "Bad request"),
    NotWritableError: (403, "Not writable"),
    NotFoundError: (404, "Not found"),
    ConflictError: (409, "Conflict"),
    MemoryLockTimeout: (503, "Busy"),  # a conflict that passes: another save holds the lock
    StoreUnavailableError: (503, "Store unavailable"),
    RecallError: (500, "Server error"),
}
#: An unreadable store, by reason: what passes by itself (a lock, an I/O hiccup, a
#: permission or an interrupted write) and a file that is not Recall's archive (a
#: setting to change, not a server bug) are unavailable (503); a missing or damaged
#: file is a server error (500). Only the transient ones say when to try again.
STORE_STATUS = {
    "locked": 503,
    "io": 503,
    "readonly": 503,
    "rollback": 503,
    "not-archive": 503,
    "missing": 500,
    "corrupt": 500,
    # Recall's own folder (datadir.FolderFault): a fault of the machine, not of a file.
    "folder-missing": 503,
    "folder-readonly": 503,
    "folder-full": 503,
}
TRANSIENT = frozenset(("locked", "io", "readonly", "rollback", "folder-missing"))
RETRY_AFTER_S = "2"

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
    "folder-missing": "Recall's own data folder (where it keeps its archive) is gone. If it "
    "was deleted while Recall ran, Recall writes the archive back there in a moment: reload.",
    "folder-readonly": "Recall's own data folder (where it keeps its archive) cannot be "
    "written, and holds no archive to show yet. Hermes's state.db is not at fault.",
    "folder-full": "The disk holding Recall's own data folder (where it keeps its archive) "
    "is full, and the folder holds no archive to show yet. Hermes's state.db is not at fault.",
    "rollback": "The file is not damaged: a write by the agent was interrupted (a crash or a "
    "power cut) and left state.db-journal beside it, which must be rolled back before anyone "
    "can read the file. Recall opens your database read-only and never writes to it, so it "
    "cannot roll it back itself. Start the agent once (Hermes rolls back when it opens the "
    "file), then reload.",
}


def status_for(exc: RecallError) -> tuple[int, str]:
    """The HTTP status and page title of ``exc`` (:data:`STATUS_FOR`, :data:`STORE_STATUS`)."""
    if isinstance(exc, StoreUnavailableError):
        return STORE_STATUS.get(exc.reason, 500), STATUS_FOR[StoreUnavailableError][1]
    for kind in type(exc).__mro__:
        if kind in STATUS_FOR:
            return STATUS_FOR[kind]  # type: ignore[index]
    return STATUS_FOR[RecallError]


def _headers(exc: RecallError) -> dict[str, str]:
    transient = isinstance(exc, MemoryLockTimeout) or (
        isinstance(exc, StoreUnavailableError) and exc.reason in TRANSIENT
    )
    return {"Retry-After": RETRY_AFTER_S} if transient else {}


def json_error(exc: RecallError) -> tuple[Response, int, dict[str, str]]:
    """``{"error": ..., "reason": ...}`` (reason: an unreadable store's) at ``exc``'s status."""
    status, _ = status_for(exc)
    body: dict[str, object] = {"error": str(exc)}
    if isinstance(exc, StoreUnavailableError) or status >= 500:
        body["reason"] = getattr(exc, "reason", None)
    return jsonify(body), status, _headers(exc)


def answer_json(bp: Blueprint) -> None:
    """Answer ``bp``'s errors as JSON, at the status the pages give the same error."""
    bp.register_error_handler(RecallError, json_error)


def init_app(app: Flask) -> None:
    @app.errorhandler(RecallError)
    def recall_error(exc: RecallError):
        status, title = status_for(exc)
        if isinstance(exc, StoreUnavailableError):
            advice = STORE_ADVICE.get(exc.reason, "")
            body = render_template("errors/store.html", error=exc, advice=advice)
        else:
            body = render_template("errors/http.html", code=status, title=title, message=str(exc))
        return body, status, _headers(exc)

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
