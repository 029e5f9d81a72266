"""Recall's repository: the storage core every screen, the CLI and agents use.

Plain library code over ``sqlite3``: no Flask in here.
"""

from dashboard.repository.errors import (
    ConflictError,
    NotFoundError,
    QuerySyntaxError,
    RecallError,
    StoreUnavailableError,
    ValidationError,
)

__all__ = [
    "ConflictError",
    "NotFoundError",
    "QuerySyntaxError",
    "RecallError",
    "StoreUnavailableError",
    "ValidationError",
]
