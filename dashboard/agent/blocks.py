"""What the agent is handed each turn: the recalled-memory block and the volatile layer.

The third seed article (9.4) puts a memory block labelled by recency at the end of
the system prompt, recomputed every turn, after the stable part (so the prompt
cache still hits):

    # Relevant Memories

    [Recent — 5 mins ago]
    …

    [Long-term — 2 weeks ago]
    …

This module turns stage-1 search results into that block (bounded in characters)
and assembles the whole volatile layer. Pure functions: no I/O, no Flask.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from dashboard.search.sessions import SessionResult
from dashboard.text import clip, clip_line, plain

HEADER = "# Relevant Memories"
RECENT_S = 48 * 3600  # younger than this is "Recent", older is "Long-term"
DEFAULT_BUDGET_CHARS = 2000  # the whole recalled block, header included
HIT_CHARS = 280  # one matched excerpt inside an item


@dataclass(frozen=True)
class RecalledItem:
    """One recalled session in the block, with where it came from (for links)."""

    session_id: str
    message_id: int | None
    label: str  # "Recent — 5 mins ago"
    text: str  # the item's body as it appears in the block
    title: str | None = None  # the session's name (title, else its first words), if any


@dataclass(frozen=True)
class RecalledBlock:
    text: str  # "" when nothing was recalled: the agent gets no block at all
    items: tuple[RecalledItem, ...] = ()
    dropped: int = 0  # results that did not fit the budget


@dataclass(frozen=True)
class Part:
    """One part of the volatile layer, as the preview page shows it."""

    kind: str  # "user", "memory", "recalled", "context"
    title: str
    text: str
    items: tuple[RecalledItem, ...] = ()

    @property
    def chars(self) -> int:
        return len(self.text)

    @property
    def tokens(self) -> int:
        return approx_tokens(self.text)


@dataclass(frozen=True)
class VolatileBlock:
    """The per-turn end of the system prompt: its parts and the text the model gets."""

    parts: tuple[Part, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def text(self) -> str:
        return "\n\n".join(p.text for p in self.parts if p.text)

    @property
    def chars(self) -> int:
        return len(self.text)

    @property
    def tokens(self) -> int:
        return approx_tokens(self.text)

    def to_json(self) -> dict[str, object]:
        """The ``/api/preview`` shape."""
        return {
            "text": self.text,
            "chars": self.chars,
            "tokens": self.tokens,
            "notes": list(self.notes),
            "parts": [
                {
                    "kind": p.kind,
                    "title": p.title,
                    "text": p.text,
                    "chars": p.chars,
                    "tokens": p.tokens,
                    "items": [
                        {
                            "session_id": i.session_id,
                            "message_id": i.message_id,
                            "label": i.label,
                            "title": i.title,
                        }
                        for i in p.items
                    ],
                }
                for p in self.parts
            ],
        }


def age_words(seconds: float) -> str:
    """``just now``, ``5 mins ago``, ``3 hours ago``, ``yesterday``, ``2 weeks ago``…"""
    s = max(0.0, seconds)

    def ago(n: int, unit: str) -> str:
        return f"{n} {unit}{'' if n == 1 else 's'} ago"

    if s < 60:
        return "just now"
    if s < 3600:
        return ago(int(s // 60), "min")
    if s < 86400:
        return ago(int(s // 3600), "hour")
    if s < 2 * 86400:
        return "yesterday"
    if s < 14 * 86400:
        return ago(int(s // 86400), "day")
    if s < 60 * 86400:
        return ago(int(s // (7 * 86400)), "week")
    if s < 365 * 86400:
        return ago(int(s // (30 * 86400)), "month")
    return ago(int(s // (365 * 86400)), "year")


def recency_label(when: float | None, now: float) -> str:
    """``Recent — 5 mins ago`` / ``Long-term — 2 weeks ago`` (Generative Agents' recency)."""
    if when is None:
        return "Long-term — date unknown"
    age = now - when
    return f"{'Recent' if age < RECENT_S else 'Long-term'} — {age_words(age)}"


def recalled_block(
    results: Sequence[SessionResult], now: float, budget_chars: int = DEFAULT_BUDGET_CHARS
) -> RecalledBlock:
    """The memory block for these results (best first), at most ``budget_chars`` long.

    Each session becomes one item labelled by the age of its best hit; its matched
    excerpts follow with their roles. Items that do not fit are dropped whole, except
    the first, which is cut: an agent is better served by one clipped memory than none.
    """
    if not results:
        return RecalledBlock("")
    pieces = [HEADER]
    used = len(HEADER)
    items: list[RecalledItem] = []
    for index, result in enumerate(results):
        best = result.hits[0] if result.hits else None
        when = (best.timestamp if best else None) or result.last_activity or result.started_at
        label = recency_label(when, now)
        body = _item_body(result)
        entry = f"[{label}]\n{body}"
        room = budget_chars - used - 2  # the blank line before the item
        if len(entry) > room:
            if items or room < len(label) + 40:
                return RecalledBlock("\n\n".join(pieces), tuple(items), len(results) - index)
            entry = clip(entry, room)
            body = entry.split("\n", 1)[1] if "\n" in entry else ""
        pieces.append(entry)
        used += len(entry) + 2
        items.append(
            RecalledItem(
                result.session_id,
                best.message_id if best else None,
                label,
                body,
                result.title or result.name or None,
            )
        )
    return RecalledBlock("\n\n".join(pieces), tuple(items), 0)


def _item_body(result: SessionResult) -> str:
    # The name every page shows (store/names.py: the title, else the first words).
    title = result.title or result.name or "Untitled session"
    lines = [f'Session "{clip(title, 100)}" ({result.source}):']
    seen: set[str] = set()
    for hit in sorted(result.hits, key=lambda h: h.message_id)[:6]:  # in conversation order
        text = clip_line(plain(hit.snippet), HIT_CHARS)
        if text not in seen and len(seen) < 3:
            seen.add(text)
            lines.append(f"{hit.role}: {text}")
    if not result.hits and result.preview:
        lines.append(clip_line(result.preview, HIT_CHARS))
    return "\n".join(lines)


def context_line(now: float, session_id: str | None, model: str | None) -> str:
    """The seed's last volatile line: current time, session and model."""
    stamp = datetime.fromtimestamp(now).astimezone().isoformat(timespec="seconds")
    session = session_id or "(new session)"
    return f"Current time: {stamp}\nSession: {session}\nModel: {model or 'unknown'}"


def approx_tokens(text: str) -> int:
    """A model-independent estimate: ~4 characters per token of ASCII text, one token
    per other character (CJK characters are roughly a token each)."""
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return math.ceil(ascii_chars / 4) + (len(text) - ascii_chars)
