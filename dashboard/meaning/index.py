"""The archive's meaning index held in memory, and the nearest messages to a query.

Each message is 256 sign bits (embedder.sign_codes), 32 bytes: 32 MB at a million
messages, compared by brute force. First by Hamming distance to the query's signs,
four 64-bit words a message, each word a contiguous column (numpy's popcount over a
column in C: ~6 ms for 1M here); then the closest :data:`SHORTLIST` are scored again
against the query's floats (an asymmetric score: the query keeps its magnitudes, the
messages their signs), which ranks better than the signs alone.

The arrays follow the table (schema.MEANING_TABLE): rows are read past the last
``seq`` taken; a vector deleted anywhere (schema.MEANING_GENERATION_KEY moved) or another
embedder reads them all again.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dashboard.store.kept import Identity, file_identity
from dashboard.store.schema import (
    MEANING_GENERATION_KEY,
    MEANING_MODEL_KEY,
    MEANING_TABLE,
    TITLE_GENERATION_KEY,
    TITLE_MEANING_TABLE,
)

SHORTLIST = 2_000  # messages rescored against the query's floats
READ_ROWS = 50_000  # rows read a statement when taking in the table


@dataclass(frozen=True)
class Near:
    """A message close in meaning to a query, and how close (higher is closer)."""

    message_id: int
    score: float


class MeaningIndex:
    """The codes of one archive in memory (see the module); safe across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = np.empty(0, dtype=np.int64)
        self._words = np.empty((0, 0), dtype=np.uint64)  # (64-bit words a code, messages)
        self._seq = 0
        self._key: tuple[object, ...] | None = None
        # Titles: few (one a session), kept whole as floats, read again when written.
        self._titles: tuple[list[str], np.ndarray] = ([], np.empty((0, 0), np.float32))
        self._titles_key: tuple[object, ...] | None = None

    def __len__(self) -> int:
        return int(self._ids.size)

    def follow(self, conn: sqlite3.Connection) -> None:
        """Take in what the table gained since the last call (all of it again when a
        vector was deleted or the embedder changed), in ``conn``'s snapshot."""
        meta = dict(
            conn.execute(
                "SELECT key, value FROM state_meta WHERE key IN (?, ?, ?)",
                (MEANING_MODEL_KEY, MEANING_GENERATION_KEY, TITLE_GENERATION_KEY),
            ).fetchall()
        )
        # The file's identity too: a restored or replaced archive numbers its rows anew.
        identity = _file_identity(conn)
        titles_key = (identity, meta.get(MEANING_MODEL_KEY), meta.get(TITLE_GENERATION_KEY))
        if titles_key != self._titles_key:
            rows = conn.execute(f"SELECT session_id, vector FROM {TITLE_MEANING_TABLE}").fetchall()
            matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float16)
            shape = (len(rows), -1) if rows else (0, 0)
            titles = ([r[0] for r in rows], matrix.reshape(shape).astype(np.float32))
            with self._lock:
                self._titles, self._titles_key = titles, titles_key
        key = (identity, meta.get(MEANING_MODEL_KEY), meta.get(MEANING_GENERATION_KEY))
        with self._lock:
            if key != self._key:
                ids, words, seq = np.empty(0, dtype=np.int64), np.empty((0, 0), np.uint64), 0
            else:
                ids, words, seq = self._ids, self._words, self._seq
        # A chunk at a time into arrays: a million rows' bytes held as Python objects
        # first cost ~150 MB more at the peak than the 40 MB they end as.
        new_ids: list[np.ndarray] = []
        new_words: list[np.ndarray] = []
        while True:
            rows = conn.execute(
                f"SELECT seq, message_id, code FROM {MEANING_TABLE} WHERE seq > ? "
                f"ORDER BY seq LIMIT {READ_ROWS}",
                (seq,),
            ).fetchall()
            if not rows:
                break
            seq = rows[-1][0]
            new_ids.append(np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows)))
            codes = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.uint8)
            new_words.append(codes.reshape(len(rows), -1).view(np.uint64).T.copy())
            del rows, codes
        if new_ids:
            ids = np.concatenate([ids, *new_ids])
            held = [words] if words.size else []
            words = np.ascontiguousarray(np.concatenate([*held, *new_words], axis=1))
        with self._lock:
            self._ids, self._words, self._seq, self._key = ids, words, seq, key

    def nearest(self, query: np.ndarray, limit: int) -> list[Near]:
        """The ``limit`` messages closest to ``query`` (a unit vector, as long as the
        vectors the codes were made of), closest first."""
        with self._lock:
            ids, words = self._ids, self._words
        dims = len(query)
        if not ids.size or limit <= 0 or words.shape[0] * 64 < dims:
            return []
        signs = np.packbits(_padded(query > 0, words.shape[0] * 64)).view(np.uint64)
        distance = np.bitwise_count(words[0] ^ signs[0]).astype(np.uint16)
        for w in range(1, words.shape[0]):
            distance += np.bitwise_count(words[w] ^ signs[w])
        short = _closest(distance, max(limit, SHORTLIST))
        # Asymmetric: the query's floats against each candidate's ±1 signs.
        bits = np.unpackbits(words[:, short].T.copy().view(np.uint8), axis=1)[:, :dims]
        scores = (bits.astype(np.float32) * 2 - 1) @ query.astype(np.float32) / np.sqrt(dims)
        order = np.argsort(-scores, kind="stable")[:limit]
        return [Near(int(ids[short[i]]), float(scores[i])) for i in order]

    def title_closeness(self, query: np.ndarray) -> dict[str, float]:
        """Each titled session's title's cosine with ``query`` (a unit vector)."""
        with self._lock:
            ids, matrix = self._titles
        if not ids or matrix.shape[1] != len(query):
            return {}
        return dict(zip(ids, (matrix @ query.astype(np.float32)).tolist(), strict=True))


def _padded(bits: np.ndarray, length: int) -> np.ndarray:
    """``bits`` with False after them up to ``length`` (a code is whole 64-bit words)."""
    return np.concatenate([bits, np.zeros(length - len(bits), dtype=bool)])


def _file_identity(conn: sqlite3.Connection) -> Identity | None:
    """The (device, inode) of the file ``conn`` reads as ``main``."""
    path = next((row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"), "")
    return file_identity(Path(path)) if path else None


def _closest(distance: np.ndarray, count: int) -> np.ndarray:
    """Positions of the ``count`` smallest distances (ties at the edge: all of them,
    up to twice ``count``), by a histogram of the few possible distances rather than a
    partition of every row."""
    if distance.size <= count:
        return np.arange(distance.size)
    histogram = np.bincount(distance)
    edge = int(np.searchsorted(np.cumsum(histogram), count))
    found = np.flatnonzero(distance <= edge)
    if found.size > 2 * count:
        found = found[np.argsort(distance[found], kind="stable")[: 2 * count]]
    return found
