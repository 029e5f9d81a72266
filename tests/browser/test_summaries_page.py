"""Summaries in real Chromium: results first, then each card's recap fills in."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from tests.support.browser_support import SCREENSHOTS, PageWatch, Server, running_server
from tests.support.llm_stub import StubLLM

SECRET = "sk-browser-test-never-shown-91c3"


@pytest.fixture(scope="module")
def summarizing_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Server, StubLLM]]:
    root = tmp_path_factory.mktemp("summaries")
    with SessionStore(root / "home" / "state.db") as store:
        for i in range(6):
            sid = store.create_session("cli", title=f"Redis pool incident {i}")
            store.append_messages(
                sid,
                [
                    NewMessage("user", f"redis pool exhausted on worker-{i}, ECONNREFUSED"),
                    NewMessage("assistant", "Share one BlockingConnectionPool per process."),
                ],
            )
    with StubLLM(delay=1.5) as stub:
        env = {
            "RECALL_LLM_BASE_URL": stub.url,
            "RECALL_LLM_MODEL": "stub-model",
            "RECALL_LLM_API_KEY": SECRET,
        }
        with running_server(["--home", str(root / "home")], root, env) as server:
            yield server, stub


def test_results_come_first_then_summaries_fill_in(summarizing_server, page) -> None:
    server, stub = summarizing_server
    watch = PageWatch()
    watch.attach(page)
    page.goto(server.url + "/?q=redis")
    cards = page.locator("#results .card")
    expect(cards).to_have_count(6)
    # The model takes 1.5 s per call: the cards are there, their summaries are not.
    assert page.locator(".summary-slot.done").count() == 0
    assert page.locator(".summary-slot.pending").count() >= 1
    expect(page.locator(".summary-slot.done").first).to_be_visible(timeout=15_000)
    # Cards below the fold ask for their summary only when scrolled into view.
    below = page.locator("#results .card").last.locator(".summary-slot")
    assert "pending" in (below.get_attribute("class") or "")
    page.locator("#results .card").last.scroll_into_view_if_needed()
    expect(page.locator(".summary-slot.done")).to_have_count(6, timeout=20_000)
    assert "Summary by stub-model" in page.locator(".summary-slot.done").first.inner_text()
    assert stub.max_in_flight <= 3
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "search-summaries.png"), full_page=True)
    assert watch.problems == []
    # The key went to the model as a bearer token and nowhere else.
    assert stub.requests[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in page.content()
    assert SECRET not in server.log.read_text()


def test_no_endpoint_shows_one_quiet_line_and_no_card_previews(demo_server: Server, browser):
    # The demo server has no model endpoint (the default): no per-card preview block,
    # no spinner that never loads without JavaScript, one line saying how to turn it on.
    for javascript in (True, False):
        context = browser.new_context(
            viewport={"width": 1280, "height": 900}, java_script_enabled=javascript
        )
        page = context.new_page()
        try:
            page.goto(demo_server.url + "/?q=redis")
            expect(page.locator("#results .card").first).to_be_visible()
            page.wait_for_timeout(1200)  # what a revealed slot would have fetched by now
            assert page.locator("#results .summary-slot, #results .spinner").count() == 0
            note = page.locator(".summaries-note")
            expect(note).to_have_count(1)
            assert "RECALL_LLM_BASE_URL" in note.inner_text()
        finally:
            context.close()


def test_without_javascript_a_card_offers_a_link_not_a_spinner(summarizing_server, nojs_page):
    server, _ = summarizing_server
    page = nojs_page
    page.goto(server.url + "/?q=redis")
    expect(page.locator("#results .card")).to_have_count(6)
    assert page.locator("#results .spinner:visible").count() == 0
    card = page.locator("#results .card").first
    link = card.get_by_role("link", name="Summarize this session")
    expect(link).to_be_visible()
    link.click()
    expect(page.locator(".summary-slot.done, .summary-slot.preview")).to_have_count(1)
