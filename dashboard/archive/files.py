"""Recall's archive: its own copy of a Hermes home's history, outliving Hermes's pruning.

The archive is a :class:`SessionStore` (Recall's Hermes-compatible schema, both FTS
indexes, the numbered migrations; migration 3 adds the columns today's Hermes
records and the provenance of each row). It lives in the home's data directory
(datadir.py), never inside the home; ``--archive PATH`` puts it elsewhere. Rows
arrive through importer.sync only (syncer.py keeps it in step inside ``recall serve``);
:func:`read_choice` decides whether a home's pages read it or the home's own store.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dashboard.archive.layout import detect_layout
from dashboard.archive.marks import LAST_SYNC_PREFIX, read_watermark, source_key
from dashboard.errors import StoreUnavailableError, ValidationError
from dashboard.hermes.home import HermesHome
from dashboard.store.datadir import recall_data_dir
from dashboard.store.readonly import open_own_readonly, open_readonly
from dashboard.store.schema import LATEST_VERSION, current_version
from dashboard.store.session_store import SessionStore

ARCHIVE_FILE = "archive.db"


def archive_path(
    home: HermesHome,
    explicit: str | os.PathLike[str] | None = None,
    folder: str | os.PathLike[str] | None = None,
) -> tuple[Path, str | None]:
    """Where ``home``'s archive lives, and a line about moved data (datadir's note).

    ``explicit`` (``--archive``) first; else ``archive.db`` in ``folder`` (the data
    directory a server was given with ``--data-dir``), else in the home's data directory.
    """
    note = None
    if explicit:
        target = Path(explicit).expanduser()
    elif folder:
        target = Path(folder).expanduser() / ARCHIVE_FILE
    else:
        folder, note = recall_data_dir(home)
        target = folder / ARCHIVE_FILE
    if target.resolve() == Path(home.state_db).expanduser().resolve():
        raise ValidationError(f"the archive cannot be the home's own state.db ({target})")
    return target, note


def open_archive(path: Path, *, to_sync: bool = False) -> SessionStore:
    """Open (creating and migrating) the archive at ``path``.

    ``to_sync``: the caller syncs next, which resumes a killed first import and
    builds its deferred trigram index once at the end, so opening leaves it.
    """
    if foreign_file(path):
        raise StoreUnavailableError(
            "not-archive", str(path), "a database that is not Recall's: Recall never writes to it"
        )
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    return SessionStore(path, finish_index=not to_sync)


def archive_files(path: Path) -> tuple[Path, Path]:
    """The archive and its ``-wal``: what a sync writes (the ``-shm`` is only mapped)."""
    return path, Path(f"{path}-wal")


def file_identity(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path``; None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def reopen_archive(store: SessionStore) -> tuple[SessionStore, bool]:
    """The archive ``store`` has open is no longer the file at its path: reopen that path,
    and whether the open copy was written back first.

    Deleted (its folder removed while Recall ran): the copy still open is the only one
    left, and it holds sessions Hermes may have pruned since, so it is written back to
    the path (SQLite's backup API, the folder made anew) rather than imported afresh.
    Another file there (a backup restored): that file is the archive now. When the
    folder cannot be made, this raises and ``store`` stays open for the next try.
    """
    path = store.path
    restored = file_identity(path) is None
    if restored:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        incoming = path.with_name(f"{path.name}.restoring-{os.getpid()}")
        try:
            with closing(sqlite3.connect(incoming)) as copy:
                store.core.conn.backup(copy)
            os.replace(incoming, path)
        finally:
            incoming.unlink(missing_ok=True)
    store.close()
    return open_archive(path, to_sync=True), restored


def holds_home(path: Path, home_root: Path) -> bool:
    """Whether the archive at ``path`` holds rows of the home at ``home_root``, read
    without writing (for an archive its syncer cannot open: a read-only folder)."""
    try:
        conn = open_own_readonly(path, timeout=0, io_retries=0)
    except StoreUnavailableError:
        return False
    try:
        row = conn.execute(
            "SELECT 1 FROM sessions WHERE src_home=? LIMIT 1", (source_key(home_root),)
        ).fetchone()
        return row is not None
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def foreign_file(path: Path) -> bool:
    """Whether ``path`` holds someone else's database (tables, no Recall schema): a Hermes
    ``state.db`` given as ``--archive``. Recall never migrates such a file into an archive
    or syncs into it. A missing, empty or unreadable file is not foreign: opening it
    creates or explains it."""
    return _recall_schema(path) == (0, True)


def _recall_schema(path: Path) -> tuple[int, bool] | None:
    """Recall's schema version of the file at ``path`` (0: none) and whether it has any
    table; None when there is no file or it cannot be read now. The one look that
    :func:`foreign_file`, :func:`read_choice` and :func:`migrate_own_store` share."""
    if not Path(path).is_file():
        return None
    try:
        conn = open_readonly(path, timeout=0, io_retries=0)
    except StoreUnavailableError:
        return None
    try:
        tables = conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is not None
        return current_version(conn), tables
    except sqlite3.Error:
        return None
    finally:
        conn.close()


@dataclass(frozen=True)
class ArchiveStatus:
    """What ``recall archive status`` prints."""

    archive: str
    archive_bytes: int
    sessions: int
    messages: int
    usage_rows: int
    from_home: dict[str, int]
    last_sync: dict[str, Any] | None
    in_progress: dict[str, Any] | None
    source: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def archive_status(archive: SessionStore, home: HermesHome) -> ArchiveStatus:
    """Counts in the archive (all, and from this home), last sync, the source's layout."""
    conn = archive.core.conn
    key = source_key(home.root)
    counts = {
        table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in ("sessions", "messages", "session_model_usage")
    }
    from_home = {
        table: conn.execute(f"SELECT count(*) FROM {table} WHERE src_home=?", (key,)).fetchone()[0]
        for table in ("sessions", "messages", "session_model_usage")
    }
    row = conn.execute("SELECT value FROM state_meta WHERE key=?", (LAST_SYNC_PREFIX + key,))
    last = row.fetchone()
    return ArchiveStatus(
        archive=str(archive.path),
        archive_bytes=_size(archive.path),
        sessions=counts["sessions"],
        messages=counts["messages"],
        usage_rows=counts["session_model_usage"],
        from_home=from_home,
        last_sync=json.loads(last[0]) if last else None,
        in_progress=read_watermark(conn, key),
        source=_source(home),
    )


def _source(home: HermesHome) -> dict[str, Any] | None:
    """The source's layout and size (None when its state.db is missing)."""
    path = Path(home.state_db)
    if not path.is_file():
        return None
    conn = open_readonly(path)
    try:
        layout = detect_layout(conn, path)
        sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
    finally:
        conn.close()
    return {"path": str(path), "bytes": _size(path), "sessions": sessions, **layout.summary()}


def _size(path: Path) -> int:
    """Bytes of a SQLite file with its WAL."""
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


@dataclass(frozen=True)
class ReadChoice:
    """What the pages, the API and the CLI read for a home, and what fills it.

    ``path`` is the store every reader opens. ``archive`` is the archive a syncer
    keeps in step with ``source`` (None when the home's own state.db is Recall's
    store: it is then the archive, read directly, with nothing to copy).
    """

    path: Path
    source: Path
    archive: Path | None
    note: str | None = None  # datadir's line about moved data

    @property
    def synced(self) -> bool:
        return self.archive is not None


def read_choice(
    home: HermesHome,
    explicit: str | os.PathLike[str] | None = None,
    *,
    folder: str | os.PathLike[str] | None = None,
    will_create: bool = False,
    own: bool = True,
) -> ReadChoice:
    """The one rule for what is read: the home's own store if it is Recall's, else the archive.

    An explicit archive (``--archive``) is always used, even over a Recall store (a
    benchmark or a test keeping the source apart from its copy). A source that cannot
    be read now (missing, locked, damaged) gets the archive: it holds what was seen
    before, and the syncer says what is wrong with the source. ``will_create``: the
    caller (an agent embedding Recall) makes Recall's store there if it is missing.
    ``own=False`` (a home with profiles): the archive, which holds every profile.
    """
    source = Path(home.state_db)
    own = own and not explicit  # ``own``: False when the home has profiles to archive too
    if own and (_is_recall_store(source) or (will_create and not source.exists())):
        return ReadChoice(source, source, None)
    target, note = archive_path(home, explicit, folder)
    return ReadChoice(target, source, target, note)


def migrate_own_store(path: Path) -> None:
    """Bring a home's own Recall store (read directly, as its archive) to the schema the
    pages read. Recall owns that file; one written by an older Recall is migrated
    (backed up first, schema.migrate). A file that cannot be opened for writing is left
    alone: reading it then says why (StoreUnavailableError "not-archive")."""
    found = _recall_schema(path)
    behind = found is not None and 0 < found[0] < LATEST_VERSION
    if behind:
        try:
            SessionStore(path).close()
        except (sqlite3.Error, OSError):
            return


def _is_recall_store(path: Path) -> bool:
    """Whether ``path`` is a readable Recall store (the demo home, an agent embedding Recall)."""
    found = _recall_schema(path)
    return found is not None and found[0] > 0
