"""The lineage graph and its cache: reloaded after every write the archive gets."""

from __future__ import annotations

from pathlib import Path

from dashboard.hermes.home import HermesHome
from dashboard.reader.reader import StateReader
from tests.support import hermes_shapes as shapes
from tests.support.archived import archive_home


def rotated(reader: StateReader) -> list:
    """The index's rotation chains (the shape also holds a session compacted in place)."""
    chains = reader.chains_index().chains
    assert [c.root for c in chains if c.in_place] == [shapes.S_TELEGRAM]
    return [c for c in chains if not c.in_place]


def test_a_sync_that_changes_a_parent_link_in_place_reaches_the_cached_lineage(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    db = shapes.build_current_views(home / "state.db")
    reader = StateReader(HermesHome(home), path=archive_home(home))
    line = [shapes.S_ROOT, shapes.S_CONT1, shapes.S_CONT2]
    (chain,) = rotated(reader)
    assert chain.segments == 3 and shapes.S_CONT2 in reader.chain_members(shapes.S_ROOT)

    # The source drops the last segment's parent link: same sessions, same row count.
    shapes.set_parent(db, shapes.S_CONT2, None)
    archive_home(home)  # a real sync: follow.py updates the archived row in place

    (chain,) = rotated(reader)
    assert (chain.root, chain.tip, chain.segments) == (line[0], line[1], 2)
    assert shapes.S_CONT2 not in reader.chain_members(shapes.S_ROOT)
    assert reader.chain_members(shapes.S_CONT2) == [shapes.S_CONT2, shapes.S_SUBAGENT]

    # And back: the link returns, the cached lineage follows.
    shapes.set_parent(db, shapes.S_CONT2, shapes.S_CONT1)
    archive_home(home)
    (chain,) = rotated(reader)
    assert chain.segments == 3 and chain.tip == shapes.S_CONT2
