"""A unified diff of two texts for a page, invisible characters shown as named markers."""

from __future__ import annotations

import difflib

from markupsafe import Markup, escape

from dashboard.memory.checks import hidden_char


def show_hidden(line: str) -> Markup:
    """``line`` escaped, each character a diff would not show (NBSP, U+200B, bidi controls,
    tab…) replaced by a visible, named marker."""
    out = []
    for char in line:
        name = hidden_char(char)
        if name is None:
            out.append(escape(char))
        else:
            code = name.split(" ", 1)[0]
            out.append(Markup('<span class="hidden-char" title="{}">{}</span>').format(name, code))
    return Markup("").join(out)


def diff_lines(
    old: str, new: str, name: str, old_label: str = "on disk", new_label: str = "yours"
) -> list[tuple[str, Markup]]:
    """A unified diff of ``old`` → ``new`` as ``(kind, line)``; kind is add/del/hunk/file/same.

    Lines are safe markup with invisible characters shown as markers (see
    :func:`show_hidden`), so a change of a space into a no-break space is visible.
    """
    out: list[tuple[str, Markup]] = []
    lines = difflib.unified_diff(
        old.splitlines(),
        new.splitlines(),
        fromfile=f"{name} ({old_label})",
        tofile=f"{name} ({new_label})",
        lineterm="",
    )
    for line in lines:
        if line.startswith(("---", "+++")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "same"
        out.append((kind, show_hidden(line)))
    return out
