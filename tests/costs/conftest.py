"""Fixtures of the cost tests: Recall's own file, where the rollup keeps its sums."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dashboard.store.recalldb import RecallData


@pytest.fixture
def data(tmp_path: Path) -> Iterator[RecallData]:
    recall = RecallData(tmp_path / "recall" / "recall.db")
    yield recall
    recall.close()
