"""Parent/child links between sessions, loaded once and kept while the archive is unchanged.

Search groups hits by chain root and cards show a chain's latest activity; both
need the ``parent_session_id`` graph. Loading it costs a few milliseconds at 10k
sessions, so :class:`LineageCache` keeps the last graph and reloads it only after
the archive got a write (its write counter, ``schema.WRITES_KEY``, moved).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Generic, TypeVar

from dashboard.lineage import links
from dashboard.store.schema import WRITES_KEY
from dashboard.store.state import StoreState

T = TypeVar("T")
DEPTH_LIMIT = 1_000  # a corrupt file may hold a cycle or an absurd chain: stop walking


@dataclass(frozen=True)
class Lineage:
    """The parent of every session that has one, the reverse map, and each link's kind."""

    parents: Mapping[str, str]
    children: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # child id -> "continuation" | "branch" | "delegation" | "reset" | "unknown"
    kinds: Mapping[str, str] = field(default_factory=dict)
    starts: Mapping[str, float] = field(default_factory=dict)  # children's start times

    @classmethod
    def from_parents(
        cls,
        parents: Mapping[str, str],
        kinds: Mapping[str, str] | None = None,
        starts: Mapping[str, float] | None = None,
    ) -> Lineage:
        children: dict[str, list[str]] = {}
        for child, parent in parents.items():
            children.setdefault(parent, []).append(child)
        return cls(
            dict(parents),
            {k: tuple(v) for k, v in children.items()},
            dict(kinds or {}),
            dict(starts or {}),
        )

    def line(self, session_id: str) -> list[str]:
        """The continuation line through a session: its first segment … the tip."""
        return links.line(session_id, self.continued, self.continues_in)

    @cached_property
    def continued(self) -> dict[str, str]:
        """child → the parent it continues (its link is a continuation)."""
        return {c: self.parents[c] for c, kind in self.kinds.items() if kind == "continuation"}

    @cached_property
    def continues_in(self) -> dict[str, str]:
        """parent → the child that continues it (the earliest, if several do)."""
        return links.successors(self.continued, self.starts)

    def part_of(self, session_id: str) -> tuple[int, int] | None:
        """``(n, m)`` when the session belongs to a continuation line of 2+ segments."""
        return links.line_part(self.line(session_id), session_id)

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


_EDGE_COLUMNS = ("source", "model_config", "started_at", "end_reason", "ended_at")


def load_lineage(conn: sqlite3.Connection) -> Lineage:
    """Every parent link, each classified by :func:`links.classify`."""

    def pick(alias: str) -> str:
        return ", ".join(f"{alias}.{c}" for c in _EDGE_COLUMNS)

    rows = conn.execute(
        f"SELECT c.id, c.parent_session_id, {pick('c')}, p.id, {pick('p')} "
        "FROM sessions c LEFT JOIN sessions p ON p.id = c.parent_session_id "
        "WHERE c.parent_session_id IS NOT NULL"
    ).fetchall()
    parents, kinds, starts = {}, {}, {}
    width = len(_EDGE_COLUMNS)
    for row in rows:
        child = dict(zip(_EDGE_COLUMNS, row[2 : 2 + width], strict=True))
        parents[row[0]] = row[1]
        starts[row[0]] = child["started_at"] or 0.0
        if row[2 + width] is None:
            kinds[row[0]] = "unknown"  # the parent is missing from the file
        else:
            parent = dict(zip(_EDGE_COLUMNS, row[3 + width :], strict=True))
            kinds[row[0]] = links.classify(child, parent)
    return Lineage.from_parents(parents, kinds, starts)


def archive_version(conn: sqlite3.Connection, state: StoreState) -> tuple[object, ...]:
    """What moves when the archive behind ``conn`` is written: the write counter moves with
    every transaction a Recall store commits, in place or not (a sync re-linking a session,
    a gone mark); the sessions' max(rowid) and count(*) also catch rows added or removed
    by anything else. One read per snapshot serves every cache keyed on it. The whole
    archive's, whatever the connection's scope (store/scope.py): a profile's caches
    then also drop on another profile's write, and the count reads an index, not the
    scope's view row by row (1.5 ms for one profile of three at 1M)."""
    return (
        state.path,
        *conn.execute(
            "SELECT (SELECT value FROM main.state_meta WHERE key = ?), max(rowid), count(*)"
            " FROM main.sessions",
            (WRITES_KEY,),
        ).fetchone(),
    )


class LineageCache(Generic[T]):
    """The last loaded :class:`Lineage` of one archive, reused until the archive is written.

    ``load`` names another whole-archive read kept the same way (the reader also keeps
    :func:`epochs.in_place_counts` in one).
    """

    def __init__(self, load: Callable[[sqlite3.Connection], T] = load_lineage) -> None:  # type: ignore[assignment]
        self._lock = threading.Lock()
        self._key: tuple[object, ...] | None = None
        self._value: T | None = None
        self._load = load

    def get(
        self, conn: sqlite3.Connection, state: StoreState, version: tuple[object, ...] | None = None
    ) -> T:
        """The lineage (or ``load``'s value) of the archive behind ``conn`` (``state`` names
        it); ``version``: its :func:`archive_version`, when the caller read it already."""
        # Read before the load: a write in between reloads next time, never hides.
        key = version if version is not None else archive_version(conn, state)
        with self._lock:
            if key == self._key and self._value is not None:
                return self._value
        value = self._load(conn)
        with self._lock:
            self._key, self._value = key, value
        return value
