"""Which rows each transcript view shows, in order (sessions/rows.py): everything once,
or what the agent sees now."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from dashboard.errors import ValidationError
from dashboard.lineage.chains import load_chain
from dashboard.sessions.rows import VIEWS, parse_view, shown_rows
from dashboard.sessions.stitched import load_stitched
from dashboard.sessions.transcript import load_transcript
from dashboard.store.readonly import open_readonly
from tests.support import hermes_shapes as hs
from tests.support import hermes_v31 as hv
from tests.support.archived import archive_home


@pytest.fixture(params=hs.EPOCH_FORMS)
def archived(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[hs.EpochFacts, Path]:
    home = tmp_path / "home"
    facts = hs.build_epochs_home(home, request.param)
    return facts, archive_home(home)


@contextmanager
def opened(path: Path) -> Iterator[sqlite3.Connection]:
    with closing(open_readonly(path)) as conn:
        yield conn


def archive_ids(conn: sqlite3.Connection) -> dict[int, int]:
    """The archive id of each source message id."""
    return {int(r[1]): r[0] for r in conn.execute("SELECT id, src_id FROM messages")}


def read(messages) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in messages]


def test_everything_holds_every_distinct_message_once_in_order(
    archived: tuple[hs.EpochFacts, Path],
) -> None:
    facts, path = archived
    with opened(path) as conn:
        page = load_transcript(conn, hs.S_EPOCHS)
        stitched = load_stitched(conn, load_chain(conn, hs.S_EPOCHS))
    assert page.view == "everything"
    assert read(page.messages) == facts.distinct
    flat = [
        m
        for part in stitched
        for m in ([part.divider] if part.divider else []) + list(part.transcript.messages)
    ]
    assert read(flat) == facts.distinct
    assert not any(hs.EPOCH_REWOUND_WORD in m.text for m in page.messages)


def test_each_compaction_carrier_is_a_divider_with_its_figures(
    archived: tuple[hs.EpochFacts, Path],
) -> None:
    facts, path = archived
    with opened(path) as conn:
        ids = archive_ids(conn)
        page = load_transcript(conn, hs.S_EPOCHS)
    made = facts.compactions[hs.S_EPOCHS]
    carriers = [ids[written[0]] for _, _, written in made]
    assert sorted(page.dividers) == carriers
    assert [(d.compaction, d.of, d.at, d.archived) for d in page.dividers.values()] == [
        (k, 3, at, len(archived_ids)) for k, (at, archived_ids, _) in enumerate(made, start=1)
    ]
    shown = [m.id for m in page.messages]
    assert all(c in shown for c in carriers)


def test_a_rewound_row_is_left_out_unless_asked_for(archived: tuple[hs.EpochFacts, Path]) -> None:
    facts, path = archived
    with opened(path) as conn:
        ids = archive_ids(conn)
        default = load_transcript(conn, hs.S_EPOCHS)
        everything = load_transcript(conn, hs.S_EPOCHS, include_inactive=True)
    rewound = [ids[i] for i in facts.rewound]
    assert default.left_out == len(rewound)
    assert not set(rewound) & {m.id for m in default.messages}
    flagged = [m for m in everything.messages if m.id in rewound]
    assert [m.id for m in flagged] == rewound and all(m.inactive for m in flagged)
    assert any(hs.EPOCH_REWOUND_WORD in m.text for m in flagged)
    # The copies are still folded into the rows they repeat.
    assert len(everything.messages) == len(facts.distinct) + len(rewound)


def test_the_live_view_is_the_sources_active_rows(archived: tuple[hs.EpochFacts, Path]) -> None:
    facts, path = archived
    with closing(sqlite3.connect(facts.db)) as source:
        active = [
            r[0]
            for r in source.execute(
                "SELECT id FROM messages WHERE session_id = ? AND active = 1 ORDER BY id",
                (hs.S_EPOCHS,),
            )
        ]
    with opened(path) as conn:
        ids = archive_ids(conn)
        live = load_transcript(conn, hs.S_EPOCHS, view="live")
        rows = shown_rows(conn, hs.S_EPOCHS, "live")
    assert live.view == "live"
    assert [m.id for m in live.messages] == [ids[i] for i in active]
    # The carrier opening it is compaction 3 of 3; the re-inserted tail is flagged.
    _, archived_ids, written = facts.compactions[hs.S_EPOCHS][-1]
    assert list(live.dividers) == [ids[written[0]]]
    assert live.dividers[ids[written[0]]].compaction == 3
    assert live.copy_of == {
        ids[c]: ids[o] for o, c in zip(archived_ids[-2:], written[1:], strict=True)
    }
    assert rows.left_out == 0  # rewound rows are not a hidden part of what the agent sees


def test_paging_counts_only_what_the_view_shows_and_a_copy_lands_on_its_row(
    archived: tuple[hs.EpochFacts, Path],
) -> None:
    facts, path = archived
    with opened(path) as conn:
        ids = archive_ids(conn)
        _, archived_ids, written = facts.compactions[hs.S_EPOCHS][0]
        copy, original = ids[written[1]], ids[archived_ids[-2]]
        first = load_transcript(conn, hs.S_EPOCHS, page=1, page_size=4)
        held = load_transcript(conn, hs.S_EPOCHS, page=3, at=copy, page_size=4)
        live_held = load_transcript(
            conn,
            hs.S_EPOCHS,
            view="live",
            page=9,
            at=ids[facts.compactions[hs.S_EPOCHS][-1][1][-1]],
            page_size=4,
        )
    assert first.paging.total == len(facts.distinct)
    assert held.paging.page == 1 and original in [m.id for m in held.messages]
    assert copy in held.aliases[original]  # the copy's anchor sits on the row it repeats
    # In the live view an archived row that was re-inserted lands on its live copy.
    assert live_held.paging.page == 1


def test_a_rotated_tip_that_compacted_in_place_stitches_each_message_once(
    archived: tuple[hs.EpochFacts, Path],
) -> None:
    _, path = archived
    with opened(path) as conn:
        parts = load_stitched(conn, load_chain(conn, hs.S_ROTATED_TIP))
        live = load_stitched(conn, load_chain(conn, hs.S_ROTATED_TIP), view="live")
    assert [p.segment.session_id for p in parts] == [hs.S_ROTATED, hs.S_ROTATED_TIP]
    tip = parts[1]
    # The rotation's summary opens the part; the two in-place carriers are dividers in it.
    assert tip.divider is not None and "rotation summary" in tip.divider.text
    assert [d.compaction for d in tip.transcript.dividers.values()] == [1, 2]
    carrier = f"{hs.SUMMARY_PREFIX}\ntip, %s in-place compaction"
    assert [m.text for m in tip.transcript.messages] == [
        f"still on {hs.ROTATED_WORD}",
        "second segment",
        carrier % "first",
        "more on the tip",
        "ok",
        carrier % "second",
        "the tip's live turn",
        "ok",
    ]
    # Live: only the tip is fed to the agent; its last carrier is a divider, never the
    # part's opening summary.
    assert [len(p.transcript.messages) for p in live] == [0, 5]
    assert live[0].transcript.view == "live" and live[0].divider is None
    assert live[1].divider is None and list(live[1].transcript.dividers.values())[0].compaction == 2


def test_a_view_is_one_of_two_names() -> None:
    assert VIEWS == ("everything", "live")
    assert parse_view(None) == parse_view("") == "everything"
    assert parse_view("live") == "live"
    with pytest.raises(ValidationError, match="view must be one of everything, live"):
        parse_view("<script>")


def test_epochs_are_read_once_until_the_archive_is_written(tmp_path: Path) -> None:
    from dashboard.lineage.epochs import EpochsCache

    home = tmp_path / "home"
    facts = hs.build_epochs_home(home)
    path = archive_home(home)
    cache = EpochsCache()
    with opened(path) as conn:
        first = cache.get(conn, [hs.S_EPOCHS])[hs.S_EPOCHS]
        again = cache.get(conn, [hs.S_EPOCHS])[hs.S_EPOCHS]
        other = cache.get(conn, [hs.S_ROTATED_TIP])[hs.S_ROTATED_TIP]
    assert again is first and first.compactions == 3 and other.compactions == 2
    hs.compact_in_place(facts.db, hs.S_EPOCHS, "so far: part 4", 1.8e9)
    archive_home(home, path)  # the syncer's next pass
    with opened(path) as conn:
        after = cache.get(conn, [hs.S_EPOCHS])[hs.S_EPOCHS]
    assert after.compactions == 4


def test_both_views_keep_hermess_order_by_id_where_copies_carry_old_times(
    tmp_path: Path,
) -> None:
    """A v31 home: re-inserted copies keep their originals' timestamps, so by time a
    summary would follow the tail it precedes. The live view is exactly the rows, in the
    order, Hermes feeds the agent (``active=1 ORDER BY id``); both views go by id."""
    facts = hv.build_v31_home(tmp_path / "home")
    archive = archive_home(facts.root)
    with opened(archive) as conn:
        ids = archive_ids(conn)
        for session, hermes_order in facts.live_order.items():
            live = shown_rows(conn, session, "live", include_inactive=True)
            assert list(live.order) == [ids[i] for i in hermes_order], session
            everything = shown_rows(conn, session, "everything", include_inactive=True)
            assert list(everything.order) == sorted(everything.order), session
        by_time = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM messages WHERE session_id = ? AND active = 1"
                " ORDER BY timestamp, id",
                (facts.long_session,),
            )
        ]
    long_live = [ids[i] for i in facts.live_order[facts.long_session]]
    assert by_time != long_live  # the home holds what a by-time order gets wrong


def test_v31_everything_shows_each_message_once_and_live_marks_every_copy(
    tmp_path: Path,
) -> None:
    """Everything: one row per message_uid, where it was said (a superseded original is
    history, the undone turn is not), plus each compaction's carrier. Live: every
    re-inserted copy says which row it repeats."""
    facts = hv.build_v31_home(tmp_path / "home")
    archive = archive_home(facts.root)
    sid = facts.long_session
    done = facts.compactions[sid]
    with opened(archive) as conn:
        ids = archive_ids(conn)
        source = {v: k for k, v in ids.items()}
        everything = shown_rows(conn, sid)
        live = shown_rows(conn, sid, "live")
        uids = dict(
            conn.execute("SELECT id, message_uid FROM messages WHERE session_id = ?", (sid,))
        )
        transcript = load_transcript(conn, sid)
    carriers = {ids[c.carrier] for c in done}
    plain = [i for i in everything.order if i not in carriers]
    assert len({uids[i] for i in plain}) == len(plain)  # no message twice
    superseded = {ids[r] for c in done for r in c.superseded}
    assert superseded <= set(everything.order) and superseded == everything.superseded
    assert not {ids[r] for r in facts.rewound} & set(everything.order)
    assert set(everything.dividers) == carriers and everything.compactions == 3
    assert {m.id for m in transcript.messages if m.superseded} == superseded
    copies = {ids[c]: ids[o] for c, o in facts.repeats.items() if source.get(ids[c]) == c}
    marked = [row for row in live.order if row in copies and row not in carriers]
    assert marked and {row: live.copy_of[row] for row in marked} == {r: copies[r] for r in marked}
