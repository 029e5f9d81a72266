"""A memory file's entries: split and joined at Hermes's ``§`` losslessly, edited one
at a time."""

from __future__ import annotations

from collections.abc import Sequence

from dashboard.errors import (
    ValidationError,
)

SEPARATOR = "\n§\n"


def split_entries(text: str) -> list[str]:
    """The entries of a file, split on ``"\\n§\\n"`` exactly as Hermes splits them.

    Lossless: ``join_entries(split_entries(t)) == t`` for every ``t``. Entries keep
    their whitespace (Hermes strips them when loading; see :func:`prompt.agent_block`).
    An empty text has no entries. A CRLF file (``"\\r\\n§\\r\\n"``) is not split,
    because Hermes does not split it either: to the agent it is one entry.
    """
    if text == "":
        return []
    return text.split(SEPARATOR)


def join_entries(entries: Sequence[str]) -> str:
    """The file text for ``entries`` (the inverse of :func:`split_entries`)."""
    return SEPARATOR.join(entries)


ENTRY_OPS = ("edit", "delete", "up", "down", "add")


def edit_entries(text: str, op: str, index: int, value: str = "") -> str:
    """``text`` with one entry operation applied: the new full file text.

    ``op`` is ``edit`` (entry ``index`` becomes ``value``), ``delete``, ``up`` /
    ``down`` (swap with the neighbour) or ``add`` (``value`` becomes the last entry;
    ``index`` is ignored). ``index`` is 0-based. Other entries are kept byte for
    byte. A bad op, an index outside the entries, or a move past either end raises
    :class:`ValidationError`.
    """
    if op not in ENTRY_OPS:
        raise ValidationError(f"unknown entry operation {op!r} (one of {', '.join(ENTRY_OPS)})")
    entries = split_entries(text)
    if op == "add":
        return join_entries([*entries, value])
    if not 0 <= index < len(entries):
        raise ValidationError(f"there is no entry {index + 1} (the file has {len(entries)})")
    if op == "edit":
        entries[index] = value
    elif op == "delete":
        del entries[index]
    else:
        other = index - 1 if op == "up" else index + 1
        if not 0 <= other < len(entries):
            raise ValidationError(f"entry {index + 1} cannot move {op}")
        entries[index], entries[other] = entries[other], entries[index]
    return join_entries(entries)
