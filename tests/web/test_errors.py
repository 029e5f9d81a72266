"""Error pages: each failure a person can meet explained as what it is."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from dashboard.errors import (
    ConflictError,
    NotFoundError,
    RecallError,
    StoreUnavailableError,
    ValidationError,
)
from dashboard.memory.files import MemoryConflict, MemoryLockTimeout
from dashboard.reader.reader import StateReader
from dashboard.web.errors import status_for
from tests.support import hermes_shapes as shapes
from tests.support.app import make_app


def test_a_hot_journal_is_explained_as_a_rollback_recall_cannot_do(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shapes.build_hot_journal(home / "state.db")
    client = make_app(home, tmp_path / "data").test_client()
    for path in ("/", "/overview", "/costs"):
        response = client.get(path)
        assert response.status_code == 503, path
        page = response.get_data(as_text=True)
        assert "state.db-journal" in page and "interrupted" in page and "read-only" in page
        assert "is not damaged" in page and "(corrupt)" not in page
    body = client.get("/api/search?q=pool").json
    assert body["reason"] == "rollback"


def test_a_read_only_folder_is_explained_as_permissions(tmp_path: Path) -> None:
    # Met before anything was archived: the page explains the source's problem.
    db = shapes.build_seed_inline(tmp_path / "home" / "state.db")
    with shapes.read_only(db, db.parent):
        client = make_app(db.parent, tmp_path / "data").test_client()
        response = client.get("/overview")
    page = response.get_data(as_text=True)
    assert response.status_code == 503
    assert "read-only" in page and "state.db-shm" in page and "(corrupt)" not in page


def test_a_read_only_folder_after_the_import_leaves_the_archive_answering(
    tmp_path: Path,
) -> None:
    db = shapes.build_seed_inline(tmp_path / "home" / "state.db")
    client = make_app(db.parent, tmp_path / "data").test_client()
    with shapes.read_only(db, db.parent):
        response = client.get("/overview")
        search = client.get("/api/search?q=pool")
    # The first import left the source's -shm behind, so the source still reads; the
    # pages answer from the archive either way.
    assert response.status_code == 200 and search.json["results"]
    assert "(corrupt)" not in response.get_data(as_text=True)


def test_an_archive_that_is_a_hermes_file_is_explained_and_never_written(
    tmp_path: Path,
) -> None:
    # `recall serve --archive` given another home's state.db by mistake.
    home = tmp_path / "home"
    shapes.build_seed_inline(home / "state.db")
    other = shapes.build_current_views(tmp_path / "other" / "state.db")
    files = [other, other.with_name("state.db-wal")]
    before = [_digest(f) for f in files]
    client = make_app(home, tmp_path / "data", ARCHIVE=str(other)).test_client()
    for path in ("/", "/?q=pool", "/overview", "/costs", f"/sessions/{shapes.S_ROOT}"):
        response = client.get(path)
        page = response.get_data(as_text=True)
        # Not a server bug, and nothing that passes by retrying: 503 without Retry-After.
        assert response.status_code == 503, path
        assert "Retry-After" not in response.headers
        assert "(not-archive)" in page and str(other) in page, path
        assert "This file is not Recall&#39;s archive" in page and "(corrupt)" not in page
    body = client.get("/api/search?q=pool").json
    assert body["reason"] == "not-archive"
    assert [_digest(f) for f in files] == before


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def test_one_status_table_for_pages_and_the_json_api(
    client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The JSON API used to answer 503 for a conflict the page answered 409.
    for error, status in (
        (ConflictError("someone else changed it"), 409),
        (MemoryConflict("USER.md", theirs="a", yours="b", base_sha256="c", their_sha256="d"), 409),
        (MemoryLockTimeout("USER.md is being saved by another writer"), 503),
        (NotFoundError("no such session"), 404),
        (ValidationError("bad"), 400),
        (StoreUnavailableError("locked", "state.db"), 503),
        (StoreUnavailableError("missing", "state.db"), 500),
        (RecallError("anything else"), 500),
    ):

        def fail(self: StateReader, session_id: str, exc: Exception = error) -> None:
            raise exc

        monkeypatch.setattr(StateReader, "chain_page", fail)
        page = client.get(f"/chains/{shapes.S_ROOT}")
        api = client.get(f"/api/chains/{shapes.S_ROOT}")
        assert page.status_code == api.status_code == status == status_for(error)[0], error
        assert page.mimetype == "text/html" and api.mimetype == "application/json"
        assert api.json["error"] == str(error)
        assert (page.headers.get("Retry-After") is not None) == (status == 503)
        assert api.headers.get("Retry-After") == page.headers.get("Retry-After")
