"""The memory page's reads of the archive: where each entry came from, and the newer
conversations that may overturn it. A part of :class:`reader.StateReader` (its
snapshot, caches and search), kept here so the reader stays one job a module."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dashboard.errors import StoreUnavailableError
from dashboard.hermes.conventions import MEMORY_FILE_BY_NAME
from dashboard.memory.provenance import entry_provenance
from dashboard.reader.provenance import MemoryProvenance, memory_provenance
from dashboard.reader.staleness import MemoryStaleness, StalenessCache, entry_staleness


class MemoryReading:
    """StateReader's memory methods (it provides ``snapshot``, ``meaning``,
    ``_memory_calls`` and ``_staleness``)."""

    def memory_provenance(
        self, name: str, text: str, revisions: Sequence[dict[str, Any]]
    ) -> MemoryProvenance:
        """Where each entry of the memory file ``name`` (its ``text`` now, its
        ``revisions`` newest first) came from, from this reader's scope (one profile's
        calls); an archive that cannot be read gives none, with the reason."""
        try:
            with self.snapshot() as snap:
                calls = self._memory_calls.get(snap.conn, snap.state, snap.version())
                return memory_provenance(snap.conn, snap.state, name, text, revisions, calls)
        except StoreUnavailableError as exc:
            return MemoryProvenance({}, problem=str(exc))

    def memory_staleness(
        self, name: str, text: str, revisions: Sequence[dict[str, Any]]
    ) -> MemoryStaleness:
        """The user's newer conversations on each entry's subject, flagged when they may
        overturn it (reader/staleness.py), in this reader's scope; kept until the
        archive's next message or the file's next change."""
        cache: StalenessCache = self._staleness
        try:
            with self.snapshot() as snap:
                by_meaning = self.meaning.status(snap.conn).built
                # What the answer reads moves with a new message (the user's words, a
                # memory call, a compaction's summary): the archive's newest id, not its
                # write counter, which the meaning index's writes move all day long.
                newest = snap.conn.execute("SELECT max(id) FROM main.messages").fetchone()[0]
                key = cache.key(name, text, (snap.state.path, newest), by_meaning)
                kept = cache.get(key)
                if kept is not None:
                    return kept
                calls = self._memory_calls.get(snap.conn, snap.state, snap.version())
                target = MEMORY_FILE_BY_NAME[name].key
                entries = entry_provenance(
                    text, target, [c for c in calls if c.op.target == target], revisions
                )
                found = entry_staleness(
                    snap.conn, snap.state, self.meaning if by_meaning else None, entries
                )
        except StoreUnavailableError as exc:
            return MemoryStaleness({}, problem=str(exc))
        cache.put(key, found)
        return found
