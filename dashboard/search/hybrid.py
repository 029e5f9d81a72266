"""Words and meaning ranked together: the messages near a query, and the fusion.

A search by words ranks the messages holding the query's terms (routes.py); the
meaning index (meaning/) ranks every message by how close its vector lies to the
query's. Reciprocal-rank fusion (Cormack et al., 2009) merges the two lists by rank
alone, ``1 / (k + rank)`` summed over the lists a message is in: bm25 and a cosine
are not on one scale, and ranks need none. A message both lists found comes first;
one only the meaning found is a *similar* hit (the card shows it as such, with no
marked words). The fused list then goes through the same grouping into sessions and
chains, counts and cards as a search by words.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from operator import itemgetter

from dashboard.meaning.builder import MeaningStatus
from dashboard.meaning.reader import MeaningReader
from dashboard.search.filters import Filters, session_level
from dashboard.search.query import ParsedQuery
from dashboard.search.request import SearchRequest
from dashboard.search.row_map import RowMap
from dashboard.search.rows import ARCHIVED_M, Row

NEAREST = 200  # messages the meaning index offers a query, before filters
# Of those the filters let through, the ones at least this share of the nearest one's
# closeness. Meaning always
# finds something; a message far below the best is noise to a person (measured on the
# fixtures: a paraphrase's own message 0.195, the next 0.147, unrelated ones ~0.1).
RELATIVE_FLOOR = 0.6
RRF_K = 60  # the fusion's constant: the paper's, which damps the first ranks' weight


def meaning_rows(
    conn: sqlite3.Connection,
    meaning: MeaningReader,
    text: str,
    request: SearchRequest,
    filters: Filters,
    row_map: RowMap | None,
) -> list[Row]:
    """The messages nearest ``text`` that the request's filters and scope let through,
    nearest first; a row's score is its distance (lower is nearer, as bm25 sorts)."""
    near = meaning.nearest(conn, text, NEAREST)
    if not near:
        return []
    scored = [(n.message_id, -n.score) for n in near]
    if row_map is not None and session_level(request):
        allowed = row_map.allowed(filters.session_sql, filters.session_params)
        rows = row_map.rows(scored, allowed)
    else:
        score = dict(scored)
        cur = conn.cursor()
        cur.row_factory = None
        found = cur.execute(
            f"SELECT m.id, m.session_id, 0, coalesce(m.timestamp, 0), {ARCHIVED_M} "
            f"FROM main.messages m JOIN sessions s ON s.id = m.session_id "
            f"WHERE m.id IN (SELECT value FROM json_each(?)){filters.sql}",
            (json.dumps([i for i, _ in scored]), *filters.params),
        ).fetchall()
        rows = [(i, sid, score[i], ts, archived) for i, sid, _, ts, archived in found]
    rows.sort(key=itemgetter(2))
    # The floor is the nearest *shown* message's: the filters first, then the cut.
    if not rows or rows[0][2] >= 0:
        return []
    return [r for r in rows if r[2] <= rows[0][2] * RELATIVE_FLOOR]


def fuse(words: list[Row], meaning: list[Row]) -> tuple[list[Row], frozenset[int]]:
    """Both rankings as one (score: minus the fused score, so lower is better), and the
    ids only the meaning found."""
    fused: dict[int, float] = {}
    first: dict[int, Row] = {}
    for ranked in (words, meaning):
        for rank, row in enumerate(ranked):
            fused[row[0]] = fused.get(row[0], 0.0) + 1.0 / (RRF_K + rank + 1)
            first.setdefault(row[0], row)
    rows = [(i, r[1], -fused[i], r[3], r[4]) for i, r in first.items()]
    rows.sort(key=itemgetter(2))  # stable: on a tie, words' order first
    return rows, frozenset(i for i in first if i not in {r[0] for r in words})


@dataclass(frozen=True)
class Blend:
    """What a request's mode made of the rows words found."""

    rows: list[Row]
    similar: frozenset[int]  # ids only the meaning found
    status: MeaningStatus | None  # the index's state (None: not asked, mode words)
    note: str | None = None  # why meaning was not used, when it was asked for
    used: bool = False  # the meaning index ran


def blend(
    conn: sqlite3.Connection,
    meaning: MeaningReader | None,
    parsed: ParsedQuery,
    request: SearchRequest,
    filters: Filters,
    row_map: RowMap | None,
    words: list[Row],
) -> Blend:
    """The rows of ``request``'s mode: words alone, meaning alone, or both fused (best
    match), or both in the requested time order. Meaning needs its index complete, an
    English query (WordLlama's vectors say little of Chinese, Japanese or Korean text:
    those keep the trigram and scan routes) and a first page (a "search older" page
    carries on the words' window)."""
    if meaning is None or request.mode == "words":
        return Blend(words, frozenset(), None)
    status = meaning.status(conn)
    if any(t.cjk for t in parsed.positive):
        note = (
            "Searched by words only: search by meaning reads English; Chinese, Japanese "
            "and Korean terms are found by their words."
        )
        return Blend(words, frozenset(), status, note)
    if not status.ready and status.model is None:
        return Blend(words, frozenset(), status)  # never built here (no `recall serve`)
    if not status.ready:
        note = (
            f"The meaning index is being built ({status.percent}% of messages): searched "
            "by words only until it is ready."
        )
        return Blend(words, frozenset(), status, note)
    if request.continues:
        return Blend(words, frozenset(), status)
    text = " ".join(t.text for t in parsed.positive)
    near = meaning_rows(conn, meaning, text, request, filters, row_map)
    if request.mode == "meaning":
        return Blend(near, frozenset(r[0] for r in near), status, used=True)
    if request.sort != "relevance":
        known = {r[0] for r in words}
        extra = [r for r in near if r[0] not in known]
        return Blend([*words, *extra], frozenset(r[0] for r in extra), status, used=True)
    rows, similar = fuse(words, near)
    return Blend(rows, similar, status, used=True)
