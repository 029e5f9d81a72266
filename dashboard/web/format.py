"""Times, sizes, money and durations, written the same way on every screen and in the CSV."""

from __future__ import annotations

import math
from datetime import UTC, datetime


def isotime(ts: float | None) -> str:
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def shortdate(ts: float | None) -> str:
    """Local date and time to the minute: ``2026-11-30 14:05``."""
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def clock(ts: float | None) -> str:
    """Local time of day to the second: ``14:05:09``."""
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts).strftime("%H:%M:%S")


def localday(ts: float | None) -> str:
    """Local calendar day: ``2026-11-30``."""
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d")


def usd(amount: float | None) -> str:
    """Money, one rule on every page: cents from one cent up (``$5.82``, ``$0.27``), two
    significant digits under a cent (``$0.0012``, never ``$0.0000``), ``$0.00`` for zero.

    Agent calls cost fractions of a cent, so a cheap session still reads as what it cost;
    anything a person adds up in a column shows cents. The CSV and the JSON keep full
    precision.
    """
    if amount is None:
        return "unknown"
    if amount == 0:
        return "$0.00"
    sign, size = ("-" if amount < 0 else ""), abs(amount)
    if round(size, 2) >= 0.01:
        return f"{sign}${size:,.2f}"
    digits = 1 - math.floor(math.log10(size))  # two significant digits
    return f"{sign}${size:.{digits}f}"


def duration(seconds: float | None) -> str:
    """A time span a person reads at a glance: ``42 s``, ``12 min``, ``3 h 05 min``, ``2 d 4 h``."""
    if seconds is None:
        return "—"
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s} s"
    minutes = s // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def compact_number(n: int | float | None) -> str:
    """A count in three significant figures: ``812``, ``48.2k``, ``1.31M``."""
    if n is None:
        return "—"
    value = float(n)
    for limit, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            scaled = value / limit
            return f"{scaled:.3g}{suffix}" if scaled < 1000 else f"{scaled:,.0f}{suffix}"
    return f"{value:,.0f}"


def filesize(n: int | float | None) -> str:
    if n is None:
        return "—"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"
