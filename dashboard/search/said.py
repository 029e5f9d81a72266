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

from dashboard.hermes.content import decode_content
from dashboard.search.sessions import SessionResult
from dashboard.text import is_marked, make_snippet


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
