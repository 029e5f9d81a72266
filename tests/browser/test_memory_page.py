"""The Memory editor in real Chromium: live counter, preview, save, history, restore."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser_support import SCREENSHOTS, PageWatch, Server

ADDED = "Likes end-to-end tests"


def test_edit_preview_save_and_restore(demo_server: Server, page) -> None:
    path = demo_server.log.parent / "data" / "demo-home" / "memories" / "USER.md"
    original = path.read_text(encoding="utf-8")
    watch = PageWatch()
    watch.attach(page)
    page.goto(demo_server.url + "/memory")

    counter = page.locator(".memory-live-count")
    number = counter.locator("[data-memory-count]")
    limit = int(counter.get_attribute("data-limit") or "0")
    expect(number).to_have_text(f"{len(original):,}")
    textarea = page.locator("#memory-text")
    # Past the limit the counter turns red (a class), and back.
    textarea.fill("é" * (limit + 1))  # code points, as Hermes counts them
    expect(number).to_have_text(f"{limit + 1:,}")
    expect(counter).to_have_class("memory-count memory-live-count over")
    textarea.fill(original)
    expect(counter).not_to_have_class("memory-count memory-live-count over")
    textarea.press("Control+End")
    textarea.type("\n§\n" + ADDED)
    expect(number).to_have_text(f"{len(original) + 3 + len(ADDED):,}")

    page.get_by_role("button", name="Preview changes").click()
    expect(page.locator("h1")).to_have_text("Preview changes to USER.md")
    expect(page.locator(".memory-diff .diff-add").last).to_have_text("+" + ADDED)
    assert path.read_text(encoding="utf-8") == original  # nothing written yet

    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".memory-saved")).to_be_visible()
    assert path.read_text(encoding="utf-8") == original + "\n§\n" + ADDED
    history = page.locator(".memory-history .memory-revision")
    expect(history.first).to_contain_text("edited in Recall")
    expect(history.first.locator(".badge")).to_have_text("current")
    expect(page.locator(".memory-entries")).to_contain_text(ADDED)

    history.filter(has_text="before first edit").get_by_role("button", name="Restore").click()
    expect(page.locator(".memory-saved")).to_be_visible()
    assert path.read_text(encoding="utf-8") == original
    expect(history.first).to_contain_text("restored from revision")
    expect(page.locator(".memory-entries")).not_to_contain_text(ADDED)

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "memory.png"), full_page=True)
    assert watch.problems == []
