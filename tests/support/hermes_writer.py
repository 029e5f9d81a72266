"""A Hermes-style writer in its own process: turns into one session, as Hermes writes them.

    python -m tests.support.hermes_writer DB SESSION_ID WORD TURNS [PAUSE_S]

Like Hermes's session store it keeps one read-write connection for its life, never sets
the journal mode (the file's own stays: WAL or rollback), and writes each turn (a user
message, the assistant's reply, the session's counters) in one ``BEGIN IMMEDIATE``
transaction, retrying a locked file with a jittered pause. The session is created when
the file lacks it. Turn ``n``'s user message holds the word ``f"{WORD}{n:03d}"``.

Any other error (``disk I/O error``…) is recorded and the turn tried again, up to
``TRIES`` times. At the end it prints one JSON line: ``{"written": [...], "errors":
[...]}`` (the turns written, every error met, each as its message).
"""

from __future__ import annotations

import json
import random
import sqlite3
import sys
import time

TRIES = 20  # tries per turn; each failed one is in "errors"

# Run with ``python -c LOCKED_MID_WRITE DB``: Hermes in rollback mode in the middle of a
# big write. It holds the EXCLUSIVE lock, and its write has spilled into the file before
# the commit (so the file changed, as a watcher's stat sees), until a line on stdin.
LOCKED_MID_WRITE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size=2")
conn.execute("BEGIN EXCLUSIVE")
conn.executemany(
    "INSERT INTO messages(session_id, role, content, timestamp) VALUES ('x', 'user', ?, 1)",
    [("spilled " * 100,)] * 300)
print("locked", flush=True)
sys.stdin.readline()  # hold the lock until the test says so
"""


def turn_word(word: str, n: int) -> str:
    """The word turn ``n`` says (what a test searches for)."""
    return f"{word}{n:03d}"


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def _insert(conn: sqlite3.Connection, table: str, values: dict[str, object]) -> None:
    present = _columns(conn, table)
    cols = [k for k in values if k in present]
    conn.execute(
        f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
        [values[k] for k in cols],
    )


def _write_turn(conn: sqlite3.Connection, session_id: str, word: str, n: int) -> None:
    now = time.time()
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("SELECT 1 FROM sessions WHERE id=?", (session_id,)).fetchone() is None:
            _insert(
                conn,
                "sessions",
                {"id": session_id, "source": "cli", "model": "hermes-4-405b", "started_at": now},
            )
        for k, (role, text) in enumerate(
            (
                ("user", f"turn {n}: tell me about {turn_word(word, n)} please"),
                ("assistant", f"answer {n}: noted."),
            )
        ):
            _insert(
                conn,
                "messages",
                {
                    "session_id": session_id,
                    "role": role,
                    "content": text,
                    "timestamp": now + k / 1000,
                    "active": 1,
                    "compacted": 0,
                    "message_uid": f"{session_id}-{n}-{k}",
                },
            )
        sets = "message_count = coalesce(message_count, 0) + 2"
        if "last_activity_at" in _columns(conn, "sessions"):
            sets += f", last_activity_at = {now!r}"
        conn.execute(f"UPDATE sessions SET {sets} WHERE id=?", (session_id,))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def main(db: str, session_id: str, word: str, turns: int, pause: float = 0.05) -> None:
    conn = sqlite3.connect(db, isolation_level=None, timeout=1, check_same_thread=False)
    written: list[int] = []
    errors: list[str] = []
    for n in range(turns):
        for _ in range(TRIES):
            try:
                _write_turn(conn, session_id, word, n)
                written.append(n)
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc):
                    errors.append(str(exc))
                time.sleep(random.uniform(0.02, 0.15))
        time.sleep(pause)
    conn.close()
    print(json.dumps({"written": written, "errors": errors}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), *map(float, sys.argv[5:6]))
