"""Wake the syncer the moment Hermes writes: file events on the folders of the sources.

A stat poll every ``POLL_S`` (:class:`source_watch.SourceWatch`) sees a commit half a poll
late on average. A watchdog ``Observer`` (inotify on Linux) on each source's folder,
not recursive, tells within a millisecond that ``state.db``, its ``-wal`` or its
``-journal`` was written, created, deleted or renamed, and sets the syncer's wake
event: the pass runs at once and the poll stays as the fallback (a missed event, a
filesystem without events). The watch is on the *folder*: inotify holds no file of
the source open, so a restored or renamed ``state.db`` is seen as the stat poll sees it.

Only writes wake it: opening and reading (what the syncer's own pass does) send no
event, so a pass never wakes the next one.

When the observer cannot start (no inotify, the per-user watch limit reached, a
folder missing at start), :meth:`SourceEvents.start` says why and the syncer polls alone;
a watched folder deleted (a reset home) ends its watch (:attr:`SourceEvents.lost`). The
syncer tries again now and then (``syncer.WATCH_RETRY_S``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

from watchdog.events import (
    DirDeletedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

# The files whose change is a change of the source: the database, its WAL, its journal
# (a rollback-mode commit creates, writes and deletes it). Not the -shm: readers write it.
SOURCE_SUFFIXES = ("", "-wal", "-journal")
# Writes, creations, deletions and renames only: no open, close or read events, which
# the syncer's own read would send. (A watched folder's own deletion comes as either
# deletion class.)
WAKING_EVENTS = [
    FileModifiedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    DirDeletedEvent,
]


def source_files(state_db: Path) -> set[str]:
    """The paths whose events wake the syncer of ``state_db``."""
    return {f"{os.path.abspath(state_db)}{suffix}" for suffix in SOURCE_SUFFIXES}


class _Waker(FileSystemEventHandler):
    def __init__(self, names: set[str], folders: set[str], wake: threading.Event) -> None:
        self.names = names
        self.folders = folders
        self.wake = wake
        self.events = 0  # events that woke the syncer (what an idle source must not raise)
        self.lost: str | None = None  # a watched folder that was deleted

    def on_any_event(self, event: FileSystemEvent) -> None:
        paths = (event.src_path, getattr(event, "dest_path", "") or "")
        if any(os.fsdecode(p) in self.names for p in paths):
            self.events += 1
            self.wake.set()
        elif event.event_type == "deleted" and os.fsdecode(event.src_path) in self.folders:
            self.lost = os.fsdecode(event.src_path)  # its watch is gone with it
            self.wake.set()


class SourceEvents:
    """An observer on the folders of ``state_dbs`` that sets ``wake`` when one changes."""

    def __init__(self, state_dbs: Iterable[Path], wake: threading.Event) -> None:
        dbs = [Path(os.path.abspath(p)) for p in state_dbs]
        self.folders = sorted({db.parent for db in dbs})
        names = set().union(*(source_files(db) for db in dbs))
        self._waker = _Waker(names, {str(f) for f in self.folders}, wake)
        self._observer: Observer | None = None  # type: ignore[valid-type]

    @property
    def events(self) -> int:
        """How many file events woke the syncer so far."""
        return self._waker.events

    @property
    def lost(self) -> str | None:
        """Why a watch that ran no longer does (a watched folder deleted), or None."""
        return f"{self._waker.lost} was deleted" if self._waker.lost else None

    def start(self) -> str | None:
        """Start watching; None when it runs, else why it could not (then nothing runs)."""
        observer = Observer()
        observer.daemon = True
        try:
            for folder in self.folders:
                observer.schedule(
                    self._waker, str(folder), recursive=False, event_filter=WAKING_EVENTS
                )
            observer.start()
        except (OSError, RuntimeError) as exc:  # no inotify, watch limit, folder missing
            observer.stop()
            where = ", ".join(str(f) for f in self.folders)
            return f"cannot watch {where}: {exc.strerror if isinstance(exc, OSError) else exc}"
        self._observer = observer
        return None

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(5)
            self._observer = None
