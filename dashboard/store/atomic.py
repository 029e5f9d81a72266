"""A file replaced whole or not at all: a reader sees the old bytes or the new, never part.

The one way Recall writes a file someone else reads (USER.md / MEMORY.md, prices.yaml,
the intent of an approval): a temp file in the same folder (``.<name>.*.tmp``), fsync,
``os.replace``, then the folder fsynced so the rename survives a power cut.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

NEW_FILE_MODE = 0o600


def mode_of(path: Path, default: int = NEW_FILE_MODE) -> int:
    """``path``'s permission bits, to keep them across a replace; ``default`` when new."""
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        return default


def temp_prefix(path: Path) -> str:
    return f".{path.name}."


def remove_stale_temp_files(path: Path) -> None:
    """Delete temp files a killed write of ``path`` left behind (``.<name>.*.tmp``).

    Call it under the lock that serialises writes of ``path``: no write is making one
    then, so any such file is a leftover; ``path`` itself was never touched by it.
    """
    for stale in path.parent.glob(temp_prefix(path) + "*.tmp"):
        stale.unlink(missing_ok=True)


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` (see the module); ``mode`` defaults to the file's own."""
    mode = mode_of(path) if mode is None else mode
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    sync_folder(path.parent)


def sync_folder(folder: Path) -> None:
    """fsync ``folder``: its renames and removals outlast a power cut."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
