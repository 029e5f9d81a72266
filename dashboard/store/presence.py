"""One rule for "this session is gone from Hermes", and the filter built on it.

Recall's archive keeps every session it ever copied. When Hermes deletes one (its
prune, a person's ``hermes sessions delete``), the sync keeps the row and sets
``gone_from_source_at``; that mark, and only that, makes a session "gone". Pages read
only the archive (store/state.py), so the column is always there.
"""

from __future__ import annotations

from dashboard.params import one_of

GONE_COLUMN = "gone_from_source_at"
#: ``presence`` filter values: every session, those still in Hermes, those only in
#: Recall's archive (gone from Hermes). The first is the default.
PRESENCES = ("all", "hermes", "archive")


def parse_presence(text: str | None) -> str:
    """The ``presence`` parameter (blank: ``all``); ValidationError for anything else."""
    return one_of(text, "presence", PRESENCES)


def gone_sql(alias: str = "s") -> str:
    """SQL for when a session (``alias`` of ``sessions``) left Hermes; NULL while it has not."""
    return f"{alias}.{GONE_COLUMN}"


def presence_sql(presence: str, alias: str = "s") -> str:
    """A condition keeping the sessions ``presence`` asks for ("1" for all)."""
    if presence == "hermes":
        return f"{gone_sql(alias)} IS NULL"
    if presence == "archive":
        return f"{gone_sql(alias)} IS NOT NULL"
    return "1"
