"""Shared fixtures: real files on disk, real processes, no mocks."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes
from tests.support.app import make_app
from tests.support.llm_stub import StubLLM


@pytest.fixture(scope="session", autouse=True)
def _recall_data_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Recall's default data directory (XDG) inside pytest's temp folder, never the user's.

    Set in the environment, so every ``recall serve`` a test starts inherits it.
    """
    previous = os.environ.get("XDG_DATA_HOME")
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data"))
    yield
    if previous is None:
        os.environ.pop("XDG_DATA_HOME", None)
    else:
        os.environ["XDG_DATA_HOME"] = previous


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    """A fresh Recall store (WAL, latest schema) in a temp folder."""
    with SessionStore(tmp_path / "state.db") as s:
        yield s


@pytest.fixture
def hermes_home(tmp_path: Path) -> Path:
    """A Hermes home holding a current-form state.db (with un-checkpointed WAL frames)."""
    home = tmp_path / "hermes"
    hermes_shapes.build_current_views(home / "state.db")
    return home


@pytest.fixture
def app(hermes_home: Path, tmp_path: Path) -> Flask:
    return make_app(hermes_home, tmp_path / "data")


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def llm_stub() -> Iterator[StubLLM]:
    """A fast, well-behaved OpenAI-compatible server on loopback."""
    with StubLLM() as stub:
        yield stub
