"""The memory page's staleness: for each entry, the user's newer conversations on its
subject, and the ones that may overturn it (memory/staleness.py holds the rules).

*Newer* is after the entry was last written: its newest write by the agent (provenance),
else the revision before it appeared; an entry with no date is compared with every
conversation, and the page says so. The conversations come from the archive's own
search, the user's messages only, in the page's profile, four questions an entry:

* its words (``memory/entries.key_words``, joined by OR), and the same with a word of
  change ("now", "no longer" …): a message that changes it is found among many that
  only mention it;
* the other things of the kinds it names (the entry names *Python*: Go, Rust, Java …)
  with a word of change: "I'm mostly writing Go now" never says *Python*;
* its meaning, when the archive's meaning index is ready.

Each message found is read against the entry (``memory/staleness.read_message``); the
conversations are listed flagged first, then newest first.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from dashboard.bounded import BoundedCache
from dashboard.hermes.content import decode_content
from dashboard.hermes.conventions import is_summary
from dashboard.meaning.reader import MeaningReader
from dashboard.memory.entries import key_words
from dashboard.memory.provenance import EntryProvenance
from dashboard.memory.staleness import (
    CHANGE_WORDS,
    KINDS,
    Reading,
    could_supersede,
    read_message,
    shared_words,
    things,
)
from dashboard.search.newer import UserMatch, nearest_user_messages, newest_user_matches
from dashboard.store.names import names_of
from dashboard.store.state import StoreState
from dashboard.text import clip

SHOWN = 3  # conversations listed an entry (flagged first)
WORDS_ROWS = 40  # the user's newest messages holding the entry's words
CHANGE_ROWS = 200  # … holding its words and a word of change
# … holding another thing of its kinds and a word of change: a big archive's user rows
# name languages and tools all day long, pasted logs above all (at 1M messages, 1,330
# since the demo's "I'm mostly writing Go now" 40 days back), and most fail a first look.
ALTERNATIVE_ROWS = 2000
PER_QUESTION = 12  # the user's messages closest in meaning
TEXT_CHARS = 400
_PLAIN_NAME = re.compile(r"^[a-z0-9]+(?: [a-z0-9]+)*$")  # FTS5 reads it as words


@dataclass(frozen=True)
class Mention:
    """A newer conversation's user message on an entry's subject, read against it."""

    session_id: str
    session_name: str
    message_id: int
    at: float | None
    text: str  # the user's words, clipped
    reading: Reading
    found_by: tuple[str, ...]  # "words", "alternatives", "meaning"
    shared: tuple[str, ...]  # the entry's words it holds

    @property
    def flagged(self) -> bool:
        return self.reading.may_supersede


@dataclass(frozen=True)
class EntryStaleness:
    """One entry's newer conversations (``number`` from 1, as the page numbers them)."""

    number: int
    text: str
    since: float | None  # after this the conversations count; None: every conversation
    since_how: str  # "written" (the agent's newest write), "appeared" (between revisions)
    mentions: tuple[Mention, ...]  # flagged first, then newest first; at most SHOWN
    more: int  # conversations found beyond those listed

    @property
    def flagged(self) -> Mention | None:
        return next((m for m in self.mentions if m.flagged), None)


@dataclass(frozen=True)
class MemoryStaleness:
    """Each entry's staleness by its number; ``problem`` says why none could be read."""

    entries: dict[int, EntryStaleness]
    by_meaning: bool = False  # the meaning index answered too
    problem: str | None = None

    @property
    def flagged(self) -> list[EntryStaleness]:
        return [e for _, e in sorted(self.entries.items()) if e.flagged is not None]

    @property
    def listed(self) -> list[EntryStaleness]:
        """The entries with newer conversations: flagged first, then in file order."""
        spoken = [e for _, e in sorted(self.entries.items()) if e.mentions]
        return sorted(spoken, key=lambda e: e.flagged is None)

    def to_json(self) -> dict[str, Any]:
        """What ``GET /api/memory/<which>/staleness`` answers (docs/memory.md)."""
        return {
            "problem": self.problem,
            "by_meaning": self.by_meaning,
            "entries": [_entry_json(self.entries[n]) for n in sorted(self.entries)],
        }


def _entry_json(entry: EntryStaleness) -> dict[str, Any]:
    return {
        "number": entry.number,
        "text": entry.text,
        "since": entry.since,
        "since_how": entry.since_how,
        "flagged": entry.flagged is not None,
        "more": entry.more,
        "mentions": [
            {
                "session_id": m.session_id,
                "session_name": m.session_name,
                "message_id": m.message_id,
                "at": m.at,
                "text": m.text,
                "quote": m.reading.quote,
                "may_supersede": m.flagged,
                "reasons": list(m.reading.reasons),
                "found_by": list(m.found_by),
            }
            for m in entry.mentions
        ],
    }


def since_of(entry: EntryProvenance) -> tuple[float | None, str]:
    """When ``entry`` was last written, as well as the archive knows, and how it knows."""
    writes = [e.call.at for e in entry.writes if e.call.at is not None]
    if writes:
        return max(writes), "written"
    if entry.appeared is not None and entry.appeared.before is not None:
        return float(entry.appeared.before["saved_at"]), "appeared"
    return None, ""


def alternatives_query(text: str) -> str:
    """Every other member of the kinds ``text`` names, as one OR query ("" for none)."""
    named = things(text)
    names: dict[str, None] = {}
    for kind, members in named.items():
        for spelling, name in KINDS[kind].items():
            if name not in members and _PLAIN_NAME.match(spelling):
                names.setdefault(f'"{spelling}"' if " " in spelling else spelling, None)
    return " OR ".join(names)


def entry_staleness(
    conn: sqlite3.Connection,
    state: StoreState,
    meaning: MeaningReader | None,
    entries: Sequence[EntryProvenance],
) -> MemoryStaleness:
    """Each of ``entries``' newer conversations (see the module), in ``conn``'s snapshot
    and scope; ``meaning``: the archive's meaning index when it is built (else None)."""
    found: dict[int, EntryStaleness] = {}
    for entry in entries:
        since, how = since_of(entry)
        own = set(entry.write_sessions)
        words = key_words(entry.text)
        matches: dict[int, tuple[UserMatch, set[str]]] = {}
        questions = [
            ("words", " OR ".join(words), WORDS_ROWS),
            ("change", _with_a_change(" OR ".join(words)), CHANGE_ROWS),
            ("alternatives", _with_a_change(alternatives_query(entry.text)), ALTERNATIVE_ROWS),
        ]
        for label, query, limit in questions:
            for match in newest_user_matches(conn, state, query, since, limit):
                matches.setdefault(match[0], (match, set()))[1].add(label)
        if meaning is not None:
            for match in nearest_user_messages(conn, meaning, entry.text, since, PER_QUESTION):
                matches.setdefault(match[0], (match, set()))[1].add("meaning")
        texts = _texts(conn, [mid for mid, (m, _) in matches.items() if m[1] not in own])
        mentions = []
        for message_id, said in texts.items():
            (_, session_id, at), labels = matches[message_id]
            if not said.strip() or is_summary(said):  # a compaction summary: not the user
                continue
            if labels == {"alternatives"} and not could_supersede(said):
                continue  # many: a first look spares them the whole reading
            reading = read_message(entry.text, said, words)
            shared = shared_words(words, said)
            if not (reading.alternatives or reading.retracted or _on_subject(shared, labels)):
                continue
            mentions.append(
                Mention(
                    session_id,
                    "",
                    message_id,
                    at,
                    clip(said, TEXT_CHARS),
                    reading,
                    tuple(sorted(labels)),
                    shared,
                )
            )
        listed = _one_a_conversation(mentions)
        shown = _named(conn, listed[:SHOWN])
        found[entry.number] = EntryStaleness(
            entry.number, entry.text, since, how, shown, len(listed[SHOWN:])
        )
    return MemoryStaleness(found, meaning is not None)


def _named(conn: sqlite3.Connection, mentions: list[Mention]) -> tuple[Mention, ...]:
    """``mentions`` with their conversations' names (store/names: every page's one name)."""
    names = names_of(conn, [m.session_id for m in mentions])
    return tuple(replace(m, session_name=names.get(m.session_id, m.session_id)) for m in mentions)


def _with_a_change(query: str) -> str:
    """``query``'s messages that also say something changed (the change words FTS5 reads
    as words: the Chinese ones are left to the meaning index and to the reading)."""
    if not query:
        return ""
    cues = " OR ".join(f'"{w}"' if " " in w else w for w in CHANGE_WORDS if w.isascii())
    return f"({query}) AND ({cues})"


def _on_subject(shared: tuple[str, ...], labels: set[str]) -> bool:
    """Speaks to the entry's subject: two of its words, one of the things it names, or
    one word and close in meaning (one common word, "alert" or "test", is not a subject;
    and the nearest messages by meaning always exist, near or not)."""
    return (
        len(shared) >= 2 or bool(things(" ".join(shared))) or bool(shared and "meaning" in labels)
    )


def _texts(conn: sqlite3.Connection, ids: list[int]) -> dict[int, str]:
    if not ids:
        return {}
    rows = conn.execute(
        f"SELECT id, content FROM messages WHERE id IN ({','.join('?' * len(ids))})", ids
    )
    return {mid: decode_content(content) for mid, content in rows}


def _one_a_conversation(mentions: list[Mention]) -> list[Mention]:
    """The best message of each conversation (flagged, then newest), flagged
    conversations first, then newest first."""

    def rank(m: Mention) -> tuple[bool, float]:
        return (m.flagged, m.at or 0.0)

    best: dict[str, Mention] = {}
    for m in mentions:
        if m.session_id not in best or rank(m) > rank(best[m.session_id]):
            best[m.session_id] = m
    return sorted(best.values(), key=rank, reverse=True)


class StalenessCache(BoundedCache[MemoryStaleness]):
    """The last few answers, per file text and the archive's newest message (a page and
    its partial ask the same twice; the next message asks again)."""

    def __init__(self, size: int = 8) -> None:
        super().__init__(size)

    @staticmethod
    def key(name: str, text: str, newest: tuple[object, ...], by_meaning: bool) -> tuple:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return (name, digest, newest, by_meaning)
