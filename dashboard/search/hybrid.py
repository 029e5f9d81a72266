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
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter

from dashboard.meaning.builder import MeaningStatus
from dashboard.meaning.embedder import EmbedderUnavailable
from dashboard.meaning.reader import MeaningReader
from dashboard.search.filters import Filters
from dashboard.search.query import ParsedQuery
from dashboard.search.request import SearchRequest
from dashboard.search.row_map import RowMap
from dashboard.search.rows import Row, rows_of

NEAREST = 1_000  # messages the meaning index offers a query, before filters
# Of those the filters let through, the ones at least this share of the nearest one's
# closeness: meaning always finds something, and a message far below the best is noise
# to a person. With NEAREST, measured on the 600-session demo's 51 English paraphrases
# (bench/meaning.py's set), hybrid hit@5 / MRR: 200 and 0.6, 0.67 / 0.50; 500 and 0.6,
# 0.73 / 0.51; 1,000 and 0.5, 0.75 / 0.52; 2,000 and 0.6, 0.73 / 0.52.
RELATIVE_FLOOR = 0.5
TITLE_WEIGHT = 1.0  # a title's closeness, added to each of its session's messages'
TITLE_SESSIONS = 20  # sessions found by their title alone, at most
RRF_K = 60  # the fusion's constant: the paper's, which damps the first ranks' weight
# Meaning's list counts a little less than words': a message only the meaning found
# (1st there: 0.9/61) then ranks below words' first seven (1/67), so a query whose
# words match keeps its first cards (equal weights moved `docker compose network`'s
# 2nd card to 14th at 1M); a paraphrase, which words do not match, loses nothing.
MEANING_WEIGHT = 0.9
WORDS_KEPT = 3  # words' first cards that stay ahead of meaning's (see fuse)


def meaning_rows(
    conn: sqlite3.Connection,
    meaning: MeaningReader,
    text: str,
    request: SearchRequest,
    filters: Filters,
    row_map: RowMap | None,
) -> list[Row]:
    """The messages nearest ``text`` that the request's filters and scope let through,
    nearest first; a row's score is minus its closeness (lower is nearer, as bm25 sorts).

    A message's closeness is its own plus its session's title's (:data:`TITLE_WEIGHT`):
    a title says in a few words what the whole conversation was about. A session whose
    title is among the :data:`TITLE_SESSIONS` closest but none of whose messages is
    near enters through its first message (measured on the 600-session demo's 51 English
    paraphrases, float vectors: messages alone hit@5 0.61, with titles 0.75).
    """
    near = meaning.nearby(conn, text, NEAREST)
    if not near.messages:
        return []
    closeness = {n.message_id: n.score for n in near.messages}
    rows = rows_of(conn, [(i, -c) for i, c in closeness.items()], request, filters, row_map)
    titles = near.titles
    rows = [(i, sid, s - TITLE_WEIGHT * titles.get(sid, 0.0), ts, a) for i, sid, s, ts, a in rows]
    held = {r[1] for r in rows}
    named = sorted((sid for sid in titles if sid not in held), key=titles.__getitem__, reverse=True)
    if named:
        weakest = min(closeness.values())
        firsts = _first_messages(conn, named[:TITLE_SESSIONS], filters)
        rows += [
            (i, sid, -(weakest + TITLE_WEIGHT * titles[sid]), ts, a) for i, sid, ts, a in firsts
        ]
    rows.sort(key=itemgetter(2))
    # The floor is the nearest *shown* message's: the filters first, then the cut.
    if not rows or rows[0][2] >= 0:
        return []
    return [r for r in rows if r[2] <= rows[0][2] * RELATIVE_FLOOR]


def _first_messages(
    conn: sqlite3.Connection, sessions: list[str], filters: Filters
) -> list[tuple[int, str, float, int]]:
    """Each session's first message the filters let through (id, session, time,
    archived): what a card found by its title shows."""
    cur = conn.cursor()
    cur.row_factory = None
    return cur.execute(
        f"SELECT min(m.id), m.session_id, coalesce(min(m.timestamp), 0), 0 "
        f"FROM main.messages m JOIN sessions s ON s.id = m.session_id "
        f"WHERE m.session_id IN (SELECT value FROM json_each(?)) AND m.role = 'user'"
        f"{filters.sql} GROUP BY m.session_id",
        (json.dumps(sessions), *filters.params),
    ).fetchall()


def fuse(
    words: list[Row], meaning: list[Row], card_of: Callable[[str], str] = str
) -> tuple[list[Row], frozenset[int]]:
    """Both rankings as one (score: minus the fused score, so lower is better), and the
    ids only the meaning found. Meaning's list weighs :data:`MEANING_WEIGHT` of words'.

    Words' first :data:`WORDS_KEPT` cards (``card_of``: a session's card, its chain's
    root when cards are chains) stay ahead of anything only the meaning found: their
    best rows are raised above meaning's best, in words' order, so a query whose
    words match never loses its first cards to look-alikes.
    """
    fused: dict[int, float] = {}
    first: dict[int, Row] = {}
    for ranked, weight in ((words, 1.0), (meaning, MEANING_WEIGHT)):
        for rank, row in enumerate(ranked):
            fused[row[0]] = fused.get(row[0], 0.0) + weight / (RRF_K + rank + 1)
            first.setdefault(row[0], row)
    cards: set[str] = set()
    for row in words:
        if len(cards) == WORDS_KEPT:
            break
        card = card_of(row[1])
        if card not in cards:
            cards.add(card)
            fused[row[0]] += MEANING_WEIGHT / (RRF_K + 1)  # above any row only meaning found
    rows = [(i, r[1], -fused[i], r[3], r[4]) for i, r in first.items()]
    rows.sort(key=itemgetter(2))  # stable: on a tie, words' order first
    said = {r[0] for r in words}
    return rows, frozenset(i for i in first if i not in said)


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
    card_of: Callable[[str], str] = str,
) -> Blend:
    """The rows of ``request``'s mode: words alone, meaning alone, or both fused (best
    match), or both in the requested time order. Meaning needs its index built
    (``MeaningStatus.built``: at most a sync's worth of new messages behind) and a first
    page (a "search older" page carries on the words' window). Chinese, Japanese and
    Korean queries keep their word routes (trigram, pairs, scan) and get meaning
    too: on the labelled set's 5 Chinese paraphrases plain WordLlama found 4 in the
    first five (bench/meaning.py --reference)."""
    if meaning is None or request.mode == "words":
        return Blend(words, frozenset(), None)
    status = meaning.status(conn)
    if not status.ready and status.model is None:
        return Blend(words, frozenset(), status)  # never built here (no `recall serve`)
    if not status.built:  # a second behind each new message is not "being built"
        note = (
            f"The meaning index is being built ({status.percent}% of messages): searched "
            "by words only until it is ready."
        )
        return Blend(words, frozenset(), status, note)
    if status.model != meaning.choice.name:
        note = (
            f"The meaning index holds {status.model}'s vectors and this server embeds with "
            f"{meaning.choice.name}: searched by words until it is built again."
        )
        return Blend(words, frozenset(), status, note)
    if request.continues:
        return Blend(words, frozenset(), status)
    text = " ".join(t.text for t in parsed.positive)
    try:
        near = meaning_rows(conn, meaning, text, request, filters, row_map)
    except EmbedderUnavailable as exc:
        note = f"Search by meaning is unavailable ({exc}): searched by words only."
        return Blend(words, frozenset(), status, note)
    if request.mode == "meaning":
        return Blend(near, frozenset(r[0] for r in near), status, used=True)
    if request.sort != "relevance":
        known = {r[0] for r in words}
        extra = [r for r in near if r[0] not in known]
        return Blend([*words, *extra], frozenset(r[0] for r in extra), status, used=True)
    rows, similar = fuse(words, near, card_of)
    return Blend(rows, similar, status, used=True)
