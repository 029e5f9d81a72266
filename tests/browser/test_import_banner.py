"""The first import's banner in real Chromium: it counts up without a reload, then goes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from dashboard.demo.build import build_demo_home
from tests.support.browser_support import SCREENSHOTS, PageWatch, running_server


def test_the_banner_updates_itself_during_the_first_import_and_then_goes(
    tmp_path: Path, page
) -> None:
    home = tmp_path / "home"
    build_demo_home(home, sessions=240, messages=24_000, anchor_day="2026-11-30", bulk=True)
    args = [
        "--home",
        str(home),
        "--data-dir",
        str(tmp_path / "data"),
        "--archive",
        str(tmp_path / "archive.db"),
    ]  # the source is not the archive
    # Two sessions per transaction: a first import of many steps, long enough to watch.
    with running_server(args, tmp_path, {"RECALL_SYNC_BATCH": "2"}, wait_for_import=False) as s:
        watch = PageWatch()
        watch.attach(page)
        page.goto(s.url + "/?q=deploy")
        banner = page.locator("#sync-banner")
        expect(banner).to_contain_text("Importing your history:")
        expect(banner).to_contain_text("older sessions are still arriving")
        expect(page.locator("#results .partial-data")).to_contain_text(
            "Older history is still being imported"
        )
        page.evaluate("window.stillThisPage = true")  # a reload would drop it
        first = _percent(banner.inner_text())
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "import-banner.png"))
        expect(banner).not_to_contain_text(f"history: {first}%", timeout=60_000)
        assert page.evaluate("window.stillThisPage") is True
        expect(banner).to_be_hidden(timeout=120_000)  # done: it renders without a trigger
        assert page.evaluate("window.stillThisPage") is True
        assert watch.problems == []


def _percent(text: str) -> int:
    found = re.search(r"Importing your history: (\d+)%", text)
    if found is None:
        pytest.fail(f"no percentage in {text!r}")
    return int(found.group(1))
