"""What a summary is made from: a session's transcript, cut around the query's matches.

Stage 2 of search (see SPEC "Summaries") formats a matched session the way Hermes's
``session_search`` tool does, cuts it with the seed's ``_truncate_around_matches``
(whole phrase, then all terms within 200 characters of the rarest, then any term;
the window keeps 25% before its anchor and 75% after), and hands the result to a
summariser. With no summariser, :func:`extractive_preview` shows the best window of
the same text as safe HTML instead.

The match strategy and window choice live once, in :func:`_locate`.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from dashboard.errors import QuerySyntaxError
from dashboard.search.query import parse_query
from dashboard.sessions.transcript import TranscriptMessage
from dashboard.text import mark_terms

MAX_RECAP_CHARS = 100_000
PREVIEW_CHARS = 1_500
EARLIER_MARKER = "...[earlier conversation truncated]...\n\n"
LATER_MARKER = "\n\n...[later conversation truncated]..."

TOOL_OUTPUT_LIMIT = 500  # longer tool results keep only their head and tail
TOOL_OUTPUT_KEEP = 250  # characters kept at each end of a long tool result
TOOL_OUTPUT_CUT = "\n...[truncated]...\n"
NEAR_CHARS = 200  # "co-occurs": another term starts fewer than this many chars away
ELLIPSIS = "…"


def format_transcript(messages: Sequence[TranscriptMessage]) -> str:
    """The session as Hermes formats it for its summariser: one ``[ROLE]: text`` block each.

    Tool calls are named, not shown with their arguments (the summariser needs to know
    what was done, not how); long tool results keep their first and last 250 characters.
    """
    parts: list[str] = []
    for m in messages:
        role = m.role.upper()
        if m.is_compaction_summary:
            # Hermes stores the summary of compacted turns as a user message; it carries
            # the context of everything before it, so it stays, labelled as such.
            parts.append(f"[USER]: {m.text}")
        elif role == "TOOL":
            text = m.text
            if len(text) > TOOL_OUTPUT_LIMIT:
                text = text[:TOOL_OUTPUT_KEEP] + TOOL_OUTPUT_CUT + text[-TOOL_OUTPUT_KEEP:]
            label = f"TOOL:{m.tool_name}" if m.tool_name else "TOOL"
            parts.append(f"[{label}]: {text}")
        elif role == "ASSISTANT" and m.tool_calls:
            # A call whose stored JSON was unreadable has no name worth repeating.
            names = [c.name or "?" for c in m.tool_calls if not c.malformed]
            if names:
                parts.append(f"[ASSISTANT]: [Called: {', '.join(names)}]")
            if m.text or not names:
                parts.append(f"[ASSISTANT]: {m.text}")
        else:
            parts.append(f"[{role}]: {m.text}")
    return "\n\n".join(parts)


def truncate_around_matches(full_text: str, query: str, max_chars: int = MAX_RECAP_CHARS) -> str:
    """``full_text`` cut to the ``max_chars`` window covering most matches of ``query``.

    The seed's ``_truncate_around_matches``, with ``query`` read as a search (FTS5
    operators, quotes and ``*`` are syntax, not text; NOT terms are not looked for).
    Markers say which ends were cut; text that fits is returned unchanged.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    if len(full_text) <= max_chars:
        return full_text
    window = _locate(full_text, query, max_chars)
    prefix = EARLIER_MARKER if window.start > 0 else ""
    suffix = LATER_MARKER if window.end < len(full_text) else ""
    return prefix + full_text[window.start : window.end] + suffix


def extractive_preview(full_text: str, query: str, width: int = PREVIEW_CHARS) -> str:
    """About ``width`` characters of the best-matching window, as safe HTML.

    Shown when no model summary is available. The window is chosen as for
    :func:`truncate_around_matches`, then its ends are moved to a line break or,
    failing that, a space (never past the first match), escaped, with the terms in
    ``<mark>`` and ``…`` where text was cut. Blank text gives ``""``.
    """
    if width < 1:
        raise ValueError("width must be at least 1")
    if not full_text.strip():
        return ""
    window = _locate(full_text, query, width)
    start, end = window.start, window.end
    slack = width // 5  # how much of the window a tidy edge may cost
    if start > 0:
        first = bisect_left(window.positions, start)
        anchor = window.positions[first] if first < len(window.positions) else end
        start = _line_or_word_start(full_text, start, min(start + slack, anchor, end))
    if end < len(full_text):
        end = _line_or_word_end(full_text, end, max(start + 1, end - slack))
    body = full_text[start:end].strip()
    head = ELLIPSIS if start > 0 else ""
    tail = ELLIPSIS if end < len(full_text) else ""
    return head + mark_terms(body, window.terms) + tail


# -- the strategy, once -------------------------------------------------------------


@dataclass(frozen=True)
class _Window:
    start: int
    end: int
    terms: list[str]  # as the person typed them (for marking)
    positions: list[int]  # sorted match positions the window was chosen from


def _locate(full_text: str, query: str, width: int) -> _Window:
    """Match positions of ``query`` in ``full_text`` and the ``width`` window covering most.

    With no match the window starts at 0.
    """
    terms = _query_terms(query)
    folded = _fold(full_text)
    needles = list(dict.fromkeys(_fold(t) for t in terms))
    positions = _match_positions(folded, needles)
    start = _best_start(positions, len(full_text), width)
    return _Window(start, min(len(full_text), start + width), terms, positions)


def _query_terms(query: str) -> list[str]:
    """The texts a search for ``query`` looks for, in the order typed.

    ``highlight_terms`` strips the FTS5 syntax (so ``"connection refused" OR redis*``
    gives ``connection refused`` and ``redis``) but orders by length; the phrase
    strategy needs the typed order, so it is restored from ``positive``.
    """
    try:
        parsed = parse_query(query)
    except QuerySyntaxError:
        return []  # only operators, punctuation or exclusions: nothing to look for
    typed: dict[str, int] = {}
    for i, term in enumerate(parsed.positive):
        typed.setdefault(term.text, i)
    return sorted(parsed.highlight_terms(), key=lambda t: typed.get(t, len(typed)))


def _fold(text: str) -> str:
    """``text.lower()`` with one character per character, so positions stay true.

    A few characters lower to two ("İ" → "i̇"); folding those would shift every later
    match position off the original text, so they are kept as they are.
    """
    lower = text.lower()
    if len(lower) == len(text):  # lower() never shortens, so this means 1:1 throughout
        return lower
    return "".join(low if len(low := ch.lower()) == 1 else ch for ch in text)


def _find_all(text: str, needle: str) -> list[int]:
    """Start of every non-overlapping occurrence of ``needle`` (as ``re.finditer`` finds)."""
    if not needle:
        return []
    return [m.start() for m in re.finditer(re.escape(needle), text)]


def _match_positions(folded: str, terms: list[str]) -> list[int]:
    """The seed's three strategies, in order, over folded text and folded terms; sorted."""
    if not terms:
        return []
    # 1. The whole query as a phrase.
    positions = _find_all(folded, " ".join(terms))
    # 2. The rarest term wherever every other term starts within NEAR_CHARS of it.
    if not positions and len(terms) > 1:
        by_term = {t: _find_all(folded, t) for t in terms}
        rarest = min(terms, key=lambda t: len(by_term[t]))
        others = [by_term[t] for t in terms if t != rarest]
        positions = [p for p in by_term[rarest] if all(_near(o, p) for o in others)]
    # 3. Any term, anywhere.
    if not positions:
        positions = [p for t in terms for p in _find_all(folded, t)]
    positions.sort()
    return positions


def _near(sorted_positions: list[int], pos: int) -> bool:
    """Some position within ``abs(p - pos) < NEAR_CHARS`` (bisect: transcripts are long)."""
    i = bisect_left(sorted_positions, pos - NEAR_CHARS + 1)
    return i < len(sorted_positions) and sorted_positions[i] < pos + NEAR_CHARS


def _best_start(positions: list[int], length: int, width: int) -> int:
    """The seed's window choice: the first candidate start covering the most positions.

    Each match is tried as an anchor a quarter into the window (clamped so the window
    does not run past the end). Counting by bisection gives the seed's counts without
    its quadratic scan, which a common term in a long transcript would make slow.
    """
    best_start, best_count = 0, 0
    for candidate in positions:
        ws = max(0, candidate - width // 4)
        if ws + width > length:
            ws = max(0, length - width)
        count = bisect_left(positions, ws + width) - bisect_left(positions, ws)
        if count > best_count:
            best_start, best_count = ws, count
    return best_start


# -- tidy preview edges -------------------------------------------------------------


def _line_or_word_start(text: str, start: int, limit: int) -> int:
    """``start`` moved forward (at most to ``limit``) to begin a line, else a word."""
    newline = text.find("\n", start - 1, limit)
    if newline != -1:
        return newline + 1
    for i in range(start - 1, limit):
        if text[i].isspace():
            return i + 1
    return start  # one long word or unspaced (CJK) text: cut mid-run


def _line_or_word_end(text: str, end: int, floor: int) -> int:
    """``end`` moved back (not below ``floor``) to end a line, else a word."""
    newline = text.rfind("\n", floor, end + 1)
    if newline != -1:
        return newline
    for i in range(end, floor - 1, -1):
        if text[i].isspace():
            return i
    return end
