"""The search page in real Chromium: live results, URL state, Back, untrusted text."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from dashboard.repository.store import NewMessage, SessionStore
from tests.browser_support import SCREENSHOTS, PageWatch, Server, running_server

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'


def test_typing_updates_results_without_a_page_load(demo_server: Server, page) -> None:
    watch = PageWatch()
    watch.attach(page)
    page.goto(demo_server.url + "/")
    assert "most recent first" in page.locator("#results").inner_text()
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads

    box = page.locator("#q")
    box.fill("redis")
    page.wait_for_url("**/?*q=redis*")
    page.wait_for_selector("#results .card mark")
    assert page.evaluate("window.__sameDocument") is True
    assert "word index" in page.locator(".result-meta").inner_text()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "search-results.png"), full_page=False)

    box.fill("docker")
    page.wait_for_url("**/?*q=docker*")
    expect(page.locator("#results mark").first).to_have_text(re.compile("docker", re.I))

    page.go_back()
    page.wait_for_url("**/?*q=redis*")
    expect(page.locator("#q")).to_have_value("redis")
    expect(page.locator("#results mark").first).to_have_text(re.compile("redis", re.I))
    assert watch.problems == []


def test_filters_and_pages_keep_the_url(demo_server: Server, page) -> None:
    page.goto(demo_server.url + "/?q=the&sort=newest")
    assert page.locator("input[name=sort][value=newest]").is_checked()
    next_link = page.locator(".pager a[rel=next]")
    if next_link.count():
        next_link.click()
        page.wait_for_url("**page=2*")
        assert "sort=newest" in page.url and "q=the" in page.url


def test_unusable_query_shows_a_message(demo_server: Server, page) -> None:
    page.goto(demo_server.url + "/")
    page.locator("#q").fill("AND OR")
    page.wait_for_selector("#results .notice.error")
    assert "Nothing to search for" in page.locator("#results").inner_text()


def test_slash_focuses_the_search_box(demo_server: Server, page) -> None:
    page.goto(demo_server.url + "/overview")
    page.goto(demo_server.url + "/")
    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    root = tmp_path_factory.mktemp("hostile")
    with SessionStore(root / "home" / "state.db") as store:
        sid = store.create_session("cli", title=f"pwn {SCRIPT}")
        store.append_messages(sid, [
            NewMessage("user", f"xsscheck {SCRIPT} and {IMG} end"),
            NewMessage("assistant", f"Quoting it back: xsscheck `{SCRIPT}` {IMG}"),
        ])  # fmt: skip
    with running_server(["--home", str(Path(root / "home"))], root) as server:
        yield server, sid


def test_untrusted_text_stays_text(hostile_server: tuple[Server, str], page) -> None:
    server, sid = hostile_server
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(server.url + "/?q=xsscheck")
    page.wait_for_selector("#results .card mark")
    results = page.locator("#results").inner_text()
    assert SCRIPT in results and "onerror=alert(1)" in results
    assert (
        page.locator("#results img").count() == 0 and page.locator("#results script").count() == 0
    )
    page.goto(f"{server.url}/sessions/{sid}?q=xsscheck")
    transcript = page.locator("#transcript").inner_text()
    assert SCRIPT in transcript and "onerror=alert(1)" in transcript
    assert page.locator("#transcript img").count() == 0
    page.goto(server.url + "/")  # the title in the recent list
    assert SCRIPT in page.locator("#results").inner_text()
    assert dialogs == []


def test_a_summary_button_replaces_only_its_slot(tmp_path: Path, page) -> None:
    # A session id is data: "zz, #main" used as a CSS selector would target <main> too.
    sid = "zz, #main"
    with SessionStore(tmp_path / "home" / "state.db") as store:
        store.create_session("cli", session_id=sid, title="Selector trouble")
        store.append_messages(sid, [NewMessage("user", "walrus selector test")])
        other = store.create_session("cli", title="Another walrus")
        store.append_messages(other, [NewMessage("user", "walrus again")])
    args = ["--home", str(tmp_path / "home"), "--data-dir", str(tmp_path / "data")]
    with running_server(args, tmp_path) as server:
        page.goto(server.url + "/?q=walrus&summaries=button")
        expect(page.locator("#results .card")).to_have_count(2)
        card = page.locator(".card", has_text="Selector trouble")
        card.locator(".summary-button").click()
        expect(
            card.locator(".summary-slot .summary-label, .summary-slot .summary-text")
        ).to_have_count(1)
        expect(page.locator("main #results .card")).to_have_count(2)
        expect(page.locator("#search-form")).to_have_count(1)
        other_card = page.locator(".card", has_text="Another walrus")
        expect(other_card.locator(".summary-button")).to_have_count(1)
