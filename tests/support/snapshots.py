"""Count the read snapshots a screen opens: each screen reads through exactly one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from dashboard.reader.reader import Snapshot, StateReader


def count_snapshots(monkeypatch: pytest.MonkeyPatch) -> list[StateReader]:
    """Wrap :meth:`StateReader.snapshot` so each one opened is recorded (by its reader)
    in the list returned; ``del opened[:]`` between screens."""
    opened: list[StateReader] = []
    original = StateReader.snapshot

    @contextmanager
    def counted(self: StateReader, **options: bool) -> Iterator[Snapshot]:
        opened.append(self)
        with original(self, **options) as snap:
            yield snap

    monkeypatch.setattr(StateReader, "snapshot", counted)
    return opened
