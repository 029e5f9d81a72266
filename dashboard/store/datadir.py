"""Where Recall keeps its own data for a home: the user's data directory, never the home.

Recall's own files (the secret key, ``recall.db`` with the summary cache, memory
revisions and cost rollup) live in ``$XDG_DATA_HOME/recall/homes/<key>/`` (default
``~/.local/share/recall/homes/<key>/``), one folder per home, so two homes never
share a cache and nothing of Recall's lands in a folder that belongs to the agent.

Older Recalls wrote ``<home>/recall/``. The first run that finds one moves it to the
data directory: a rename on one filesystem (atomic; a Recall still running on the old
folder keeps writing to the same files), else a copy through SQLite's backup API
into a temporary folder renamed into place, then the old folder is removed. A folder
holding files Recall did not write, or a data directory that already holds data, is
left alone and said so.

The folder itself can fail while Recall runs: it is deleted, becomes read-only or its
disk fills. :func:`folder_fault` tells which, so every place that writes there (the
syncer, ``recall serve``, the pages' own file) names Recall's folder and what to do,
never a damaged Hermes ``state.db``.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from dashboard.errors import NotWritableError, StoreUnavailableError
from dashboard.hermes.home import HermesHome

LEGACY_FOLDER = "recall"  # what older Recalls wrote inside the home
# Everything Recall writes in a data directory (recall.db's backups before a migration
# are recall.db.v<N>-<stamp>.bak).
_OURS = re.compile(r"secret_key|recall\.db(?:-wal|-shm|-journal)?|recall\.db\.v\d+-[^/]*\.bak")
_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")  # folded into the copy by the backup API


def user_data_root() -> Path:
    """``$XDG_DATA_HOME/recall`` (if absolute, as the spec says), else ``~/.local/share/recall``."""
    base = os.environ.get("XDG_DATA_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "share"
    return root / "recall"


def data_dir_for(home: HermesHome) -> Path:
    """The home's own folder in the data directory: ``homes/<name>-<hash of its path>``."""
    where = Path(home.root).expanduser().resolve()
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", where.name).strip("-")[:40] or "home"
    digest = hashlib.sha256(str(where).encode()).hexdigest()[:12]
    return user_data_root() / "homes" / f"{name}-{digest}"


def recall_data_dir(
    home: HermesHome, explicit: str | os.PathLike[str] | None = None
) -> tuple[Path, str | None]:
    """The folder Recall's own data for ``home`` lives in, and a line to tell the user.

    ``explicit`` (``--data-dir``) is used as given. Otherwise :func:`data_dir_for`,
    after moving an old ``<home>/recall/`` there once; the line says what was moved or
    why it was left (None when there was nothing to do).
    """
    if explicit:
        return Path(explicit), None
    target = data_dir_for(home)
    return target, _adopt(Path(home.root) / LEGACY_FOLDER, target)


def _adopt(source: Path, target: Path) -> str | None:
    if source.is_symlink() or not source.is_dir():
        return None
    names = sorted(p.name for p in source.iterdir())
    strangers = [n for n in names if not _OURS.fullmatch(n)]
    if strangers:
        return (
            f"left {source} in place: it holds files Recall did not write "
            f"({', '.join(strangers[:5])}); Recall's data is now in {target}"
        )
    if target.exists() and any(target.iterdir()):
        return f"left {source} in place: {target} already holds Recall's data"
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        target.rmdir()  # empty: the rename needs the name free
    try:
        os.rename(source, target)
    except FileNotFoundError:
        return None  # another Recall starting at the same moment moved it
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            return f"could not move {source} to {target} ({exc.strerror}); it was left in place"
        _copy_across(source, target, names)
    return f"moved Recall's data from {source} to {target}"


def _copy_across(source: Path, target: Path, names: list[str]) -> None:
    """Another filesystem: copy into a temporary folder, rename it into place, remove the old."""
    incoming = target.with_name(f"{target.name}.incoming-{os.getpid()}")
    incoming.mkdir(mode=0o700)
    try:
        for name in names:
            if name.endswith(_SQLITE_SIDE_FILES):
                continue
            src, dst = source / name, incoming / name
            if name == "recall.db":
                # The backup API reads one consistent state, WAL frames included.
                with closing(sqlite3.connect(src)) as old, closing(sqlite3.connect(dst)) as new:
                    old.backup(new)
                os.chmod(dst, src.stat().st_mode & 0o777)
            else:
                shutil.copy2(src, dst)
            with open(dst, "rb") as handle:
                os.fsync(handle.fileno())
        os.rename(incoming, target)
    except BaseException:
        shutil.rmtree(incoming, ignore_errors=True)
        raise
    shutil.rmtree(source)


# SQLite's primary result codes that a write into a full or unwritable folder gives.
_SQLITE_FULL = 13
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# Below this much free space a folder counts as full even without an error saying so:
# one sync pass of a busy home writes a few pages of WAL (4 KiB each) and an index merge.
FULL_BELOW_BYTES = 256 * 1024
FOLDER_REASONS = ("folder-missing", "folder-readonly", "folder-full")


@dataclass(frozen=True)
class FolderFault:
    """What is wrong with one of Recall's own folders: ``missing``, ``readonly`` or ``full``."""

    kind: str
    folder: Path
    detail: str = ""

    @property
    def reason(self) -> str:
        """:meth:`error`'s reason: ``folder-missing``, ``folder-readonly``, ``folder-full``."""
        return f"folder-{self.kind}"

    @property
    def sentence(self) -> str:
        """The one line a person reads: the folder, what it stops and what to do."""
        where = f"Recall's data folder {self.folder}"
        if self.kind == "missing":
            return (
                f"{where} is gone: Recall can't save its archive there. Start Recall "
                "again (it makes the folder anew), or start it with --data-dir on another folder"
            )
        if self.kind == "full":
            return (
                f"{where} is on a full disk: Recall can't save new history to its archive. "
                "Free some space there, or start Recall with --data-dir on another disk"
            )
        return (
            f"{where} is read-only: Recall can't save its archive there. Make it "
            "writable, or start Recall with --data-dir on a writable folder"
        )

    def error(self) -> StoreUnavailableError:
        """The error a page answers with while nothing can be read because of this."""
        return StoreUnavailableError(self.reason, str(self.folder), self.sentence)


def folder_fault(
    folder: str | os.PathLike[str],
    files: Sequence[str | os.PathLike[str]] = (),
    error: BaseException | None = None,
) -> FolderFault | None:
    """What keeps Recall from writing in ``folder`` now (None: nothing seen).

    ``files`` are Recall's files there that must stay writable (an archive and its
    ``-wal``); ``error`` the failure that made the caller look (a write saying the disk
    is full is believed even when some space has come back since). Looks only: creates
    nothing, and costs a few ``stat`` calls, so callers ask after a failure.
    """
    where = Path(folder)
    if not where.is_dir():
        return FolderFault("missing", where, "no such folder")
    if _says_full(error):
        return FolderFault("full", where, str(error))
    # access() answers for this process: root too is refused a read-only mount or an
    # immutable file, and a user without write permission is refused the folder.
    unwritable = [p for p in (where, *map(Path, files)) if p.exists() and not _writable(p)]
    if unwritable:
        return FolderFault("readonly", where, f"not writable: {unwritable[0]}")
    try:
        room = os.statvfs(where)
    except OSError:
        return None
    free = room.f_bavail * room.f_frsize
    if free < FULL_BELOW_BYTES:
        return FolderFault("full", where, f"{free:,} bytes free")
    return None


def _writable(path: Path) -> bool:
    mode = os.W_OK | (os.X_OK if path.is_dir() else 0)
    return os.access(path, mode)


def _says_full(error: BaseException | None) -> bool:
    if isinstance(error, OSError):
        return error.errno in _FULL_ERRNOS
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == _SQLITE_FULL


def unwritable(path: str | os.PathLike[str], error: BaseException) -> NotWritableError | None:
    """``error`` (a failed write of Recall's file ``path``) as its folder's fault, or None
    when the folder looks fine (then the error is something else: raise it as it is)."""
    where = Path(path)
    fault = folder_fault(where.parent, (where, Path(f"{where}-wal")), error)
    if fault is None:
        return None
    return NotWritableError(f"{fault.sentence}. Nothing was saved.", str(fault.folder))
