"""The archive's marks of a source in ``state_meta``: which home, how far a pass got."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

WATERMARK_PREFIX = "archive_watermark:"


LAST_SYNC_PREFIX = "archive_last_sync:"


def source_key(home_root: Path) -> str:
    """How the archive names a source home (its resolved path)."""
    return str(Path(home_root).expanduser().resolve())


def read_watermark(conn: sqlite3.Connection, home: str) -> dict[str, Any] | None:
    """The pass in progress for ``home`` (None when the last pass finished or none ran)."""
    row = conn.execute(
        "SELECT value FROM state_meta WHERE key=?", (WATERMARK_PREFIX + home,)
    ).fetchone()
    return json.loads(row[0]) if row else None


def put_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    """Set one ``state_meta`` key inside a write."""
    conn.execute(
        "INSERT INTO state_meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
        (key, value),
    )
