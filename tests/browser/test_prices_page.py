"""The prices page in real Chromium: the routes, and prices.yaml saved through the form."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.support.browser_support import SCREENSHOTS, PageWatch, Server

LOCAL = "llama3.3:70b"  # the demo's local model: no price list has it


def test_the_routes_and_a_price_saved_through_the_form(demo_server: Server, page) -> None:
    watch = PageWatch()
    watch.attach(page)
    page.goto(f"{demo_server.url}/costs/prices")
    unpriced = page.locator("table.prices-unpriced")
    expect(unpriced).to_contain_text(LOCAL)
    expect(page.locator("table.prices-priced")).to_contain_text("genai-prices")
    snippet = unpriced.locator("code.snippet").first
    assert snippet.inner_text().splitlines()[0] == f'- model: "{LOCAL}"'  # one line each
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "prices.png"), full_page=True)

    original = page.locator("#prices-text").input_value()
    page.fill("#prices-text", f"prices:\n  - model: {LOCAL}\n    input: 0.1\n    output: 0.2\n")
    page.click("button:has-text('Save prices.yaml')")
    page.wait_for_url("**saved=1")
    expect(page.locator("p.notice")).to_contain_text("prices.yaml saved")
    expect(page.locator("table.prices-priced")).to_contain_text(f"any provider:{LOCAL}")
    try:
        # A list that does not read is refused on the page; the typed text stays.
        page.fill("#prices-text", "prices:\n  - model: x\n    input: lots\n")
        page.click("button:has-text('Save prices.yaml')")
        expect(page.locator(".notice.error")).to_contain_text("input must be a number")
        assert "input: lots" in page.locator("#prices-text").input_value()
    finally:
        page.goto(f"{demo_server.url}/costs/prices")
        page.fill("#prices-text", original)  # the demo server is shared: as it was
        page.click("button:has-text('Save prices.yaml')")
        page.wait_for_url("**saved=1")
    expect(page.locator("table.prices-unpriced")).to_contain_text(LOCAL)
    assert [p for p in watch.problems if "400" not in p] == []
