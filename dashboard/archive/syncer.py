"""The archive's background syncer: one thread per served home, woken by the source changing.

The syncer owns a persistent read-only connection on the source ``state.db``
(:class:`SourceWatch`). Every ``POLL_S`` it asks that connection for
``PRAGMA data_version`` (SQLite changes it whenever another connection commits)
and stats the file (a new device/inode is a replaced file: reopen). Only when one
of them moved does it run :func:`importer.sync` into the archive; unchanged, a
poll reads one header and no row. A first import runs at start, and a
reconciliation pass (``sync(reconcile=True)``, which re-reads what the cheap checks could
miss) at start and every ``RECONCILE_S`` when the source moved meanwhile.

Nothing that goes wrong with the source stops the thread: a missing, locked,
corrupt file becomes :attr:`SyncState.error` (and ``reason``; a replaced one is
imported again and noted in ``replaced_at``), the
pages keep reading the archive, the next poll tries again. A pass that fails because
of the archive's own folder (gone, read-only, full: :func:`datadir.folder_fault`) is
said as that (``folder_reason``, ``folder_error``), never as a fault of the source; a
folder deleted under the open archive gets the archive written back
(:func:`files.reopen_archive`, ``restored_at``).

Pages use :meth:`Syncer.before_read` (a :class:`StateReader` hook): with
``inline=True`` (tests, one-shot commands) it syncs on the calling thread when the
source changed, so no thread is needed; either way, while the archive holds
nothing of this home and the source cannot be read, it raises the source's error,
so a page says why there is nothing rather than showing an empty archive.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from dashboard.archive.files import (
    archive_files,
    file_identity,
    holds_home,
    open_archive,
    reopen_archive,
)
from dashboard.archive.importer import BATCH_SESSIONS, Progress, sync
from dashboard.archive.marks import read_watermark, source_key
from dashboard.errors import StoreUnavailableError
from dashboard.store.datadir import folder_fault
from dashboard.store.readonly import classify, open_readonly
from dashboard.store.session_store import SessionStore

POLL_S = 0.5
RECONCILE_S = 600.0  # a reconciliation pass this often, when the source moved meanwhile
STOP_WAIT_S = 30.0  # how long stop() waits for a cut-off sync to rebuild its index


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
    replaced_at: float | None = None  # when another file was last found at the path
    # Recall's own folder (the archive's), not the source: gone, read-only or full
    # (datadir.FolderFault: folder-missing, folder-readonly, folder-full), and its sentence.
    folder_reason: str | None = None
    folder_error: str | None = None
    restored_at: float | None = None  # when the archive was written back to a deleted folder

    @property
    def percent(self) -> int:
        """How far the first import is, 0–100 (rounded down: 100 only when done)."""
        if not self.sessions_total:
            return 0
        return min(100, self.sessions_done * 100 // self.sessions_total)

    def to_json(self) -> dict[str, object]:
        return {**self.__dict__, "percent": self.percent}


class SourceWatch:
    """A persistent read-only connection on the source: has it changed since the last look?"""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None
        self._version: int | None = None
        self.replaced = False  # the last change seen was a new file at the path

    def changed(self) -> bool:
        """True when the file is new (first look, other inode) or ``data_version`` moved.

        Raises :class:`StoreUnavailableError` when the file cannot be read (the
        connection is then dropped and reopened on the next look).
        """
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.close()
            raise StoreUnavailableError("missing", str(self.path), "no such file") from None
        identity = (st.st_dev, st.st_ino)
        # A restored backup or a reset home: another file at the path. Compared with the
        # last file seen even when an error closed the connection in between; the old
        # connection would still read the old inode and never see a change.
        self.replaced = self._identity is not None and identity != self._identity
        if self.replaced:
            self.close()
        if self._conn is None:
            # timeout=0: a held lock is reported at once and asked again next poll.
            self._conn = open_readonly(self.path, timeout=0, io_retries=0)
            self._identity = identity
            self._version = self._data_version()
            return True
        version = self._data_version()
        if version == self._version:
            return False
        self._version = version
        return True

    def _data_version(self) -> int:
        assert self._conn is not None
        try:
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error as exc:
            self.close()
            raise classify(exc, self.path) from exc

    def close(self) -> None:
        """Drop the connection (the file seen last is remembered, to tell a new one)."""
        if self._conn is not None:
            self._conn.close()
        self._conn, self._version = None, None


class _Polling(ABC):
    """What a syncer and a group of them share: the pages' hook and the polling thread.

    A subclass gives ``poll()``, ``state()``, ``inline``, ``poll_s``, ``_stop`` (an
    Event) and ``_thread``.
    """

    inline: bool
    poll_s: float
    _stop: threading.Event
    _thread: threading.Thread | None

    @abstractmethod
    def poll(self) -> bool:
        """One look at the source(s); whether a sync ran."""

    @abstractmethod
    def state(self) -> SyncState:
        """What the pages show about the syncing."""

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
        """Start the background thread (a first sync at once, then a poll every POLL_S)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="recall-syncer", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        self.poll()
        while not self._stop.wait(self.poll_s):
            self.poll()


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
        reconcile_s: float = RECONCILE_S,
        batch_sessions: int = BATCH_SESSIONS,
        on_progress: Callable[[Progress], None] | None = None,
        profile: str | None = None,
        id_prefix: str = "",
    ) -> None:
        self.archive_path = Path(archive)
        self.profile = profile  # the name its rows are archived under (profiles.py)
        self.id_prefix = id_prefix
        self.state_db = Path(state_db)
        self.home_root = Path(home_root)
        self.inline = inline
        self.poll_s = poll_s
        self.reconcile_s = reconcile_s
        self.batch_sessions = batch_sessions
        self.on_progress = on_progress  # each committed batch (the terminal's line)
        self._watch = SourceWatch(self.state_db)
        self._store: SessionStore | None = None
        self._store_id: tuple[int, int] | None = None  # the archive file it has open
        self._state = SyncState(source=str(self.state_db), archive=str(self.archive_path))
        self._state_lock = threading.Lock()
        self._sync_lock = threading.Lock()  # one sync at a time (inline: request threads)
        self._stop = threading.Event()
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

    # -- the work -----------------------------------------------------------------

    def poll(self) -> bool:
        """One look at the source; sync when it changed or reconciliation is due.

        Returns whether a sync ran. Never raises: what went wrong is in the state.
        """
        with self._sync_lock:
            try:
                store = self._archive()
                changed = self._watch.changed()
                self._moved = self._moved or changed
                due = self._moved and time.monotonic() >= self._next_reconcile
                # A pass the folder refused is run again each poll until the folder takes it.
                if not (changed or due or self._state.folder_reason):
                    return False
                replaced = self._watch.replaced
                self._run_sync(store, reconcile=due)
                if due:
                    self._moved = False
                    self.reconciliations += 1
                    self._next_reconcile = time.monotonic() + self.reconcile_s
                self._set(reason=None, error=None, folder_reason=None, folder_error=None)
                if replaced:
                    self._set(replaced_at=time.time())
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
            return False

    def _folder_failed(self, exc: BaseException) -> bool:
        """Whether a failed pass is the archive's folder's fault (then said so, not the
        source's): gone, read-only or full, as :func:`datadir.folder_fault` sees it."""
        fault = folder_fault(self.archive_path.parent, archive_files(self.archive_path), exc)
        if fault is None:
            return False
        # An archive it could not open may still hold this home: the pages read it as is.
        held = self._store is not None or holds_home(self.archive_path, self.home_root)
        self._set(
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

    def _run_sync(self, store: SessionStore, *, reconcile: bool = False) -> None:
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
            sync(
                store,
                self.state_db,
                self.home_root,
                batch_sessions=self.batch_sessions,
                on_progress=progress,
                reconcile=reconcile,
                profile=self.profile,
                id_prefix=self.id_prefix,
            )
        finally:
            self._set(running=False)
        self.syncs += 1
        self._set(importing=False, last_sync_at=time.time(), imported=self._holds_home(store))
        if self.on_synced is not None:
            self.on_synced()

    # -- the thread ---------------------------------------------------------------

    def close(self) -> None:
        """Close both connections (the group's stop, with no thread of this syncer's)."""
        with self._sync_lock:
            self._watch.close()
            if self._store is not None:
                self._store.close()
                self._store = None

    def stop(self, timeout: float = STOP_WAIT_S) -> None:
        """Stop polling, let a running batch commit, close both connections."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.close()


class SyncGroup(_Polling):
    """Several profiles' syncers filling one archive, on one thread, one pass at a time.

    Each profile keeps its own :class:`Syncer` (its watch on its own ``state.db``,
    its watermark, its state); the group polls them in order, so two first imports
    never race for the archive's write lock or for a first import's side trigram
    build. It answers what the pages and ``recall serve`` ask a syncer.
    """

    def __init__(self, members: Sequence[Syncer], *, poll_s: float = POLL_S) -> None:
        if not members:
            raise ValueError("a sync group needs a syncer")
        self.members = list(members)
        self.poll_s = poll_s
        self.inline = members[0].inline
        self.archive_path = members[0].archive_path
        self._stop = threading.Event()
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

    def state(self) -> SyncState:
        """One state for the banner and ``/healthz``: importing while any profile is,
        progress summed, the oldest last sync, the first error (naming its file)."""
        states = [m.state() for m in self.members]
        failing = [st for st in states if st.reason is not None]
        synced = [st.last_sync_at for st in states]
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
            replaced_at=max((st.replaced_at for st in states if st.replaced_at), default=None),
            # One archive, one folder: any member's word on it is the group's.
            folder_reason=next((st.folder_reason for st in states if st.folder_reason), None),
            folder_error=next((st.folder_error for st in states if st.folder_error), None),
            restored_at=max((st.restored_at for st in states if st.restored_at), default=None),
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
        self._stop.set()
        for m in self.members:
            m._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for m in self.members:
            m.close()


def _sentence(exc: StoreUnavailableError) -> str:
    """What a person reads about a source that cannot be read."""
    what = {
        "missing": "is missing",
        "locked": "is locked by another program (asked again shortly)",
        "corrupt": "is damaged (not a readable SQLite database)",
        "io": "gave a disk I/O error",
        "readonly": "cannot be opened (permissions)",
        "rollback": "holds an unfinished write only Hermes can roll back",
    }.get(exc.reason, f"cannot be read ({exc.reason})")
    return f"{exc.path} {what}"
