"""In-place compaction epochs derived from an archived session's rows (epochs.py)."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import pytest

from dashboard.repository.epochs import (
    EpochRow,
    Epochs,
    derive_epochs,
    epochs_of,
    session_epochs,
)
from dashboard.repository.readonly import open_readonly
from tests import hermes_shapes as hs
from tests.archived import archive_home


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
        None, "so far: part 1", "so far: part 2", "so far: part 3"]  # fmt: skip
    # Re-inserted tails are copies of the rows they repeat; the rewind is set apart.
    assert found.copies == {
        ids[c]: ids[o] for _, archived_ids, written in made
        for o, c in zip(archived_ids[-2:], written[1:], strict=True)
    }  # fmt: skip
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
        EpochRow(1, "user", "a", 1.0, 0, 1), EpochRow(2, "assistant", "b", 2.0, 0, 1),
        EpochRow(3, "user", summary, 3.0, 0, 1), EpochRow(4, "user", "a", 3.1, 0, 1),
        EpochRow(5, "assistant", "b", 3.2, 0, 1),
        EpochRow(6, "user", summary, 4.0), EpochRow(7, "assistant", "b", 4.1),
    ]  # fmt: skip
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
