"""One rule for whole numbers and dates a person types: URLs, forms, ``config.yaml``.

Every such value goes through these two functions, so "what is a number" and "what
is a date" are decided once. Bad input raises :class:`ValidationError` with a message
naming the parameter; the web layer turns it into a 400, never a 500.
"""

from __future__ import annotations

import re
from datetime import datetime

from dashboard.errors import ValidationError

# ASCII digits only: str.isdigit() also accepts "²" (which int() refuses) and "٣" or
# "３" (which int() reads as 3); neither is a number anyone means in a URL.
_DIGITS = re.compile(r"[0-9]+")
# int() refuses more than 4,300 digits; no bound Recall uses needs more than this.
_MAX_DIGITS = 30

# Hermes stores Unix timestamps; outside these years the local-time conversion of a
# naive date fails in some zones (year 1 in Tokyo is year 0 in UTC).
FIRST_YEAR = 1970
LAST_YEAR = 9998


def whole_number(text: str | None, name: str, low: int, high: int) -> int | None:
    """``text`` as an int from ``low`` to ``high``; None when blank.

    Raises ValidationError naming ``name`` for anything but ASCII digits (surrounding
    spaces and leading zeros are fine) and for a number outside the range.
    """
    if text is None or not text.strip():
        return None
    digits = text.strip()
    if not _DIGITS.fullmatch(digits):
        raise ValidationError(f"{name} must be a whole number (got {digits[:20]!r})")
    digits = digits.lstrip("0") or "0"
    if len(digits) > _MAX_DIGITS or not low <= int(digits) <= high:
        raise ValidationError(f"{name} must be between {low} and {high}")
    return int(digits)


def date_bound(text: str | None, name: str, *, end_of_day: bool = False) -> float | None:
    """A date (``2026-11-30``, or ISO 8601 with a time) as a Unix timestamp; None when blank.

    A date without a zone is the user's local time. With ``end_of_day``, a bare date
    means the end of that day (``before=2026-11-30`` includes the 30th).
    """
    if text is None or not text.strip():
        return None
    value = text.strip()
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        shown = value[:40]
        raise ValidationError(f"{name} must be a date like 2026-11-30 (got {shown!r})") from exc
    if not FIRST_YEAR <= moment.year <= LAST_YEAR:
        raise ValidationError(
            f"{name} must be a date from {FIRST_YEAR} to {LAST_YEAR} (got {value[:40]!r})"
        )
    if moment.tzinfo is None:
        moment = moment.astimezone()  # the user's local time
    stamp = moment.timestamp()
    if end_of_day and len(value) == 10:
        stamp += 86_400
    return stamp


def table_sort(
    sort: str | None, direction: str | None, choices: tuple[str, ...], default: str
) -> tuple[str, bool]:
    """``(column, descending)`` of a table sorted by its ``sort``/``dir`` links.

    Blank means ``default``, descending; anything else unknown raises ValidationError.
    """
    sort = sort or default
    if sort not in choices:
        raise ValidationError(f"sort must be one of {', '.join(choices)}")
    if direction not in (None, "", "asc", "desc"):
        raise ValidationError("dir must be asc or desc")
    return sort, direction != "asc"


def one_of(text: str | None, name: str, choices: tuple[str, ...]) -> str:
    """``text`` as one of ``choices`` (surrounding spaces ignored); blank means the first.

    Raises ValidationError naming ``name`` and listing the choices for anything else.
    """
    value = (text or "").strip()
    if not value:
        return choices[0]
    if value not in choices:
        raise ValidationError(f"{name} must be one of {', '.join(choices)} (got {value[:40]!r})")
    return value
