"""Jinja filters for times and sizes, shown the same way on every screen."""

from __future__ import annotations

from datetime import UTC, datetime

from flask import Flask


def isotime(ts: float | None) -> str:
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def shortdate(ts: float | None) -> str:
    """Local date and time to the minute: ``2026-11-30 14:05``."""
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def filesize(n: int | float | None) -> str:
    if n is None:
        return "—"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"


def init_app(app: Flask) -> None:
    app.add_template_filter(isotime)
    app.add_template_filter(shortdate)
    app.add_template_filter(filesize)
