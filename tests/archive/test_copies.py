"""Which archived rows re-insert an earlier one (archive/copies.py): ``repeats`` from
schema 31's ``message_uid``, derived as rows land, and taken once by older archives."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from dashboard.archive.copies import UIDS_DONE_PREFIX
from dashboard.archive.marks import source_key
from dashboard.lineage.epochs import EpochsCache
from dashboard.search.sessions import SearchRequest
from dashboard.store.readonly import open_readonly
from dashboard.store.writecore import WriteCore
from tests.support import hermes_shapes as hs
from tests.support import hermes_v31 as hv
from tests.support.archived import archive_home, archived_reader

WORD = "quokkafern"


def _hits(home: Path, word: str) -> tuple[int, list[int]]:
    result = archived_reader(home).search(SearchRequest(query=word))
    return result.total_matches, [c.hit_count for c in result.results]


def test_a_restore_from_before_a_compaction_counts_the_tail_once(tmp_path: Path) -> None:
    """Import just after a v31 compaction (the tail twice: original and live copy, one
    uid), put back a backup from before it, let Hermes write on: one message, one hit."""
    facts = hv.build_v31_home(tmp_path / "home")
    sid, at = "20261019_090000_abcdef", facts.now - 3600
    hs.start_session(facts.db, sid, at)
    for n, text in enumerate(["open the ticket", "check the logs", "restart it"]):
        hs.append_turn(facts.db, sid, text, "done", at + 10 * n)
    hs.append_turn(facts.db, sid, f"and the {WORD} alarm", "silenced", at + 40)
    backup = hs.backup_copy(facts.db, tmp_path / "backup.db")
    hv.compact_in_place(facts.db, sid, "Ticket handled.", at + 60, keep=2)
    assert _hits(facts.root, WORD) == (1, [1])
    hs.restore_copy(backup, facts.db)
    assert _hits(facts.root, WORD) == (1, [1])
    hs.append_turn(facts.db, sid, "one more thing", "sure", at + 120)
    assert _hits(facts.root, WORD) == (1, [1])


def test_an_archive_made_before_message_uids_takes_them_once(tmp_path: Path) -> None:
    """Rows archived without their uid (before schema migration 7) get them on the next
    sync, with every copy marked: the head said twice counts twice, not four times."""
    facts = hv.build_v31_home(tmp_path / "home")
    archive = archive_home(facts.root)
    home = source_key(facts.root)
    core = WriteCore(archive)
    try:
        core.write(
            lambda c: (
                c.execute("UPDATE messages SET message_uid = NULL, repeats = NULL"),
                c.execute("DELETE FROM state_meta WHERE key = ?", (UIDS_DONE_PREFIX + home,)),
            )
        )
    finally:
        core.close()
    marker = facts.markers[hv.HEAD_MARKER]
    assert _hits(facts.root, marker.word)[0] == marker.messages
    with closing(WriteCore(archive)) as core:
        lacking = core.conn.execute(
            "SELECT count(*) FROM messages WHERE message_uid IS NULL"
        ).fetchone()[0]
        copies = core.conn.execute(
            "SELECT count(*) FROM messages WHERE repeats IS NOT NULL"
        ).fetchone()[0]
    assert lacking == 0
    assert copies == len(_plain_copies(facts.db))


def _plain_copies(db: Path) -> list[int]:
    """The source rows re-inserting an earlier row of their session (same uid), a merged
    summary carrier excepted: the rule read plainly, row by row."""
    seen: dict[tuple[str, str], bool] = {}  # (session, uid) -> some row merged a summary
    out = []
    with closing(sqlite3.connect(db)) as src:
        rows = src.execute(
            'SELECT id, session_id, message_uid, "_compressed_summary" FROM messages ORDER BY id'
        ).fetchall()
    for row_id, session, uid, merged in rows:
        key = (session, uid)
        if key in seen and (not merged or seen[key]):
            out.append(row_id)
        seen[key] = seen.get(key, False) or bool(merged)
    return out


def test_a_reader_s_cached_epochs_see_uids_taken_late(tmp_path: Path) -> None:
    """Taking uids adds no row; the epochs a reader cached before must still change."""
    facts = hv.build_v31_home(tmp_path / "home")
    archive = archive_home(facts.root)
    home = source_key(facts.root)
    with closing(WriteCore(archive)) as core:
        core.write(
            lambda c: (
                c.execute("UPDATE messages SET message_uid = NULL, repeats = NULL"),
                c.execute("DELETE FROM state_meta WHERE key = ?", (UIDS_DONE_PREFIX + home,)),
            )
        )
    cache = EpochsCache()
    with closing(open_readonly(archive)) as conn:
        before = cache.get(conn, [facts.long_session])[facts.long_session]
    assert not before.superseded  # without uids a retained original reads as rewound
    archive_home(facts.root)
    with closing(open_readonly(archive)) as conn:
        after = cache.get(conn, [facts.long_session])[facts.long_session]
    superseded = {r for c in facts.compactions[facts.long_session] for r in c.superseded}
    assert len(after.superseded) == len(superseded) and after.compactions == 3
