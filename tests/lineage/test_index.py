"""Lineage kinds, part N of M, and the chain index (one list, sorted by any column)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.errors import ValidationError
from dashboard.hermes.home import HermesHome
from dashboard.lineage.index import chain_lines, check_chain_sort
from dashboard.reader.reader import StateReader
from dashboard.store.records import NewMessage, Usage
from dashboard.store.session_store import SessionStore


@pytest.fixture
def reader(tmp_path: Path) -> StateReader:
    """Three chains of 4, 2 and 1 segments, a branch and a delegation."""
    with SessionStore(tmp_path / "state.db") as store:

        def chain(prefix: str, segments: int, start: float, cost: float | None) -> list[str]:
            ids = [
                store.create_session(
                    "cli", session_id=f"{prefix}0", started_at=start, title=f"{prefix} chain"
                )
            ]
            for i in range(1, segments + 1):
                store.append_messages(
                    ids[-1], [NewMessage("user", f"{prefix} turn {i}", timestamp=start + i * 10)]
                )
                if cost is not None:
                    store.record_usage(
                        ids[-1], Usage(model="m", estimated_cost_usd=cost, cost_status="estimated")
                    )
                if i < segments:
                    ids.append(
                        store.compress(
                            ids[-1], "summary", child_id=f"{prefix}{i}", at=start + i * 10 + 5
                        )
                    )
            return ids

        long_ids = chain("long", 4, 1000.0, None)
        chain("pricey", 2, 5000.0, 3.0)
        chain("single", 1, 9000.0, 0.5)
        store.create_session(
            "cli",
            session_id="branch",
            parent_session_id="long1",
            started_at=1100.0,
            model_config={"_branched_from": "long1"},
        )
        store.create_session(
            "subagent",
            session_id="helper",
            parent_session_id="long2",
            started_at=1200.0,
            model_config={"_delegate_from": "long2"},
        )
        assert long_ids == ["long0", "long1", "long2", "long3"]
    return StateReader(HermesHome(tmp_path))


def test_lineage_kinds_and_parts(reader: StateReader) -> None:
    with reader.snapshot() as snap:
        lineage = reader._lineage.get(snap.conn, snap.state)
    assert lineage.kinds == {
        "long1": "continuation",
        "long2": "continuation",
        "long3": "continuation",
        "pricey1": "continuation",
        "branch": "branch",
        "helper": "delegation",
    }
    assert lineage.line("long2") == ["long0", "long1", "long2", "long3"]
    assert lineage.part_of("long0") == (1, 4) and lineage.part_of("long3") == (4, 4)
    assert lineage.part_of("branch") is None and lineage.part_of("single0") is None
    assert sorted(map(tuple, chain_lines(lineage))) == [
        ("long0", "long1", "long2", "long3"),
        ("pricey0", "pricey1"),
    ]


def test_index_orders(reader: StateReader) -> None:
    def roots(sort: str, descending: bool = True) -> list[str]:
        return [c.root for c in reader.chains_index(sort, descending).chains]

    index = reader.chains_index()
    assert index.total == 2 and index.sort == "last" and index.descending
    assert roots("segments") == ["long0", "pricey0"]
    assert roots("segments", descending=False) == ["pricey0", "long0"]
    assert roots("last") == ["pricey0", "long0"] == roots("started")
    assert roots("messages") == ["long0", "pricey0"]
    # An unknown price sorts after every known one, either way.
    assert roots("cost") == ["pricey0", "long0"] == roots("cost", descending=False)
    pricey, long = reader.chains_index("cost").chains
    assert (
        pricey.cost.effective == pytest.approx(6.0) and long.cost.effective is None
    )  # unknown, not $0
    assert long.segments == 4 and long.tip == "long3" and long.messages == 4 + 3
    assert reader.chains_index("segments", limit=1).chains[0].root == "long0"
    # Every sort shows the same figures, the cost included (priced only when listed).
    for sort in ("last", "started", "segments", "messages"):
        by_root = {c.root: c for c in reader.chains_index(sort).chains}
        assert by_root["pricey0"] == pricey and by_root["long0"] == long, sort


def test_index_names_chains_by_the_conversations_title(tmp_path: Path) -> None:
    """An untitled first segment: the chain is named after the first titled part."""
    with SessionStore(tmp_path / "state.db") as store:
        first = store.create_session("cli", session_id="a0", started_at=100.0)
        store.append_messages(first, [NewMessage("user", "hi", timestamp=101.0)])
        second = store.compress(first, "summary", child_id="a1", at=110.0)
        store.set_title(second, "Fix the build #2")
    (only,) = StateReader(HermesHome(tmp_path)).chains_index().chains
    assert only.title == "Fix the build" and only.root == "a0"


def test_bad_index_sort_is_a_validation_error() -> None:
    assert check_chain_sort(None, None) == ("last", True)
    assert check_chain_sort("cost", "asc") == ("cost", False)
    for sort, direction in (("price", None), ("cost", "sideways")):
        with pytest.raises(ValidationError):
            check_chain_sort(sort, direction)


def test_search_cards_show_their_part(reader: StateReader) -> None:
    from dashboard.search.sessions import SearchRequest

    result = reader.search(SearchRequest(query="turn", group="session", per_page=50))
    parts = {r.session_id: r.chain_part for r in result.results}
    assert parts["long2"] == (3, 4) and parts["single0"] is None
    by_id = {r["session_id"]: r for r in result.to_json()["results"]}
    assert by_id["long2"]["chain_part"] == [3, 4]


def test_a_session_that_only_compacted_in_place_is_listed_counting_its_epochs(
    tmp_path: Path,
) -> None:
    with SessionStore(tmp_path / "state.db") as store:
        first = store.create_session("cli", session_id="a0", started_at=100.0, title="Rotated")
        store.append_messages(first, [NewMessage("user", "hi", timestamp=101.0)])
        tip = store.compress(first, "summary", child_id="a1", at=110.0)
        store.append_messages(
            tip,
            [
                NewMessage("user", "on", timestamp=111.0),
                NewMessage("assistant", "ok", timestamp=112.0),
            ],
        )
        store.compact_in_place(tip, "tip compacted", at=120.0)
        solo = store.create_session("cli", session_id="solo", started_at=200.0, title="Solo")
        for n in range(2):
            at = 201.0 + n * 10
            turn = [
                NewMessage("user", f"q{n}", timestamp=at),
                NewMessage("assistant", "a", timestamp=at + 1),
            ]
            store.append_messages(solo, turn)
            store.compact_in_place(solo, f"part {n}", at=205.0 + n * 10)
        plain = store.create_session("cli", session_id="plain", started_at=300.0)
        store.append_messages(plain, [NewMessage("user", "once", timestamp=301.0)])
    reader = StateReader(HermesHome(tmp_path))
    index = reader.chains_index("epochs")
    assert index.total == 2
    by_root = {c.root: c for c in index.chains}
    assert set(by_root) == {"a0", "solo"}  # "plain" never compacted: no chain
    assert (by_root["solo"].segments, by_root["solo"].epochs) == (1, 3)
    assert (by_root["a0"].segments, by_root["a0"].epochs) == (2, 3)
    assert by_root["solo"].tip == "solo" and by_root["solo"].in_place
    assert not by_root["a0"].in_place
    # A later compaction shows on the next read (the count is cached per archive write).
    with SessionStore(tmp_path / "state.db") as store:
        store.compact_in_place(solo, "part 2", at=230.0)
    assert [c.root for c in reader.chains_index("epochs").chains] == ["solo", "a0"]
    assert reader.chains_index("epochs").chains[0].epochs == 4


def test_chains_of_every_profile_name_their_profile_sort_by_it_and_never_cross(
    tmp_path: Path,
) -> None:
    from tests.support import hermes_shapes as hs
    from tests.support.archived import profiles_reader

    _, reader = profiles_reader(tmp_path)
    index = reader.chains_index("profile", descending=False)
    assert index.sort == "profile"
    assert [c.profile for c in index.chains] == sorted(c.profile for c in index.chains)
    assert {(c.root, c.profile) for c in index.chains if c.segments > 1} == {
        (hs.S_ROOT, "default"),
        (f"legacy:{hs.S_ROOT}", "legacy"),
    }
    for summary in index.chains:  # every segment of a chain is of the chain's profile
        chain = reader.chain(summary.tip)
        assert {s.profile for s in chain.segments} == {summary.profile}, summary.root
        assert chain.profile == summary.profile
    assert check_chain_sort("profile", "desc") == ("profile", True)
    # One profile's index: its own chains, still named.
    legacy = reader.scoped("legacy").chains_index()
    assert {c.profile for c in legacy.chains} == {"legacy"}
