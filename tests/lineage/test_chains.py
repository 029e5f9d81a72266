"""Compaction chains: every edge classified, the continuation line, totals, stitched transcript."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from dashboard.errors import NotFoundError
from dashboard.hermes.conventions import visible_sql
from dashboard.hermes.home import HermesHome
from dashboard.lineage.chains import Chain, load_chain
from dashboard.lineage.epochs import Epochs
from dashboard.reader.reader import StateReader
from dashboard.sessions.stitched import load_stitched
from dashboard.store.readonly import open_readonly
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as shapes
from tests.support.app import make_app
from tests.support.archived import archive_home
from tests.support.chain_homes import (
    SEGMENT_S,
    SEGMENTS,
    T0,
    ChainHome,
    build_chain_home,
    build_priced_chain,
)


@contextmanager
def opened(db: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to a Recall store (an archive, or a home's own store)."""
    with closing(open_readonly(db)) as conn:
        yield conn


def imported(db: Path) -> Path:
    """The archive of the Hermes home ``db`` belongs to, imported as the syncer does."""
    return archive_home(db.parent, db.parent / "archive.db")


def chain_of(db: Path, session_id: str) -> Chain:
    with opened(db) as conn:
        return load_chain(conn, session_id)


@pytest.fixture
def chain_home(tmp_path: Path) -> ChainHome:
    return build_chain_home(tmp_path / "home")


def test_twelve_segments_two_branches_and_a_delegation_are_classified(
    chain_home: ChainHome,
) -> None:
    h = chain_home
    for focus in (h.line[0], h.line[6], h.line[-1]):
        chain = chain_of(h.db, focus)
        kinds = {s.session_id: s.kind for s in chain.segments}
        assert kinds == {
            h.line[0]: "root",
            **{sid: "continuation" for sid in h.line[1:]},
            h.branch_mid: "branch",
            h.branch_tip: "branch",
            h.delegate: "delegation",
        }
        parents = {s.session_id: s.parent_session_id for s in chain.segments}
        assert all(parents[b] == a for a, b in zip(h.line, h.line[1:], strict=False))
        assert parents[h.branch_mid] == "chain-05" and parents[h.delegate] == "chain-03"
        assert chain.root == h.line[0] and chain.tip == h.line[-1]
        assert chain.line == tuple(h.line) and len(chain.line) == SEGMENTS
        assert chain.warnings == ()
        assert [s.session_id for s in chain.segments if s.is_tip] == [h.line[-1]]
        assert chain.part_of(focus) == (h.line.index(focus) + 1, SEGMENTS)
    assert chain.part_of(h.branch_mid) is None
    # Depth-first, continuations first: the whole line, then the side links deepest first.
    order = [s.session_id for s in chain.segments]
    assert order == [*h.line, h.branch_tip, h.branch_mid, h.delegate]


def test_a_branch_is_its_own_line_and_names_the_chain_root(chain_home: ChainHome) -> None:
    chain = chain_of(chain_home.db, chain_home.branch_mid)
    assert chain.root == chain_home.line[0] and chain.focus == chain_home.branch_mid
    assert chain.line == (chain_home.branch_mid,) and chain.tip == chain_home.branch_mid
    assert chain.part_of(chain_home.branch_mid) == (1, 1)
    assert len(chain.segments) == SEGMENTS + 3


def test_totals_cover_the_line_and_unknown_cost_stays_unknown(chain_home: ChainHome) -> None:
    chain = chain_of(chain_home.db, chain_home.line[3])
    segments = {s.session_id: s for s in chain.segments}
    t = chain.totals
    assert t["segments"] == SEGMENTS and t["compressions"] == SEGMENTS - 1
    # One summary row in every continuation, a four-message turn in every segment.
    assert t["messages"] == sum(segments[s].message_count for s in chain_home.line)
    assert t["messages"] == SEGMENTS * 4 + (SEGMENTS - 1)
    assert t["tool_calls"] == SEGMENTS
    assert t["tokens"]["input"] == SEGMENTS * 1000 and t["tokens"]["output"] == SEGMENTS * 100
    assert t["estimated_cost_usd"] is None and t["actual_cost_usd"] is None  # never $0
    assert t["unknown_cost_segments"] == SEGMENTS
    assert t["duration_s"] == pytest.approx(SEGMENTS * SEGMENT_S - 60)
    assert segments[chain_home.delegate].estimated_cost_usd == pytest.approx(0.05)
    assert segments["chain-02"].summary_preview == "Part 1 covered step 1."
    assert segments["chain-01"].summary_preview is None


def corrupt(db: Path, links: dict[str, str]) -> None:
    """Rewrite parent links with plain sqlite3 (no foreign key checks), as a damaged file has."""
    with closing(sqlite3.connect(db)) as conn, conn:
        for child, parent in links.items():
            conn.execute("UPDATE sessions SET parent_session_id=? WHERE id=?", (parent, child))


def two_sessions(home: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    with SessionStore(home / "state.db") as store:
        for sid in ("A", "B", "C"):
            store.create_session("cli", session_id=sid, started_at=T0, title=f"session {sid}")
            store.append_messages(sid, [NewMessage("user", f"hello {sid}", timestamp=T0 + 1)])
            store.end_session(sid, "compression", ended_at=T0 + 10)
    return home / "state.db"


def test_a_parent_cycle_and_a_missing_parent_give_a_warning_not_a_hang(tmp_path: Path) -> None:
    db = two_sessions(tmp_path / "home")
    corrupt(db, {"A": "B", "B": "A", "C": "ghost-session"})

    cycle = chain_of(db, "A")
    assert {s.session_id for s in cycle.segments} == {"A", "B"}
    assert any("cycle" in w for w in cycle.warnings)
    assert cycle.part_of("A") is not None
    missing = chain_of(db, "C")
    assert [s.session_id for s in missing.segments] == ["C"]
    assert missing.segments[0].kind == "root"
    assert any("ghost-session" in w and "missing" in w for w in missing.warnings)

    client = make_app(tmp_path / "home", tmp_path / "data").test_client()
    assert client.get("/chains/B").status_code == 200  # warm up: templates compile once
    for sid, words in (("A", "cycle"), ("C", "missing")):
        started = time.monotonic()
        for path in (f"/chains/{sid}", f"/chains/{sid}/transcript", f"/api/chains/{sid}"):
            response = client.get(path)
            assert response.status_code == 200, path
            assert words in response.get_data(as_text=True), path
        assert time.monotonic() - started < 1.0
    session_page = client.get("/sessions/A").get_data(as_text=True)
    assert 'href="/chains/A"' in session_page


@pytest.mark.parametrize("shape", sorted(shapes.SHAPES))
def test_hermes_chain_in_every_shape(tmp_path: Path, shape: str) -> None:
    db = imported(shapes.SHAPES[shape](tmp_path / "state.db"))
    line = (shapes.S_ROOT, shapes.S_CONT1, shapes.S_CONT2)
    for focus in (*line, shapes.S_SUBAGENT):
        chain = chain_of(db, focus)
        kinds = {s.session_id: s.kind for s in chain.segments}
        assert kinds == {
            shapes.S_ROOT: "root",
            shapes.S_CONT1: "continuation",
            shapes.S_CONT2: "continuation",
            shapes.S_SUBAGENT: "delegation",
        }
        assert chain.root == shapes.S_ROOT and chain.warnings == ()
    assert chain_of(db, shapes.S_CONT1).line == line
    assert chain_of(db, shapes.S_CONT1).part_of(shapes.S_CONT1) == (2, 3)
    assert chain_of(db, shapes.S_ROOT).tip == shapes.S_CONT2
    # The preview starts where the summary does, after the marker and its stock paragraph.
    preview = chain_of(db, shapes.S_ROOT).segment(shapes.S_CONT1).summary_preview
    assert preview and not preview.startswith("[CONTEXT") and "Earlier turns" not in preview
    telegram = chain_of(db, shapes.S_BRANCH)
    assert {s.session_id: s.kind for s in telegram.segments} == {
        shapes.S_TELEGRAM: "root",
        shapes.S_BRANCH: "branch",
    }
    totals = chain_of(db, shapes.S_CONT2).totals
    assert totals["compressions"] == 2 and totals["segments"] == 3
    assert totals["tokens"]["input"] == 48210 + 39120 + 21030
    assert totals["estimated_cost_usd"] == pytest.approx(0.0002 + 0.2952 + 0.1502)
    assert totals["actual_cost_usd"] == pytest.approx(0.4211)


def test_unknown_session_is_not_found(chain_home: ChainHome) -> None:
    with pytest.raises(NotFoundError):
        chain_of(chain_home.db, "no-such-session")


# -- stitched transcript ------------------------------------------------------------------


def visible_ids(db: Path, session_ids: list[str], *, everything: bool = False) -> list[int]:
    with opened(db) as conn:
        where = "1" if everything else visible_sql("m")
        marks = ",".join("?" for _ in session_ids)
        rows = conn.execute(
            f"SELECT m.id FROM messages m WHERE m.session_id IN ({marks}) AND {where}",
            session_ids,
        ).fetchall()
    return sorted(r[0] for r in rows)


def stitched_ids(parts) -> list[int]:
    ids = []
    for p in parts:
        if p.divider:
            ids.append(p.divider.id)
        ids += [m.id for m in p.transcript.messages]
    return ids


def test_stitched_transcript_has_every_message_once_with_summaries_as_dividers(
    chain_home: ChainHome,
) -> None:
    h = chain_home
    reader = StateReader(HermesHome(h.home))
    chain, parts = reader.stitched(h.line[4])
    assert [p.segment.session_id for p in parts] == h.line == list(chain.line)
    assert [p.part for p in parts] == list(range(1, SEGMENTS + 1))
    ids = stitched_ids(parts)
    assert len(ids) == len(set(ids))
    assert sorted(ids) == visible_ids(h.db, h.line)
    assert parts[0].divider is None
    for p in parts[1:]:
        assert p.divider is not None and p.divider.is_compaction_summary
        assert f"Part {p.part - 1} covered step {p.part - 1}." in p.divider.text
        assert not any(m.is_compaction_summary for m in p.transcript.messages)
        assert [m.role for m in p.transcript.messages] == ["user", "assistant", "tool", "assistant"]
    # Conversation order: timestamps never go back across the stitched line.
    stamps = [m.timestamp for p in parts for m in p.transcript.messages]
    assert stamps == sorted(stamps)
    # Branches and delegations are other conversations: none of their rows is stitched in.
    assert not set(ids) & set(visible_ids(h.db, [h.branch_mid, h.branch_tip, h.delegate]))


@pytest.mark.parametrize("shape", ["current_views", "seed_inline"])
def test_stitched_hermes_chain_shows_inactive_rows_only_when_asked(
    tmp_path: Path, shape: str
) -> None:
    db = imported(shapes.SHAPES[shape](tmp_path / "state.db"))
    line = [shapes.S_ROOT, shapes.S_CONT1, shapes.S_CONT2]
    with opened(db) as conn:
        chain = load_chain(conn, shapes.S_CONT2)
        shown = load_stitched(conn, chain)
        everything = load_stitched(conn, chain, include_inactive=True)
        telegram = load_stitched(conn, load_chain(conn, shapes.S_TELEGRAM))
    assert sorted(stitched_ids(shown)) == visible_ids(db, line)
    assert sorted(stitched_ids(everything)) == visible_ids(db, line, everything=True)
    assert [p.divider is not None for p in shown] == [False, True, True]
    rewound = [m for p in everything for m in p.transcript.messages if m.inactive]
    if shapes.EXPECTED[shape].modern:
        assert [shapes.REWOUND_WORD in m.text for m in rewound] == [True]
        assert not any(shapes.REWOUND_WORD in m.text for p in shown for m in p.transcript.messages)
        assert shown[0].transcript.left_out == 1
    else:
        assert rewound == []
    # In-place compaction: the history rows once, its hidden summary row not at all.
    texts = [m.text for p in telegram for m in p.transcript.messages]
    assert sum(shapes.COMPACTED_WORD in t for t in texts) == 1
    assert not any(shapes.HIDDEN_WORD in t for t in texts)
    assert len(texts) == len(set(texts))


# --- Chain costs (issue 13, item 3) -------------------------------------------------------


def test_chain_totals_show_effective_spend_and_its_coverage(tmp_path: Path) -> None:
    line = build_priced_chain(tmp_path / "home")
    chain = chain_of(tmp_path / "home" / "state.db", line[4])
    t = chain.totals
    assert t["effective_cost_usd"] == pytest.approx(7 * 0.105 + 2 * 0.125)
    assert t["actual_cost_usd"] == pytest.approx(9 * 0.005 + 2 * 0.12)  # the billed part only
    assert t["billed_segments"] == 2 and t["partly_billed_segments"] == 7
    assert t["unknown_cost_segments"] == 1  # the tip: no price, whatever else it did
    assert t["cost_coverage"] == "billed for 2 of 10 segments, partly for 7, no price for 1"
    segments = {s.session_id: s for s in chain.segments}
    assert segments[line[4]].cost.status == "partial"
    assert segments[line[4]].cost.effective == pytest.approx(0.105)
    assert segments[line[2]].cost.status == "actual"
    assert segments[line[9]].cost.effective is None


def test_most_expensive_chains_rank_by_effective_spend(tmp_path: Path) -> None:
    build_priced_chain(tmp_path / "home")
    index = StateReader(HermesHome(tmp_path / "home")).chains_index("cost")
    # $0.985 (mostly estimated) before $0.60 (billed): not by the partial bill ($0.285).
    assert [c.root for c in index.chains] == ["priced-01", "billed-01"]
    assert index.chains[0].cost.effective == pytest.approx(0.985)
    assert index.chains[0].cost.counts["partial"] == 7


@pytest.fixture(params=shapes.EPOCH_FORMS)
def epochs_home(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[shapes.EpochFacts, Path]:
    facts = shapes.build_epochs_home(tmp_path / "home", request.param)
    return facts, archive_home(tmp_path / "home")


def test_a_session_compacted_only_in_place_is_a_chain_of_its_epochs(
    epochs_home: tuple[shapes.EpochFacts, Path],
) -> None:
    facts, path = epochs_home
    with opened(path) as conn:
        chain = load_chain(conn, shapes.S_EPOCHS, epochs=True)
        plain = load_chain(conn, shapes.S_EPOCHS)
        src = {int(r[1]): r[0] for r in conn.execute("SELECT id, src_id FROM messages")}
    (segment,) = chain.segments
    assert plain.segments[0].epochs is None  # read only when asked for
    assert segment.epochs is not None and segment.epochs.compactions == 3
    made = facts.compactions[shapes.S_EPOCHS]
    assert [e.compacted_at for e in segment.epochs.epochs] == [at for at, _, _ in made] + [None]
    assert [e.summary_id for e in segment.epochs.epochs[1:]] == [src[w[0]] for _, _, w in made]
    assert chain.compactions_in_place == 3 and chain.is_in_place
    assert sum(e.rows for e in segment.epochs.epochs) == len(facts.distinct)


def test_a_rotated_chain_whose_tip_compacted_in_place_carries_the_tips_epochs(
    epochs_home: tuple[shapes.EpochFacts, Path],
) -> None:
    _, path = epochs_home
    with opened(path) as conn:
        chain = load_chain(conn, shapes.S_ROTATED, epochs=True)
    assert chain.line == (shapes.S_ROTATED, shapes.S_ROTATED_TIP)
    first, tip = (chain.segment(sid) for sid in chain.line)
    assert first.epochs == Epochs() and tip.epochs.compactions == 2
    assert chain.compactions_in_place == 2 and not chain.is_in_place


def test_an_epochs_cost_is_what_its_usage_rows_inside_it_cost(tmp_path: Path) -> None:
    facts = shapes.build_epochs_home(tmp_path / "home", "current_views")
    inside = shapes.add_epoch_usage(facts)
    path = archive_home(tmp_path / "home")
    with opened(path) as conn:
        (segment,) = load_chain(conn, shapes.S_EPOCHS, epochs=True).segments
    costs = segment.epoch_costs
    assert len(costs) == 4
    assert [round(c.estimated, 6) if c.estimated is not None else None for c in costs] == [
        inside.get(n) for n in (1, 2, 3, 4)
    ]
    assert segment.unattributed_usage == 1  # the main loop's row spans every compaction
    assert segment.cost.estimated == pytest.approx(0.75 + 0.002 + 0.04)
