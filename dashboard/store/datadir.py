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
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

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
