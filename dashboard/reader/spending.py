"""Spend questions asked inside one read snapshot, answered by the cost rollup or the raw
rows, and the answers kept while the file's spend fingerprint is unchanged."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dashboard.bounded import BoundedCache
from dashboard.costs.book import current_book
from dashboard.costs.costly import (
    TOP_SESSIONS,
    CostlySessions,
    Families,
    costly_sessions,
    rank_sessions,
    raw_session_sums,
)
from dashboard.costs.rollup import CostRollup
from dashboard.costs.spend import Spend, SpendMark, fingerprint, plan, spend
from dashboard.store.readonly import read_snapshot

SPEND_CACHE_SIZE = 32  # distinct (range, period, dimension, …) answers kept


class SpendCache(BoundedCache[Any]):
    """Answers by question and fingerprint, the oldest dropped past ``size`` (per reader:
    the page, its CSV and the JSON ask the same questions in a row)."""

    def __init__(self, size: int = SPEND_CACHE_SIZE) -> None:
        super().__init__(size)


class SpendReading:
    """Spend questions about the state one connection sees (inside its read transaction).

    The answer comes from the ``rollup`` once it is built (Recall's per-day sums, in
    its own file, brought up to date from this state first: its fingerprint is the
    snapshot's), else from the raw rows of ``conn``. A scoped reader's connection sees
    one profile, and the rollup is brought up to date from the whole archive: through
    ``open_whole``, opened once for all the questions of this reading and held in one
    read transaction, the answers filtered to ``profiles``.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        rollup: CostRollup | None,
        cache: SpendCache,
        lineage: Callable[[], Families],
        *,
        profiles: tuple[str, ...] | None = None,
        open_whole: Callable[[], sqlite3.Connection] | None = None,
    ) -> None:
        self.conn = conn
        self.rollup = rollup
        self._cache = cache
        self._lineage = lineage
        self._profiles = profiles
        self._open_whole = open_whole
        self._whole: sqlite3.Connection | None = None
        self._mark: SpendMark | None = None

    @property
    def mark(self) -> SpendMark:
        """The snapshot's spend fingerprint (read once: the snapshot does not move)."""
        if self._mark is None:
            self._mark = fingerprint(self.conn)
        return self._mark

    def _rollup_conn(self) -> tuple[sqlite3.Connection, SpendMark | None, dict[str, Any]]:
        """How the rollup is asked: ``(connection, its fingerprint, extra options)``."""
        if self._profiles is None:
            return self.conn, self.mark, {}
        if self._whole is None:
            assert self._open_whole is not None
            self._whole = self._open_whole()
            self._whole.execute("BEGIN")  # one state of the whole archive for this reading
        return self._whole, None, {"profiles": self._profiles}

    def close(self) -> None:
        if self._whole is not None:
            self._whole.close()
            self._whole = None

    def spend(self, **options: Any) -> Spend:
        """Spend by period and dimension (options as :func:`dashboard.costs.spend.plan`)."""
        key = (repr(sorted(options.items())), self.mark, current_book().key)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        result = None
        if self.rollup is not None:
            conn, whole, scope = self._rollup_conn()
            result = self.rollup.spend(conn, mark=whole, **{**options, **scope})
        if result is None:
            result = spend(self.conn, **options)
        self._cache.put(key, result)
        return result

    def costly_sessions(
        self, *, sort: str = "cost", descending: bool = True, **options: Any
    ) -> CostlySessions:
        """The sessions that cost the most in a spend question's range, from the rollup's
        rows once built, else the raw rows."""
        key = (
            "sessions",
            sort,
            descending,
            repr(sorted(options.items())),
            self.mark,
            current_book().key,
        )
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        question = plan(**options)
        order = {"sort": sort, "descending": descending, "limit": TOP_SESSIONS}
        found = None
        if self.rollup is not None:
            conn, whole, scope = self._rollup_conn()
            asked = plan(**{**options, **scope})
            found = self.rollup.session_sums(conn, asked, mark=whole, **order)
        if found is None:  # no rollup (yet): sum the raw rows by the same rules
            sums = raw_session_sums(self.conn, question)
            found = len(sums), rank_sessions(sums, **order)
        result = costly_sessions(
            self.conn, self._lineage(), *found, sort=sort, descending=descending
        )
        self._cache.put(key, result)
        return result


@contextmanager
def spend_reading(
    conn: sqlite3.Connection,
    rollup: CostRollup | None,
    cache: SpendCache,
    lineage: Callable[[], Families],
    *,
    profiles: tuple[str, ...] | None = None,
    open_whole: Callable[[], sqlite3.Connection] | None = None,
) -> Iterator[SpendReading]:
    """A :class:`SpendReading` of ``conn`` inside one read transaction (joined if open)."""
    reading = SpendReading(conn, rollup, cache, lineage, profiles=profiles, open_whole=open_whole)
    try:
        with read_snapshot(conn):
            yield reading
    finally:
        reading.close()
