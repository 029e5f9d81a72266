"""From matching rows to result cards: fold re-inserted copies into the rows they
repeat, fold rows into groups (a chain or a session), then build one card per group on
the page, with its best hits as escaped snippets.

Each card is read in a few statements for the whole page (sessions, first user
messages, the chains' latest activity, the hit messages), never one per card.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import compress
from operator import itemgetter
from typing import Any

from dashboard.hermes.content import decode_content
from dashboard.hermes.conventions import visible_sql
from dashboard.lineage.epochs import Epochs
from dashboard.lineage.graph import Lineage
from dashboard.search.query import ParsedQuery
from dashboard.search.request import Hit, SearchRequest, SessionResult
from dashboard.search.rows import Row
from dashboard.store.names import session_names
from dashboard.store.presence import gone_sql
from dashboard.text import (
    make_snippet,
    plain_opening,
    preview,
    readable,
    readable_tool_calls,
)

HITS_SHOWN = 3
HIT_CANDIDATES = 12  # hits read per card so that identical texts can go (shown once)
Hits = tuple[Any, ...]  # a Row, or any tuple led by (message id, session id)


@dataclass
class Group:
    """One future card: a chain root (or a session) and the hits that fell into it."""

    key: str
    best_session: str
    hit_ids: list[tuple[int, str]] = field(default_factory=list)  # (message id, session id)
    hit_count: int = 0
    session_hits: dict[str, int] = field(default_factory=dict)  # hits per member session
    title_match: bool = False
    when: float | None = None  # newest (or oldest) time among its hits and matched names


def archived_sessions(rows: Iterable[Row]) -> list[str]:
    """Sessions with an archived row among ``rows``: the only ones where a hit can have a
    copy that also matched (a re-inserted tail repeats rows its compaction archived)."""
    rows = list(rows)  # passes in C: thousands of rows a search
    return list(dict.fromkeys(compress(map(itemgetter(1), rows), map(itemgetter(4), rows))))


def fold_copies(rows: Iterable[Hits], epochs: Mapping[str, Epochs]) -> tuple[list[Hits], int]:
    """``rows`` as a person reads them, and how many were folded away.

    A hit on a re-inserted copy is a hit on the row it repeats
    (:meth:`Epochs.shown_once`), and a message hit again that way (its copy matched as well)
    counts once, where it first came. Sessions absent from ``epochs`` pass unchanged.
    """
    with_copies = {sid: found for sid, found in epochs.items() if found.copies}
    out = list(rows)
    if not with_copies:
        return out, 0  # nothing to fold (most searches): no pass over the rows
    # Only the rows of sessions with copies are looked at (a comprehension finds them).
    seen: set[int] = set()
    folded: set[int] = set()
    mine = map(with_copies.__contains__, map(itemgetter(1), out))
    for i in list(compress(range(len(out)), mine)):
        row = out[i]
        shown = with_copies[row[1]].shown_once(row[0])
        if shown in seen:
            folded.add(i)
            continue
        seen.add(shown)
        if shown != row[0]:
            out[i] = (shown, *row[1:])
    if folded:
        out = [row for i, row in enumerate(out) if i not in folded]
    return out, len(folded)


def fold_family_copies(
    conn: sqlite3.Connection, rows: list[Hits], lineage: Lineage
) -> tuple[list[Hits], int]:
    """``rows`` with a message another session of its family re-inserted counted once,
    as the row it first was (the lowest id), and how many were folded away.

    A rotation child opens with the head copy, which keeps the ``message_uid`` of the
    ancestor's row (HERMES_FACTS, "Hermes v31"): one message, said once. Only hits in
    child sessions can be such copies, so their uids are read first; the rest of a
    family's hits only when one of them has a uid (sources without uids: one read).
    """
    # Per session, not per row: thousands of rows, a few hundred sessions.
    sessions = set(map(itemgetter(1), rows))
    children = {sid for sid in sessions if lineage.parents.get(sid) is not None}
    if not children or not _any_uid(conn):
        return rows, 0
    copied = _uids(conn, [r[0] for r in rows if r[1] in children])
    if not copied:
        return rows, 0
    roots = {sid: lineage.root(sid) for sid in dict.fromkeys(r[1] for r in rows)}
    families = {roots[r[1]] for r in rows if r[0] in copied}
    uids = {
        **copied,
        **_uids(conn, [r[0] for r in rows if roots[r[1]] in families and r[1] not in children]),
    }
    first: dict[tuple[str, str], int] = {}
    for r in rows:
        uid = uids.get(r[0])
        if uid is not None:
            key = (roots[r[1]], uid)
            first[key] = min(first.get(key, r[0]), r[0])
    kept = [r for r in rows if r[0] not in uids or first[(roots[r[1]], uids[r[0]])] == r[0]]
    return kept, len(rows) - len(kept)


def _any_uid(conn: sqlite3.Connection) -> bool:
    """Whether any archived row has a ``message_uid`` (one seek in its partial index; the
    whole archive's, not a scope's: it only spares a read)."""
    return (
        conn.execute("SELECT 1 FROM main.messages WHERE message_uid IS NOT NULL LIMIT 1").fetchone()
        is not None
    )


def _uids(conn: sqlite3.Connection, ids: list[int]) -> dict[int, str]:
    """The ``message_uid`` of each of the rows ``ids`` that has one."""
    if not ids:
        return {}
    return dict(
        conn.execute(
            "SELECT m.id, m.message_uid FROM messages m WHERE m.message_uid IS NOT NULL"
            " AND m.id IN (SELECT value FROM json_each(?))",
            (json.dumps(ids),),
        ).fetchall()
    )


def group_rows(
    rows: Iterable[Row],
    lineage: Lineage,
    request: SearchRequest,
    titles: list[tuple[str, float]],
) -> list[Group]:
    """Fold rows into groups in the request's order.

    Best match: by best row, name matches first. Newest and oldest: by the newest
    (oldest) time of any hit or name-matched session start, name matches included.
    """
    groups: dict[str, Group] = {}
    roots: dict[str, str] = {}
    oldest = request.sort == "oldest"
    chains = request.group == "chain"

    def key_of(sid: str) -> str:
        if not chains:
            return sid
        root = roots.get(sid)
        if root is None:
            root = roots[sid] = lineage.root(sid)
        return root

    def seen(group: Group, when: float) -> None:
        if group.when is None or (when < group.when if oldest else when > group.when):
            group.when = when

    for sid, started in titles:
        key = key_of(sid)
        group = groups.setdefault(key, Group(key, sid))
        group.title_match = True
        seen(group, started)
    timed = request.sort != "relevance"
    # Per session, not per row: a mid-frequency word ranks thousands of rows for a page
    # of 20 cards. Counted in C; a group's sessions in the order their first rows come.
    counts = Counter(map(itemgetter(1), rows))
    # Rows come newest (oldest) first: a session's first row is its newest (oldest).
    first_when = {r[1]: r[3] for r in reversed(rows)} if timed else {}
    for sid in counts:  # a Counter keeps first-seen order
        key = key_of(sid)
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(key, sid)
        if timed and not group.hit_count:
            seen(group, first_when[sid])
        group.hit_count += counts[sid]
        group.session_hits[sid] = counts[sid]
    ordered = list(groups.values())
    if request.sort != "relevance":
        ordered.sort(key=lambda g: g.when or 0.0, reverse=not oldest)  # stable: ties keep order
    return ordered


def page_of(groups: list[Group], request: SearchRequest, rows: Iterable[Hits]) -> list[Group]:
    """The groups on the request's page, each with its first hits in ``rows``' order
    (only these: the other groups' hits are never read)."""
    start = (request.page - 1) * request.per_page
    page = groups[start : start + request.per_page]
    member = {sid: g for g in page for sid in g.session_hits}
    # The walk ends once every card has its candidates (the best cards' hits come first).
    unfilled = sum(1 for g in page if g.hit_count)
    if member:
        for row in rows:
            group = member.get(row[1])
            if group is not None and len(group.hit_ids) < HIT_CANDIDATES:
                group.hit_ids.append((row[0], row[1]))
                if len(group.hit_ids) == min(HIT_CANDIDATES, group.hit_count):
                    unfilled -= 1
                    if not unfilled:
                        break
    return page


def build_cards(
    conn: sqlite3.Connection,
    page: list[Group],
    lineage: Lineage,
    parsed: ParsedQuery | None,
    epochs: Mapping[str, Epochs] | None = None,
    similar: frozenset[int] = frozenset(),
) -> list[SessionResult]:
    """One card per group: its session, title, first user message, activity and hits.

    ``epochs``: the sessions compacted in place among the hits; a hit in an archived
    epoch says which compaction it came before. ``similar``: the hits found by meaning
    alone (search/hybrid.py), shown as such.
    """
    epochs = epochs or {}
    if not page:
        return []
    wanted = [g.best_session for g in page] + [g.key for g in page]
    sessions = _session_rows(conn, wanted)
    firsts = _first_user_messages(conn, list(dict.fromkeys(wanted)))
    names = session_names(conn, {sid: row["title"] for sid, row in sessions.items()})
    activity = _chain_activity(conn, {g.key: lineage.family(g.key) for g in page})
    terms = parsed.highlight_terms() if parsed else []
    page_hits = _page_hits(conn, page, terms, epochs, similar)
    cards = []
    for g, hits in zip(page, page_hits, strict=True):
        s = sessions.get(g.best_session) or sessions.get(g.key)
        root = sessions.get(g.key) or s
        if s is None:
            continue
        title = (root["title"] if root is not None else None) or s["title"]
        cards.append(
            SessionResult(
                session_id=s["id"],
                root_session_id=g.key,
                title=title,
                name=title or names[(root or s)["id"]],
                preview=preview(plain_opening(firsts.get(g.key) or firsts.get(s["id"]) or "")),
                source=s["source"],
                model=s["model"],
                started_at=(root or s)["started_at"],
                last_activity=activity.get(g.key),
                message_count=s["message_count"],
                hit_count=g.hit_count,
                session_hit_count=g.session_hits.get(s["id"], 0),
                title_match=g.title_match,
                hits=hits,
                chain_part=lineage.part_of(s["id"]),
                gone_at=s["gone_at"],
                profile=s["profile"],
            )
        )
    return cards


def _page_hits(
    conn: sqlite3.Connection,
    page: list[Group],
    terms: list[str],
    epochs: Mapping[str, Epochs],
    similar: frozenset[int] = frozenset(),
) -> list[list[Hit]]:
    """Each group's first :data:`HITS_SHOWN` hits with distinct snippets, in its hits'
    order. The first hits of every card are read at once; a card whose hits repeat a
    text reads its next ones in another round (a message is read only to be shown)."""
    hits: list[list[Hit]] = [[] for _ in page]
    shown: list[set[str]] = [set() for _ in page]
    taken = [0] * len(page)
    while True:
        wanted: dict[int, list[tuple[int, str]]] = {}
        for i, g in enumerate(page):
            need = HITS_SHOWN - len(hits[i])
            if need > 0 and taken[i] < len(g.hit_ids):
                wanted[i] = g.hit_ids[taken[i] : taken[i] + need]
                taken[i] += len(wanted[i])
        if not wanted:
            return hits
        messages = _message_rows(conn, [mid for ids in wanted.values() for mid, _ in ids])
        for i, ids in wanted.items():
            for mid, sid in ids:
                m = messages.get(mid)
                if m is None:
                    continue
                text = readable(decode_content(m["content"]))
                calls = readable_tool_calls(m["tool_calls"])
                extra = " ".join(x for x in (m["tool_name"], calls) if x)
                like = mid in similar
                # A similar hit holds none of the words: its opening, or its tool call's.
                snippet = (
                    make_snippet(text or extra, [], "")
                    if like
                    else make_snippet(text, terms, extra)
                )
                if snippet in shown[i]:
                    continue  # the same text again: once is enough
                shown[i].add(snippet)
                compaction = _compaction(epochs.get(sid), mid)
                hits[i].append(
                    Hit(mid, sid, m["role"], m["timestamp"], snippet, compaction, similar=like)
                )


def _compaction(epochs: Epochs | None, message_id: int) -> tuple[int, int] | None:
    """(k, n) for a message before compaction k of its session's n, else None."""
    if epochs is None:
        return None
    before = epochs.before_compaction(message_id)
    return (before, epochs.compactions) if before is not None else None


def _session_rows(conn: sqlite3.Connection, ids: Iterable[str]) -> dict[str, sqlite3.Row]:
    ids = list(dict.fromkeys(ids))
    if not ids:
        return {}
    rows = conn.execute(
        "SELECT id, source, title, model, started_at, ended_at, message_count, "
        f"last_activity_at, {gone_sql('sessions')} AS gone_at, profile FROM sessions "
        f"WHERE id IN ({','.join('?' * len(ids))})",
        ids,
    ).fetchall()
    return {r["id"]: r for r in rows}


def _first_user_messages(conn: sqlite3.Connection, ids: list[str]) -> dict[str, str]:
    """Each session's first visible user message, in one statement.

    The inner lookup walks (session_id, timestamp) in index order and stops at
    the first user row, so it reads a handful of rows per session.
    """
    if not ids:
        return {}
    rows = conn.execute(
        "SELECT m.session_id, m.content FROM messages m WHERE m.id IN ("
        " SELECT (SELECT x.id FROM messages x WHERE x.session_id = j.value"
        f"  AND x.role = 'user' AND {visible_sql('x')} ORDER BY x.timestamp, x.id LIMIT 1)"
        " FROM json_each(?) j)",
        (json.dumps(ids),),
    ).fetchall()
    return {sid: decode_content(content) for sid, content in rows}


def _message_rows(conn: sqlite3.Connection, ids: list[int]) -> dict[int, sqlite3.Row]:
    if not ids:
        return {}
    rows = conn.execute(
        "SELECT id, role, content, tool_name, tool_calls, timestamp FROM messages "
        f"WHERE id IN ({','.join('?' * len(ids))})",
        ids,
    ).fetchall()
    return {r["id"]: r for r in rows}


def _chain_activity(
    conn: sqlite3.Connection, families: dict[str, list[str]]
) -> dict[str, float | None]:
    """Latest activity across each chain root and its descendants, in one statement."""
    members = sorted({sid for family in families.values() for sid in family})
    latest = dict(
        conn.execute(
            "SELECT s.id, max(coalesce(last_activity_at, 0), coalesce(ended_at, 0), "
            "coalesce(started_at, 0)) FROM sessions s JOIN json_each(?) j ON s.id = j.value",
            (json.dumps(members),),
        ).fetchall()
    )
    return {
        root: max((latest.get(sid) or 0 for sid in family), default=0) or None
        for root, family in families.items()
    }
