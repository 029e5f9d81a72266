"""The overview's figures (reader/overview.py): counts through partial indexes equal the
visible-row rule read row by row; a source's figures kept while its files are unchanged."""

from __future__ import annotations

import os
import time
from contextlib import closing
from pathlib import Path

import pytest

from dashboard.hermes.conventions import visible_sql
from dashboard.reader import overview
from dashboard.reader.overview import SourceFigures, archive_counts, visible_messages
from dashboard.store.readonly import open_readonly
from tests.support import hermes_shapes as hs
from tests.support import hermes_v31 as hv
from tests.support.archived import archive_home


@pytest.mark.parametrize("shape", ["v31", "epochs", "profiles"])
def test_visible_messages_through_the_index_equal_the_rule_row_by_row(
    tmp_path: Path, shape: str
) -> None:
    """Copies, rewound, superseded and hidden rows all present: every message less the
    indexed few equals the rule applied to every row."""
    home = tmp_path / "home"
    if shape == "v31":
        hv.build_v31_home(home)
    elif shape == "epochs":
        hs.build_epochs_home(home)
    else:
        hs.build_current_views(home / "state.db")
    path = archive_home(home)
    with closing(open_readonly(path)) as conn:
        plain = conn.execute(f"SELECT count(*) FROM messages m WHERE {visible_sql('m')}")
        every = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        expected = plain.fetchone()[0]
        assert visible_messages(conn) == expected < every
        plan = conn.execute(
            f"EXPLAIN QUERY PLAN SELECT count(*) FROM messages WHERE {overview.UNSHOWN_ROWS}"
        ).fetchall()
        assert "idx_messages_unshown" in " ".join(str(tuple(r)) for r in plan)
        newest = conn.execute("SELECT max(timestamp) FROM messages").fetchone()[0]
        assert conn.execute(overview.NEWEST_MESSAGE).fetchone()[0] == newest
        gone = conn.execute("SELECT count(*) FROM messages m WHERE m.gone_from_source_at > 0")
        assert archive_counts(conn)["gone_messages"] == gone.fetchone()[0]


def test_a_source_s_figures_are_kept_until_its_files_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = hs.build_current_views(tmp_path / "home" / "state.db")
    old = time.time() - 60  # written a minute ago: past the clock's grain
    for path in (db, Path(f"{db}-wal")):
        if path.exists():
            os.utime(path, (old, old))
    reads: list[Path] = []
    real = overview.source_overview
    monkeypatch.setattr(overview, "source_overview", lambda path: reads.append(path) or real(path))
    figures = SourceFigures()
    first = figures.get(db)
    assert first["reachable"] and figures.get(db) == first and len(reads) == 1
    hs.append_turn(db, hs.S_ROOT, "one more", "ok", 1_900_000_000.0)
    after = figures.get(db)
    assert len(reads) == 2 and after["messages"] == first["messages"] + 2
    figures.get(db)  # written just now: not kept, read again
    assert len(reads) == 3
    db.unlink()
    for side in ("-wal", "-shm"):
        Path(f"{db}{side}").unlink(missing_ok=True)
    assert figures.get(db)["reachable"] is False  # a file gone is said, not served stale
