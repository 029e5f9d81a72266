"""Text as pages show it, once: the term pattern, marking, clipping, plain text back.

Message text is untrusted. Every snippet is built by HTML-escaping the chosen
window of plain text and only then inserting ``<mark>`` around term matches found
in the *unescaped* text, so no byte of a message can open a tag. Search cards,
transcripts (through web/markdown.py), recaps and the agent's memory block all
mark, clip and un-mark text through the functions here.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt

MARK_OPEN, MARK_CLOSE = "<mark>", "</mark>"
SNIPPET_CHARS = 220
PREVIEW_CHARS = 160
_SPACE = re.compile(r"\s+")
_MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])
#: Code points of CJK ideographs, kana and hangul (inclusive ranges): the characters a
#: word index cannot split into words. One rule for the query parser's CJK pattern and
#: the store's index of messages ending in one (schema.CJK_TAIL_ROWS).
CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x1100, 0x11FF),
    (0x3005, 0x3005),
    (0x3040, 0x30FF),
    (0x3130, 0x318F),
    (0x31F0, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0xFF66, 0xFF9F),
    (0x20000, 0x3134F),
)
CJK = re.compile("[" + "".join(f"{chr(a)}-{chr(b)}" for a, b in CJK_RANGES) + "]")


def readable(text: str) -> str:
    """JSON tool output as the text it holds (strings unescaped); other text as is."""
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return text
    try:
        value = json.loads(stripped)
    except ValueError:
        return text
    return "\n".join(_leaves(value)) or text


def readable_tool_calls(raw: str | None) -> str:
    """OpenAI-format tool calls as ``name: key=value …`` lines."""
    if not raw:
        return ""
    try:
        calls = json.loads(raw)
    except ValueError:
        return raw
    lines = []
    for call in calls if isinstance(calls, list) else [calls]:
        fn = call.get("function", {}) if isinstance(call, dict) else {}
        args: Any = fn.get("arguments", "")
        try:
            args = json.loads(args) if isinstance(args, str) else args
        except ValueError:
            pass
        if isinstance(args, dict):
            args = " ".join(f"{k}={v}" for k, v in args.items())
        lines.append(f"{fn.get('name', '?')}: {args}")
    return "\n".join(lines)


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    if value is None or isinstance(value, bool):
        return []
    return [str(value)]


def term_pattern(terms: Iterable[str]) -> re.Pattern[str] | None:
    """One case-insensitive alternation of the terms, longest first (None when empty)."""
    return _compiled(tuple(terms))


@lru_cache(maxsize=64)
def _compiled(terms: tuple[str, ...]) -> re.Pattern[str] | None:
    cleaned = sorted({t for t in terms if t and t.strip()}, key=len, reverse=True)
    if not cleaned:
        return None
    return re.compile("|".join(re.escape(t) for t in cleaned), re.IGNORECASE)


def make_snippet(
    text: str, terms: Sequence[str], extra: str = "", width: int = SNIPPET_CHARS
) -> str:
    """A window of ``text`` around the first term match, escaped, terms in ``<mark>``.

    When no term is in ``text`` (the match was in a tool name or the tool-call
    arguments), the window is taken from ``extra`` instead.
    """
    pattern = term_pattern(terms)
    near = _around_match(text, terms, pattern, width)
    if near is not None:
        flat, found = near
    else:
        flat = _SPACE.sub(" ", text).strip()
        found = pattern.search(flat) if pattern else None
    if found is None and extra:
        flat_extra = _SPACE.sub(" ", extra).strip()
        alt = pattern.search(flat_extra) if pattern else None
        if alt is not None:
            flat, found = flat_extra, alt
    return _window(flat, found, pattern, width)


def _window(
    flat: str, found: re.Match[str] | None, pattern: re.Pattern[str] | None, width: int
) -> str:
    """The snippet of flattened text ``flat`` around match ``found`` (its start without)."""
    if found is None:
        start = 0
    else:
        # A third of the window before the match reads better than centring it.
        start = max(0, found.start() - width // 3)
        if start:
            space = flat.rfind(" ", max(0, start - 20), start + 1)
            start = space + 1 if space >= 0 else start
    end = min(len(flat), start + width)
    if end < len(flat):
        space = flat.rfind(" ", end - 25, end)
        end = space if space > start else end
    window = flat[start:end]
    body = mark(window, pattern)
    return ("…" if start > 0 else "") + body + ("…" if end < len(flat) else "")


def _around_match(
    text: str, terms: Sequence[str], pattern: re.Pattern[str] | None, width: int
) -> tuple[str, re.Match[str]] | None:
    """:func:`make_snippet`'s flattened text cut to a slice around the first match, and
    the match in it; None when the whole text must be flattened (short, no match, a
    term holding a space).

    A tool's output can run to hundreds of KB, and a card shows 220 characters of it.
    The slice holds more than the window can take on either side of the match (else
    None), so the window, and whether text lies beyond it, are the whole text's."""
    if pattern is None or len(text) < 8 * width or any(_SPACE.search(t) for t in terms):
        return None
    found = pattern.search(text)  # no term holds a space: the same first match as flat's
    if found is None:
        return None
    low, high = max(0, found.start() - 2 * width), found.end() + 3 * width
    # Where only whitespace lies beyond a side, the slice goes to that end (stripped).
    whole_before = low == 0 or text[:low].isspace()
    whole_after = high >= len(text) or text[high:].isspace()
    flat = _SPACE.sub(" ", text[0 if whole_before else low : len(text) if whole_after else high])
    flat = flat.lstrip() if whole_before else flat
    flat = flat.rstrip() if whole_after else flat
    near = pattern.search(flat)
    if near is None:
        return None
    # The window starts at most width // 3 + 20 before the match and takes width more.
    if (not whole_before and near.start() <= width // 3 + 21) or (
        not whole_after and len(flat) - near.start() <= width + 1
    ):
        return None
    return flat, near


def escape_html(text: str) -> str:
    """``text`` as HTML text (quotes too, so it is safe in an attribute)."""
    return html.escape(text, quote=True)


def mark(
    text: str, pattern: re.Pattern[str] | None, escape: Callable[[str], str] = escape_html
) -> str:
    """Escape ``text`` and wrap each match of ``pattern`` in ``<mark>``.

    ``escape``: how each piece is escaped (web/markdown.py passes markupsafe's, whose
    entities the templates use).
    """
    if pattern is None:
        return escape(text)
    out = []
    last = 0
    for m in pattern.finditer(text):
        out.append(escape(text[last : m.start()]))
        out.append(f"{MARK_OPEN}{escape(m.group(0))}{MARK_CLOSE}")
        last = m.end()
    out.append(escape(text[last:]))
    return "".join(out)


def mark_terms(text: str, terms: Sequence[str]) -> str:
    """Escape ``text`` and mark ``terms`` (for titles and previews)."""
    return mark(text, term_pattern(terms))


def is_marked(snippet_html: str) -> bool:
    """Whether a snippet marks a term: it escapes its text first, so only a found term
    opens a ``<mark>``."""
    return MARK_OPEN in snippet_html


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last one an ellipsis (a space before it
    dropped); text that fits is returned as it is."""
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


def clip_line(text: str, limit: int) -> str:
    """``text`` on one line (each run of whitespace one space), then :func:`clip` ped."""
    return clip(" ".join(text.split()), limit)


def preview(text: str, width: int = PREVIEW_CHARS) -> str:
    """One line of plain text (not escaped: templates escape it) for a card's preview."""
    flat = _SPACE.sub(" ", text).strip()
    if len(flat) <= width:
        return flat
    cut = flat.rfind(" ", width - 30, width)
    return flat[: cut if cut > 0 else width] + "…"


#: Of a message's Markdown, what is read for its first words (a session's name, a card's
#: preview): far more than either shows, and a pasted log need not be parsed whole.
OPENING_CHARS = 4_000


def plain_opening(text: str) -> str:
    """The first words of Markdown ``text`` as a reader sees them (:func:`markdown_plain`
    of its opening). Kept for the last few hundred openings: a page of search cards
    names and previews the same sessions search after search."""
    return _plain_opening(text[:OPENING_CHARS])


@lru_cache(maxsize=512)
def _plain_opening(opening: str) -> str:
    return markdown_plain(opening)


def markdown_plain(text: str) -> str:
    """Markdown as the words a reader sees: no backticks, emphasis marks or link targets."""
    words: list[str] = []
    for block in _MARKDOWN.parse(text):
        if block.type in ("fence", "code_block", "html_block"):
            words.append(block.content)
        for token in block.children or ():
            if token.type in ("text", "code_inline"):
                words.append(token.content)
            elif token.type in ("softbreak", "hardbreak"):
                words.append(" ")
            elif token.type == "html_inline":
                words.append(token.content)
        if block.type.endswith("_close") and block.block:
            words.append(" ")
    return _SPACE.sub(" ", "".join(words)).strip()


def plain(snippet_html: str, marks: tuple[str, str] = ("", "")) -> str:
    """A marked snippet as the text it came from: each ``<mark>`` and ``</mark>``
    becomes ``marks`` (nothing, or ``«`` ``»`` for a terminal), entities are decoded."""
    opened = snippet_html.replace(MARK_OPEN, marks[0]).replace(MARK_CLOSE, marks[1])
    return html.unescape(opened)
