"""What the archive holds at a glance (counts, date range, size, recent activity), and
its source's state and layout (the one page where a Hermes layout is shown)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from dashboard.archive.layout import Layout, detect_layout
from dashboard.archive.source_watch import SourceWatch, source_stamps
from dashboard.errors import NotWritableError, StoreUnavailableError
from dashboard.hermes.conventions import visible_sql
from dashboard.store.readonly import classify, open_readonly
from dashboard.store.recalldb import RecallData
from dashboard.store.schema import GONE_ROWS, UNSHOWN_ROWS

#: The rows the visible-row rule leaves out (over ``messages``, unaliased): found among the
#: few of their partial index (schema migration 8) and checked by the rule itself (a
#: superseded original among them is shown). A count of visible rows is every row less
#: these.
LEFT_OUT = f"{UNSHOWN_ROWS} AND NOT ({visible_sql('messages')})"


def archive_overview(
    conn: sqlite3.Connection,
    path: str | Path,
    by_profile: bool = False,
    figures: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What the archive holds: counts of sessions and visible messages, first and last
    activity, file sizes, and its own indexes' state (its layout, as the overview shows).

    ``by_profile``: the same figures per profile too (``profiles``: name -> figures),
    their sums the totals. ``figures``: :func:`archive_figures` read earlier in the same
    state of the file (a reader keeps them until the archive's next write).
    """
    out: dict[str, Any] = {"layout": detect_layout(conn, path).summary()}
    out.update(figures if figures is not None else archive_figures(conn, by_profile))
    out["files"] = _files(Path(path))
    return out


def archive_figures(
    conn: sqlite3.Connection, by_profile: bool = False, every: int | None = None
) -> dict[str, Any]:
    """:func:`archive_overview`'s counts: sessions, their sources, visible messages, first
    and last activity (and each profile's, ``by_profile``). Only a write changes them.
    ``every``: the count of every message, read already in the same state of the file."""
    out = _counts(conn, visible_sql("m"), messages=False, indexed=True)
    if by_profile:
        out["profiles"] = profile_figures(conn)
        out["messages"] = sum(p["messages"] for p in out["profiles"].values())
    else:
        out["messages"] = visible_messages(conn, every)
    return out


def profile_figures(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """Per profile: sessions, visible messages, first and last activity (as :func:`_counts`
    reads them for the whole archive), in one pass over the messages."""
    out: dict[str, dict[str, Any]] = {}
    for name, sessions, first, last in conn.execute(
        "SELECT profile, count(*), min(started_at), max(coalesce(ended_at, started_at))"
        " FROM sessions GROUP BY profile ORDER BY profile"
    ):
        out[name] = {
            "sessions": sessions,
            "messages": 0,
            "first_activity": first,
            "last_activity": last,
        }
    # Each profile's messages from the (session_id, timestamp) index alone, a range of
    # it per session, less the rows the visible-row rule leaves out (their own index),
    # and its newest by one seek per session: reading each row's flags went past its
    # text (2 s at 1M messages).
    sessions = "FROM sessions s CROSS JOIN messages ON messages.session_id = s.id"
    left_out = dict(
        conn.execute(f"SELECT s.profile, count(*) {sessions} WHERE {LEFT_OUT} GROUP BY 1")
    )
    for name, every in conn.execute(f"SELECT s.profile, count(*) {sessions} GROUP BY 1"):
        out[name]["messages"] = every - left_out.get(name, 0)
    for name, last in conn.execute(
        "SELECT s.profile, max((SELECT max(m.timestamp) FROM messages m"
        " WHERE m.session_id = s.id)) FROM sessions s GROUP BY s.profile"
    ):
        figures = out[name]
        if last and (figures["last_activity"] or 0) < last:
            figures["last_activity"] = last
    return out


#: The newest message's time, one seek per session in ``(session_id, timestamp)`` (the
#: archive's index; a plain max() read the whole index: 70 ms at 1M messages).
NEWEST_MESSAGE = (
    "SELECT max((SELECT max(m.timestamp) FROM messages m WHERE m.session_id = s.id))"
    " FROM sessions s"
)


def _counts(
    conn: sqlite3.Connection, visible: str, messages: bool = True, indexed: bool = False
) -> dict[str, Any]:
    """Sessions, their sources, first and last activity (and visible messages);
    ``indexed``: the file has the archive's indexes (a source may lack them)."""
    row = conn.execute(
        "SELECT count(*), min(started_at), max(coalesce(ended_at, started_at)) FROM sessions"
    ).fetchone()
    out: dict[str, Any] = {"sessions": row[0], "first_activity": row[1], "last_activity": row[2]}
    out["sources"] = {
        r[0]: r[1]
        for r in conn.execute(
            "SELECT source, count(*) FROM sessions GROUP BY source ORDER BY 2 DESC"
        )
    }
    if messages:
        count = conn.execute(f"SELECT count(*) FROM messages m WHERE {visible}")
        out["messages"] = count.fetchone()[0]
    last = conn.execute(NEWEST_MESSAGE if indexed else "SELECT max(timestamp) FROM messages")
    last = last.fetchone()[0]
    if last and (out.get("last_activity") or 0) < last:
        out["last_activity"] = last
    return out


def _files(path: Path) -> dict[str, int]:
    return {
        suffix or "db": Path(f"{path}{suffix}").stat().st_size
        for suffix in ("", "-wal")
        if Path(f"{path}{suffix}").is_file()
    }


def store_overview(conn: sqlite3.Connection, layout: Layout) -> dict[str, Any]:
    """A source file's counts and layout (any shape Hermes wrote: :mod:`layout`)."""
    out: dict[str, Any] = {"layout": layout.summary()}
    if {"sessions", "messages"} <= layout.tables:
        out.update(_counts(conn, layout.visible_messages_sql("m")))
    out["files"] = _files(Path(layout.path))
    return out


def visible_messages(conn: sqlite3.Connection, every: int | None = None) -> int:
    """How many messages the archive shows: every row (``every``, when counted already:
    a pass over an index of every message, 25 ms at 1M) less the rows the visible-row
    rule leaves out (:data:`LEFT_OUT`)."""
    if every is None:
        every = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    unshown = conn.execute(f"SELECT count(*) FROM messages WHERE {LEFT_OUT}").fetchone()[0]
    return int(every) - int(unshown)


def archive_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """What Recall's archive keeps: sessions, messages, and how many exist only here
    (``gone_from_source_at`` set: Hermes pruned or lost them)."""
    sessions, gone = conn.execute(
        "SELECT count(*), count(gone_from_source_at) FROM sessions"
    ).fetchone()
    messages = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    # The partial index of gone rows (schema migration 8): a few rows, not a full scan.
    gone_messages = conn.execute(f"SELECT count(*) FROM messages WHERE {GONE_ROWS}").fetchone()[0]
    return {
        "sessions": sessions,
        "messages": messages,
        "gone_sessions": gone,
        "gone_messages": gone_messages,
    }


def source_overview(path: Path) -> dict[str, Any]:
    """The source's state for the overview: its layout and counts, or why it cannot be read."""
    try:
        conn = open_readonly(path, timeout=0, io_retries=0)
    except StoreUnavailableError as exc:
        return {"path": str(path), "reachable": False, "reason": exc.reason, "detail": exc.detail}
    try:
        return {
            "path": str(path),
            "reachable": True,
            **store_overview(conn, detect_layout(conn, path)),
        }
    except sqlite3.Error as exc:
        error = classify(exc, path)
        return {
            "path": str(path),
            "reachable": False,
            "reason": error.reason,
            "detail": error.detail,
        }
    finally:
        conn.close()


class SourceFigures:
    """Each source's :func:`source_overview`, kept while its files are unchanged.

    Counting a Hermes file's visible messages reads every row (0.5-1 s at 1M messages),
    and a source cannot take Recall's indexes. The stamps of ``state.db`` and its
    ``-wal`` (archive.source_watch.source_stamps: which file, size, last write) change
    with any commit, restore or truncation, so an entry holds until one of them moves.
    A file written within the clock's grain of the read is not kept (the same tick
    could hide a later write), and neither is an unreachable one (its reason may pass).
    With a ``shelf`` (Recall's own file), an entry is kept there too, under the same
    stamps: the first overview after a restart reads it instead of counting again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[Path, tuple[object, dict[str, Any]]] = {}

    def get(self, path: Path, shelf: RecallData | None = None) -> dict[str, Any]:
        # The clock before the stamps: a file written within the grain of this moment
        # may be written again in the same tick, unseen (the count after it may take
        # longer than the grain, so the clock after it cannot tell).
        looked = time.time_ns()
        before = source_stamps(path)
        with self._lock:
            kept = self._kept.get(path)
        if kept is not None and kept[0] == before:
            return dict(kept[1])
        stamps = json.dumps([dataclasses.astuple(s) if s else None for s in before])
        figures = _shelved(shelf, path, stamps)
        if figures is None:
            figures = source_overview(path)
            settled = all(s is None or s.mtime_ns < looked - SourceWatch.GRAIN_NS for s in before)
            if not (figures.get("reachable") and settled and source_stamps(path) == before):
                return dict(figures)
            _shelve(shelf, path, stamps, figures)
        with self._lock:
            self._kept[path] = (before, figures)
        return dict(figures)


def _shelved(shelf: RecallData | None, path: Path, stamps: str) -> dict[str, Any] | None:
    """The figures ``shelf`` kept of ``path`` at ``stamps``; None when it cannot say."""
    if shelf is None:
        return None
    try:
        return shelf.kept_source_figures(str(path), stamps)
    except (sqlite3.Error, NotWritableError, ValueError, KeyError):
        return None  # a shelf that cannot answer: count the file, as without one


def _shelve(shelf: RecallData | None, path: Path, stamps: str, figures: dict[str, Any]) -> None:
    if shelf is None:
        return
    try:
        shelf.keep_source_figures(str(path), stamps, figures)
    except (sqlite3.Error, NotWritableError):
        pass  # Recall's folder refuses a write (read-only, full): kept in memory only


# -- activity of the last days ---------------------------------------------------------
