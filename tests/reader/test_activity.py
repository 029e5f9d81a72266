"""The overview's top tools (reader/activity.py): counted from partial indexes, equal to
the visible-row rule read row by row, in every window of session starts."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from dashboard.hermes.conventions import visible_sql
from dashboard.reader.activity import TOP_TOOLS, top_tools
from dashboard.reader.overview import LEFT_OUT
from dashboard.store.readonly import open_readonly
from dashboard.store.schema import TOOL_ROWS
from tests.support.archived import archive_home, build_shape


def plain_top_tools(conn: sqlite3.Connection, since: float, until: float) -> list[tuple[str, int]]:
    """The rule applied to every message of the window's sessions (the query before the
    partial index)."""
    return [
        (name, count)
        for name, count in conn.execute(
            "SELECT m.tool_name, count(*) FROM sessions s JOIN messages m"
            " ON m.session_id = s.id WHERE s.started_at >= ? AND s.started_at < ?"
            f" AND m.tool_name IS NOT NULL AND m.tool_name != '' AND {visible_sql('m')}"
            " GROUP BY m.tool_name ORDER BY 2 DESC, 1 LIMIT ?",
            (since, until, TOP_TOOLS),
        )
    ]


def flag_tool_rows(path: Path) -> None:
    """Give tool rows every flag the rule reads: a re-inserted copy, a rewound row, a
    hidden row, and a superseded original (left out by its flags, shown by the rule)."""
    with closing(sqlite3.connect(path)) as conn, conn:
        rows = conn.execute(
            f"SELECT id, session_id FROM messages WHERE {TOOL_ROWS} ORDER BY id"
        ).fetchall()
        copy, rewound, hidden, original = (row[0] for row in rows[:4])
        conn.execute("UPDATE messages SET repeats = ? WHERE id = ?", (rewound, copy))
        conn.execute("UPDATE messages SET active = 0, compacted = 0 WHERE id = ?", (rewound,))
        conn.execute("UPDATE messages SET display_kind = 'hidden' WHERE id = ?", (hidden,))
        later = conn.execute(
            "SELECT max(id) FROM messages WHERE session_id = ? AND id > ?",
            (rows[3][1], original),
        ).fetchone()[0]
        assert later is not None
        conn.execute(
            "UPDATE messages SET active = 0, compacted = 0, message_uid = 'uid-1' WHERE id = ?",
            (original,),
        )
        conn.execute("UPDATE messages SET message_uid = 'uid-1' WHERE id = ?", (later,))


def archive_of(tmp_path: Path, shape: str) -> Path:
    home = tmp_path / "home"
    build_shape(home, "current" if shape == "flagged" else shape)
    path = archive_home(home)
    if shape == "flagged":
        flag_tool_rows(path)
    return path


@pytest.mark.parametrize("shape", ["v31", "epochs", "current", "flagged"])
def test_top_tools_equal_the_rule_row_by_row_in_every_window(tmp_path: Path, shape: str) -> None:
    path = archive_of(tmp_path, shape)
    with closing(open_readonly(path)) as conn:
        left_out = conn.execute(f"SELECT count(*) FROM messages WHERE {TOOL_ROWS} AND {LEFT_OUT}")
        if shape in ("v31", "flagged"):  # the subtraction has rows to take away
            assert left_out.fetchone()[0] > 0
        starts = sorted({r[0] for r in conn.execute("SELECT started_at FROM sessions")})
        edges = [starts[0] - 1, *starts, starts[-1] + 1]
        for i, since in enumerate(edges):
            for until in edges[i:]:
                assert top_tools(conn, since, until) == plain_top_tools(conn, since, until)
        assert top_tools(conn, edges[0], edges[-1])  # the home has tool calls


def test_top_tools_read_the_partial_indexes(tmp_path: Path) -> None:
    """The counts come from the index of tool rows and the index of unshown rows, never
    from the messages' own rows (their text)."""
    path = archive_of(tmp_path, "flagged")
    with closing(open_readonly(path)) as conn:
        traced: list[str] = []
        conn.set_trace_callback(traced.append)
        top_tools(conn, 0, 1e12)
        conn.set_trace_callback(None)
        plans = [
            " ".join(str(tuple(r)) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
            for sql in traced
        ]
    indexes = ("COVERING INDEX idx_messages_tools", "idx_messages_unshown")
    for plan, index in zip(plans, indexes, strict=True):
        # The range's sessions first (whichever index of their starts), then each one's rows.
        assert plan.index("(started_at>? AND started_at<?)") < plan.index(index)
