"""Detect what a ``state.db`` holds, from the file itself, never from a version number.

Real Hermes homes come in many shapes (HERMES_FACTS.md): the seed's inline FTS,
older external-content FTS, the current form read through views, no trigram
table, a CJK table whose tokenizer is not loadable, a stale index, DELETE journal
mode, missing newer columns. :func:`detect_layout` reads ``sqlite_master`` and a
few pragmas (all read-only) and returns a :class:`Layout` the rest of Recall
branches on and the overview page shows.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from dashboard.hermes.conventions import visible_rows_sql
from dashboard.store.schema import DEMO_KEY, TRIGRAM_PENDING_KEY

FTS_NAMES = ("messages_fts", "messages_fts_trigram", "messages_fts_cjk")


@dataclass(frozen=True)
class FtsIndex:
    """One FTS5 table over messages, as declared and as found usable."""

    name: str
    tokenizer: str  # e.g. "unicode61", "trigram", "cjk_unicode61"
    columns: tuple[str, ...]
    content: str | None  # None: inline (the index stores its own copy of the text)
    usable: bool
    error: str | None = None

    @property
    def form(self) -> str:
        """``inline``, ``external`` (content= a table) or ``views`` (content= a view)."""
        if self.content is None:
            return "inline"
        return "external" if self.content == "messages" else "views"


@dataclass(frozen=True)
class Layout:
    """What one state.db contains, as detected."""

    path: str
    schema_version: int | None
    recall_version: int | None
    journal_mode: str
    tables: frozenset[str]
    session_columns: frozenset[str]
    message_columns: frozenset[str]
    fts: dict[str, FtsIndex] = field(default_factory=dict)
    fts_stale: bool = False
    # Hermes rebuilds its index in the background; rows between the progress
    # mark and the high-water mark are not indexed yet.
    fts_rebuilding: bool = False
    # Recall's first import indexes words as rows land and builds the trigram
    # index once at the end; until then it answers nothing and must not be asked.
    trigram_pending: bool = False
    demo_seed: str | None = None  # set in homes built by ``recall demo``

    @property
    def is_demo(self) -> bool:
        """Whether ``recall demo`` built this home (the banner on every page)."""
        return self.demo_seed is not None

    # -- what the rest of the app asks -------------------------------------------------

    @property
    def fts_form(self) -> str:
        """Layout of the main index: ``inline``, ``external``, ``views`` or ``none``."""
        main = self.fts.get("messages_fts")
        return main.form if main else "none"

    @property
    def word_index(self) -> FtsIndex | None:
        """The unicode61 index, when present and queryable."""
        return self._usable("messages_fts")

    @property
    def trigram_index(self) -> FtsIndex | None:
        return None if self.trigram_pending else self._usable("messages_fts_trigram")

    @property
    def cjk_index(self) -> FtsIndex | None:
        return self._usable("messages_fts_cjk")

    def _usable(self, name: str) -> FtsIndex | None:
        index = self.fts.get(name)
        return index if index and index.usable else None

    @property
    def has_model_usage(self) -> bool:
        return "session_model_usage" in self.tables

    @property
    def is_recall_store(self) -> bool:
        return self.recall_version is not None

    def visible_messages_sql(self, alias: str = "m") -> str:
        """A WHERE fragment selecting the rows a person should see (1 when no columns)."""
        return visible_rows_sql(self.message_columns, alias)

    def summary(self) -> dict[str, object]:
        """A flat description for the overview page and ``recall info``."""
        return {
            "schema_version": self.schema_version,
            "recall_version": self.recall_version,
            "journal_mode": self.journal_mode,
            "fts_form": self.fts_form,
            "word_index": bool(self.word_index),
            "trigram_index": bool(self.trigram_index),
            "cjk_index": (
                "usable"
                if self.cjk_index
                else ("unusable: " + (self.fts["messages_fts_cjk"].error or "?"))
                if "messages_fts_cjk" in self.fts
                else "absent"
            ),
            "fts_stale": self.fts_stale,
            "fts_rebuilding": self.fts_rebuilding,
            "trigram_pending": self.trigram_pending,
            "visible_rows_filter": self.visible_messages_sql(),
            "session_model_usage": self.has_model_usage,
        }


def detect_layout(conn: sqlite3.Connection, path: str | Path = "") -> Layout:
    """Describe the database behind ``conn`` without writing anything to it."""
    master = {
        row[0]: (row[1], row[2] or "")
        for row in conn.execute("SELECT name, type, sql FROM sqlite_master")
    }
    tables = frozenset(n for n, (kind, _) in master.items() if kind in ("table", "view"))
    fts = {
        name: _fts_index(conn, name, master[name][1])
        for name in FTS_NAMES
        if name in master and "fts5" in master[name][1].lower()
    }
    meta = _state_meta(conn) if "state_meta" in tables else {}
    recall_version = meta.get("recall_schema_version")
    return Layout(
        path=str(path),
        schema_version=_schema_version(conn) if "schema_version" in tables else None,
        recall_version=int(recall_version) if recall_version and recall_version.isdigit() else None,
        journal_mode=str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower(),
        tables=tables,
        session_columns=_columns(conn, "sessions") if "sessions" in tables else frozenset(),
        message_columns=_columns(conn, "messages") if "messages" in tables else frozenset(),
        fts=fts,
        fts_stale=meta.get("fts_stale") == "1",
        fts_rebuilding=bool(meta.get("fts_rebuild_high_water")),
        trigram_pending=meta.get(TRIGRAM_PENDING_KEY) == "1",
        demo_seed=meta.get(DEMO_KEY),
    )


def parse_fts5_args(sql: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """Split ``CREATE VIRTUAL TABLE ... USING fts5(...)`` into columns and options."""
    start = sql.find("(")
    end = sql.rfind(")")
    if start < 0 or end <= start:
        return (), {}
    columns: list[str] = []
    options: dict[str, str] = {}
    for arg in _split_top_level(sql[start + 1 : end]):
        if "=" in arg:
            key, _, value = arg.partition("=")
            options[key.strip().lower()] = _unquote(value.strip())
        elif arg.strip():
            # A column may carry the UNINDEXED flag: keep just its name.
            columns.append(_unquote(arg.split()[0]))
    return tuple(columns), options


def _fts_index(conn: sqlite3.Connection, name: str, sql: str) -> FtsIndex:
    columns, options = parse_fts5_args(sql)
    tokenizer = (options.get("tokenize") or "unicode61").split()[0].strip("'\"")
    content = options.get("content") or None
    error = None
    try:
        # Preparing a query is enough to load the tokenizer; LIMIT 0 reads nothing.
        conn.execute(f"SELECT rowid FROM {name} WHERE {name} MATCH 'a' LIMIT 0").fetchall()
    except sqlite3.Error as exc:
        error = str(exc)
    return FtsIndex(name, tokenizer, columns, content, error is None, error)


def _split_top_level(text: str) -> list[str]:
    parts, depth, quote, current = [], 0, "", []
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`[":
            quote = "]" if ch == "[" else ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts]


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"`":
        return value[1:-1]
    return re.sub(r"^\[(.*)\]$", r"\1", value)


def _columns(conn: sqlite3.Connection, table: str) -> frozenset[str]:
    return frozenset(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))


def _schema_version(conn: sqlite3.Connection) -> int | None:
    try:
        row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    except sqlite3.Error:
        return None
    return int(row[0]) if row and row[0] is not None else None


def _state_meta(conn: sqlite3.Connection) -> dict[str, str]:
    try:
        return {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM state_meta")}
    except sqlite3.Error:
        return {}
