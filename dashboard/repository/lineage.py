"""Parent/child links between sessions, loaded once and kept while the file is unchanged.

Search groups hits by chain root and cards show a chain's latest activity; both
need the ``parent_session_id`` graph. Loading it costs a few milliseconds at 10k
sessions, so :class:`LineageCache` keeps the last graph and reloads it only when
the sessions table changed (its max rowid or row count moved).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from dashboard.repository.layout import Layout

DEPTH_LIMIT = 1_000  # a corrupt file may hold a cycle or an absurd chain: stop walking


@dataclass(frozen=True)
class Lineage:
    """The parent of every session that has one, and the reverse map."""

    parents: Mapping[str, str]
    children: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def from_parents(cls, parents: Mapping[str, str]) -> Lineage:
        children: dict[str, list[str]] = {}
        for child, parent in parents.items():
            children.setdefault(parent, []).append(child)
        return cls(dict(parents), {k: tuple(v) for k, v in children.items()})

    def root(self, session_id: str) -> str:
        """The topmost ancestor; safe against cycles and missing parents."""
        seen = {session_id}
        current = session_id
        for _ in range(DEPTH_LIMIT):
            parent = self.parents.get(current)
            if parent is None or parent in seen:
                return current
            seen.add(parent)
            current = parent
        return current

    def family(self, root: str) -> list[str]:
        """``root`` and all its descendants (bounded, cycle-safe)."""
        out = [root]
        seen = {root}
        stack = [root]
        while stack and len(out) < DEPTH_LIMIT:
            for child in self.children.get(stack.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    out.append(child)
                    stack.append(child)
        return out


EMPTY = Lineage({}, {})


def load_lineage(conn: sqlite3.Connection, layout: Layout) -> Lineage:
    if "parent_session_id" not in layout.session_columns:
        return EMPTY
    rows = conn.execute(
        "SELECT id, parent_session_id FROM sessions WHERE parent_session_id IS NOT NULL"
    )
    return Lineage.from_parents({r[0]: r[1] for r in rows})


class LineageCache:
    """The last loaded :class:`Lineage` of one file, reused while sessions are unchanged."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[object, ...] | None = None
        self._value: Lineage = EMPTY

    def get(self, conn: sqlite3.Connection, layout: Layout) -> Lineage:
        # count(*) walks the smallest index; max(rowid) is one seek. A new, deleted
        # or re-parented session moves one of them (re-parenting is not done in place
        # by Hermes: children are created with their parent).
        key = (layout.path, *conn.execute("SELECT max(rowid), count(*) FROM sessions").fetchone())
        with self._lock:
            if key == self._key:
                return self._value
        value = load_lineage(conn, layout)
        with self._lock:
            self._key, self._value = key, value
        return value
