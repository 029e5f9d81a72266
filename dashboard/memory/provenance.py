"""Where each entry of USER.md / MEMORY.md came from: the ``memory`` tool calls that
wrote it, the calls that changed or removed an earlier version, and, without any, when
Recall first saw it in the file's revisions.

Hermes records no provenance per entry (HERMES_FACTS, "Memory approvals"). What the
archive holds is each foreground write: the assistant message calling ``memory`` and
its result (hermes/memory_tool.py; the rows are read by store/memory_calls.py). The
rules here are by text, as Hermes's own are:

* an entry was *written* by an ``add`` whose stripped content equals it, or a
  ``replace`` whose content equals it, whose result is not a failure (a staged write
  counts, labelled: it lands when approved);
* a ``replace`` that wrote it names the version before by ``old_text`` (a substring):
  the newest earlier text holding it (an earlier call's content, or an entry of a
  revision saved before the call) is an earlier version, followed the same way;
* a ``remove`` or ``replace`` whose ``old_text`` is a substring of the entry or of an
  earlier version is part of its history;
* an entry no call wrote was written by the background review (whose writes leave no
  transcript) or by hand; the revisions say between which two times it appeared.

Nothing here reads a file or a database: the reader hands in the calls and revisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dashboard.hermes.memory_tool import FAILED, MemoryOp, MemoryResult, memory_ops, read_result
from dashboard.memory.entries import split_entries
from dashboard.store.memory_calls import MemoryCallRow

#: The revisions read for when an entry appeared: as many as the memory page's history
#: lists (the JSON API reads as many).
REVISIONS_READ = 50

# How a call relates to an entry (EntryEvent.role).
WROTE = "wrote"  # wrote the entry's text as it is now
EARLIER = "earlier"  # wrote an earlier version (a later replace changed it)
TOUCHED = "touched"  # a remove or replace that matched it or an earlier version
FAILED_WRITE = "failed"  # tried to write its text and failed: never counted as writing


@dataclass(frozen=True)
class MemoryCall:
    """One operation of a ``memory`` call in the archive (a batch gives one per op)."""

    session_id: str
    profile: str | None
    message_id: int  # the assistant message that made the call (else its result row)
    result_id: int
    at: float | None
    op: MemoryOp
    result: MemoryResult
    shown: bool = True  # the message shows in the transcript without ``all=1``

    @property
    def counts(self) -> bool:
        """Whether it may have written (not a failure; staged and unknown count)."""
        return self.result.status != FAILED


@dataclass(frozen=True)
class Said:
    """The user message a written entry was most likely said in (search/said.py)."""

    message_id: int
    at: float | None
    text: str  # clipped
    words: tuple[str, ...]  # the entry's words it holds
    shown: bool = True  # the message shows in the transcript without ``all=1``


@dataclass(frozen=True)
class EntryEvent:
    """A call in an entry's history: how it relates (``role``), and where the user
    said the text it wrote (``said``, filled by the reader)."""

    call: MemoryCall
    role: str
    said: Said | None = None


@dataclass(frozen=True)
class Appearance:
    """The revisions around an entry's appearance: the first of the latest run of
    revisions holding it, and the one before it (None: it was in the oldest kept)."""

    first: dict[str, Any]
    before: dict[str, Any] | None


@dataclass(frozen=True)
class EntryProvenance:
    """One entry (``number`` from 1, as the page numbers them) and where it came from."""

    number: int
    text: str
    events: tuple[EntryEvent, ...] = ()  # oldest first
    appeared: Appearance | None = None

    @property
    def writes(self) -> tuple[EntryEvent, ...]:
        return tuple(e for e in self.events if e.role == WROTE)

    @property
    def write_sessions(self) -> tuple[str, ...]:
        """The conversations that wrote its text as it is now, oldest first, once each."""
        return tuple(dict.fromkeys(e.call.session_id for e in self.writes))

    @property
    def no_transcript(self) -> bool:
        """No call in the archive wrote its text: the background review, or by hand."""
        return not any(e.role in (WROTE, EARLIER) for e in self.events)


def memory_calls(rows: Iterable[MemoryCallRow]) -> list[MemoryCall]:
    """The archive's memory call rows as operations, oldest first (batches expanded)."""
    calls = []
    for row in rows:
        result = read_result(row.result)
        for op in memory_ops(row.tool_calls, row.tool_call_id):
            calls.append(
                MemoryCall(
                    session_id=row.session_id,
                    profile=row.profile,
                    message_id=row.call_id if row.call_id is not None else row.result_id,
                    result_id=row.result_id,
                    at=row.at,
                    op=op,
                    result=result,
                    shown=row.shown,
                )
            )
    return calls


def entry_provenance(
    text: str, target: str, calls: Sequence[MemoryCall], revisions: Sequence[dict[str, Any]]
) -> list[EntryProvenance]:
    """Each entry of the file ``text`` with its history.

    Args:
        text: the file's text as it is now.
        target: the file's key (``user`` or ``memory``): only calls aimed at it count.
        calls: the memory calls of the file's profile, oldest first (:func:`memory_calls`).
        revisions: the file's revisions Recall kept, newest first (``RecallData.revisions``).
    """
    mine = [c for c in calls if c.op.target == target]
    return [
        EntryProvenance(
            number,
            raw,
            tuple(_events(raw.strip(), mine, revisions)),
            _appearance(raw.strip(), revisions),
        )
        for number, raw in enumerate(split_entries(text), 1)
    ]


def with_said(entry: EntryProvenance, said: dict[int, Said | None]) -> EntryProvenance:
    """``entry`` with each write's ``said`` from ``said`` (by the call's message id)."""
    events = tuple(
        replace(e, said=said.get(e.call.message_id)) if e.role in (WROTE, EARLIER) else e
        for e in entry.events
    )
    return replace(entry, events=events)


def _events(
    text: str, calls: Sequence[MemoryCall], revisions: Sequence[dict[str, Any]]
) -> list[EntryEvent]:
    if not text:
        return []
    versions = {text}
    found: list[EntryEvent] = []
    for n in range(len(calls) - 1, -1, -1):  # newest first: versions grow backwards
        call = calls[n]
        op = call.op
        if op.action in ("add", "replace") and op.content in versions:
            if not call.counts:
                found.append(EntryEvent(call, FAILED_WRITE))
                continue
            found.append(EntryEvent(call, WROTE if op.content == text else EARLIER))
            if op.action == "replace" and op.old_text:
                prior = _prior_text(op.old_text, call, calls[:n], revisions)
                if prior is not None:
                    versions.add(prior)
        elif op.action in ("remove", "replace") and op.old_text:
            if any(op.old_text in v for v in versions):
                found.append(EntryEvent(call, TOUCHED))
    found.reverse()
    return found


def _prior_text(
    old_text: str,
    call: MemoryCall,
    earlier: Sequence[MemoryCall],
    revisions: Sequence[dict[str, Any]],
) -> str | None:
    """The newest text before ``call`` that holds ``old_text``: what it replaced."""
    candidates: list[tuple[float, str]] = [
        (c.at or 0.0, c.op.content)
        for c in earlier
        if c.counts and c.op.action in ("add", "replace") and old_text in c.op.content
    ]
    when = call.at if call.at is not None else float("inf")
    for revision in revisions:
        if revision["saved_at"] < when:
            for entry in split_entries(revision["content"]):
                if old_text in entry.strip():
                    candidates.append((revision["saved_at"], entry.strip()))
    if not candidates:
        return None
    return max(candidates, key=lambda c: c[0])[1]


def _appearance(text: str, revisions: Sequence[dict[str, Any]]) -> Appearance | None:
    """Where the latest run of revisions holding ``text`` starts (revisions newest first)."""
    first = None
    for revision in revisions:
        held = text and text in (e.strip() for e in split_entries(revision["content"]))
        if held:
            first = revision
        elif first is not None:
            return Appearance(first, revision)
        else:
            return None  # the newest revision does not hold it
    return Appearance(first, None) if first is not None else None
