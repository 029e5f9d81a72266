"""Browser fixtures: one demo server and one Chromium for the whole browser suite."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from dashboard.store.readonly import readonly_uri
from tests.support.browser_support import CHROMIUM, CHROMIUM_ARGS, Server, running_server
from tests.support.demo_homes import demo_home_copy


@pytest.fixture(scope="session")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``recall serve`` with no Hermes home: it serves the demo home in its data dir."""
    root = tmp_path_factory.mktemp("browser")
    data_dir = root / "data"
    # Built here, smaller than the default, so the suite stays quick; serve finds it.
    demo_home_copy(
        tmp_path_factory,
        data_dir / "demo-home",
        sessions=120,
        messages=4000,
        anchor_day="2026-11-30",
    )
    env = {"HOME": str(root / "user"), "HERMES_HOME": ""}
    with running_server(["--data-dir", str(data_dir)], root, env) as server:
        yield server


@pytest.fixture(scope="session")
def demo_sessions(demo_server: Server) -> dict[str, str]:
    """A few session ids of the demo home, read straight from its state.db (read-only).

    ``middle``: a compaction segment with a previous and a next segment and tool calls.
    """
    # demo_server serves <root>/data/demo-home and logs into <root>.
    db = demo_server.log.parent / "data" / "demo-home" / "state.db"
    with closing(sqlite3.connect(readonly_uri(db), uri=True)) as conn:
        (middle,) = conn.execute(
            "SELECT s.id FROM sessions s JOIN sessions p ON p.id = s.parent_session_id"
            " WHERE p.end_reason = 'compression' AND s.end_reason = 'compression'"
            " AND EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id"
            "             AND m.tool_calls IS NOT NULL)"
            " ORDER BY s.message_count DESC, s.id LIMIT 1"
        ).fetchone()
    return {"middle": middle}


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium package")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        yield page
    finally:
        context.close()


@pytest.fixture
def nojs_page(browser) -> Iterator[object]:
    """A page with JavaScript off: every screen must work as plain links and forms."""
    context = browser.new_context(
        java_script_enabled=False, viewport={"width": 1280, "height": 900}
    )
    page = context.new_page()
    try:
        yield page
    finally:
        context.close()
