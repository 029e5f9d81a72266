"""The entry-by-entry three-way merge of USER.md / MEMORY.md."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dashboard.memory.entries import join_entries
from dashboard.memory.merge import merge_entries


def j(*entries: str) -> str:
    return join_entries(entries)


BASE = j("Name: Ada", "Prefers short answers", "Lives in Lisbon")


@pytest.mark.parametrize(
    ("theirs", "yours", "merged"),
    [
        # neighbouring entries edited by each side (diff3 would call this a conflict)
        (
            j("Name: Ada L.", "Prefers short answers", "Lives in Lisbon"),
            j("Name: Ada", "Prefers long answers", "Lives in Lisbon"),
            j("Name: Ada L.", "Prefers long answers", "Lives in Lisbon"),
        ),
        # the agent appends while you move the last entry up
        (
            j("Name: Ada", "Prefers short answers", "Lives in Lisbon", "Added by the agent"),
            j("Name: Ada", "Lives in Lisbon", "Prefers short answers"),
            j("Name: Ada", "Lives in Lisbon", "Prefers short answers", "Added by the agent"),
        ),
        # both append: both kept, theirs first; the same entry appended twice is kept once
        (j(BASE, "Theirs"), j(BASE, "Yours"), j(BASE, "Theirs", "Yours")),
        (j(BASE, "Same"), j(BASE, "Same"), j(BASE, "Same")),
        (j(BASE, "T", "Same"), j(BASE, "Same"), j(BASE, "T", "Same")),
        # the same deletion on both sides
        (
            j("Name: Ada", "Lives in Lisbon"),
            j("Name: Ada", "Lives in Lisbon"),
            j("Name: Ada", "Lives in Lisbon"),
        ),
        # you move an entry down while they edit its neighbour
        (
            j("Name: Ada L.", "Prefers short answers", "Lives in Lisbon"),
            j("Name: Ada", "Lives in Lisbon", "Prefers short answers"),
            j("Name: Ada L.", "Lives in Lisbon", "Prefers short answers"),
        ),
        # one deletes the first entry, the other edits the last
        (
            j("Prefers short answers", "Lives in Lisbon"),
            j("Name: Ada", "Prefers short answers", "Lives in Porto"),
            j("Prefers short answers", "Lives in Porto"),
        ),
    ],
)
def test_changes_to_different_entries_merge(theirs: str, yours: str, merged: str) -> None:
    assert merge_entries(BASE, theirs, yours) == merged


@pytest.mark.parametrize(
    ("theirs", "yours"),
    [
        (
            j("Name: Ada L.", "Prefers short answers", "Lives in Lisbon"),
            j("Name: Ada Lovelace", "Prefers short answers", "Lives in Lisbon"),
        ),  # one entry, two ways
        (
            j("Prefers short answers", "Lives in Lisbon"),
            j("Name: Ada!", "Prefers short answers", "Lives in Lisbon"),
        ),  # deleted vs edited
        (
            j("Prefers short answers", "Name: Ada", "Lives in Lisbon"),
            j("Name: Ada", "Lives in Lisbon", "Prefers short answers"),
        ),  # two moves of one entry
    ],
)
def test_a_real_overlap_is_no_merge(theirs: str, yours: str) -> None:
    assert merge_entries(BASE, theirs, yours) is None


entries = st.lists(st.sampled_from(["a", "b", "c", "d", "e", "x y"]), max_size=6)


@given(entries, entries)
def test_an_unchanged_side_gives_the_other(base: list[str], other: list[str]) -> None:
    assert merge_entries(j(*base), j(*base), j(*other)) == j(*other)
    assert merge_entries(j(*base), j(*other), j(*base)) == j(*other)
