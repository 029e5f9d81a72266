"""What a reader knows of the store it reads: Recall's archive, or a refusal that says so."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dashboard.errors import StoreUnavailableError
from dashboard.hermes.home import HermesHome
from dashboard.reader.reader import StateReader
from dashboard.search.sessions import SearchRequest
from dashboard.store.readonly import open_readonly
from dashboard.store.state import read_state
from tests.support import hermes_shapes as shapes
from tests.support.archived import archive_home


@pytest.mark.parametrize("shape", sorted(shapes.SHAPES))
def test_a_hermes_file_is_refused_as_not_an_archive(tmp_path: Path, shape: str) -> None:
    db = shapes.SHAPES[shape](tmp_path / "home" / "state.db")
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    reader = StateReader(HermesHome(tmp_path / "home"))
    for read in (
        lambda: reader.search(SearchRequest(query="pool")),
        lambda: reader.search_page(None),
        lambda: reader.matching_messages(shapes.S_ROOT, "pool"),
    ):
        with pytest.raises(StoreUnavailableError) as caught:
            read()
        assert caught.value.reason == "not-archive" and caught.value.path == str(db)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_the_archive_of_a_hermes_file_is_read(tmp_path: Path) -> None:
    shapes.build_current_views(tmp_path / "home" / "state.db")
    path = archive_home(tmp_path / "home")
    conn = open_readonly(path)
    try:
        state = read_state(conn, path)
    finally:
        conn.close()
    assert state.trigram_ready and not state.is_demo and state.path == str(path)
