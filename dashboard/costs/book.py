"""The price book every cost figure of this process is recomputed from.

One book per process: the pinned table and the overrides of the data directory's
``prices.yaml`` (``recall serve`` and the CLI name the directory at start). The file is
read again when its stat changes, so a save on the page or by hand is seen by the next
question; the book's version then changes, and the caches keyed on it (the spend
answers, the rollup) follow. A file that cannot be read leaves the table alone in use
and :attr:`PriceBook.problem` says why, on every page that shows a recomputed figure.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from dashboard.costs import overrides
from dashboard.costs.prices import PriceBook
from dashboard.errors import ValidationError

_lock = threading.Lock()
_folder: Path | None = None
_book: PriceBook | None = None
_stamp: tuple[int, int, int] | None = None


def configure(data_dir: Path | None) -> None:
    """Read overrides from ``data_dir``'s prices.yaml from now on (None: the table only)."""
    global _folder, _book, _stamp
    with _lock:
        _folder, _book, _stamp = data_dir, None, None


def overrides_path() -> Path | None:
    """Where this process reads prices.yaml, if anywhere."""
    return None if _folder is None else _folder / overrides.FILE_NAME


def current_book() -> PriceBook:
    """The book of the overrides on disk now (the same object while the file is unchanged)."""
    global _book, _stamp
    path = overrides_path()
    stamp = _stat(path)
    with _lock:
        if _book is not None and stamp == _stamp:
            return _book
        book = PriceBook()
        if path is not None and stamp is not None:
            try:
                book = PriceBook(overrides.load(path.parent))
            except ValidationError as exc:
                book = PriceBook(problem=f"{exc}; prices from the table alone until it is fixed")
        _book, _stamp = book, stamp
        return book


def _stat(path: Path | None) -> tuple[int, int, int] | None:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)
