"""In-place compaction epochs derived from an archived session's rows (epochs.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from dashboard.lineage.epochs import (
    _FLAGGED,
    EpochRow,
    Epochs,
    EpochsCache,
    compacted_epochs,
    derive_epochs,
    epochs_of,
    in_place_counts,
    keep_in_place_counts,
    session_epochs,
    usage_epoch,
)
from dashboard.store import schema
from dashboard.store.readonly import open_readonly
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from dashboard.store.writecore import WriteCore
from tests.support import hermes_shapes as hs
from tests.support import hermes_v31 as hv
from tests.support.archived import archive_home


@pytest.fixture(params=hs.EPOCH_FORMS)
def archived(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[hs.EpochFacts, Path]:
    home = tmp_path / "home"
    facts = hs.build_epochs_home(home, request.param)
    return facts, archive_home(home)


def _epochs_of(path: Path, session_id: str) -> tuple[Epochs, dict[int, int]]:
    """A session's epochs in the archive, and the archive id of each source message id."""
    with closing(open_readonly(path)) as conn:
        ids = {int(r[1]): r[0] for r in conn.execute("SELECT id, src_id FROM messages")}
        return session_epochs(conn, session_id), ids


def test_three_in_place_compactions_make_four_epochs_with_their_times(
    archived: tuple[hs.EpochFacts, Path],
) -> None:
    facts, path = archived
    found, ids = _epochs_of(path, hs.S_EPOCHS)
    made = facts.compactions[hs.S_EPOCHS]
    assert found.compactions == 3
    assert [e.compacted_at for e in found.epochs] == [at for at, _, _ in made] + [None]
    assert [e.live for e in found.epochs] == [False, False, False, True]
    # Each compaction archived every row that was live; its carrier opens the next epoch.
    assert [e.archived for e in found.epochs[:3]] == [len(a) for _, a, _ in made]
    assert [e.summary_id for e in found.epochs[1:]] == [ids[w[0]] for _, _, w in made]
    assert [e.summary_opening for e in found.epochs] == [
        None,
        "so far: part 1",
        "so far: part 2",
        "so far: part 3",
    ]
    # Re-inserted tails are copies of the rows they repeat; the rewind is set apart.
    assert found.copies == {
        ids[c]: ids[o]
        for _, archived_ids, written in made
        for o, c in zip(archived_ids[-2:], written[1:], strict=True)
    }
    assert found.rewound == {ids[i] for i in facts.rewound}
    assert sum(e.rows for e in found.epochs) == len(facts.distinct)


def test_a_word_said_in_an_epoch_is_before_that_compaction(
    archived: tuple[hs.EpochFacts, Path],
) -> None:
    facts, path = archived
    found, ids = _epochs_of(path, hs.S_EPOCHS)
    words = (hs.EPOCH1_WORD, *hs.EPOCH_WORDS)
    assert [found.before_compaction(ids[facts.word_ids[w]]) for w in words] == [1, 2, 3, None]


def test_a_copy_reads_as_the_row_it_repeats_and_so_does_a_copy_of_a_copy() -> None:
    summary = hs.SUMMARY_PREFIX + "\nsummary"
    rows = [
        EpochRow(1, "user", "a", 1.0, 0, 1),
        EpochRow(2, "assistant", "b", 2.0, 0, 1),
        EpochRow(3, "user", summary, 3.0, 0, 1),
        EpochRow(4, "user", "a", 3.1, 0, 1),
        EpochRow(5, "assistant", "b", 3.2, 0, 1),
        EpochRow(6, "user", summary, 4.0),
        EpochRow(7, "assistant", "b", 4.1),
    ]
    found = derive_epochs(rows)
    assert found.copies == {4: 1, 5: 2, 7: 5}
    assert found.shown_once(7) == 2 and found.before_compaction(7) == 1
    assert [e.rows for e in found.epochs] == [2, 1, 1]  # the carriers; b only once


def test_a_rotation_child_and_an_uncompacted_session_are_one_epoch(
    archived: tuple[hs.EpochFacts, Path],
) -> None:
    _, path = archived
    with closing(open_readonly(path)) as conn:
        tip = session_epochs(conn, hs.S_ROTATED_TIP)
        first = session_epochs(conn, hs.S_ROTATED)
        child = session_epochs(conn, hs.S_EARLY_CHILD)
        nothing = session_epochs(conn, "no-such-session")
    # The tip's first row is the rotation's summary: not an in-place compaction.
    assert tip.compactions == 2 and tip.epochs[0].summary_id is None
    assert first.compactions == 0 and child.compactions == 0
    assert nothing.epochs == ()


def test_many_sessions_read_at_once_equal_each_read_alone(
    archived: tuple[hs.EpochFacts, Path],
) -> None:
    _, path = archived
    ids = [hs.S_EPOCHS, hs.S_ROTATED, hs.S_ROTATED_TIP, hs.S_EARLY_CHILD, "no-such-session"]
    with closing(open_readonly(path)) as conn:
        together = epochs_of(conn, [*ids, hs.S_EPOCHS])
        alone = {sid: session_epochs(conn, sid) for sid in ids}
    assert set(together) == set(ids) - {"no-such-session"}
    assert all(together[sid] == alone[sid] for sid in together)
    assert together[hs.S_EPOCHS].compactions == 3


def test_a_usage_row_inside_one_epoch_is_attributed_to_it_and_one_spanning_is_not() -> None:
    summary = hs.SUMMARY_PREFIX + "\nsummary"
    rows = [
        EpochRow(1, "user", "a", 10.0, 0, 1),
        EpochRow(2, "assistant", "b", 20.0, 0, 1),
        EpochRow(3, "user", summary, 30.0, 0, 1),
        EpochRow(4, "assistant", "c", 40.0, 0, 1),
        EpochRow(5, "user", summary, 50.0),
        EpochRow(6, "assistant", "d", 60.0),
    ]
    found = derive_epochs(rows)
    assert [e.compacted_at for e in found.epochs] == [30.0, 50.0, None]
    assert usage_epoch(found, 9.0, 29.0) == 1  # before the first row still counts as epoch 1
    assert usage_epoch(found, 12.0, 30.0) == 1  # the compaction's own call closes epoch 1
    assert usage_epoch(found, 31.0, 49.0) == 2
    assert usage_epoch(found, 51.0, 1e12) == 3  # the live epoch runs on
    assert usage_epoch(found, 12.0, 40.0) is None  # spans compaction 1
    assert usage_epoch(found, None, 40.0) is None and usage_epoch(found, 40.0, None) is None
    assert usage_epoch(Epochs(), 1.0, 2.0) is None


def test_in_place_counts_name_every_session_that_compacted_in_place(
    archived: tuple[hs.EpochFacts, Path],
) -> None:
    _, path = archived
    with closing(open_readonly(path)) as conn:
        counts = in_place_counts(conn)
        every = [r[0] for r in conn.execute("SELECT id FROM sessions")]
        derived = {sid: e.compactions for sid, e in epochs_of(conn, every).items()}
    assert counts == {sid: n for sid, n in derived.items() if n}
    assert counts[hs.S_EPOCHS] == 3 and counts[hs.S_ROTATED_TIP] == 2
    assert hs.S_ROTATED not in counts


def test_compacted_epochs_reads_only_the_sessions_that_compacted_in_place(
    archived: tuple[hs.EpochFacts, Path],
) -> None:
    _, path = archived
    ids = [hs.S_EPOCHS, hs.S_ROTATED, hs.S_ROTATED_TIP, hs.S_EARLY_CHILD, "no-such-session"]
    with closing(open_readonly(path)) as conn:
        found = compacted_epochs(conn, ids)
        every = epochs_of(conn, ids)
    assert set(found) == {hs.S_EPOCHS, hs.S_ROTATED_TIP}
    assert all(found[sid] == every[sid] for sid in found)
    assert all(every[sid].compactions == 0 for sid in set(every) - set(found))


def test_the_cache_keeps_a_session_until_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    cache = EpochsCache(kept=2)
    with SessionStore(path) as store:
        for sid in ("a", "b", "c"):
            store.create_session("cli", session_id=sid, started_at=1000.0)
            store.append_messages(
                sid,
                [
                    NewMessage("user", f"{sid} one", timestamp=1001.0),
                    NewMessage("assistant", "ok", timestamp=1002.0),
                ],
            )
            store.compact_in_place(sid, "so far", at=1003.0)

        def read(*sids: str) -> dict[str, Epochs]:
            with closing(open_readonly(path)) as conn:
                return cache.get(conn, list(sids))

        first = read("a", "missing")
        assert set(first) == {"a"} and first["a"].compactions == 1
        with closing(open_readonly(path)) as conn:
            assert first["a"] == session_epochs(conn, "a")
        assert read("a")["a"] is first["a"]  # nothing written: kept
        store.append_messages("b", [NewMessage("user", "b two", timestamp=1004.0)])
        assert read("a")["a"] is first["a"]  # another session written: still kept
        store.compact_in_place("a", "so far, again", at=1005.0)
        again = read("a")["a"]
        assert again.compactions == 2
        read("b", "c")  # a third session: the one used least recently ("a") goes
        assert read("a")["a"] is not again


def test_epochs_read_from_the_archive_are_the_rule_over_every_full_row(
    archived: tuple[hs.EpochFacts, Path],
) -> None:
    # epochs_of reads contents only for sessions that mention a summary prefix at all;
    # whatever it skips, its answer is derive_epochs over every row in full.
    _, path = archived
    with closing(open_readonly(path)) as conn:
        sids = [r[0] for r in conn.execute("SELECT id FROM sessions ORDER BY id")]
        found = epochs_of(conn, sids)
        full: dict[str, list[EpochRow]] = {}
        for sid, *row in conn.execute(
            "SELECT session_id, id, role, content, timestamp, active, compacted, token_count"
            " FROM messages"
        ):
            full.setdefault(sid, []).append(EpochRow(*row))
    assert len(found) == len(full) > 10
    assert found == {sid: derive_epochs(rows) for sid, rows in full.items()}
    assert {hs.S_EPOCHS, hs.S_ROTATED_TIP} <= {sid for sid, e in found.items() if e.compactions}


# -- Hermes v31 (HERMES_FACTS, "Hermes v31"): message_uid, merged carriers, head copies --


@pytest.fixture(scope="module")
def v31(tmp_path_factory: pytest.TempPathFactory) -> tuple[hv.V31Facts, Path]:
    facts = hv.build_v31_home(tmp_path_factory.mktemp("v31") / "home")
    return facts, archive_home(facts.root)


def test_a_v31_session_compacted_three_times_reads_three_epochs_of_their_summaries(
    v31: tuple[hv.V31Facts, Path],
) -> None:
    """Both summary forms open an epoch (compaction 2 is merged into a tool-call row),
    the re-inserted head before the first summary is a copy, and each epoch's line is
    its summary's own text."""
    facts, path = v31
    epochs, ids = _epochs_of(path, facts.long_session)
    done = facts.compactions[facts.long_session]
    assert [c.form for c in done] == ["standalone", "merged", "standalone"]
    assert epochs.compactions == 3
    assert [e.summary_id for e in epochs.epochs[1:]] == [ids[c.carrier] for c in done]
    assert [e.summary_opening for e in epochs.epochs[1:]] == [c.summary for c in done]
    # A standalone summary is written when its compaction runs; a merged carrier keeps
    # its row's old time, so the compaction reads as when the next turn began.
    closed = [e.compacted_at for e in epochs.epochs[:3]]
    assert (closed[0], closed[2]) == (done[0].at, done[2].at)
    assert closed[1] is not None and done[1].at <= closed[1] <= epochs.epochs[2].ended_at
    head = done[0].head_copies
    assert {ids[h] for h in head} <= epochs.copies.keys()
    merged = done[1]
    tool_call = facts.repeats[merged.carrier]
    assert epochs.merged == {ids[merged.carrier]: ids[tool_call]}
    assert ids[merged.carrier] not in epochs.copies


def test_superseded_originals_are_history_and_the_undone_turn_is_rewound(
    v31: tuple[hv.V31Facts, Path],
) -> None:
    facts, path = v31
    epochs, ids = _epochs_of(path, facts.long_session)
    superseded = {ids[r] for c in facts.compactions[facts.long_session] for r in c.superseded}
    assert epochs.superseded == superseded
    assert epochs.rewound == {ids[r] for r in facts.rewound}
    # Each copy is shown as the first row with its uid.
    for copy, original in facts.repeats.items():
        if copy in ids and ids[copy] in epochs.copies:
            assert epochs.shown_once(ids[copy]) == ids[original]


def test_every_row_of_a_marker_word_is_in_the_epoch_it_was_said_in(
    v31: tuple[hv.V31Facts, Path],
) -> None:
    facts, path = v31
    epochs, ids = _epochs_of(path, facts.long_session)
    for marker in facts.markers.values():
        if marker.session != facts.long_session or marker.word == hv.UNDO_MARKER:
            continue
        expected = marker.epoch if marker.epoch <= epochs.compactions else None
        for row in marker.rows:
            assert epochs.before_compaction(ids[row]) == expected, (marker.word, row)


def test_no_rotation_child_reads_as_compacted_in_place(v31: tuple[hv.V31Facts, Path]) -> None:
    """A child opens with the head copy, then its summary: not a compaction. The tip,
    compacted in place once later, reads once."""
    facts, path = v31
    with closing(open_readonly(path)) as conn:
        found = epochs_of(conn, list(facts.rotation))
        counts = in_place_counts(conn)
    assert [found[s].compactions for s in facts.rotation] == [0, 0, 0, 1]
    assert {s: n for s, n in counts.items() if s in facts.rotation} == {facts.rotation[-1]: 1}
    assert counts[facts.long_session] == 3


def test_a_rotation_child_of_every_generation_opens_without_a_compaction(
    tmp_path: Path,
) -> None:
    """The seed's and today's forms: a child whose first row is the head copy, then the
    summary, is one epoch (its opening summary is no compaction), and still reads so
    once it compacted in place itself."""
    summary = f"{hs.SUMMARY_PREFIX}\nEarlier turns were compacted into the summary below.\nGist."
    rows = [
        EpochRow(1, "user", "the head copy", 10.0, message_uid="h"),
        EpochRow(2, "user", summary, 20.0, message_uid="o"),
        EpochRow(3, "assistant", "carrying on", 30.0, message_uid="c"),
    ]
    assert derive_epochs(rows, child=True).compactions == 0
    assert derive_epochs(rows, child=True).opening == 2
    assert derive_epochs(rows[1:]).compactions == 0  # the seed's child: the summary first
    bare = [r._replace(message_uid=None) for r in rows]  # before schema 31
    assert derive_epochs(bare, child=True).compactions == 0
    # Later compacted in place (Hermes v31): the old opening is archived with the rest,
    # the head is re-inserted, then the new summary: one compaction, not two.
    later = [r._replace(active=0, compacted=1) for r in rows] + [
        EpochRow(4, "user", "the head copy", 10.0, message_uid="h", repeats=1),
        EpochRow(5, "user", summary.replace("Gist.", "Second."), 40.0, message_uid="s"),
    ]
    once = derive_epochs(later, child=True)
    assert once.compactions == 1 and once.epochs[1].summary_opening == "Second."


def test_each_v31_compaction_archived_the_messages_it_summarized(
    v31: tuple[hv.V31Facts, Path],
) -> None:
    """A head copy archived again is no new turn; a retained row's copy archived is the
    first time its message was."""
    facts, path = v31
    epochs, ids = _epochs_of(path, facts.long_session)
    done = facts.compactions[facts.long_session]
    first_of = {c: o for c, o in facts.repeats.items()}

    def messages(rows: tuple[int, ...]) -> set[int]:
        return {first_of.get(r, r) for r in rows}

    seen: set[int] = set()
    expected = []
    for c in done:
        new = messages(c.summarized) - seen
        seen |= new
        expected.append(len(new))
    assert [e.archived for e in epochs.epochs[:3]] == expected
    assert expected[0] == 7


# -- kept counts (keep_in_place_counts): the rule's, or missing, never stale --------


def _reinsert(db: Path, session_id: str, at: float) -> None:
    """Hermes re-inserting a session's live rows by mistake (a v31 file's keep their
    uids): the rule drops them as copies (dedupe, never delete)."""
    with closing(sqlite3.connect(db)) as conn:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(messages)") if r[1] != "id"]
        flags = "active = 1" if "active" in columns else "1"
        copied = ", ".join("? " if c == "timestamp" else c for c in columns)
        conn.execute(
            f"INSERT INTO messages ({', '.join(columns)}) SELECT {copied} FROM messages"
            f" WHERE session_id = ? AND {flags} ORDER BY id",
            (at, session_id),
        )
        conn.commit()


def _kept(path: Path) -> dict[str, int]:
    with closing(sqlite3.connect(path)) as conn:
        return dict(conn.execute("SELECT session_id, compactions FROM session_compactions"))


def _derived(path: Path) -> dict[str, int]:
    """The count of every session with an archived row (``compacted=1``: what
    in_place_counts lists) by the rule, read afresh (no cache, nothing kept)."""
    with closing(open_readonly(path)) as conn:
        flagged = [r[0] for r in conn.execute("SELECT session_id FROM messages WHERE compacted")]
        return {sid: e.compactions for sid, e in epochs_of(conn, flagged).items()}


def _assert_never_stale(path: Path) -> dict[str, int]:
    """Each count kept is the rule's over the rows as they are now, and the counts the
    chains index reads (kept or derived) are the rule's."""
    derived = _derived(path)
    kept = _kept(path)
    assert kept == {sid: derived[sid] for sid in kept}
    with closing(open_readonly(path)) as conn:
        assert in_place_counts(conn) == {sid: n for sid, n in derived.items() if n}
    return derived


def _shape(tmp_path: Path, shape: str) -> tuple[Path, Path, str]:
    """(home, its state.db, the session compacted three times) of a shape with in-place
    compaction: either epoch form, or Hermes v31."""
    if shape == "v31":
        facts = hv.build_v31_home(tmp_path / shape)
        return facts.root, facts.db, facts.long_session
    home = tmp_path / shape
    return home, hs.build_epochs_home(home, shape).db, hs.S_EPOCHS


@pytest.mark.parametrize("shape", [*hs.EPOCH_FORMS, "v31"])
def test_kept_counts_stay_the_rules_through_compactions_rewinds_and_reinserts(
    tmp_path: Path, shape: str
) -> None:
    """After every sync (before the counts are kept again: a count a write left behind
    would be stale) and after keeping them, each kept count is derive_epochs's."""
    home, db, sid = _shape(tmp_path, shape)
    path = archive_home(home)
    assert _kept(path) == {}  # nothing kept yet: every count derived
    with SessionStore(path) as store:
        assert keep_in_place_counts(store) > 0
    derived = _assert_never_stale(path)
    assert _kept(path)[sid] == derived[sid] == 3
    backup = hs.backup_copy(db, tmp_path / "backup.db")
    at = 1_900_000_000.0
    compact = hv.compact_in_place if shape == "v31" else hs.compact_in_place
    steps = [
        lambda: compact(db, sid, "once more", at),
        lambda: hs.rewind(db, sid, 1, at + 60),  # a retained copy undone
        lambda: hs.append_turn(db, sid, "and then?", "this", at + 120),
        lambda: compact(db, sid, "and again", at + 180),
        lambda: hs.rewind(db, sid, 3, at + 240),  # its carrier and copies undone
        lambda: _reinsert(db, sid, at + 300),
        lambda: hs.restore_copy(backup, db),  # an older copy: its rows come back as they were
    ]
    counts = [derived[sid]]
    for step in steps:
        step()
        archive_home(home, path)
        _assert_never_stale(path)
        with SessionStore(path) as store:
            keep_in_place_counts(store)
        counts.append(_assert_never_stale(path)[sid])
        assert sid in _kept(path)
    # Up at each compaction, down when a rewind undoes one; a re-insert or an older
    # copy adds none (the archive keeps what the source lost).
    assert counts == [3, 4, 4, 4, 5, 4, 4, 4]


def test_any_write_to_a_session_forgets_its_kept_count(tmp_path: Path) -> None:
    """The store's triggers (schema.COUNT_TRIGGERS), whatever writes: a turn, a
    compaction, a flag flipped, a parent link, a deletion; other sessions keep theirs."""
    path = tmp_path / "own.db"
    with SessionStore(path) as store:
        sids = [store.create_session("cli", started_at=1_000.0 + n) for n in range(2)]
        for sid in sids:
            for n in range(3):
                store.append_messages(
                    sid, [NewMessage("user", f"q{n}"), NewMessage("assistant", "a")]
                )
                store.compact_in_place(sid, f"so far {n}")
        one, other = sids
        assert keep_in_place_counts(store) == 2 and _kept(path) == {one: 3, other: 3}
        last = f"SELECT max(id) FROM messages WHERE session_id = '{one}'"
        writes: list[Callable[[sqlite3.Connection], object]] = [
            lambda c: c.execute(
                "INSERT INTO messages (session_id, role, content, timestamp)"
                " VALUES (?, 'user', 'more', 2000)",
                (one,),
            ),
            lambda c: c.execute(f"UPDATE messages SET active = 0 WHERE id = ({last})"),
            lambda c: c.execute(f"UPDATE messages SET content = 'x' WHERE id = ({last})"),
            lambda c: c.execute(
                "UPDATE sessions SET parent_session_id = ? WHERE id = ?", (other, one)
            ),
            lambda c: c.execute(f"DELETE FROM messages WHERE id = ({last})"),
            lambda c: c.execute("DELETE FROM sessions WHERE id = ?", (one,)),
        ]
        for write in writes:
            keep_in_place_counts(store)
            assert set(_kept(path)) == {one, other}
            store.core.write(write, foreign_keys=False)
            assert _kept(path) == {other: 3}
            _assert_never_stale(path)


def test_an_archive_migrated_to_kept_counts_derives_them_until_they_are_kept(
    tmp_path: Path,
) -> None:
    """Schema migration 11 on an archive that has compacted sessions: nothing kept at
    first, the counts still the rule's; kept afterwards. The sessions are found through
    the partial index of archived rows, one seek per session."""
    path = tmp_path / "archive.db"
    core = WriteCore(path)
    schema.migrate(core, target=10)
    core.close()
    with SessionStore(path) as store:  # now at the latest version, counts table empty
        sid = store.create_session("cli", started_at=1_000.0)
        for n in range(2):
            store.append_messages(sid, [NewMessage("user", f"q{n}"), NewMessage("assistant", "a")])
            store.compact_in_place(sid, f"so far {n}")
        assert _kept(path) == {}
        with closing(open_readonly(path)) as conn:
            assert in_place_counts(conn) == {sid: 2}
            plan = " ".join(str(tuple(r)) for r in conn.execute(f"EXPLAIN QUERY PLAN {_FLAGGED}"))
        assert "idx_messages_compacted (session_id>?)" in plan
        assert keep_in_place_counts(store) == 1 and _kept(path) == {sid: 2}
