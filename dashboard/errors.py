"""Errors the repository raises; the web layer maps each to a clear page."""

from __future__ import annotations


class RecallError(Exception):
    """Base class for every error the repository raises on purpose."""


class NotFoundError(RecallError):
    """A session, message or file that was asked for does not exist."""


class ConflictError(RecallError):
    """A write would break a uniqueness rule or overwrite someone else's change."""


class ValidationError(RecallError):
    """Input that cannot be stored as given (too long, wrong type, empty)."""


class StoreUnavailableError(RecallError):
    """The database cannot be read: missing, corrupt, locked or not SQLite.

    ``reason`` is one of ``missing``, ``corrupt``, ``locked``, ``io``, ``readonly`` (the
    file or its folder cannot be used even for reading: permissions) or ``rollback``
    (a hot journal from an interrupted write that only a writer can roll back).
    """

    def __init__(self, reason: str, path: str, detail: str = "") -> None:
        self.reason = reason
        self.path = path
        self.detail = detail
        message = f"{path}: {reason}"
        super().__init__(f"{message} ({detail})" if detail else message)


class QuerySyntaxError(ValidationError):
    """A search query that cannot be repaired into something searchable."""


class NotWritableError(RecallError):
    """A file Recall was asked to write cannot be written (permissions, a read-only disk).

    ``folder`` is where the write was refused; nothing was written.
    """

    def __init__(self, message: str, folder: str) -> None:
        self.folder = folder
        super().__init__(message)
