"""A memory file's entries: split and joined at Hermes's ``§`` losslessly, edited one
at a time."""

from __future__ import annotations

import re
from collections.abc import Sequence

from dashboard.errors import (
    ValidationError,
)

SEPARATOR = "\n§\n"
# Words too common to say what an entry is about (and FTS5's operators).
_COMMON = frozenset(
    "the and for with that this from have has had are was were you your user users "
    "not but all any can will would should about into also more most very their them "
    "they when what which who how likes like prefers prefer uses use using".split()
)
WORD = re.compile(r"[^\W_]{3,}")  # a word: letters and digits ("___" is no word to FTS5)
MAX_WORDS = 16  # an entry's first words: enough to find the message, a short query


def key_words(text: str) -> tuple[str, ...]:
    """An entry's words worth searching for (where it was said, what was said since):
    three letters or more, not common, once each."""
    words: dict[str, None] = {}
    for word in WORD.findall(text.casefold()):
        if word not in _COMMON and not word.isdigit():
            words.setdefault(word, None)
    return tuple(words)[:MAX_WORDS]


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
