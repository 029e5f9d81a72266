"""Checks that a source home is left as it was and that an archive mirrors it."""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path

from dashboard.archive import source
from dashboard.archive.marks import source_key
from dashboard.archive.source import usage_source_id
from dashboard.hermes import conventions
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as hs

ALL_SHAPES = {**hs.SHAPES, **hs.COST_SHAPES}


MESSAGE_FIELDS = (
    "session_id",
    "role",
    "content",
    "tool_call_id",
    "tool_calls",
    "tool_name",
    "timestamp",
    "token_count",
    "active",
    "compacted",
    "display_kind",
)


EMPTY = hashlib.sha256(b"").hexdigest()


def digests(db: Path) -> dict[str, str | None]:
    """SHA-256 of a state.db and of its -wal (None when absent)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None
        for p in (db, Path(f"{db}-wal"))
    }


def assert_untouched(db: Path, before: dict[str, str | None]) -> None:
    """The file and an existing -wal byte-identical; SQLite's read-only opener may leave
    an *empty* -wal where there was none (as tests/test_readonly.py allows)."""
    after = digests(db)
    assert after[db.name] == before[db.name]
    wal = f"{db.name}-wal"
    assert after[wal] == before[wal] or (before[wal] is None and after[wal] == EMPTY)


def source_conn(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    return conn


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def source_messages(conn: sqlite3.Connection) -> dict[str, tuple[object, ...]]:
    """Every source message by id, with the defaults a missing flag column means."""
    have = columns(conn, "messages")
    out = {}
    for r in conn.execute("SELECT * FROM messages"):
        row = dict(r)
        for c, default in conventions.MESSAGE_DEFAULTS.items():
            row.setdefault(c, default)
        out[str(row["id"])] = tuple(
            row[c] if c in have or c in row else None for c in MESSAGE_FIELDS
        )
    return out


def archive_messages(conn: sqlite3.Connection, home: str) -> dict[str, tuple[object, ...]]:
    rows = conn.execute(
        f"SELECT src_id, {', '.join(MESSAGE_FIELDS)} FROM messages WHERE src_home=?", (home,)
    )
    return {r[0]: tuple(r[1:]) for r in rows}


def _source_rows(db: Path) -> tuple[dict, dict, dict]:
    """Sessions, messages and usage rows of the source, as the archive should hold them."""
    with closing(source_conn(db)) as src:
        sessions = {r["id"]: dict(r) for r in src.execute("SELECT * FROM sessions")}
        messages = source_messages(src)
        tables = {r[0] for r in src.execute("SELECT name FROM sqlite_master")}
        usage = {}
        if "session_model_usage" in tables:
            usage = {
                usage_source_id(dict(r)): dict(r)
                for r in src.execute("SELECT * FROM session_model_usage")
            }
        else:
            for sid, row in sessions.items():
                derived = source.derived_usage_row(row)
                if derived is not None:
                    usage[f"sessions:{sid}"] = {"session_id": sid, **derived}
    return sessions, messages, usage


def assert_mirrors(archive: SessionStore, db: Path, home: Path) -> None:
    """Every row still in the source is in the archive, equal in every copied column,
    and not marked gone."""
    key = source_key(home)
    conn = archive.core.conn
    sessions, messages, usage = _source_rows(db)
    kept = {
        r["src_id"]: dict(r)
        for r in conn.execute("SELECT * FROM sessions WHERE src_home=?", (key,))
    }
    for sid, row in sessions.items():
        mine = kept[sid]
        assert mine["gone_from_source_at"] is None, sid
        for c in source.SESSION_COLUMNS:
            if c == "last_activity_at" and row.get(c) is None:
                # No activity recorded: the archive's is the newest message (source.py).
                assert mine[c] is not None and mine[c] >= row["started_at"], sid
            elif c in row and c != "system_prompt":
                assert mine[c] == row[c], (sid, c)
    present = {
        src_id: row for src_id, row in archive_messages(conn, key).items() if src_id in messages
    }
    assert present == messages
    gone_present = conn.execute(
        f"SELECT count(*) FROM messages WHERE src_home=? AND gone_from_source_at IS NOT NULL"
        f" AND src_id IN ({','.join('?' for _ in messages)})",
        (key, *messages),
    ).fetchone()[0]
    assert gone_present == 0
    stored = {
        r["src_id"]: dict(r)
        for r in conn.execute("SELECT * FROM session_model_usage WHERE src_home=?", (key,))
    }
    for src_id, row in usage.items():
        mine = stored[src_id]
        assert mine["gone_from_source_at"] is None, src_id
        for c in source.USAGE_COLUMNS:
            if c in row:
                assert mine[c] == row[c], (src_id, c)
