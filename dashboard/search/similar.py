"""Similar conversations: the sessions whose messages lie nearest one session's, by meaning.

A session's meaning is the mean of its messages' vectors (their sign bits as ±1, the
same compression the index keeps); the messages nearest that mean, grouped by session,
rank the other conversations. Its own chain and family are left out (they are the same
conversation), and so is anything the reader's scope does not show.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

import numpy as np

from dashboard.hermes.conventions import visible_sql
from dashboard.lineage.graph import Lineage
from dashboard.meaning.reader import MeaningReader
from dashboard.store.names import names_of
from dashboard.store.schema import MEANING_TABLE

SHOWN = 5  # conversations listed
NEAREST = 300  # messages read to find them


@dataclass(frozen=True)
class SimilarSession:
    session_id: str
    name: str
    started_at: float | None
    messages: int  # of its messages among the nearest
    score: float  # the closest one's closeness (higher is closer)


def similar_sessions(
    conn: sqlite3.Connection, meaning: MeaningReader, lineage: Lineage, session_id: str
) -> list[SimilarSession]:
    """Up to :data:`SHOWN` other conversations closest in meaning to ``session_id``'s,
    closest first; none while it has no vectors (the index not built yet)."""
    codes = [
        r[0]
        for r in conn.execute(
            f"SELECT v.code FROM messages m JOIN {MEANING_TABLE} v ON v.message_id = m.id "
            f"WHERE m.session_id = ? AND {visible_sql('m')}",
            (session_id,),
        )
    ]
    if not codes:
        return []
    bits = np.unpackbits(np.frombuffer(b"".join(codes), dtype=np.uint8).reshape(len(codes), -1))
    signs = bits.reshape(len(codes), -1).astype(np.float32) * 2 - 1
    centre = signs.mean(axis=0)
    norm = float(np.linalg.norm(centre))
    if norm == 0:
        return []
    meaning.index.follow(conn)
    near = meaning.index.nearest(centre / norm, NEAREST)
    own = set(lineage.family(lineage.root(session_id)))
    owners = dict(
        conn.execute(
            f"SELECT m.id, m.session_id FROM messages m JOIN sessions s ON s.id = m.session_id "
            f"WHERE m.id IN (SELECT value FROM json_each(?)) AND {visible_sql('m')}",
            (json.dumps([n.message_id for n in near]),),
        ).fetchall()
    )
    found: dict[str, list[float]] = {}
    for n in near:
        sid = owners.get(n.message_id)
        if sid is not None and sid not in own:
            found.setdefault(sid, []).append(n.score)
    best = sorted(found, key=lambda sid: (-max(found[sid]), -len(found[sid])))[:SHOWN]
    names = names_of(conn, best)
    starts = dict(
        conn.execute(
            "SELECT s.id, s.started_at FROM sessions s JOIN json_each(?) j ON s.id = j.value",
            (json.dumps(best),),
        ).fetchall()
    )
    return [
        SimilarSession(sid, names.get(sid, sid), starts.get(sid), len(found[sid]), max(found[sid]))
        for sid in best
    ]
