"""What a state.db holds, at a glance: counts, date range, size, layout."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from dashboard.repository.layout import Layout


def store_overview(conn: sqlite3.Connection, layout: Layout) -> dict[str, Any]:
    """Counts of sessions and visible messages, first and last activity, file sizes."""
    out: dict[str, Any] = {"layout": layout.summary()}
    if "sessions" in layout.tables:
        row = conn.execute(
            "SELECT count(*), min(started_at), max(coalesce(ended_at, started_at)) FROM sessions"
        ).fetchone()
        out.update(sessions=row[0], first_activity=row[1], last_activity=row[2])
        out["sources"] = {
            r[0]: r[1]
            for r in conn.execute(
                "SELECT source, count(*) FROM sessions GROUP BY source ORDER BY 2 DESC"
            )
        }
    if "messages" in layout.tables:
        visible = layout.visible_messages_sql("m")
        out["messages"] = conn.execute(
            f"SELECT count(*) FROM messages m WHERE {visible}"
        ).fetchone()[0]
        last = conn.execute("SELECT max(timestamp) FROM messages").fetchone()[0]
        if last and (out.get("last_activity") or 0) < last:
            out["last_activity"] = last
    path = Path(layout.path)
    out["files"] = {
        suffix or "db": Path(f"{path}{suffix}").stat().st_size
        for suffix in ("", "-wal")
        if Path(f"{path}{suffix}").is_file()
    }
    return out
