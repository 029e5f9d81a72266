"""The first import's banner in real Chromium: it counts up without a reload, then goes."""

from __future__ import annotations

import re
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from dashboard.archive.files import open_archive
from dashboard.demo.build import build_demo_home
from tests.support.browser_support import SCREENSHOTS, PageWatch, running_server


def test_the_banner_updates_itself_during_the_first_import_and_then_goes(
    tmp_path: Path, page
) -> None:
    home = tmp_path / "home"
    build_demo_home(home, sessions=120, messages=12_000, anchor_day="2026-11-30", bulk=True)
    archive = tmp_path / "archive.db"
    args = ["--home", str(home), "--data-dir", str(tmp_path / "data"), "--archive", str(archive)]
    # The page must be rendered while the import runs, however fast the import goes on
    # this machine: the archive (Recall's own, empty) is write-locked by the test until
    # the page has come, so the import waits at its first transaction (it retries for
    # about 15 s before it would call the archive locked: the hold is one page's answer).
    open_archive(archive).close()
    with closing(sqlite3.connect(archive, timeout=30, isolation_level=None)) as hold:
        hold.execute("BEGIN IMMEDIATE")
        # Two sessions per transaction: a first import of 60 steps for the banner to show.
        env = {"RECALL_SYNC_BATCH": "2"}
        with running_server(args, tmp_path, env, wait_for_import=False) as s:
            _wait_until_importing(s.url)
            watch = PageWatch()
            watch.attach(page)
            response = page.goto(s.url + "/?q=deploy", wait_until="commit")
            rendered = response.text()
            hold.execute("ROLLBACK")  # the import goes on
            # What the page came with: read from its answer, not from the banner, which
            # may already have been replaced by its next poll.
            assert "Importing your history:" in rendered
            assert "older sessions are still arriving" in rendered
            assert "Older history is still being imported" in rendered
            first = _percent(rendered)
            expect(page.locator("#results .partial-data")).to_contain_text(
                "Older history is still being imported"
            )
            page.evaluate("window.stillThisPage = true")  # a reload would drop it
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "import-banner.png"))
            banner = page.locator("#sync-banner")
            expect(banner).not_to_contain_text(f"history: {first}%", timeout=60_000)
            assert page.evaluate("window.stillThisPage") is True
            expect(banner).to_be_hidden(timeout=120_000)  # done: it renders without a trigger
            assert page.evaluate("window.stillThisPage") is True
            assert watch.problems == []


def _wait_until_importing(url: str) -> None:
    """Until the syncer has begun the first import (it waits on the test's lock there)."""
    deadline = time.monotonic() + 60
    while not httpx.get(f"{url}/healthz", timeout=5.0).json()["sync"]["importing"]:
        assert time.monotonic() < deadline, "the first import did not begin"
        time.sleep(0.05)


def _percent(text: str) -> int:
    found = re.search(r"Importing your history: (\d+)%", text)
    if found is None:
        pytest.fail(f"no percentage in {text!r}")
    return int(found.group(1))
