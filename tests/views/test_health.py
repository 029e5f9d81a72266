"""The syncer on the pages: the first import's banner, partial-data notices, /healthz."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask

from dashboard.archive.importer import Progress
from dashboard.archive.syncer import Syncer
from tests.support import hermes_shapes as shapes
from tests.support.app import make_app
from tests.support.waiting import wait_for


@pytest.fixture
def importing(tmp_path: Path) -> Iterator[tuple[Flask, Syncer, threading.Event]]:
    """An app whose background syncer is held after its third batch of a first import."""
    yield from _held_import(tmp_path, 3)


@pytest.fixture
def starting(tmp_path: Path) -> Iterator[tuple[Flask, Syncer, threading.Event]]:
    """The same, held before its first batch: nothing is in the archive yet."""
    yield from _held_import(tmp_path, 0)


def _held_import(tmp_path: Path, at: int) -> Iterator[tuple[Flask, Syncer, threading.Event]]:
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    app = make_app(home, tmp_path / "data", SYNC="background")
    syncer = app.extensions["recall.syncer"]
    syncer.batch_sessions = 1
    go_on = threading.Event()

    def hold(p: Progress) -> None:
        if p.sessions_done == at:
            go_on.wait(30)

    syncer.on_progress = hold
    syncer.start()
    wait_for(lambda: syncer.state().importing and syncer.state().sessions_done == at)
    try:
        yield app, syncer, go_on
    finally:
        go_on.set()
        syncer.stop()


def test_every_page_shows_the_import_banner_until_it_is_done(importing) -> None:
    app, syncer, go_on = importing
    client = app.test_client()
    percent = 3 * 100 // len(shapes.SESSION_IDS)
    for path in ("/", "/overview", "/costs", "/chains", "/memory", "/nope"):
        html = client.get(path).get_data(as_text=True)
        assert f"Importing your history: {percent}%" in html, path
        assert "older sessions are still arriving" in html
    banner = client.get("/sync/banner").get_data(as_text=True)
    assert banner.lstrip().startswith('<div id="sync-banner"')
    assert 'hx-trigger="every 2s"' in banner and 'hx-swap="outerHTML"' in banner
    assert client.get("/healthz").json["sync"]["importing"] is True
    go_on.set()
    wait_for(lambda: not syncer.state().importing and syncer.state().last_sync_at)
    done = client.get("/sync/banner").get_data(as_text=True)
    assert "Importing" not in done and "hx-trigger" not in done  # the polling stops
    assert "Importing your history" not in client.get("/").get_data(as_text=True)


def test_results_and_costs_on_partial_data_say_so(importing) -> None:
    app, syncer, go_on = importing
    client = app.test_client()
    notice = "Older history is still being imported"
    assert notice in client.get("/?q=pool").get_data(as_text=True)
    partial = client.get("/?q=pool", headers={"HX-Request": "true", "HX-Target": "results"})
    assert notice in partial.get_data(as_text=True)  # live search keeps saying it
    assert notice in client.get("/costs").get_data(as_text=True)
    go_on.set()
    wait_for(lambda: syncer.state().last_sync_at)
    assert notice not in client.get("/?q=pool").get_data(as_text=True)
    assert notice not in client.get("/costs").get_data(as_text=True)


def test_an_empty_archive_during_the_import_is_not_called_an_empty_home(starting) -> None:
    app, _, _ = starting
    html = app.test_client().get("/?q=pool").get_data(as_text=True)
    assert "Nothing has reached Recall's archive yet" in html
    assert "This home has no conversations yet" not in html


def test_healthz_tells_the_syncer_and_the_source_apart(tmp_path: Path) -> None:
    home = tmp_path / "home"
    db = shapes.build_current_views(home / "state.db")
    client = make_app(home, tmp_path / "data").test_client()
    body = client.get("/healthz").json
    assert body["status"] == "ok" and body["source_ok"] is True
    assert body["sync"]["imported"] and body["sync"]["last_sync_at"]
    for side in ("-wal", "-shm"):
        Path(f"{db}{side}").unlink(missing_ok=True)
    db.unlink()  # Hermes's file is gone: the archive still answers, health says both
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json["source_ok"] is False
    assert response.json["sync"]["reason"] == "missing"
    # Not a plain "ok": the pages answer, but Hermes's newest history is not arriving.
    assert response.json["status"] == "degraded"
    assert str(db) in response.json["problem"] and "missing" in response.json["problem"]
    assert "cannot be read right now" in client.get("/").get_data(as_text=True)
    assert client.get("/api/search?q=pool").json["results"]


def test_a_recall_store_home_is_read_directly_with_no_syncer(tmp_path: Path) -> None:
    from dashboard.demo.build import build_demo_home

    report = build_demo_home(tmp_path / "demo", sessions=8, messages=100, anchor_day="2026-11-30")
    app = make_app(report.home, tmp_path / "data")
    assert app.extensions["recall.syncer"] is None
    assert app.extensions["recall.reader"].path == Path(report.home) / "state.db"
    body = app.test_client().get("/healthz").json
    assert "sync" not in body and body["status"] == "ok"
    html = app.test_client().get("/overview").get_data(as_text=True)
    assert "it is the archive: read directly" in html
