"""Keeping the archive's meaning index whole: a vector for every message with text.

One batch a step (:meth:`MeaningBuilder.step`): first the messages whose text changed
(``meaning_redo``, filled by a trigger), then the rows newer than any considered yet,
then, on a first build, the older ones, newest first, so recent conversations are found
by meaning first. Each batch is embedded outside any transaction, then written in one
(its vectors and how far the build got, together), so a build killed at any moment
resumes where its last batch ended. A text changed between the read and the write is
caught by the same trigger and done again.

The writes go through their own :class:`WriteCore` (BEGIN IMMEDIATE, jittered retry)
and do not count as archive writes (``recall_writes``): vectors change no page's rows,
so the caches keyed on that counter (lineage, epochs, the message map's flags) stay.
The batches are large (a commit makes every reader's page cache stale).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dashboard.meaning.embedder import Embedder, configured_embedder, message_text, sign_codes
from dashboard.store.kept import Identity, file_identity
from dashboard.store.schema import (
    MEANING_DONE_KEY,
    MEANING_FLOOR_KEY,
    MEANING_MODEL_KEY,
    MEANING_REDO,
    MEANING_TABLE,
    MEANING_TOP_KEY,
    TITLE_GENERATION_KEY,
    TITLE_MEANING_TABLE,
)
from dashboard.store.writecore import WriteCore

BATCH = 2_048  # messages a step: ~0.5 s of embedding here, one commit
IDLE_S = 5.0  # a look for new rows when nothing woke the worker (__main__.py)
ERROR_WAIT_S = 30.0  # after a step failed (a locked or replaced file): try again later


BEHIND_FLOOR = 200  # messages a built index may lag (MeaningStatus.built)


@dataclass(frozen=True)
class MeaningStatus:
    """How complete the index is: ``covered`` of ``total`` messages considered (a
    message without text is considered and has no vector)."""

    ready: bool
    covered: int
    total: int
    model: str | None = None
    newer: int = 0  # of the messages left, those newer than the last pass (a sync's)

    def to_json(self) -> dict[str, object]:
        return {"ready": self.ready, "covered": self.covered, "total": self.total}

    @property
    def percent(self) -> int:
        return 100 if not self.total else min(100, self.covered * 100 // self.total)

    @property
    def built(self) -> bool:
        """Built here and behind only by messages newer than its last pass, no more than
        a sync's worth (the larger of 200 and 1% of them): a busy home's index is a
        second behind each new message, not one being built."""
        behind = self.total - self.covered
        return self.ready or (
            self.model is not None
            and behind == self.newer
            and behind <= max(BEHIND_FLOOR, self.total // 100)
        )


@dataclass
class _Work:
    kind: str  # "redo", "new" or "older"
    rows: list[tuple[int, str]] = field(default_factory=list)  # (id, text to embed)
    considered: list[int] = field(default_factory=list)  # every id read, with text or not


class MeaningBuilder:
    """The meaning index of the archive at ``path`` (see the module).

    ``embedder``: made on first use (loading WordLlama takes 0.2 s), or given (tests).
    """

    def __init__(
        self,
        path: str | Path,
        embedder: Callable[[], Embedder] = configured_embedder,
        batch: int = BATCH,
    ) -> None:
        self.path = Path(path)
        self._make_embedder = embedder
        self._embedder: Embedder | None = None
        self.batch = batch
        self._core: WriteCore | None = None
        self._identity: Identity | None = None  # of the file the writer opened
        self._lock = threading.Lock()  # one step at a time

    def close(self) -> None:
        """Close its writer connection (a file gone bad: the connection goes with it)."""
        core, self._core = self._core, None
        if core is not None:
            try:
                core.close()
            except sqlite3.Error:
                pass

    # -- one step -------------------------------------------------------------------------

    def build(self, progress: Callable[[MeaningStatus], None] | None = None) -> MeaningStatus:
        """Step until the index is complete (``recall archive sync``, tests); its state
        after each step goes to ``progress``."""
        while self.step():
            if progress is not None:
                progress(read_status(self._writer().conn))
        return read_status(self._writer().conn)

    def step(self) -> int:
        """Embed and write one batch; return how many messages it considered (0: the
        index is complete and current)."""
        with self._lock:
            core = self._writer()
            embedder = self._embedder_now()
            meta = self._meta(core.conn)
            if meta.get(MEANING_MODEL_KEY) != embedder.name:
                core.write(lambda conn: _start_over(conn, embedder.name))
                meta = self._meta(core.conn)
            titles = _titles_to_embed(core.conn, self.batch)
            if titles or _stale_titles(core.conn):
                vectors = embedder.embed([title for _, title in titles]).astype(np.float16)
                core.write(lambda conn: _land_titles(conn, titles, vectors))
            work = _next_work(core.conn, meta, self.batch)
            if work is not None:
                codes = sign_codes(embedder.embed([text for _, text in work.rows]))
                core.write(lambda conn: _land(conn, work, codes))
            return len(titles) + (len(work.considered) if work is not None else 0)

    def _writer(self) -> WriteCore:
        """The writer, opened again when the file at the path is another one (a restored
        or replaced archive: the old connection would write into the file it replaced)."""
        identity = file_identity(self.path)
        if identity is None:  # never make an empty file where the archive was
            self.close()
            raise sqlite3.OperationalError(f"{self.path} is missing or empty")
        if self._core is not None and identity != self._identity:
            self.close()
        if self._core is None:
            self._core = WriteCore(self.path)
            self._identity = identity
        return self._core

    def _embedder_now(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self._make_embedder()
        return self._embedder

    @staticmethod
    def _meta(conn: sqlite3.Connection) -> dict[str, str]:
        keys = (MEANING_MODEL_KEY, MEANING_FLOOR_KEY, MEANING_TOP_KEY, MEANING_DONE_KEY)
        rows = conn.execute(
            f"SELECT key, value FROM state_meta WHERE key IN ({', '.join('?' * len(keys))})", keys
        )
        return {r[0]: r[1] for r in rows}


def _titles_to_embed(conn: sqlite3.Connection, batch: int) -> list[tuple[str, str]]:
    """Titled sessions whose title is not the one embedded (new, or renamed)."""
    return [
        (r[0], r[1])
        for r in conn.execute(
            f"SELECT s.id, s.title FROM sessions s LEFT JOIN {TITLE_MEANING_TABLE} v "
            "ON v.session_id = s.id WHERE coalesce(s.title, '') != '' "
            "AND v.title IS NOT s.title LIMIT ?",
            (batch,),
        )
    ]


def _stale_titles(conn: sqlite3.Connection) -> bool:
    """Whether a title vector outlived its session's title (deleted, or cleared)."""
    return (
        conn.execute(
            f"SELECT 1 FROM {TITLE_MEANING_TABLE} v LEFT JOIN sessions s ON s.id = v.session_id "
            "WHERE coalesce(s.title, '') = '' LIMIT 1"
        ).fetchone()
        is not None
    )


def _land_titles(
    conn: sqlite3.Connection, titles: list[tuple[str, str]], vectors: np.ndarray
) -> None:
    """Write title vectors, forget those of sessions gone or untitled, tell readers."""
    conn.executemany(
        f"INSERT OR REPLACE INTO {TITLE_MEANING_TABLE}(session_id, title, vector) VALUES (?, ?, ?)",
        [(sid, title, vectors[n].tobytes()) for n, (sid, title) in enumerate(titles)],
    )
    conn.execute(
        f"DELETE FROM {TITLE_MEANING_TABLE} WHERE session_id NOT IN "
        "(SELECT id FROM sessions WHERE coalesce(title, '') != '')"
    )
    conn.execute(
        "INSERT INTO state_meta(key, value) VALUES (?, 1) "
        "ON CONFLICT(key) DO UPDATE SET value = value + 1",
        (TITLE_GENERATION_KEY,),
    )


def _start_over(conn: sqlite3.Connection, model: str) -> None:
    """Another embedder (or none yet): its vectors are not comparable; begin again."""
    conn.execute(f"DELETE FROM {TITLE_MEANING_TABLE}")
    conn.execute(f"DELETE FROM {MEANING_TABLE}")
    conn.execute(f"DELETE FROM {MEANING_REDO}")
    top = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
    for key, value in (
        (MEANING_MODEL_KEY, model),
        (MEANING_TOP_KEY, str(top)),
        (MEANING_FLOOR_KEY, str(top + 1)),  # nothing considered yet
        (MEANING_DONE_KEY, "0"),
    ):
        _set(conn, key, value)


def _set(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO state_meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


_COLUMNS = "id, role, content, tool_calls"


def _next_work(conn: sqlite3.Connection, meta: dict[str, str], batch: int) -> _Work | None:
    """The next batch: texts changed, then newer rows, then older ones (see the module)."""
    top, floor = int(meta[MEANING_TOP_KEY]), int(meta[MEANING_FLOOR_KEY])
    redo = conn.execute(
        f"SELECT m.{_COLUMNS.replace(', ', ', m.')} FROM {MEANING_REDO} r "
        f"JOIN messages m ON m.id = r.message_id ORDER BY r.message_id DESC LIMIT ?",
        (batch,),
    ).fetchall()
    gone = conn.execute(
        f"SELECT message_id FROM {MEANING_REDO} r WHERE NOT EXISTS "
        f"(SELECT 1 FROM messages m WHERE m.id = r.message_id) LIMIT ?",
        (batch,),
    ).fetchall()
    if redo or gone:
        work = _work("redo", redo)
        work.considered += [r[0] for r in gone]
        return work
    newer = conn.execute(
        f"SELECT {_COLUMNS} FROM messages WHERE id > ? ORDER BY id LIMIT ?", (top, batch)
    ).fetchall()
    if newer:
        return _work("new", newer)
    older = conn.execute(
        f"SELECT {_COLUMNS} FROM messages WHERE id < ? ORDER BY id DESC LIMIT ?", (floor, batch)
    ).fetchall()
    return _work("older", older) if older else None


def _work(kind: str, rows: list[sqlite3.Row]) -> _Work:
    work = _Work(kind)
    for row in rows:
        work.considered.append(row[0])
        text = message_text(row[1], row[2], row[3])
        if text:
            work.rows.append((row[0], text))
    return work


def _land(conn: sqlite3.Connection, work: _Work, codes: np.ndarray) -> None:
    """Write one batch's vectors and how far the build got, in one transaction."""
    keep = list(range(len(work.rows)))
    if work.kind == "redo":
        # A text that changed again since it was read stays queued (its trigger ran
        # before this transaction began, so the queue still holds it): not written.
        ids = [i for i, _ in work.rows]
        now = {
            r[0]: message_text(r[1], r[2], r[3])
            for r in conn.execute(
                f"SELECT {_COLUMNS} FROM messages WHERE id IN ({', '.join('?' * len(ids))})", ids
            )
        }
        keep = [n for n, (i, text) in enumerate(work.rows) if now.get(i) == text]
        done = {work.rows[n][0] for n in keep} | (set(work.considered) - set(ids))
        conn.executemany(f"DELETE FROM {MEANING_REDO} WHERE message_id = ?", [(i,) for i in done])
    conn.executemany(
        f"INSERT OR REPLACE INTO {MEANING_TABLE}(message_id, code) VALUES (?, ?)",
        [(work.rows[n][0], codes[n].tobytes()) for n in keep],
    )
    if work.kind == "new":
        _set(conn, MEANING_TOP_KEY, str(max(work.considered)))
    elif work.kind == "older":
        _set(conn, MEANING_FLOOR_KEY, str(min(work.considered)))
    if work.kind != "redo":
        conn.execute(
            "UPDATE state_meta SET value = value + ? WHERE key = ?",
            (len(work.considered), MEANING_DONE_KEY),
        )


def read_status(conn: sqlite3.Connection) -> MeaningStatus:
    """How complete the index is, in ``conn``'s snapshot, in a few seeks (pages ask it
    on every search): complete when no row lies below the floor or above the top and
    none is queued again. What is left is counted by ids (the archive's ids are
    ``AUTOINCREMENT`` and rarely deleted: nearly dense), so no count of every row."""
    meta = MeaningBuilder._meta(conn)
    oldest, newest = _oldest(conn), _newest(conn)
    if MEANING_TOP_KEY not in meta:  # never built here
        return MeaningStatus(False, 0, newest - oldest + 1 if newest else 0)
    top, floor = int(meta[MEANING_TOP_KEY]), int(meta[MEANING_FLOOR_KEY])
    redo = conn.execute(f"SELECT count(*) FROM {MEANING_REDO}").fetchone()[0]
    newer = max(0, newest - top) if newest else 0
    left = max(0, floor - oldest) + newer + redo if newest else 0
    covered = int(meta.get(MEANING_DONE_KEY, 0))
    return MeaningStatus(left == 0, covered, covered + left, meta.get(MEANING_MODEL_KEY), newer)


def _oldest(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT coalesce(min(id), 0) FROM messages").fetchone()[0]


def _newest(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
