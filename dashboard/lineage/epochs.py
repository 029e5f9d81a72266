"""In-place compaction epochs: the history inside one session, from its rows alone.

Today's Hermes compacts a long conversation in place (HERMES_FACTS.md, "Today's
Hermes" and "Hermes v31"): one write flips the live rows it summarizes to ``active=0,
compacted=1``, and inserts a summary carrier and a copy of the retained tail as fresh
live rows. So a session's rows, in id order, read as epochs:

* **Carriers.** A summary row (a compaction prefix, conventions.is_summary) or a retained
  row a summary was merged into (``compressed_summary``). A plain copy of a carrier (a
  later compaction retaining it) is a copy, not a new compaction.
* **Copies.** With ``message_uid`` (schema 31) a copy is the row ``repeats`` names
  (archive/copies.py): the head a first compaction re-inserts before its summary, the
  retained tail. Without it (older files), the rows right after a carrier that repeat,
  role and content in order, the last rows before it; the same rule drops a whole
  transcript Hermes re-inserts by mistake (dedupe, never delete). A copy is shown once,
  as the row it repeats, in the epoch that row was said in.
* **Superseded is not rewound.** Schema 31 leaves the retained tail's originals
  ``active=0, compacted=0``, a rewind's flags; a row with a later copy (same uid) is
  superseded (history), one without is rewound (``/undo``: not history).
* **Bounds.** Epoch 1 runs from the first row to the first carrier that opens an
  in-place compaction; each later carrier opens the next epoch, and compaction *k*
  closed epoch *k* at the carrier's time. A session's *opening* summary is not a
  compaction: a session's first row, or, in a child session (a rotation child opens with
  the head copy, then its summary), its first carrier when nothing before it was
  archived or no re-inserted head precedes it (:func:`_opens_child`). Elsewhere a
  carrier after the first row is a compaction, as before schema 31.

:func:`derive_epochs` is the rule over rows (:class:`EpochRow`), asked by the chain view,
the session page, search and the chains index alike; :func:`session_epochs` and
:func:`epochs_of` read them from the archive; :class:`EpochsCache` keeps them between
requests (search asks for the same long conversations again and again);
:func:`keep_in_place_counts` keeps each session's count in the archive for the chains
index (schema migration 11, which forgets a count as its session is written).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from dashboard.hermes.conventions import is_rewound, is_summary, summary_text
from dashboard.store.schema import COMPACTIONS_TABLE, IDENTITY_KEY, WRITES_KEY
from dashboard.store.session_store import SessionStore

OPENING_CHARS = 160  # of a summary, for the epoch's line on the chain page


class EpochRow(NamedTuple):
    """What the derivation needs of one message row (a named tuple: a session page reads
    thousands of them per request, and a frozen dataclass took 5x as long to build)."""

    id: int
    role: str
    content: str | None
    timestamp: float
    active: int = 1
    compacted: int = 0
    token_count: int | None = None
    message_uid: str | None = None
    repeats: int | None = None  # the row this one re-inserts (archive/copies.py)
    compressed_summary: int = 0
    gone: int = 0  # the source lost it (store/presence.py); the archive keeps it
    seq: int | None = None  # conversation order (sessions.rows.ORDER_SQL's key); None: id


@dataclass(frozen=True)
class Epoch:
    """One stretch of a conversation between two compactions (or after the last)."""

    number: int  # 1-based
    first_id: int
    last_id: int
    started_at: float
    ended_at: float  # its last row's time
    rows: int  # distinct rows: the re-inserted copies and rewound rows not counted
    compacted_at: float | None  # when the compaction closing it ran; None: the live epoch
    archived: int  # rows that compaction flipped to archived (0 for the live epoch)
    summary_id: int | None  # the carrier opening it (None for epoch 1)
    summary_opening: str | None  # the first line of that summary's own text
    tokens: int | None  # sum of its distinct rows' token_count; None when none recorded

    @property
    def live(self) -> bool:
        return self.compacted_at is None


@dataclass(frozen=True)
class Epochs:
    """A session's epochs and how its rows map onto them."""

    epochs: tuple[Epoch, ...] = ()
    copies: dict[int, int] = field(default_factory=dict)  # copy id -> the row it repeats
    rewound: frozenset[int] = frozenset()
    epoch_of: dict[int, int] = field(default_factory=dict)  # row id -> epoch number
    #: retained rows' originals a compaction re-inserted (active=0, compacted=0: history)
    superseded: frozenset[int] = frozenset()
    #: a carrier a summary was merged into -> the retained row it also re-inserts
    merged: dict[int, int] = field(default_factory=dict)
    opening: int | None = None  # the summary a rotation child opens with (no compaction)

    @property
    def compactions(self) -> int:
        """How many times the session compacted in place."""
        return max(0, len(self.epochs) - 1)

    def shown_once(self, row_id: int) -> int:
        """The row a person reads for ``row_id``: the original a copy repeats, else itself."""
        while row_id in self.copies:
            row_id = self.copies[row_id]
        return row_id

    def before_compaction(self, row_id: int) -> int | None:
        """The compaction a row came before (its epoch's number), None in the live epoch."""
        number = self.epoch_of.get(self.shown_once(row_id))
        if number is None or number > self.compactions:
            return None
        return number


_ROW_SELECT = (
    "SELECT session_id, id, role, content, timestamp, active, compacted, token_count,"
    " message_uid, repeats, compressed_summary, gone_from_source_at IS NOT NULL,"
    # The conversation's order, as sessions/rows.py's ORDER_SQL reads it.
    " coalesce(CAST(src_id AS INTEGER), id)"
)


def session_epochs(conn: sqlite3.Connection, session_id: str) -> Epochs:
    """The epochs of one archived session (every row, rewound ones included)."""
    return epochs_of(conn, [session_id]).get(session_id, Epochs())


def epochs_of(conn: sqlite3.Connection, session_ids: Sequence[str]) -> dict[str, Epochs]:
    """The epochs of each archived session named (absent ids are left out).

    One query per 500 ids, not one per session: a chain of hundreds of segments and a
    page of search cards both ask for many at once.
    """
    rows: dict[str, list[EpochRow]] = {}
    children: set[str] = set()
    unique = list(dict.fromkeys(session_ids))
    # Plain tuples and no ORDER BY (derive_epochs orders by id): sorting in SQL copied
    # every row's content through the sorter, and sqlite3.Row unpacks slower; together
    # a third of the time for a 5,000-row session.
    cur = conn.cursor()
    cur.row_factory = None
    for start in range(0, len(unique), 500):
        part = unique[start : start + 500]
        marks = ",".join("?" for _ in part)
        for row in cur.execute(f"{_ROW_SELECT} FROM messages WHERE session_id IN ({marks})", part):
            rows.setdefault(row[0], []).append(EpochRow._make(row[1:]))
        children.update(
            r[0]
            for r in cur.execute(
                f"SELECT id FROM sessions WHERE id IN ({marks}) AND parent_session_id IS NOT NULL",
                part,
            )
        )
    return {sid: derive_epochs(found, child=sid in children) for sid, found in rows.items()}


def derive_epochs(rows: Sequence[EpochRow], *, child: bool = False) -> Epochs:
    """The epochs of one session's rows (any order: they are read in the conversation's,
    :attr:`EpochRow.seq`, else by id).

    ``child``: the session has a parent, so its first summary may be a rotation child's
    opening one (see the module).
    """
    ordered = sorted(rows, key=lambda r: (r.id if r.seq is None else r.seq, r.id))
    if not ordered:
        return Epochs()
    pure = {r.id: r.repeats for r in ordered if r.repeats is not None}
    superseded = _superseded(ordered)
    rewound = frozenset(
        r.id for r in ordered if is_rewound(r.active, r.compacted, r.id in superseded)
    )
    bounds, opening = _bounds(ordered, pure, superseded, rewound, child)
    starts = [0, *bounds]
    ends = [*bounds, len(ordered)]
    copies: dict[int, int] = dict(pure)
    # Never a tail original: rewound rows, copies, and rows a session still in the source
    # lost (a restored older copy): the archive keeps them, but the source's compaction
    # re-inserted what *it* held (a whole session gone keeps all its rows).
    lost = {r.id for r in ordered if r.gone} if not all(r.gone for r in ordered) else set()
    skipped = rewound | pure.keys() | lost
    epoch_of: dict[int, int] = {}
    epochs: list[Epoch] = []
    for number, (start, end) in enumerate(zip(starts, ends, strict=True), start=1):
        part = ordered[start:end]
        if number > 1:
            # Files without message_uid: the retained tail by role and content.
            before = [r for r in ordered[starts[number - 2] : start] if r.id not in skipped]
            after = [r for r in part[1:] if r.id not in pure and r.id not in lost]
            copies.update(_tail_copies(before, after))
        for row in part:
            epoch_of[row.id] = number
        distinct = [r for r in part if r.id not in copies and r.id not in rewound]
        closing = ordered[end] if end < len(ordered) else None
        carrier = part[0] if number > 1 else None
        tokens = [r.token_count for r in distinct if r.token_count is not None]
        epochs.append(
            Epoch(
                number=number,
                first_id=part[0].id,
                last_id=part[-1].id,
                started_at=part[0].timestamp,
                ended_at=part[-1].timestamp,
                rows=len(distinct),
                compacted_at=_compacted_at(ordered, end, copies) if end < len(ordered) else None,
                archived=_archived(part, copies) if closing is not None else 0,
                summary_id=carrier.id if carrier else None,
                summary_opening=_opening(carrier.content) if carrier else None,
                tokens=sum(tokens) if tokens else None,
            )
        )
    merged = _merged(ordered, bounds, pure)
    return Epochs(tuple(epochs), copies, rewound, epoch_of, superseded, merged, opening)


def _archived(part: Sequence[EpochRow], copies: dict[int, int]) -> int:
    """The messages the compaction closing ``part`` archived: its rows flipped to
    ``compacted=1``, a re-inserted copy counted as the message it repeats (a head copy
    archived again is no new turn; a retained copy archived is its message's first)."""
    shown: set[int] = set()
    for r in part:
        if r.compacted == 1:
            row_id = r.id
            while row_id in copies:
                row_id = copies[row_id]
            shown.add(row_id)
    return len(shown)


def _compacted_at(ordered: Sequence[EpochRow], bound: int, copies: Collection[int]) -> float:
    """When the compaction whose carrier is ``ordered[bound]`` ran.

    A standalone summary is written then. A merged carrier keeps the retained row's
    time, as the copies after it do; Hermes compacts as a turn begins, so the first
    row written after them is the nearest time the rows give (else the carrier's).
    """
    carrier = ordered[bound]
    if not carrier.compressed_summary:
        return carrier.timestamp
    later = (r.timestamp for r in ordered[bound + 1 :] if r.id not in copies)
    return max(carrier.timestamp, next(later, carrier.timestamp))


def _superseded(ordered: Sequence[EpochRow]) -> frozenset[int]:
    """Rows flagged like a rewind (``active=0, compacted=0``) that a later row of the
    session re-inserts (same ``message_uid``)."""
    last: dict[str, int] = {}
    for r in ordered:
        if r.message_uid:
            last[r.message_uid] = r.id
    return frozenset(
        r.id
        for r in ordered
        if r.message_uid and r.active == 0 and r.compacted == 0 and last[r.message_uid] != r.id
    )


def _bounds(
    ordered: Sequence[EpochRow],
    pure: Collection[int],
    superseded: Collection[int],
    rewound: Collection[int],
    child: bool,
) -> tuple[list[int], int | None]:
    """The indexes of the carriers that open an epoch, and the id of the session's
    opening summary when it has one (see the module)."""
    bounds: list[int] = []
    opening: int | None = None
    first = True
    for i, row in enumerate(ordered):
        if row.id in pure or row.id in rewound:
            continue
        if not is_summary(row.content, row.compressed_summary):
            continue
        if first:
            first = False
            if i == 0 or (child and _opens_child(ordered[:i], pure, superseded)):
                opening = row.id  # the session's opening summary (a rotation child's)
                continue
        bounds.append(i)
    return bounds, opening


def _opens_child(
    before: Sequence[EpochRow], pure: Collection[int], superseded: Collection[int]
) -> bool:
    """Whether a child session's first summary, after the rows ``before`` it, is the one
    it opens with: nothing before it was archived in place (the head copy a rotation
    child starts with is live), or, where rows carry ``message_uid``, no re-inserted
    head precedes it (a first in-place compaction inserts one before its summary; a
    child compacted in place later archives its opening rows too)."""
    if not any(r.compacted == 1 or r.id in superseded for r in before):
        return True
    return any(r.message_uid for r in before) and not any(r.id in pure for r in before)


def _merged(
    ordered: Sequence[EpochRow], bounds: Sequence[int], pure: Collection[int]
) -> dict[int, int]:
    """Each carrier a summary was merged into -> the first row with its uid."""
    first: dict[str, int] = {}
    for r in ordered:
        if r.message_uid and r.id not in pure:
            first.setdefault(r.message_uid, r.id)
    out: dict[int, int] = {}
    for i in bounds:
        row = ordered[i]
        original = first.get(row.message_uid or "")
        if original is not None and original != row.id:
            out[row.id] = original
    return out


def _tail_copies(before: Sequence[EpochRow], after: Sequence[EpochRow]) -> dict[int, int]:
    """The rows at the start of ``after`` repeating the end of ``before`` (role, content,
    in order): the longest such run, each copy mapped to the row it repeats."""
    longest = min(len(before), len(after))
    if not longest:
        return {}
    # Compared as (role, content) lists: slices compare in C, and a run of n can only
    # start where before[-n] repeats after[0].
    tail = [_key(r) for r in before[-longest:]]
    head = [_key(r) for r in after[:longest]]
    for n in range(longest, 0, -1):
        if tail[longest - n] == head[0] and tail[longest - n :] == head[:n]:
            return {b.id: a.id for a, b in zip(before[-n:], after[:n], strict=True)}
    return {}


def _key(row: EpochRow) -> tuple[str, str]:
    """What makes two rows the same message: role and content, in order."""
    return row.role, row.content or ""


def _opening(content: str | None) -> str:
    """The first line of a summary's own text (conventions.summary_text)."""
    text = summary_text(content)
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:OPENING_CHARS]


def usage_epoch(epochs: Epochs, first_seen: float | None, last_seen: float | None) -> int | None:
    """The epoch a usage row's calls all fall in, else None (the row cannot be split).

    Hermes records cost per session, model and task (one row accumulating every call),
    never per epoch. A row whose ``first_seen``..``last_seen`` lies inside one epoch
    is that epoch's: epoch *k* runs from compaction *k-1* (epoch 1: from any time
    before) up to and including compaction *k* (the summarizing call closes it); the
    live epoch runs on. A row spanning a compaction, or without both times, is not
    attributed.
    """
    if first_seen is None or last_seen is None or not epochs.epochs:
        return None
    opened = float("-inf")
    for epoch in epochs.epochs:
        closed = epoch.compacted_at if epoch.compacted_at is not None else float("inf")
        if first_seen >= opened and last_seen <= closed:
            return epoch.number
        opened = closed
    return None


#: The sessions that compacted in place: the distinct sessions of the partial index of
#: the rows a compaction flipped to ``compacted=1`` (schema migration 5), read by seeking
#: from one session to the next: 3 ms for 664 sessions at 1M messages, where a DISTINCT
#: walks all 246,536 entries (30-50 ms), on every pass of the syncer too.
_FLAGGED = (
    "WITH RECURSIVE flagged(id) AS ("
    " SELECT (SELECT min(session_id) FROM messages WHERE compacted = 1)"
    " UNION ALL SELECT (SELECT min(session_id) FROM messages"
    "  WHERE compacted = 1 AND session_id > flagged.id)"
    " FROM flagged WHERE flagged.id IS NOT NULL)"
    " SELECT id FROM flagged WHERE id IS NOT NULL"
)


def in_place_counts(conn: sqlite3.Connection, cache: EpochsCache | None = None) -> dict[str, int]:
    """Every archived session that compacted in place, with how many times.

    Only a compaction flips rows to ``compacted=1``, so those sessions are found from
    the partial index of those rows (:data:`_FLAGGED`); their count is
    :func:`derive_epochs`'s, the one rule: the count kept for the session
    (:func:`keep_in_place_counts`, which a write to the session forgets), else derived
    here, with ``cache`` only for the sessions that changed since it last read them.
    """
    found = [r[0] for r in conn.execute(_FLAGGED)]
    kept = dict(conn.execute(f"SELECT session_id, compactions FROM {COMPACTIONS_TABLE}"))
    counts = {sid: kept[sid] for sid in found if sid in kept}
    missing = [sid for sid in found if sid not in kept]
    epochs = cache.get(conn, missing) if cache is not None else epochs_of(conn, missing)
    counts.update((sid, e.compactions) for sid, e in epochs.items())
    return {sid: n for sid, n in counts.items() if n}


KEEP_SESSIONS = 50  # sessions derived per write transaction of keep_in_place_counts


def keep_in_place_counts(store: SessionStore, stop: Callable[[], bool] = lambda: False) -> int:
    """Keep the count of every session that compacted in place and has none kept
    (just migrated, or written since), for :func:`in_place_counts`; returns how many.

    Each step reads the rows and writes the counts in one write transaction, so a count
    is the rule's for the rows it keeps beside; a later write forgets it (the store's
    triggers, schema.COUNT_TRIGGERS). Steps of :data:`KEEP_SESSIONS` sessions hold the
    write lock a fraction of a second each; ``stop`` is asked between them.
    """
    kept = 0
    while not stop():
        done = store.core.write(_keep_some)
        if not done:
            break
        kept += done
    return kept


#: Sessions that compacted in place without a kept count.
_MISSING = f"{_FLAGGED} AND id NOT IN (SELECT session_id FROM {COMPACTIONS_TABLE})"


def counts_missing(conn: sqlite3.Connection) -> bool:
    """Whether a session that compacted in place has no kept count."""
    return conn.execute(f"{_MISSING} LIMIT 1").fetchone() is not None


def _keep_some(conn: sqlite3.Connection) -> int:
    """Derive and keep up to KEEP_SESSIONS missing counts (inside a write transaction)."""
    missing = [r[0] for r in conn.execute(f"{_MISSING} LIMIT ?", (KEEP_SESSIONS,))]
    epochs = epochs_of(conn, missing)
    conn.executemany(
        f"INSERT OR REPLACE INTO main.{COMPACTIONS_TABLE}(session_id, compactions) VALUES (?, ?)",
        [(sid, e.compactions) for sid, e in epochs.items()],
    )
    return len(epochs)


def compacted_epochs(conn: sqlite3.Connection, session_ids: Sequence[str]) -> dict[str, Epochs]:
    """:func:`epochs_of` for the sessions named that compacted in place; the others
    (no row flipped to ``compacted=1``: one epoch, nothing to split) are left out
    unread, so a long session that never compacted costs one index walk, not a read
    of every row."""
    unique = list(dict.fromkeys(session_ids))
    if not unique:
        return {}
    flagged = [
        r[0]
        for r in conn.execute(
            "SELECT j.value FROM json_each(?) j WHERE EXISTS (SELECT 1 FROM messages m"
            " WHERE m.session_id = j.value AND m.compacted = 1)",
            (json.dumps(unique),),
        )
    ]
    return epochs_of(conn, flagged)


EPOCHS_KEPT = 1_024  # sessions an EpochsCache keeps (the longest used least recently go first)
DERIVE_SESSIONS = 8  # sessions whose rows EpochsCache reads at once to derive them


class EpochsCache:
    """The epochs of sessions read before, kept while each session is unchanged.

    Deriving a session's epochs reads every row of it (about 7 µs a row on a 2-core
    machine): a search whose hits fall in a few long in-place conversations paid 10–30 ms
    for them on every request. An entry holds while the archive's write counter stays
    (nothing was written); when it moved, while the session's row count, newest row id
    and source digest stay, and the archive's identity generation (schema.IDENTITY_KEY:
    rows taking their ``message_uid`` late). A compaction always adds rows (its carrier),
    and a sync of a changed source session rewrites its digest, so both show. A rewind
    alone flips flags
    only: it shows with the session's next row or digest change, and meanwhile no hit
    lands on the rows it hid (search reads visible rows only).
    """

    def __init__(self, kept: int | None = None) -> None:
        self._lock = threading.Lock()
        # Read when made, not when defined: bench/long_transcript.py --cold sets it to 0.
        self._kept = EPOCHS_KEPT if kept is None else kept
        # session id -> (write counter when last checked, version, epochs)
        self._entries: OrderedDict[str, tuple[object, tuple[object, ...], Epochs]] = OrderedDict()

    def warm(self, conn: sqlite3.Connection, sessions: Iterable[str]) -> None:
        """Derive (or check) the epochs of ``sessions`` ahead of the searches that need
        them: the newest of them (by start), as many as three quarters of the cache (the
        rest is for the pages' own, so that warming again after each sync pass does not
        derive what they pushed out)."""
        wanted = list(sessions)
        room = self._kept - self._kept // 4
        if len(wanted) > room:
            rows = conn.execute(
                "SELECT id FROM sessions WHERE id IN (SELECT value FROM json_each(?))"
                " ORDER BY started_at DESC LIMIT ?",
                (json.dumps(wanted), room),
            )
            wanted = [r[0] for r in rows]
        self.get(conn, wanted)

    def get(self, conn: sqlite3.Connection, session_ids: Sequence[str]) -> dict[str, Epochs]:
        """The epochs of each archived session named (absent ids are left out)."""
        wanted = list(dict.fromkeys(session_ids))
        if not wanted:
            return {}
        writes = conn.execute(
            "SELECT value FROM state_meta WHERE key = ?", (WRITES_KEY,)
        ).fetchone()
        found: dict[str, Epochs] = {}
        with self._lock:
            for sid in wanted:
                entry = self._entries.get(sid)
                if entry is not None and writes is not None and entry[0] == writes:
                    self._entries.move_to_end(sid)
                    found[sid] = entry[2]
        unsure = [sid for sid in wanted if sid not in found]
        if not unsure:
            return found
        # Read before the epochs: a write in between is seen next time, never hidden.
        versions = _versions(conn, unsure)
        # Rows that took their uids later changed what is a copy, adding no row.
        identity = conn.execute(
            "SELECT value FROM state_meta WHERE key = ?", (IDENTITY_KEY,)
        ).fetchone()
        versions = {sid: (*version, identity) for sid, version in versions.items()}
        with self._lock:
            for sid in unsure:
                entry = self._entries.get(sid)
                if entry is not None and sid in versions and entry[1] == versions[sid]:
                    self._entries[sid] = (writes, entry[1], entry[2])
                    self._entries.move_to_end(sid)
                    found[sid] = entry[2]
        stale = [sid for sid in unsure if sid in versions and sid not in found]
        # A few sessions a read: deriving holds every row of the sessions read at once,
        # their text too (~230 MB for the 664 in-place sessions of a 1M archive at once,
        # for 18 MB of epochs kept).
        fresh: dict[str, Epochs] = {}
        for start in range(0, len(stale), DERIVE_SESSIONS):
            fresh.update(epochs_of(conn, stale[start : start + DERIVE_SESSIONS]))
        with self._lock:
            for sid, epochs in fresh.items():
                self._entries[sid] = (writes, versions[sid], epochs)
                self._entries.move_to_end(sid)
            while len(self._entries) > self._kept:
                self._entries.popitem(last=False)
        found.update(fresh)
        return found


def _versions(
    conn: sqlite3.Connection, session_ids: Sequence[str]
) -> dict[str, tuple[object, ...]]:
    """Each session's row count, newest row id (both from the session index alone) and
    source digest: what changes when its epochs can."""
    marks = ",".join("?" for _ in session_ids)
    rows = conn.execute(
        f"SELECT m.session_id, count(*), max(m.id), s.src_digest FROM messages m "
        f"JOIN sessions s ON s.id = m.session_id WHERE m.session_id IN ({marks}) "
        f"GROUP BY m.session_id",
        list(session_ids),
    )
    return {r[0]: tuple(r[1:]) for r in rows}
