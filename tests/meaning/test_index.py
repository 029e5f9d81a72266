"""The meaning index in memory: the nearest messages are the brute force's, and it
follows the table as rows are added and vectors deleted."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from dashboard.meaning import index as meaning_index
from dashboard.meaning.builder import MeaningBuilder
from dashboard.meaning.embedder import DIMS, WordLlamaEmbedder
from dashboard.meaning.index import MeaningIndex
from dashboard.store.schema import MEANING_TABLE
from dashboard.store.writecore import WriteCore
from tests.support import hermes_shapes as shapes
from tests.support.archived import archive_home


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    path = archive_home(home, tmp_path / "archive.db")
    MeaningBuilder(path).build()
    return home, path


def _brute(path: Path, query: np.ndarray) -> list[tuple[int, float]]:
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute(f"SELECT message_id, code FROM {MEANING_TABLE}").fetchall()
    scored = []
    for message_id, code in rows:
        signs = np.unpackbits(np.frombuffer(code, dtype=np.uint8)).astype(np.float32) * 2 - 1
        scored.append((message_id, float(signs @ query) / np.sqrt(DIMS)))
    return sorted(scored, key=lambda s: -s[1])


def _nearest(index: MeaningIndex, query: np.ndarray, limit: int) -> list[tuple[int, float]]:
    return [(n.message_id, n.score) for n in index.nearest(query, limit)]


@pytest.mark.parametrize("shortlist", [2_000, 5])
def test_the_nearest_are_the_brute_forces(
    built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, shortlist: int
) -> None:
    """Exact when every message is shortlisted; with a shortlist of 5 the first pass
    (Hamming) decides which are rescored, so the answer is a subset, still in order."""
    monkeypatch.setattr(meaning_index, "SHORTLIST", shortlist)
    _, path = built
    query = WordLlamaEmbedder().embed(["a question about the database connection"])[0]
    index = MeaningIndex()
    with closing(sqlite3.connect(path)) as conn:
        index.follow(conn)
    brute = _brute(path, query)
    assert len(index) == len(brute) > 10
    got = _nearest(index, query, 5)
    if shortlist > len(brute):
        assert [i for i, _ in got] == [i for i, _ in brute[:5]]
    scores = dict(brute)
    assert all(abs(scores[i] - s) < 1e-5 for i, s in got)
    assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)


def test_it_follows_new_vectors_and_deletions(built: tuple[Path, Path]) -> None:
    home, path = built
    index = MeaningIndex()
    with closing(sqlite3.connect(path)) as conn:
        index.follow(conn)
    before = len(index)
    shapes.append_turn(home / "state.db", shapes.S_ROOT, "lemon cake recipe", "sure", 2e9)
    archive_home(home, path)
    MeaningBuilder(path).build()
    with closing(sqlite3.connect(path)) as conn:
        index.follow(conn)
    assert len(index) == before + 2
    core = WriteCore(path)
    try:
        core.write(lambda c: c.execute("DELETE FROM messages WHERE content = 'lemon cake recipe'"))
    finally:
        core.close()
    with closing(sqlite3.connect(path)) as conn:
        index.follow(conn)  # a deletion: read again, whole
    query = WordLlamaEmbedder().embed(["lemon cake recipe"])[0]
    assert len(index) == before + 1
    fresh = MeaningIndex()
    with closing(sqlite3.connect(path)) as conn:
        fresh.follow(conn)
    assert _nearest(index, query, 10) == _nearest(fresh, query, 10)
