"""What was said in a search hit: its text, never the tool-call arguments it also holds.

Stage-1 search indexes a message's text together with its tool name and tool-call
arguments, so an assistant turn that only called ``write_file`` matches the words of
the file it wrote, and its snippet is ``write_file: path=… content=…``. An agent's
recalled memories are what the user and the agent said: :func:`said_only` keeps the
hits whose own text holds a term, with snippets cut from that text alone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import replace

from dashboard.errors import QuerySyntaxError
from dashboard.hermes.content import decode_content
from dashboard.hermes.conventions import visible_sql
from dashboard.memory.entries import WORD, key_words
from dashboard.memory.provenance import Said
from dashboard.search.query import parse_query
from dashboard.search.routes import session_matches
from dashboard.search.sessions import SessionResult
from dashboard.store.state import StoreState
from dashboard.text import clip, is_marked, make_snippet


def said_only(
    conn: sqlite3.Connection, results: Sequence[SessionResult], terms: Sequence[str]
) -> list[SessionResult]:
    """``results`` with each hit re-cut from its message's text alone.

    A hit whose text holds none of ``terms`` (the match was in a tool name or its
    arguments) is dropped, and so is a result left with no hit that matched by its
    hits only (a result that matched by its title, with no hits, is kept). A hit found
    by meaning (``similar``) holds none by nature: it is kept, its text's opening shown.
    """
    ids = [h.message_id for r in results for h in r.hits]
    texts: dict[int, str] = {}
    if ids:
        rows = conn.execute(
            f"SELECT id, content FROM messages WHERE id IN ({','.join('?' * len(ids))})", ids
        )
        texts = {mid: decode_content(content) for mid, content in rows}
    kept: list[SessionResult] = []
    for result in results:
        hits = []
        for hit in result.hits:
            text = texts.get(hit.message_id, "")
            if hit.similar:
                if text.strip():
                    hits.append(replace(hit, snippet=make_snippet(text, [])))
                continue
            snippet = make_snippet(text, terms)
            if is_marked(snippet):
                hits.append(replace(hit, snippet=snippet))
        if hits or not result.hits:
            kept.append(replace(result, hits=hits))
    return kept


SAID_CHARS = 200


def where_said(
    conn: sqlite3.Connection,
    state: StoreState,
    session_id: str,
    before_id: int,
    text: str,
    *,
    rewound: bool = False,
) -> Said | None:
    """The user message of ``session_id`` before message ``before_id`` that shares the
    most of ``text``'s words (:func:`key_words`), the nearest on a tie; None when no
    earlier user message holds any. ``rewound``: the call was rewound out of the
    conversation, so the user's words may have been too: rewound rows count.

    The session's matches come from the archive's word search (``session_matches``: the
    word index, then trigram, then a scan), with the entry's words joined by OR.
    """
    words = key_words(text)
    if not words:
        return None
    try:
        parsed = parse_query(" OR ".join(words))
    except QuerySyntaxError:  # nothing FTS5 reads as a word: nowhere to find it
        return None
    found = session_matches(conn, state, session_id, parsed, every_row=rewound)
    ids = [i for i in found if i < before_id]
    if not ids:
        return None
    rows = conn.execute(
        f"SELECT m.id, m.timestamp, m.content, {visible_sql('m')} FROM messages m"
        f" WHERE m.role = 'user' AND m.id IN ({','.join('?' * len(ids))})",
        ids,
    ).fetchall()
    best: tuple[int, int, Said] | None = None
    for mid, at, content, shown in rows:
        said = decode_content(content)
        lowered = set(WORD.findall(said.casefold()))
        shared = tuple(w for w in words if w in lowered)
        if shared and (best is None or (len(shared), mid) > best[:2]):
            best = (len(shared), mid, Said(mid, at, clip(said, SAID_CHARS), shared, bool(shown)))
    return best[2] if best else None
