"""Three-way merge of a memory file, entry by entry.

Two writers who started from the same text (two browser tabs, or a tab and the
agent) usually touch different entries: one moves entry 3 up while the other adds
an entry at the end. :func:`merge_entries` combines such edits over the ``§``
entries; when both changed the same entries differently there is no merge, and
the caller shows the three versions instead.

Line-based three-way merges (diff3, ``merge3``) also call edits of *neighbouring*
lines a conflict; for entries that would refuse the common case (you edit entry 2,
the agent edits entry 3), so the changes of each side are found with
:class:`difflib.SequenceMatcher` and only those that touch the same base entries
conflict.
"""

from __future__ import annotations

from difflib import SequenceMatcher

from dashboard.memory.entries import join_entries, split_entries

# One side's change: base entries [start, end) become ``entries`` (start == end: inserted).
_Change = tuple[int, int, tuple[str, ...]]


def _changes(base: list[str], other: list[str]) -> list[_Change]:
    matcher = SequenceMatcher(None, base, other, autojunk=False)
    return [
        (i1, i2, tuple(other[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def _overlap(a: _Change, b: _Change) -> bool:
    """Whether two changes touch the same base entries (neighbours do not)."""
    (a1, a2, _), (b1, b2, _) = a, b
    if a1 == a2 and b1 == b2:
        return False  # both insert at one place: both are kept
    if a1 == a2:
        return b1 < a1 < b2
    if b1 == b2:
        return a1 < b1 < a2
    return a1 < b2 and b1 < a2


def _same_entry_placed_twice(a: _Change, b: _Change) -> bool:
    """Whether both sides put one entry somewhere, differently (two moves of one entry)."""
    both_insert_here = a[0] == a[1] == b[0] == b[1]
    return not both_insert_here and bool(set(a[2]) & set(b[2]))


def _keeps_order_changes(base: list[str], side: list[str], merged: list[str]) -> bool:
    """Whether every pair of entries whose order ``side`` changed keeps that order in
    ``merged`` (one side moves an entry up, the other moves it down: no merge)."""

    def places(entries: list[str]) -> dict[str, int]:
        unique = {e for e in entries if entries.count(e) == 1}
        return {e: i for i, e in enumerate(entries) if e in unique}

    b, s, m = places(base), places(side), places(merged)
    shared = [e for e in s if e in b and e in m]
    return all(
        (b[x] < b[y]) == (s[x] < s[y]) or (s[x] < s[y]) == (m[x] < m[y])
        for i, x in enumerate(shared)
        for y in shared[i + 1 :]
    )


def merge_entries(base: str, theirs: str, yours: str) -> str | None:
    """The text holding both ``theirs``' and ``yours``' changes to ``base``, or None.

    None means a real overlap: both changed, moved or deleted some of the same
    entries in different ways. A change both sides made alike is taken once; entries
    both sides inserted at one place are all kept, theirs first (an entry both added
    is kept once).
    """
    entries = split_entries(base)
    their_changes = _changes(entries, split_entries(theirs))
    your_changes = [c for c in _changes(entries, split_entries(yours)) if c not in their_changes]
    if any(
        _overlap(t, y) or _same_entry_placed_twice(t, y)
        for t in their_changes
        for y in your_changes
    ):
        return None
    ordered = sorted(
        [(c, 0) for c in their_changes] + [(c, 1) for c in your_changes],
        key=lambda item: (item[0][0], item[0][1] > item[0][0], item[1]),
    )
    merged: list[str] = []
    position = 0
    inserted_here: set[str] = set()
    for (start, end, new), _side in ordered:
        if start > position:
            inserted_here = set()
        merged.extend(entries[position:start])
        if start == end:  # an insertion: skip an entry the other side inserted here too
            new = tuple(e for e in new if e not in inserted_here)
            inserted_here.update(new)
        merged.extend(new)
        position = max(position, end)
    merged.extend(entries[position:])
    sides = (split_entries(theirs), split_entries(yours))
    if not all(_keeps_order_changes(entries, side, merged) for side in sides):
        return None
    return join_entries(merged)
