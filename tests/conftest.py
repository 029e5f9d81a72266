"""Shared fixtures: real files on disk, real processes, no mocks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dashboard.repository.store import SessionStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    """A fresh Recall store (WAL, latest schema) in a temp folder."""
    with SessionStore(tmp_path / "state.db") as s:
        yield s
