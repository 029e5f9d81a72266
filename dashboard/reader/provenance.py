"""The memory page's provenance: each entry of one file with the calls that wrote it
and where the user said it, read in one snapshot of the archive (memory/provenance.py
holds the rules)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dashboard.hermes.conventions import MEMORY_FILE_BY_NAME
from dashboard.memory.provenance import (
    EARLIER,
    WROTE,
    EntryProvenance,
    MemoryCall,
    Said,
    entry_provenance,
    memory_calls,
    with_said,
)
from dashboard.search.said import where_said
from dashboard.store.memory_calls import memory_call_rows
from dashboard.store.state import StoreState

#: The newest writes of an entry whose user message is looked for: each is a word search
#: of its session (~5 ms), and a text the agent wrote again and again (the demo home's
#: twenty most written entries have 1,853 writes) took 10 s of a page for all of them.
SAID_PER_ENTRY = 3


@dataclass(frozen=True)
class MemoryProvenance:
    """Each entry's provenance by its number (from 1); ``problem`` says why none could
    be read (the archive unreadable: the page shows the file all the same)."""

    entries: dict[int, EntryProvenance]
    calls: int = 0  # memory calls of this file's target in the archive's scope
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        """What ``GET /api/memory/<which>/provenance`` answers (docs/memory.md)."""
        return {
            "problem": self.problem,
            "calls": self.calls,
            "entries": [_entry_json(self.entries[n]) for n in sorted(self.entries)],
        }


def _revision_json(revision: dict[str, Any] | None) -> dict[str, Any] | None:
    if revision is None:
        return None
    return {k: revision[k] for k in ("id", "saved_at", "note")}


def _entry_json(entry: EntryProvenance) -> dict[str, Any]:
    appeared = entry.appeared
    return {
        "number": entry.number,
        "text": entry.text,
        "no_transcript": entry.no_transcript,
        "written_in": list(entry.write_sessions),
        "appeared": None
        if appeared is None
        else {"first": _revision_json(appeared.first), "before": _revision_json(appeared.before)},
        "events": [
            {
                "role": e.role,
                "action": e.call.op.action,
                "content": e.call.op.content,
                "old_text": e.call.op.old_text,
                "batch_index": e.call.op.index if e.call.op.batch else None,
                "session_id": e.call.session_id,
                "message_id": e.call.message_id,
                "at": e.call.at,
                "rewound": not e.call.shown,
                "status": e.call.result.status,
                "result": e.call.result.message,
                "pending_id": e.call.result.pending_id,
                "said": None
                if e.said is None
                else {
                    "message_id": e.said.message_id,
                    "at": e.said.at,
                    "text": e.said.text,
                    "words": list(e.said.words),
                    "rewound": not e.said.shown,
                },
            }
            for e in entry.events
        ],
    }


def archive_memory_calls(conn: sqlite3.Connection) -> tuple[MemoryCall, ...]:
    """Every memory call the connection's scope holds, oldest first: what a reader keeps
    until the archive's next write (parsing 5,599 calls' JSON is ~50 ms of ~160)."""
    return tuple(memory_calls(memory_call_rows(conn)))


def memory_provenance(
    conn: sqlite3.Connection,
    state: StoreState,
    name: str,
    text: str,
    revisions: Sequence[dict[str, Any]],
    every_call: Sequence[MemoryCall],
) -> MemoryProvenance:
    """The provenance of every entry of the file ``name`` whose text is ``text``, from
    ``every_call`` (:func:`archive_memory_calls` of the connection's scope: one
    profile's, on its page)."""
    target = MEMORY_FILE_BY_NAME[name].key
    calls = [c for c in every_call if c.op.target == target]
    entries = entry_provenance(text, target, calls, revisions)
    said: dict[tuple[str, int, str], Said | None] = {}
    shown: dict[int, EntryProvenance] = {}
    for entry in entries:
        found: dict[int, Said | None] = {}
        writes = [e for e in entry.events if e.role in (WROTE, EARLIER)]
        for event in writes[-SAID_PER_ENTRY:]:
            call = event.call
            key = (call.session_id, call.message_id, call.op.content)
            if key not in said:
                said[key] = where_said(
                    conn,
                    state,
                    call.session_id,
                    call.message_id,
                    call.op.content,
                    rewound=not call.shown,
                )
            found[call.message_id] = said[key]
        shown[entry.number] = with_said(entry, found)
    return MemoryProvenance(shown, len(calls))
