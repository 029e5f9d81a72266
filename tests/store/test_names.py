"""What a person calls a session (store/names.py): title, else first words, else id."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dashboard.hermes.conventions import COMPACTION_MARKER
from dashboard.store.names import NAME_CHARS, session_name, session_names

ROWS = [
    # (session, role, content, timestamp, active, compacted, display_kind)
    ("plain", "assistant", "I answer first", 1.0, 1, 0, None),
    ("plain", "user", "  **Fix** the `build`\n\nplease ", 2.0, 1, 0, None),
    ("plain", "user", "a later question", 3.0, 1, 0, None),
    ("carried", "user", f"{COMPACTION_MARKER}\nEarlier turns were compacted.", 1.0, 1, 0, None),
    ("carried", "user", "   ", 2.0, 1, 0, None),
    ("carried", "user", "what the segment asks", 3.0, 1, 0, None),
    ("undone", "user", "rewound words", 1.0, 0, 0, None),
    ("undone", "user", "hidden words", 2.0, 1, 0, "hidden"),
    ("undone", "user", "kept words", 3.0, 0, 1, None),
    ("structured", "user", '\x00json:[{"type": "text", "text": "look at this"}]', 1.0, 1, 0, None),
    ("long", "user", "word " * 100, 1.0, 1, 0, None),
    ("silent", "assistant", "no user here", 1.0, 1, 0, None),
    # By time: a copy inserted later with its original's (earlier) timestamp comes first.
    ("copied", "user", "second said", 5.0, 1, 0, None),
    ("copied", "user", "first said", 4.0, 1, 0, None),
]


def _archive(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT,"
        " content TEXT, timestamp REAL, active INTEGER, compacted INTEGER, display_kind TEXT)"
    )
    conn.execute("CREATE INDEX idx_messages_session ON messages(session_id, timestamp)")
    conn.executemany(
        "INSERT INTO messages (session_id, role, content, timestamp, active, compacted,"
        " display_kind) VALUES (?, ?, ?, ?, ?, ?, ?)",
        ROWS,
    )
    return conn


def test_an_untitled_session_is_named_by_its_first_words(tmp_path: Path) -> None:
    conn = _archive(tmp_path / "archive.db")
    ids = ["plain", "carried", "undone", "structured", "long", "silent", "copied", "nothing"]
    names = session_names(conn, {sid: None for sid in ids} | {"titled": "Fix the build"})
    assert (
        names
        == {
            "plain": "Fix the build please",  # Markdown as read, on one line
            "carried": "what the segment asks",  # not its summary, not a blank row
            "undone": "kept words",  # a rewound or hidden row is not what a person sees
            "structured": "look at this",
            "long": ("word " * 100)[: NAME_CHARS - 1].rstrip() + "…",
            "silent": "silent",  # nothing said by the user: its id
            "copied": "first said",
            "nothing": "nothing",
            "titled": "Fix the build",
        }
    )
    assert len(names["long"]) <= NAME_CHARS


def test_the_rule_without_a_database() -> None:
    assert session_name("A title", "words", "s1") == "A title"
    assert session_name(None, "**just** words", "s1") == "just words"
    assert session_name(None, "---", "s1") == "s1"  # nothing a reader sees: the id
    assert session_name("", None, "s1") == "s1"
