"""The archive's background syncer: one thread per served home, woken by the source changing.

The syncer holds nothing of the source open between passes. A file event on the
source's folder (:class:`source_events.SourceEvents`: ``state.db``, its ``-wal`` or
``-journal`` written) wakes it at once, after the burst of events a commit sends
(``BURST_S``); every ``POLL_S`` it looks anyway, the fallback for an event missed or a
filesystem without events (``SyncState.watch`` says which). A look stats ``state.db``
and its ``-wal`` (:class:`SourceWatch`); only when a stamp moved does it run
:func:`importer.sync`, which opens the file read-only, reads, and closes it. An idle
source costs two ``stat`` calls per poll. A first import runs at start,
and a reconciliation pass (``sync(reconcile=True)``, which re-reads what the cheap
checks could miss) at start, every ``RECONCILE_S`` when the source moved meanwhile,
and at once when the file looks replaced, shrank, or was missing or empty. Each pass
also keeps the calls the home's ``logs/agent.log`` added (archive/call_log.py); when
only the log files moved (their stamps, stat'ed each look), that alone runs.

Nothing that goes wrong with the source stops the thread: a missing, empty, locked,
corrupt file becomes :attr:`SyncState.error` (and ``reason``), the pages keep reading
the archive, the next poll tries again. A file found to be another copy than the one
last read (another inode, an older backup restored in place, another store or file
generation: :func:`follow.replaced_why`) is reconciled and noted in ``replaced_at``,
``replaced_why`` and ``replaced_sessions``, which the pages show.
A pass that fails because of the archive's own folder (gone, read-only, full:
:func:`datadir.folder_fault`) is said as that (``folder_reason``, ``folder_error``),
never as a fault of the source; a folder deleted under the open archive gets the
archive written back (:func:`files.reopen_archive`, ``restored_at``).

Pages use :meth:`Syncer.before_read` (a :class:`StateReader` hook): with
``inline=True`` (tests, one-shot commands) it syncs on the calling thread when the
source changed, so no thread is needed; either way, while the archive holds
nothing of this home and the source cannot be read, it raises the source's error,
so a page says why there is nothing rather than showing an empty archive.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from dashboard.archive.call_log import CallsReport, keep_calls, log_stamps
from dashboard.archive.files import (
    archive_files,
    file_identity,
    holds_home,
    open_archive,
    reopen_archive,
)
from dashboard.archive.importer import BATCH_SESSIONS, Progress, SyncReport, sync
from dashboard.archive.marks import read_watermark, source_key
from dashboard.archive.source_events import SourceEvents
from dashboard.archive.source_watch import SourceWatch
from dashboard.errors import StoreUnavailableError
from dashboard.hermes.profiles import ArchiveIds
from dashboard.store.datadir import folder_fault
from dashboard.store.readonly import classify
from dashboard.store.session_store import SessionStore

POLL_S = 0.5  # the fallback look: file events wake a pass at once (source_events.py)
# A commit sends a burst of file events (each page written to the -wal; a journal
# created, written, deleted): a pass starts once none came for BURST_S, or BURST_MAX_S
# after the first, so a burst costs one pass, not one per event.
BURST_S = 0.01
BURST_MAX_S = 0.1
# How often a file watch that could not start, or was lost with its folder, is tried
# again (a home made after Recall started, a reset home): meanwhile the poll alone runs.
WATCH_RETRY_S = 5.0
# How long a pass waits for a writer's lock on the source: a Hermes commit holds it for
# milliseconds; a longer hold is said ("locked") and asked again at the next poll.
SOURCE_BUSY_S = 1.0
RECONCILE_S = 600.0  # a reconciliation pass this often, when the source moved meanwhile
STOP_WAIT_S = 30.0  # how long stop() waits for a cut-off sync to rebuild its index
# How long every page's banner says the source was replaced (the overview keeps saying
# it until a restart): a restore done in the morning is still news in the evening.
REPLACED_NOTICE_S = 24 * 3600.0
REUSED_IDS = "its message ids now name other messages"


#: What an upper layer keeps derived in the archive after each pass, handed down the
#: way the prune radar gets the continuation rule: the rule sits above the archive
#: (reader/opening.py gives lineage/epochs.keep_in_place_counts). Given the archive and
#: whether to stop; it writes through the archive's write core.
Upkeep = Callable[[SessionStore, Callable[[], bool]], object]


class SyncStopped(Exception):
    """Raised from the progress callback to cut a sync off at a transaction boundary."""


@dataclass(frozen=True)
class SyncState:
    """What the pages show about the syncer: an import's progress, the last sync, errors."""

    source: str
    archive: str
    running: bool = False
    importing: bool = False  # the first import (or its resumption) is under way
    sessions_done: int = 0
    sessions_total: int = 0
    last_sync_at: float | None = None  # wall clock of the last finished sync
    reason: str | None = None  # missing, locked, corrupt, io, … (None: the source is fine)
    error: str | None = None  # the sentence a person reads
    imported: bool = False  # the archive holds rows from this home
    replaced_at: float | None = None  # when another copy of the file was last found
    replaced_why: str | None = None  # how it was told (follow.replaced_why's words)
    replaced_sessions: int = 0  # sessions the pass re-read from it
    # Recall's own folder (the archive's), not the source: gone, read-only or full
    # (datadir.FolderFault: folder-missing, folder-readonly, folder-full), and its sentence.
    folder_reason: str | None = None
    folder_error: str | None = None
    restored_at: float | None = None  # when the archive was written back to a deleted folder
    # What wakes the syncer: "events" (file events, the poll as fallback), "poll" (no
    # thread, or events turned off), "poll: <why>" (the file watch could not start).
    watch: str = "poll"
    # A log file of the home that could not be read (call_log.py): its calls wait.
    calls_note: str | None = None

    @property
    def percent(self) -> int:
        """How far the first import is, 0–100 (rounded down: 100 only when done)."""
        if not self.sessions_total:
            return 0
        return min(100, self.sessions_done * 100 // self.sessions_total)

    @property
    def replaced_recently(self) -> bool:
        """Whether the banner still says the source was replaced (:data:`REPLACED_NOTICE_S`)."""
        return self.replaced_at is not None and time.time() - self.replaced_at < REPLACED_NOTICE_S

    def to_json(self) -> dict[str, object]:
        return {**self.__dict__, "percent": self.percent}


class _Polling(ABC):
    """What a syncer and a group of them share: the pages' hook and the polling thread.

    A subclass gives ``poll()``, ``state()``, ``sources()``, ``_said()``, ``inline``,
    ``poll_s``, ``file_events``, ``_stop`` and ``_wake`` (Events) and ``_thread``.
    """

    inline: bool
    poll_s: float
    file_events: bool  # False: the poll alone wakes it (no file watch)
    _stop: threading.Event
    _wake: threading.Event  # set by a file event, or by stop()
    _thread: threading.Thread | None
    _events: SourceEvents | None = None
    looks: int = 0  # the thread's looks after the first pass: by file event or by poll
    watch_retry_s: float = WATCH_RETRY_S
    _watch_again_at: float = 0.0

    @abstractmethod
    def poll(self) -> bool:
        """One look at the source(s); whether a sync ran."""

    @abstractmethod
    def state(self) -> SyncState:
        """What the pages show about the syncing."""

    @abstractmethod
    def sources(self) -> list[Path]:
        """The ``state.db`` files it follows."""

    @abstractmethod
    def _said(self, watch: str) -> None:
        """Put what wakes it (``SyncState.watch``) in the state."""

    @property
    def events(self) -> int:
        """How many file events woke it so far (0 without a file watch)."""
        return self._events.events if self._events is not None else 0

    def before_read(self) -> None:
        """Run before a page reads the archive (see the module docstring): inline, sync
        first; while the archive holds nothing of the home and the source cannot be
        read, say why."""
        if self.inline:
            self.poll()
        state = self.state()
        if not state.imported and state.folder_reason is not None:
            folder = str(Path(state.archive).parent)
            raise StoreUnavailableError(state.folder_reason, folder, state.folder_error or "")
        if not state.imported and state.reason is not None:
            raise StoreUnavailableError(state.reason, state.source, state.error or "")

    def start(self) -> None:
        """Start the background thread (a first sync at once, then a pass on each file
        event, and a look every POLL_S)."""
        if self._thread is not None:
            return
        if self.file_events:
            self._watch_files()
        self._thread = threading.Thread(target=self._loop, name="recall-syncer", daemon=True)
        self._thread.start()

    def _watch_files(self) -> None:
        """Start the file watch, or say why the poll runs alone."""
        events = SourceEvents(self.sources(), self._wake)
        why = events.start()
        self._events = events if why is None else None
        self._said("events" if why is None else f"poll: {why}")
        self._watch_again_at = time.monotonic() + self.watch_retry_s

    def _rewatch(self) -> None:
        """A watch that could not start, or lost its folder, is tried again now and then."""
        if not self.file_events or self._stop.is_set():
            return
        if self._events is not None:
            lost = self._events.lost
            if lost is None:
                return
            self._events.stop()
            self._events = None
            self._said(f"poll: {lost}")
            self._watch_again_at = time.monotonic() + self.watch_retry_s
        if time.monotonic() >= self._watch_again_at:
            self._watch_files()

    def _loop(self) -> None:
        self.poll()
        while not self._stop.is_set():
            if self._wake.wait(self.poll_s):
                self._let_burst_end()
            if self._stop.is_set():
                break
            self.looks += 1
            self.poll()
            self._rewatch()

    def _let_burst_end(self) -> None:
        """Wait until file events stop coming for ``BURST_S`` (at most ``BURST_MAX_S``).
        An event after this is seen by the pass's look, or wakes the next pass."""
        ends = time.monotonic() + BURST_MAX_S
        self._wake.clear()
        while time.monotonic() < ends and self._wake.wait(BURST_S):
            self._wake.clear()
        self._wake.clear()

    def _stop_thread(self, timeout: float) -> None:
        """Stop the file watch and the thread (a running batch commits first)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._events is not None:
            self._events.stop()
            self._events = None


class Syncer(_Polling):
    """Keeps ``archive`` in step with ``state_db`` (the source of home ``home_root``)."""

    def __init__(
        self,
        archive: Path,
        state_db: Path,
        home_root: Path,
        *,
        inline: bool = False,
        poll_s: float = POLL_S,
        file_events: bool = True,
        reconcile_s: float = RECONCILE_S,
        batch_sessions: int = BATCH_SESSIONS,
        on_progress: Callable[[Progress], None] | None = None,
        profile: str | None = None,
        id_prefix: str = "",
        upkeep: Upkeep | None = None,
    ) -> None:
        self.archive_path = Path(archive)
        self.upkeep = upkeep  # after each pass that landed (see Upkeep)
        self.profile = profile  # the name its rows are archived under (profiles.py)
        self.id_prefix = id_prefix
        self.state_db = Path(state_db)
        self.home_root = Path(home_root)
        self.inline = inline
        self.poll_s = poll_s
        self.file_events = file_events
        self.reconcile_s = reconcile_s
        self.batch_sessions = batch_sessions
        self.on_progress = on_progress  # each committed batch (the terminal's line)
        self._watch = SourceWatch(self.state_db)
        # The log files' stamps at the last pass that read them (None: none yet), so a
        # call logged with no commit to state.db is kept without a sync of it.
        self._logs_seen: tuple[object, ...] | None = None
        self._store: SessionStore | None = None
        self._store_id: tuple[int, int] | None = None  # the archive file it has open
        self._state = SyncState(source=str(self.state_db), archive=str(self.archive_path))
        self._state_lock = threading.Lock()
        self._sync_lock = threading.Lock()  # one sync at a time (inline: request threads)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_reconcile = 0.0
        # Whether the source moved since the last reconciliation (True: none yet).
        # A file no one wrote to has nothing the cheap checks could have missed, and
        # at 1M messages a reconciliation costs ~10 s of CPU: an idle home skips it.
        self._moved = True
        self.syncs = 0  # passes run (what an idle server must not increase)
        self.reconciliations = 0  # of those, the full comparisons
        self.on_synced: Callable[[], None] | None = None  # after each finished pass

    # -- state --------------------------------------------------------------------

    def state(self) -> SyncState:
        with self._state_lock:
            return self._state

    def _set(self, **changes: object) -> None:
        with self._state_lock:
            self._state = replace(self._state, **changes)

    def sources(self) -> list[Path]:
        return [self.state_db]

    def _said(self, watch: str) -> None:
        self._set(watch=watch)

    # -- the work -----------------------------------------------------------------

    def poll(self) -> bool:
        """One look at the source; sync when it changed or reconciliation is due.

        Returns whether a sync ran. Never raises: what went wrong is in the state.
        """
        with self._sync_lock:
            try:
                store = self._archive()
                changed = self._watch.changed()
                # A racy second look alone does not call for a reconciliation.
                self._moved = self._moved or self._watch.moved
                due = self._moved and time.monotonic() >= self._next_reconcile
                logs = log_stamps(self.home_root)
                # A pass the folder refused is run again each poll until the folder takes it.
                if not (changed or due or self._state.folder_reason):
                    if logs != self._logs_seen:
                        self._keep_calls(store, logs)
                    return False
                report = self._run_sync(store, reconcile=due, suspect=self._watch.suspect)
                # A file that could not be read is tried again each poll (permissions mended
                # move no stamp).
                self._logs_seen = None if report.calls_notes else logs
                self._set(calls_note="; ".join(report.calls_notes) or None)
                self._watch.settled()
                if due:
                    self._moved = False
                    self.reconciliations += 1
                    self._next_reconcile = time.monotonic() + self.reconcile_s
                self._set(reason=None, error=None, folder_reason=None, folder_error=None)
                if report.replaced_why or (report.replaced and not self._state.replaced_at):
                    # Rows retired alone (ids reused) follow a replacement already told.
                    self._set(
                        replaced_at=time.time(),
                        replaced_why=report.replaced_why or REUSED_IDS,
                        replaced_sessions=report.sessions_reread,
                    )
                if self.upkeep is not None:
                    # After the state says the pass landed: its rows are searchable, and a
                    # folder that took them is no longer at fault, whatever this adds.
                    self.upkeep(store, self._stop.is_set)
                return True
            except SyncStopped:
                pass  # the next start resumes from the watermark
            except StoreUnavailableError as exc:
                if exc.path == str(self.state_db) or not self._folder_failed(exc):
                    self._set(importing=False, reason=exc.reason, error=_sentence(exc))
            except sqlite3.Error as exc:
                if not self._folder_failed(exc):
                    error = classify(exc, self.state_db)
                    self._set(importing=False, reason=error.reason, error=_sentence(error))
            except Exception as exc:  # noqa: BLE001 - the thread must outlive any bad file
                if not self._folder_failed(exc):
                    self._set(importing=False, reason="error", error=f"sync failed: {exc}")
            # The pass did not finish: the next look tries again, whatever the stamps say.
            self._watch.forget()
            return False

    def _keep_calls(self, store: SessionStore, logs: tuple[object, ...]) -> CallsReport:
        """Only the home's log files moved: keep the calls they added (call_log.py)."""
        ids = ArchiveIds.of_home(self.home_root, self.profile, self.id_prefix)
        report = keep_calls(store, self.home_root, ids)
        self._logs_seen = None if report.notes else logs
        self._set(calls_note="; ".join(report.notes) or None)
        return report

    def _folder_failed(self, exc: BaseException) -> bool:
        """Whether a failed pass is the archive's folder's fault (then said so, not the
        source's): gone, read-only or full, as :func:`datadir.folder_fault` sees it."""
        fault = folder_fault(self.archive_path.parent, archive_files(self.archive_path), exc)
        if fault is None:
            return False
        # An archive it could not open may still hold this home: the pages read it as is.
        held = self._store is not None or holds_home(self.archive_path, self.home_root)
        # The pass got as far as Recall's folder: a source fault an earlier pass saw
        # (Hermes's lock, held a moment) is over, and must not be said until the folder heals.
        self._set(
            reason=None,
            error=None,
            importing=False,
            folder_reason=fault.reason,
            folder_error=fault.sentence,
            imported=self._state.imported or held,
        )
        return True

    def _archive(self) -> SessionStore:
        if self._store is not None and self._store_id != file_identity(self.archive_path):
            # Its folder was deleted (or the file replaced) under the open connection.
            self._store, restored = reopen_archive(self._store)
            self._store_id = file_identity(self.archive_path)
            if restored:
                self._set(restored_at=time.time())
        if self._store is None:
            self._store = open_archive(self.archive_path, to_sync=True)
            self._store_id = file_identity(self.archive_path)
            self._set(imported=self._holds_home(self._store))
        return self._store

    def _holds_home(self, store: SessionStore) -> bool:
        row = store.core.conn.execute(
            "SELECT 1 FROM sessions WHERE src_home=? LIMIT 1", (source_key(self.home_root),)
        ).fetchone()
        return row is not None

    def _run_sync(
        self, store: SessionStore, *, reconcile: bool = False, suspect: bool = False
    ) -> SyncReport:
        first = not self._state.imported or (
            read_watermark(store.core.conn, source_key(self.home_root)) is not None
        )
        self._set(importing=first, running=True)

        def progress(p: Progress) -> None:
            if self._stop.is_set():
                raise SyncStopped  # between transactions: the watermark covers what landed
            self._set(
                sessions_done=p.sessions_done,
                sessions_total=p.sessions_total,
                imported=self._state.imported or p.messages_added > 0,
            )
            if self.on_progress:
                self.on_progress(p)

        try:
            report = sync(
                store,
                self.state_db,
                self.home_root,
                batch_sessions=self.batch_sessions,
                on_progress=progress,
                reconcile=reconcile or suspect,
                busy_timeout=SOURCE_BUSY_S,
                profile=self.profile,
                id_prefix=self.id_prefix,
            )
        finally:
            self._set(running=False)
        self.syncs += 1
        self._set(importing=False, last_sync_at=time.time(), imported=self._holds_home(store))
        if self.on_synced is not None:
            self.on_synced()
        return report

    # -- the thread ---------------------------------------------------------------

    def close(self) -> None:
        """Close the archive's connection (the group's stop, with no thread of this
        syncer's). The source has none open between passes."""
        with self._sync_lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def stop(self, timeout: float = STOP_WAIT_S) -> None:
        """Stop polling, let a running batch commit, close the archive's connection."""
        self._stop_thread(timeout)
        self.close()


class SyncGroup(_Polling):
    """Several profiles' syncers filling one archive, on one thread, one pass at a time.

    Each profile keeps its own :class:`Syncer` (its watch on its own ``state.db``,
    its watermark, its state); the group polls them in order, so two first imports
    never race for the archive's write lock or for a first import's side trigram
    build. It answers what the pages and ``recall serve`` ask a syncer.
    """

    def __init__(
        self, members: Sequence[Syncer], *, poll_s: float = POLL_S, file_events: bool = True
    ) -> None:
        if not members:
            raise ValueError("a sync group needs a syncer")
        self.members = list(members)
        self.poll_s = poll_s
        self.file_events = file_events
        self.inline = members[0].inline
        self.archive_path = members[0].archive_path
        self._stop = threading.Event()
        self._wake = threading.Event()  # one watch on every profile's folder wakes the group
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # What each member shares: its batch size and the callbacks serve.py sets.
    def _fan(name: str) -> property:  # type: ignore[misc]  # noqa: N805
        def get(self: SyncGroup) -> object:
            return getattr(self.members[0], name)

        def put(self: SyncGroup, value: object) -> None:
            for m in self.members:
                setattr(m, name, value)

        return property(get, put)

    batch_sessions = _fan("batch_sessions")
    on_progress = _fan("on_progress")
    on_synced = _fan("on_synced")
    del _fan

    @property
    def syncs(self) -> int:
        return sum(m.syncs for m in self.members)

    @property
    def reconciliations(self) -> int:
        return sum(m.reconciliations for m in self.members)

    def states(self) -> dict[str, SyncState]:
        """Each profile's state, by profile name."""
        return {str(m.profile): m.state() for m in self.members}

    def sources(self) -> list[Path]:
        return [m.state_db for m in self.members]

    def _said(self, watch: str) -> None:
        for m in self.members:
            m._said(watch)

    def state(self) -> SyncState:
        """One state for the banner and ``/healthz``: importing while any profile is,
        progress summed, the oldest last sync, the first error (naming its file)."""
        states = [m.state() for m in self.members]
        failing = [st for st in states if st.reason is not None]
        synced = [st.last_sync_at for st in states]
        replaced = [st for st in states if st.replaced_at is not None]
        newest = max(replaced, key=lambda st: st.replaced_at or 0.0, default=None)
        return SyncState(
            source=", ".join(st.source for st in states),
            archive=str(self.archive_path),
            running=any(st.running for st in states),
            importing=any(st.importing for st in states),
            sessions_done=sum(st.sessions_done for st in states),
            sessions_total=sum(st.sessions_total for st in states),
            last_sync_at=None if None in synced else min(synced),  # type: ignore[type-var]
            reason=failing[0].reason if failing else None,
            error=failing[0].error if failing else None,
            imported=any(st.imported for st in states),
            replaced_at=newest.replaced_at if newest else None,
            replaced_why=newest.replaced_why if newest else None,
            replaced_sessions=sum(st.replaced_sessions for st in states if st.replaced_at),
            # One archive, one folder: any member's word on it is the group's.
            folder_reason=next((st.folder_reason for st in states if st.folder_reason), None),
            folder_error=next((st.folder_error for st in states if st.folder_error), None),
            restored_at=max((st.restored_at for st in states if st.restored_at), default=None),
            watch=states[0].watch,  # one thread, one watch for all of them
            calls_note=next((st.calls_note for st in states if st.calls_note), None),
        )

    def poll(self) -> bool:
        """One look at every profile's source, in order; whether any synced."""
        with self._lock:
            ran = False
            for m in self.members:
                if self._stop.is_set():
                    break
                ran = m.poll() or ran
            return ran

    def start(self) -> None:
        for m in self.members:
            m._stop = self._stop  # a member's import stops at its next batch with the group
        super().start()

    def stop(self, timeout: float = STOP_WAIT_S) -> None:
        for m in self.members:
            m._stop.set()
        self._stop_thread(timeout)
        for m in self.members:
            m.close()


def _sentence(exc: StoreUnavailableError) -> str:
    """What a person reads about a source that cannot be read."""
    what = {
        "missing": "is missing",
        "empty": "is empty (0 bytes): it was truncated, or is being replaced",
        "locked": "is locked by another program (asked again shortly)",
        "corrupt": "is damaged (not a readable SQLite database)",
        "io": "gave a disk I/O error",
        "readonly": "cannot be opened (permissions)",
        "rollback": "holds an unfinished write only Hermes can roll back",
    }.get(exc.reason, f"cannot be read ({exc.reason})")
    return f"{exc.path} {what}"
