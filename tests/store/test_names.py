"""What a person calls a session (store/names.py): title, else first words, else id."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dashboard.hermes.conventions import COMPACTION_MARKER, MERGED_SUMMARY_OPEN
from dashboard.store.names import NAME_CHARS, session_name, session_names

ROWS = [
    # (session, role, content, timestamp, active, compacted, display_kind, compressed_summary)
    ("plain", "assistant", "I answer first", 1.0, 1, 0, None, 0),
    ("plain", "user", "  **Fix** the `build`\n\nplease ", 2.0, 1, 0, None, 0),
    ("plain", "user", "a later question", 3.0, 1, 0, None, 0),
    ("carried", "user", f"{COMPACTION_MARKER}\nEarlier turns were compacted.", 1.0, 1, 0, None, 0),
    ("carried", "user", "   ", 2.0, 1, 0, None, 0),
    ("carried", "user", "what the segment asks", 3.0, 1, 0, None, 0),
    ("undone", "user", "rewound words", 1.0, 0, 0, None, 0),
    ("undone", "user", "hidden words", 2.0, 1, 0, "hidden", 0),
    ("undone", "user", "kept words", 3.0, 0, 1, None, 0),
    (
        "structured",
        "user",
        '\x00json:[{"type": "text", "text": "look at this"}]',
        1.0,
        1,
        0,
        None,
        0,
    ),
    ("long", "user", "word " * 100, 1.0, 1, 0, None, 0),
    ("silent", "assistant", "no user here", 1.0, 1, 0, None, 0),
    # By time: a copy inserted later with its original's (earlier) timestamp comes first.
    ("copied", "user", "second said", 5.0, 1, 0, None, 0),
    ("copied", "user", "first said", 4.0, 1, 0, None, 0),
    # A summary merged into a retained user row (schema 31), then the first words.
    ("merged", "user", f"{MERGED_SUMMARY_OPEN}\nthe old talk", 1.0, 1, 0, None, 1),
    ("merged", "user", "flagged only: a summary too", 2.0, 1, 0, None, 1),
    ("merged", "user", "what was asked after", 3.0, 1, 0, None, 0),
]


def _archive(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT,"
        " content TEXT, timestamp REAL, active INTEGER, compacted INTEGER, display_kind TEXT,"
        " compressed_summary INTEGER NOT NULL DEFAULT 0, message_uid TEXT, repeats INTEGER)"
    )
    conn.execute("CREATE INDEX idx_messages_session ON messages(session_id, timestamp)")
    conn.executemany(
        "INSERT INTO messages (session_id, role, content, timestamp, active, compacted,"
        " display_kind, compressed_summary) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ROWS,
    )
    # Schema 31: a superseded original (active=0, compacted=0, its uid copied later) is
    # history a person sees; its live copy repeats it and is not shown twice.
    original = conn.execute(
        "INSERT INTO messages (session_id, role, content, timestamp, active, compacted,"
        " message_uid) VALUES ('superseded', 'user', 'the original ask', 1.0, 0, 0, 'u1')"
    ).lastrowid
    conn.execute(
        "INSERT INTO messages (session_id, role, content, timestamp, active, compacted,"
        " message_uid, repeats) VALUES ('superseded', 'user', 'the original ask', 1.0, 1, 0,"
        " 'u1', ?)",
        (original,),
    )
    conn.execute(
        "INSERT INTO messages (session_id, role, content, timestamp, active, compacted,"
        " message_uid) VALUES ('superseded', 'user', 'a rewound ask', 0.5, 0, 0, 'u2')"
    )
    return conn


def test_an_untitled_session_is_named_by_its_first_words(tmp_path: Path) -> None:
    conn = _archive(tmp_path / "archive.db")
    ids = ["plain", "carried", "undone", "structured", "long", "silent", "copied", "merged"]
    ids += ["superseded", "nothing"]
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
            "merged": "what was asked after",
            "superseded": "the original ask",  # not the rewound row said before it
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
