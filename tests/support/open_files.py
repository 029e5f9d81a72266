"""Which files a process holds open (Linux: ``/proc/<pid>/fd``): how tests check that
Recall keeps nothing of a source open between passes."""

from __future__ import annotations

import os
from pathlib import Path


def open_files(pid: int | str = "self") -> set[str]:
    """The paths process ``pid`` (default: this one) holds open."""
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            found.add(os.readlink(fd))
        except OSError:
            continue  # closed while listed
    return found


def held_source_files(pid: int | str, db: Path) -> list[str]:
    """The source's files (``state.db``, ``-wal``, ``-shm``, ``-journal``) ``pid`` has open."""
    return sorted(path for path in open_files(pid) if path.startswith(str(db)))
