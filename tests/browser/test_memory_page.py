"""The Memory editor in real Chromium: live counter, preview, save, history, restore."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.support.browser_support import SCREENSHOTS, PageWatch, Server

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
    page.wait_for_url("**/memory/USER.md?saved=1&change=*")  # the restore's own page
    expect(page.locator(".memory-saved")).to_be_visible()
    expect(page.locator(".memory-last-change .diff-del").last).to_have_text("-" + ADDED)
    assert path.read_text(encoding="utf-8") == original
    expect(history.first).to_contain_text("restored from revision")
    expect(page.locator(".memory-entries")).not_to_contain_text(ADDED)

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "memory.png"), full_page=True)
    assert watch.problems == []


def _memory_md(server: Server):
    return server.log.parent / "data" / "demo-home" / "memories" / "MEMORY.md"


def test_moving_an_entry_saves_in_one_step_shows_the_diff_and_undoes(
    demo_server: Server, page
) -> None:
    path = _memory_md(demo_server)
    original = path.read_text(encoding="utf-8")
    entries = original.split("\n§\n")
    watch = PageWatch()
    watch.attach(page)
    page.goto(demo_server.url + "/memory/MEMORY.md")
    page.get_by_role("button", name="Move entry 2 up").click()
    expect(page.locator(".memory-saved")).to_be_visible()  # no preview page in between
    moved = [entries[1], entries[0], *entries[2:]]
    assert path.read_text(encoding="utf-8") == "\n§\n".join(moved)
    changed = page.locator(".memory-last-change .memory-diff")
    expect(changed.locator(".diff-add").first).to_contain_text(entries[1][:40])
    expect(page.locator("#entry-1 .memory-text")).to_have_text(entries[1])
    expect(page.locator(".memory-history .memory-revision").first).to_contain_text(
        "moved entry 2 up"
    )

    page.get_by_role("button", name="Undo").click()
    expect(page.locator(".memory-saved")).to_be_visible()
    assert path.read_text(encoding="utf-8") == original
    expect(page.locator("#entry-1 .memory-text")).to_have_text(entries[0])
    assert watch.problems == []


def test_edits_of_different_entries_in_two_tabs_merge(demo_server: Server, browser) -> None:
    path = _memory_md(demo_server)
    original = path.read_text(encoding="utf-8")
    entries = original.split("\n§\n")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        first, second = context.new_page(), context.new_page()
        watch = PageWatch()
        watch.attach(first)
        watch.attach(second)
        for tab in (first, second):  # both tabs load the same text
            tab.goto(demo_server.url + "/memory/MEMORY.md")

        first.locator("#entry-1 summary", has_text="Edit").click()
        first.locator("#entry-value-1").fill("Prod cluster: k3s on 4 nodes.")
        first.get_by_role("button", name="Save entry 1").click()
        expect(first.locator(".memory-saved")).to_be_visible()

        # The second tab still shows the old text and moves the last entry up.
        last = len(entries)
        second.get_by_role("button", name=f"Move entry {last} up").click()
        expect(second.locator(".memory-saved")).to_contain_text("merged with a change made")
        merged = ["Prod cluster: k3s on 4 nodes.", *entries[1:-2], entries[-1], entries[-2]]
        assert path.read_text(encoding="utf-8") == "\n§\n".join(merged)
        expect(second.locator("#entry-1 .memory-text")).to_have_text(merged[0])
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        second.screenshot(path=str(SCREENSHOTS / "memory-merged.png"), full_page=True)
        assert watch.problems == []
    finally:
        context.close()
        path.write_text(original, encoding="utf-8")  # as the agent would: the next test's file
