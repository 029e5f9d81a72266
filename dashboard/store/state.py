"""What a reader must know of the store it reads, beyond the one schema every page reads.

Every page, API and CLI command reads Recall's archive (or the home's own store when
it is Recall's: archive.read_choice), so the tables and columns are always those of
schema.py at :data:`schema.LATEST_VERSION`; a file of any other shape is the
importer's to read (importer.py and its adapters), never a page's. What still varies
is state, not layout: during a first import the trigram index is built once at the
end (``fts_trigram_pending``), and a demo home says so.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from dashboard.errors import StoreUnavailableError
from dashboard.store.schema import DEMO_KEY, LATEST_VERSION, TRIGRAM_PENDING_KEY, VERSION_KEY

WORD_INDEX = "messages_fts"  # unicode61: whole words, any language but CJK runs
TRIGRAM_INDEX = "messages_fts_trigram"  # parts of words, CJK (3+ characters)
TRIGRAM_VOCAB = "temp.recall_trigram_vocab"  # its pieces, one row each (trigram_vocab)

_META_KEYS = (VERSION_KEY, TRIGRAM_PENDING_KEY, DEMO_KEY)


@dataclass(frozen=True)
class StoreState:
    """The archive a unit of work reads: its path, whether its trigram index answers yet,
    and whether ``recall demo`` built it."""

    path: str
    trigram_ready: bool
    demo_seed: str | None = None

    @property
    def is_demo(self) -> bool:
        return self.demo_seed is not None


def read_state(conn: sqlite3.Connection, path: str | Path) -> StoreState:
    """The state of the store behind ``conn``; StoreUnavailableError("not-archive") when
    it is not Recall's store at the current schema (a Hermes file, an older Recall)."""
    try:
        marks = ", ".join("?" * len(_META_KEYS))
        rows = conn.execute(f"SELECT key, value FROM state_meta WHERE key IN ({marks})", _META_KEYS)
        meta = dict(rows.fetchall())
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
        meta = {}
    version = meta.get(VERSION_KEY)
    if version != str(LATEST_VERSION):
        found = f"Recall schema {version}" if version else "no Recall schema"
        raise StoreUnavailableError(
            "not-archive", str(path), f"{found}; pages read schema {LATEST_VERSION}"
        )
    return StoreState(str(path), meta.get(TRIGRAM_PENDING_KEY) != "1", meta.get(DEMO_KEY))


def trigram_vocab(conn: sqlite3.Connection) -> str:
    """The name of a table listing the trigram index's pieces (FTS5's ``fts5vocab``, by
    ``term``: a range of pieces is one seek), made on ``conn`` when it first asks.

    Temporary, so per connection; a reader's connection is ``query_only``, which a
    temporary table's creation needs lifted for the moment (as store/scope.py does).
    """
    made = conn.execute(
        "SELECT 1 FROM temp.sqlite_master WHERE name = ?", (TRIGRAM_VOCAB.split(".")[1],)
    ).fetchone()
    if made is None:
        only = conn.execute("PRAGMA query_only").fetchone()[0]
        conn.execute("PRAGMA query_only=0")
        try:
            conn.execute(
                f"CREATE VIRTUAL TABLE {TRIGRAM_VOCAB} USING fts5vocab(main, {TRIGRAM_INDEX}, row)"
            )
        finally:
            conn.execute(f"PRAGMA query_only={int(only)}")
    return TRIGRAM_VOCAB
