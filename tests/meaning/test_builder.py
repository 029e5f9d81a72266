"""The meaning index in the archive: complete, current after syncs, edits and deletes,
and resumed after a kill."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from dashboard.meaning.builder import MeaningBuilder
from dashboard.meaning.embedder import WordLlamaEmbedder, message_text, sign_codes
from dashboard.store.schema import (
    MEANING_FLOOR_KEY,
    MEANING_GENERATION_KEY,
    MEANING_REDO,
    MEANING_TABLE,
    TITLE_MEANING_TABLE,
)
from dashboard.store.writecore import WriteCore
from tests.support import hermes_shapes as shapes
from tests.support.archived import archive_home

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def archive(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    return home, archive_home(home, tmp_path / "archive.db")


def _vectors(path: Path) -> dict[int, bytes]:
    with closing(sqlite3.connect(path)) as conn:
        return dict(conn.execute(f"SELECT message_id, code FROM {MEANING_TABLE}").fetchall())


def _expected(path: Path) -> dict[int, bytes]:
    """Every message with text, and its code, computed here from the rows as they are."""
    embedder = WordLlamaEmbedder()
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT id, role, content, tool_calls FROM messages").fetchall()
    texts = {i: message_text(role, c, t) for i, role, c, t in rows}
    texts = {i: text for i, text in texts.items() if text}
    codes = sign_codes(embedder.embed(list(texts.values())))
    return {i: codes[n].tobytes() for n, i in enumerate(texts)}


def test_a_build_gives_every_message_with_text_its_vector(archive: tuple[Path, Path]) -> None:
    _, path = archive
    builder = MeaningBuilder(path, batch=7)  # several steps of every kind
    status = builder.build()
    assert status.ready and status.covered == status.total > 0
    with closing(sqlite3.connect(path)) as conn:
        total = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    assert status.total == total
    assert _vectors(path) == _expected(path)
    assert builder.step() == 0  # nothing left


def test_the_index_follows_new_turns_edits_and_deletions(archive: tuple[Path, Path]) -> None:
    home, path = archive
    builder = MeaningBuilder(path, batch=5)
    builder.build()
    shapes.append_turn(home / "state.db", shapes.S_ROOT, "the containers cannot talk", "ok", 2e9)
    archive_home(home, path)
    assert builder.step() > 0  # the new turn's two messages
    builder.build()
    core = WriteCore(path)
    try:
        edited, deleted = core.conn.execute(
            "SELECT max(id), min(id) FROM messages WHERE role = 'user'"
        ).fetchone()
        before = core.conn.execute(
            f"SELECT value FROM state_meta WHERE key = '{MEANING_GENERATION_KEY}'"
        ).fetchone()
        core.write(
            lambda c: c.execute(
                "UPDATE messages SET content = 'a recipe for lemon cake' WHERE id = ?", (edited,)
            )
        )
        core.write(lambda c: c.execute("DELETE FROM messages WHERE id = ?", (deleted,)))
        queued = core.conn.execute(f"SELECT message_id FROM {MEANING_REDO}").fetchall()
        after = core.conn.execute(
            f"SELECT value FROM state_meta WHERE key = '{MEANING_GENERATION_KEY}'"
        ).fetchone()
    finally:
        core.close()
    assert [r[0] for r in queued] == [edited]
    assert after is not None and (before is None or int(after[0]) > int(before[0]))
    assert builder.build().ready
    assert _vectors(path) == _expected(path)
    assert deleted not in _vectors(path)


_KILLED = """
import sys, time
from dashboard.meaning.builder import MeaningBuilder
builder = MeaningBuilder(sys.argv[1], batch=3)
while builder.step():
    print("step", flush=True)
    time.sleep(0.05)
"""


def test_a_killed_build_resumes_where_it_stopped(archive: tuple[Path, Path]) -> None:
    """A real process killed (SIGKILL) between or inside batches; another finishes."""
    _, path = archive
    with subprocess.Popen(
        [sys.executable, "-c", _KILLED, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ) as proc:
        assert proc.stdout is not None
        for _ in range(4):
            assert proc.stdout.readline().startswith("step")
        time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    part = _vectors(path)
    with closing(sqlite3.connect(path)) as conn:
        floor = conn.execute(
            f"SELECT value FROM state_meta WHERE key = '{MEANING_FLOOR_KEY}'"
        ).fetchone()[0]
    assert part and all(i >= int(floor) for i in part)  # written with how far it got
    builder = MeaningBuilder(path, batch=50)
    assert builder.build().ready
    assert _vectors(path) == _expected(path)


def test_another_embedder_starts_the_index_again(archive: tuple[Path, Path]) -> None:
    _, path = archive
    MeaningBuilder(path).build()

    class Ones:
        name = "ones-256"

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts), 256), dtype=np.float32)

    assert MeaningBuilder(path, embedder=Ones).build().ready
    assert set(_vectors(path).values()) == {b"\xff" * 32}


def test_titles_get_their_vectors_and_follow_renames(archive: tuple[Path, Path]) -> None:
    home, path = archive
    builder = MeaningBuilder(path, batch=2)
    builder.build()

    def titles() -> dict[str, str]:
        with closing(sqlite3.connect(path)) as conn:
            return dict(conn.execute(f"SELECT session_id, title FROM {TITLE_MEANING_TABLE}"))

    with closing(sqlite3.connect(path)) as conn:
        titled = dict(
            conn.execute("SELECT id, title FROM sessions WHERE coalesce(title, '') != ''")
        )
        vector = conn.execute(
            f"SELECT vector FROM {TITLE_MEANING_TABLE} WHERE session_id = ?", (shapes.S_ROOT,)
        ).fetchone()[0]
    assert titles() == titled and len(titled) > 1
    expected = WordLlamaEmbedder().embed([titled[shapes.S_ROOT]])[0].astype(np.float16)
    assert vector == expected.tobytes()
    shapes.retitle(home / "state.db", shapes.S_ROOT, "a lemon cake recipe")
    other = next(sid for sid in titled if sid != shapes.S_ROOT)
    shapes.retitle(home / "state.db", other, None)
    archive_home(home, path)
    assert builder.build().ready
    now = titles()
    assert now[shapes.S_ROOT] == "a lemon cake recipe" and other not in now


def test_a_replaced_archive_is_written_and_read_as_the_new_file(
    archive: tuple[Path, Path], tmp_path: Path
) -> None:
    """A backup restored over the archive: the index in memory reads the new file whole
    (its rows are numbered as the old file's were), the builder writes the new file (not
    the one it replaced, which its old connection still holds), and a missing file is an
    error, never a new empty one."""
    from dashboard.meaning.index import MeaningIndex

    home, path = archive
    builder = MeaningBuilder(path)
    builder.build()
    backup = tmp_path / "backup.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copy(path, backup)  # complete, as of now
    shapes.append_turn(home / "state.db", shapes.S_ROOT, "the lemon cake recipe", "yes", 2e9)
    archive_home(home, path)
    builder.build()
    index = MeaningIndex()
    with closing(sqlite3.connect(path)) as conn:
        index.follow(conn)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    newer = len(index)
    os.replace(backup, path)  # the same model and generation; two rows fewer
    with closing(sqlite3.connect(path)) as conn:
        index.follow(conn)
    assert len(index) == newer - 2
    core = WriteCore(path)
    try:
        core.write(
            lambda c: c.execute(
                "INSERT INTO messages(session_id, role, content, timestamp) "
                "VALUES (?, 'user', 'a new row of the restored file', 2e9)",
                (shapes.S_ROOT,),
            )
        )
    finally:
        core.close()
    assert builder.build().ready
    assert _vectors(path) == _expected(path)
    os.remove(path)
    with pytest.raises(sqlite3.OperationalError, match="missing or empty"):
        builder.step()
    assert not path.exists()
