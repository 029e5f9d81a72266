"""Browser fixtures: one demo server and one Chromium for the whole browser suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dashboard.demo.build import build_demo_home
from tests.browser_support import CHROMIUM, CHROMIUM_ARGS, Server, running_server


@pytest.fixture(scope="session")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``recall serve`` with no Hermes home: it serves the demo home in its data dir."""
    root = tmp_path_factory.mktemp("browser")
    data_dir = root / "data"
    # Built here, smaller than the default, so the suite stays quick; serve finds it.
    build_demo_home(data_dir / "demo-home", sessions=120, messages=4000, anchor_day="2026-11-30")
    env = {"HOME": str(root / "user"), "HERMES_HOME": ""}
    with running_server(["--data-dir", str(data_dir)], root, env) as server:
        yield server


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
