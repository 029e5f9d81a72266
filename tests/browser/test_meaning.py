"""Search by meaning in real Chromium, on the demo home `recall serve` built (its meaning
index built by the server's worker process)."""

from __future__ import annotations

import time

import httpx

from tests.support.browser_support import SCREENSHOTS, PageWatch, Server

# The demo's docker-compose networking conversations, asked the way a person remembers
# them: none of these words is the topic's.
ASKED = "the time my containers could not talk to each other"


def _index_ready(server: Server, seconds: float = 120.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        answer = httpx.get(f"{server.url}/api/search", params={"q": "x"}, timeout=30).json()
        if answer["meaning_index"]["ready"]:
            return
        time.sleep(0.3)
    raise AssertionError(f"the meaning index was not built: {server.log.read_text()[-2000:]}")


def test_a_paraphrase_finds_conversations_marked_similar(demo_server: Server, page) -> None:
    _index_ready(demo_server)
    watch = PageWatch()
    watch.attach(page)
    page.goto(f"{demo_server.url}/?q={ASKED}")
    assert "by meaning" in page.locator(".result-meta").inner_text()
    similar = page.locator("#results .hit-similar")
    assert similar.count() > 0
    cards = page.locator("#results .card").all_inner_texts()
    assert any("ompose" in card or "container" in card for card in cards[:5]), cards[:5]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "search-meaning.png"))

    # Words only, from the filters panel: the same query finds no similar hit.
    page.locator("details.filters > summary").click()
    page.locator("input[name=mode][value=words]").check()
    page.wait_for_url("**mode=words**")
    page.wait_for_function("() => !document.querySelector('#results .hit-similar')")
    assert "by meaning" not in page.locator(".result-meta").inner_text()
    assert watch.problems == []


def test_a_session_page_lists_similar_conversations(
    demo_server: Server, demo_sessions: dict[str, str], page
) -> None:
    _index_ready(demo_server)
    page.goto(f"{demo_server.url}/sessions/{demo_sessions['middle']}")
    heading = page.locator("#similar h2")
    heading.wait_for()
    assert heading.inner_text() == "Similar conversations"
    links = page.locator("#similar a")
    assert links.count() >= 1
    href = links.first.get_attribute("href") or ""
    assert href.startswith("/sessions/") and demo_sessions["middle"] not in href
