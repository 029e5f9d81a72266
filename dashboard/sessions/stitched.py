"""A chain's continuation line read as one conversation: each segment a part, opened by
the compaction summary it continues from (the chain's stitched transcript)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, replace

from dashboard.lineage.chains import Chain, Segment
from dashboard.lineage.epochs import Epochs, epochs_of
from dashboard.sessions.rows import ShownRows, shown_rows
from dashboard.sessions.transcript import (
    Paging,
    SessionInfo,
    Transcript,
    TranscriptMessage,
    messages_by_id,
    paging_for,
    session_info,
    with_rows,
)


@dataclass(frozen=True)
class StitchedPart:
    """One segment of a stitched conversation: the summary that opens it, then its messages."""

    part: int  # 1-based position on the continuation line
    segment: Segment
    transcript: Transcript  # the segment's messages, without the divider
    divider: TranscriptMessage | None = None  # the compaction summary the segment starts with


@dataclass(frozen=True)
class StitchedPage:
    """One page of a stitched conversation, with the figures of the whole line."""

    parts: list[StitchedPart]  # the parts with something on this page
    segments: int  # parts on the whole line
    messages: int  # messages on the whole line, dividers included
    left_out: int  # rows the visibility filter leaves out, on the whole line
    paging: Paging | None = None  # None: every part is on this one page
    view: str = "everything"  # which rows (sessions.rows.VIEWS)
    compactions: int = 0  # in-place compactions of every part, together


def load_stitched(
    conn: sqlite3.Connection,
    chain: Chain,
    *,
    include_inactive: bool = False,
    view: str = "everything",
) -> list[StitchedPart]:
    """The continuation line of ``chain`` as one conversation, segment after segment.

    Each continuation's opening compaction summary becomes its part's ``divider``
    (it restates what came before, so it is not read as a message). Inside a part,
    ``view`` picks the rows as on the session page (sessions/rows.py): by default
    every distinct message once, each in-place compaction a divider, re-inserted tails
    folded, rewound and hidden rows only with ``include_inactive`` (flagged). A message
    is listed once even if corrupt links put a session on the line twice.

    Args:
        conn: a connection to the archive (read-only is enough).
        chain: the lineage (from :func:`~dashboard.lineage.chains.load_chain`).
        include_inactive: also return rewound and hidden rows, flagged.
        view: which rows (:data:`~dashboard.sessions.rows.VIEWS`).
    """
    return load_stitched_page(conn, chain, include_inactive=include_inactive, view=view).parts


def load_stitched_page(
    conn: sqlite3.Connection,
    chain: Chain,
    *,
    include_inactive: bool = False,
    page: int = 1,
    at: int | None = None,
    page_size: int | None = None,
    view: str = "everything",
) -> StitchedPage:
    """:func:`load_stitched`, one page at a time when ``page_size`` is set.

    Pages cut the line's messages (dividers included) into runs of ``page_size``;
    a part split by a page boundary appears on both pages. Only the rows of the
    page are read in full. ``at`` picks the page holding that message (a
    re-inserted copy: the row it repeats).
    """
    plans = _stitch_plan(conn, chain, include_inactive, view)
    order = [mid for plan in plans for mid in plan.ids]
    size = page_size or max(1, len(order))
    landed = next((found for plan in plans if (found := plan.rows.land(at)) is not None), None)
    paging = paging_for(order, size, page, landed)
    on_page = set(paging.ids)
    rows = {m.id: m for m in messages_by_id(conn, paging.ids)}
    last_page = paging.page == paging.pages
    parts: list[StitchedPart] = []
    for plan in plans:
        ids = [i for i in plan.ids if i in on_page]
        if not ids:
            # An empty segment shows where the line reaches it: before the next message.
            start = plan.start
            if plan.ids or not (
                paging.first <= start < paging.first + size or (start >= len(order) and last_page)
            ):
                continue
        divider = rows.get(plan.divider) if plan.divider in on_page else None
        messages = tuple(rows[i] for i in ids if i != plan.divider and i in rows)
        body = Transcript(plan.session, messages, include_inactive, plan.rows.left_out)
        parts.append(StitchedPart(plan.part, plan.segment, with_rows(body, plan.rows), divider))
    return StitchedPage(
        parts,
        len(plans),
        len(order),
        sum(p.rows.left_out for p in plans),
        paging if page_size else None,
        view,
        sum(p.rows.compactions for p in plans),
    )


@dataclass(frozen=True)
class _PartPlan:
    part: int
    segment: Segment
    session: SessionInfo
    ids: list[int]  # in conversation order, the divider first when there is one
    divider: int | None
    rows: ShownRows  # how the view shows the session's rows
    start: int  # index of the part's first message in the whole line


def _stitch_plan(
    conn: sqlite3.Connection, chain: Chain, include_inactive: bool, view: str
) -> list[_PartPlan]:
    """Which message ids each part of the line holds, read without their text."""
    plans: list[_PartPlan] = []
    seen: set[int] = set()
    said: set[str] = set()
    start = 0
    found = epochs_of(conn, chain.line)  # the whole line's epochs in one read
    for n, session_id in enumerate(chain.line, start=1):
        segment = chain.segment(session_id)
        session = session_info(conn, session_id) if segment is not None else None
        if segment is None or session is None:
            continue
        rows = shown_rows(conn, session_id, view, include_inactive, found.get(session_id, Epochs()))
        if view == "live" and n < len(chain.line):
            # The agent is fed only the line's last segment: an earlier one's rows are
            # still active=1 there, but a continuation replaced them with its summary.
            rows = replace(rows, order=(), dividers={}, copy_of={}, aliases={}, left_out=0)
        ids = [i for i in rows.order if i not in seen]
        seen.update(ids)
        # A rotation child opens with the head copy (same message_uid as the root's
        # rows): one message, shown where it was first said.
        uids = _uids(conn, ids)
        ids = [i for i in ids if uids.get(i) is None or uids[i] not in said]
        said.update(u for u in uids.values() if u is not None)
        opening = found.get(session_id, Epochs()).opening
        divider = opening if opening in ids else None
        if divider is not None:
            ids.remove(divider)
            ids.insert(0, divider)
        plans.append(_PartPlan(n, segment, session, ids, divider, rows, start))
        start += len(ids)
    return plans


def _uids(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, str | None]:
    """The ``message_uid`` of each row (None where the source had none)."""
    return dict(
        conn.execute(
            "SELECT m.id, m.message_uid FROM messages m"
            " WHERE m.id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(ids)),),
        ).fetchall()
    )
