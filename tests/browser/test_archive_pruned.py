"""In real Chromium, against a real ``recall serve`` and its syncer: Hermes prunes a session
while its page is open, and the page still opens — from the archive, with its badge."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import httpx
from playwright.sync_api import expect

from dashboard.hermes.home import HermesHome
from tests.support import hermes_shapes as shapes
from tests.support.browser_support import PageWatch, running_server
from tests.support.pruned_homes import prune_from_source

SYNC_WAIT_S = 60  # a loaded machine; the syncer polls every 500 ms


def _synced_after(url: str, since: float) -> None:
    """Wait until the server's syncer finished a sync that started after ``since``."""
    deadline = time.monotonic() + SYNC_WAIT_S
    while time.monotonic() < deadline:
        sync = httpx.get(f"{url}/healthz", timeout=5).json()["sync"]
        if sync["last_sync_at"] and sync["last_sync_at"] > since and not sync["running"]:
            return
        time.sleep(0.2)
    raise TimeoutError("the syncer did not pick up the prune")


def test_a_session_pruned_while_its_page_is_open_still_opens_with_its_badge(
    tmp_path: Path, page
) -> None:
    now = time.time()
    ids = shapes.build_prune_home(tmp_path / "home", now)
    home = HermesHome(tmp_path / "home")
    doomed = ids["old"]  # ended, 40 days old: the next sweep's
    watch = PageWatch()
    watch.attach(page)
    args = ["--home", str(home.root), "--data-dir", str(tmp_path / "data")]
    env = {"RECALL_ARCHIVE": str(tmp_path / "archive.db")}
    with running_server(args, tmp_path, env) as server:
        page.goto(f"{server.url}/sessions/{doomed}")
        expect(page.locator("h1")).to_be_visible()
        expect(page.locator(".tag-gone")).to_have_count(0)  # Hermes still has it
        title = page.locator("h1").inner_text()

        pruned_at = time.time()
        prune_from_source(home, doomed)  # Hermes's sweep, while the page is open
        _synced_after(server.url, pruned_at)

        page.reload()
        expect(page.locator("h1")).to_have_text(title)
        day = datetime.fromtimestamp(pruned_at).strftime("%Y-%m-%d")
        expect(page.locator(".tag-gone")).to_have_text(
            f"deleted from Hermes on {day} — kept in Recall's archive"
        )
        # Its messages are still there, and search still finds it, marked.
        expect(page.locator("li.msg").first).to_contain_text("turn 0 redis")
        page.goto(f"{server.url}/?q=redis&presence=archive")
        expect(page.locator(f'a[href^="/sessions/{doomed}"]').first).to_be_visible()
    assert watch.problems == []
