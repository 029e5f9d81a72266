"""What the agent sees, in real Chromium: live preview, URL state, recalled links, errors."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.support.browser_support import SCREENSHOTS, PageWatch, Server

# Words of the demo's redis conversations (a user asks about connected_clients on redis).
MESSAGE = "redis connected_clients keeps growing; share one client or one per request?"
PARTS = ("user", "memory", "recalled", "context")
UNKNOWN = "no-such-session-0000"


def figure(page, selector: str) -> int:
    return int(page.locator(selector).inner_text().replace(",", ""))


def test_typing_shows_what_the_agent_would_get(demo_server: Server, page) -> None:
    watch = PageWatch()
    watch.attach(page)
    # The preview's HTMX requests, to catch a double request per edit (the session page
    # visited on the way loads its similar conversations through HTMX too: not counted).
    swaps: list[str] = []
    page.on(
        "request",
        lambda r: r.headers.get("hx-request") and "/preview" in r.url and swaps.append(r.url),
    )
    page.goto(demo_server.url + "/preview")
    # Before any message: the files and the context line, nothing recalled yet.
    expect(page.locator("section.preview-part[data-part=context] pre")).to_be_visible()
    expect(page.locator("section.preview-part[data-part=recalled]")).to_contain_text(
        "Type a message"
    )
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads

    page.locator("#preview-message").fill(MESSAGE)
    page.wait_for_url("**/preview?*message=*")
    recalled = page.locator("section.preview-part[data-part=recalled]")
    expect(recalled.locator("pre.preview-text")).to_contain_text("# Relevant Memories")
    assert page.evaluate("window.__sameDocument") is True
    for part in PARTS:
        section = page.locator(f"section.preview-part[data-part={part}]")
        expect(section).to_have_count(1)
        expect(section.locator("h2")).to_be_visible()
    expect(recalled.locator("pre.preview-text")).to_contain_text(
        re.compile(r"\[(Recent|Long-term) — ")
    )
    assert "redis" in page.url
    assert figure(page, "[data-preview-chars]") > 0
    assert figure(page, "[data-preview-tokens]") > 0
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "preview-recalled.png"), full_page=True)
    page.locator("#preview-message").press("Tab")  # leaving the box asks nothing again

    # Copy puts exactly the block the agent gets on the clipboard.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=demo_server.url)
    copy = page.get_by_role("button", name="Copy the whole block")
    expect(copy).to_be_visible()
    copy.click()
    # By its target, not its name: the name becomes "Copied".
    expect(page.locator("[data-copy-target=preview-whole]")).to_have_text("Copied")
    whole = page.locator("#preview-whole").text_content()
    assert page.evaluate("navigator.clipboard.readText()") == whole
    assert "# Relevant Memories" in whole and whole.endswith(
        page.locator("section.preview-part[data-part=context] pre").text_content()
    )

    # A recalled memory links to its session, at the message that matched.
    first = recalled.locator("ol.preview-items li a").first
    href = first.get_attribute("href") or ""
    assert re.fullmatch(r"/sessions/[^/#?]+#m\d+", href), href
    first.click()
    page.wait_for_url(re.compile(r"/sessions/"))
    expect(page.locator("#transcript")).to_be_visible()
    expect(page.locator(href[href.index("#") :])).to_be_in_viewport()

    # Back: the preview is rebuilt from its URL, message and all.
    page.go_back()
    page.wait_for_url("**/preview?*message=*")
    expect(page.locator("#preview-message")).to_have_value(MESSAGE)
    expect(recalled.locator("pre.preview-text")).to_contain_text("# Relevant Memories")
    assert watch.problems == []

    # Continuing a session that is not there: a clear message, not a broken page.
    page.locator("input[name=session]").fill(UNKNOWN)
    page.locator("input[name=session]").press("Enter")
    notice = page.locator("#preview .notice.error")
    expect(notice).to_contain_text(f"No session with id '{UNKNOWN}'")
    expect(page.locator("section.preview-part")).to_have_count(0)
    # The 400 is the answer the page asked for (htmx swaps it in): the only problems
    # allowed are that response and Chromium's note about it; no CSP violation.
    unexpected = [
        p
        for p in watch.problems
        if not (p.startswith("http 400: ") and "/preview?" in p)
        and not (p.startswith("console: Failed to load resource") and " 400 " in p)
    ]
    assert unexpected == []
    page.wait_for_timeout(300)  # a second, queued request would have gone out by now
    assert len(swaps) == 2, swaps  # one for the message, one for Enter in the session box


def test_without_javascript_the_form_is_a_plain_get(demo_server: Server, nojs_page) -> None:
    page = nojs_page
    page.goto(demo_server.url + "/preview")
    page.locator("#preview-message").fill(MESSAGE)
    page.get_by_role("button", name="Preview").click()
    page.wait_for_url("**/preview?*message=*")
    for part in PARTS:
        expect(page.locator(f"section.preview-part[data-part={part}]")).to_have_count(1)
    expect(page.locator("section.preview-part[data-part=recalled] pre")).to_contain_text(
        "# Relevant Memories"
    )
    assert page.locator("ol.preview-items li a").count() > 0
    assert not page.get_by_role("button", name="Copy the whole block").is_visible()


def test_recalled_items_are_what_was_said_and_the_model_is_the_configured_one(
    demo_server: Server, page
) -> None:
    """The demo's assistants write files: their arguments must not come back as memories."""
    watch = PageWatch()
    watch.attach(page)
    page.goto(demo_server.url + "/preview")
    page.locator("#preview-message").fill("how do we import json and the settings from app.config?")
    recalled = page.locator("section.preview-part[data-part=recalled] pre.preview-text")
    expect(recalled).to_contain_text("# Relevant Memories")
    text = recalled.inner_text()
    assert "content=" not in text and "path=" not in text, text
    # The demo's config.yaml runs claude-sonnet-4.5 for a new session.
    context = page.locator("section.preview-part[data-part=context] pre")
    expect(context).to_contain_text("Model: anthropic/claude-sonnet-4.5")
    assert watch.problems == []
