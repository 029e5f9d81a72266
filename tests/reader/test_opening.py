"""What a home reads (opening.py): the reader, the syncer, and the counts they keep."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from dashboard.hermes.home import HermesHome
from dashboard.lineage.epochs import epochs_of
from dashboard.reader.opening import reading_for
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as hs


def _kept(path: Path) -> dict[str, int]:
    with closing(sqlite3.connect(path)) as conn:
        return dict(conn.execute("SELECT session_id, compactions FROM session_compactions"))


def _derived(path: Path) -> dict[str, int]:
    """The rule's count of each session with an archived row."""
    with closing(sqlite3.connect(path)) as conn:
        flagged = [r[0] for r in conn.execute("SELECT session_id FROM messages WHERE compacted")]
        return {sid: e.compactions for sid, e in epochs_of(conn, flagged).items()}


def test_the_archives_syncer_keeps_the_in_place_counts_after_each_pass(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hs.build_epochs_home(home)
    archive = tmp_path / "data" / "archive.db"
    reading = reading_for(HermesHome(home), archive, inline=True, folder=tmp_path / "data")
    assert reading.syncer is not None and reading.syncer.poll()
    kept = _kept(archive)
    assert kept[hs.S_EPOCHS] == 3 and kept == _derived(archive)
    hs.compact_in_place(home / "state.db", hs.S_EPOCHS, "once more", 1_900_000_000.0)
    assert reading.syncer.poll()
    assert _kept(archive)[hs.S_EPOCHS] == 4 and _kept(archive) == _derived(archive)
    counts = reading.reader.chains_index(sort="epochs").chains
    assert counts[0].root == hs.S_EPOCHS and counts[0].epochs == 5


def test_a_homes_own_store_gets_its_counts_kept_when_opened(tmp_path: Path) -> None:
    """No syncer writes a home's own store (the demo home, an agent's): its counts are
    kept as it is opened, once missing (a migration, a build, an agent's compaction)."""
    home = tmp_path / "own"
    home.mkdir()
    with SessionStore(home / "state.db") as store:
        sid = store.create_session("cli", started_at=1_000.0)
        for n in range(2):
            store.append_messages(sid, [NewMessage("user", f"q{n}"), NewMessage("assistant", "a")])
            store.compact_in_place(sid, f"so far {n}")
    reading = reading_for(HermesHome(home))
    assert reading.syncer is None and reading.reader.path == home / "state.db"
    assert _kept(home / "state.db") == {sid: 2}
    with SessionStore(home / "state.db") as store:
        store.compact_in_place(sid, "so far 3")
    assert _kept(home / "state.db") == {}
    assert reading.reader.chains_index().chains[0].epochs == 4  # 3 compactions, derived meanwhile
    reading_for(HermesHome(home))
    assert _kept(home / "state.db") == {sid: 3}
