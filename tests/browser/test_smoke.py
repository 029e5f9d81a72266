"""Open every page in real Chromium, follow the navigation, keep a screenshot of each."""

from __future__ import annotations

from urllib.parse import urljoin

from tests.support.browser_support import SCREENSHOTS, PageWatch, Server

# Pages whose README screenshot a test of their own takes, on data that shows them
# (the demo home has no archive): the tour does not overwrite it.
OWN_SCREENSHOT = {"Archive"}


def test_every_page_loads_cleanly_and_navigation_works(demo_server: Server, page) -> None:
    watch = PageWatch()
    watch.attach(page)
    page.goto(demo_server.url + "/")
    assert page.locator("header nav a[aria-current=page]").inner_text() == "Search"
    assert page.locator(".banner.demo").is_visible()
    links = page.locator("header nav a:not(.pending-badge)")  # the count has its own test
    targets = [
        (links.nth(i).inner_text(), links.nth(i).get_attribute("href"))
        for i in range(links.count())
    ]
    assert targets, "the navigation lists at least one page"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for label, href in targets:
        page.locator("header nav a", has_text=label).click()
        page.wait_for_load_state("networkidle")
        assert page.url == urljoin(demo_server.url, href)
        assert page.locator("header nav a[aria-current=page]").inner_text() == label
        assert page.locator(".banner.demo").is_visible()
        if label not in OWN_SCREENSHOT:
            page.screenshot(path=str(SCREENSHOTS / f"{label.lower()}.png"), full_page=True)
    # htmx loaded and wired (a vendored file served with the right type, no CSP breach).
    assert page.evaluate("typeof window.htmx") == "object"
    assert watch.problems == []


def test_overview_describes_the_demo_store(demo_server: Server, page) -> None:
    page.goto(demo_server.url + "/overview")
    text = page.locator("#overview").inner_text()
    assert "external content over messages" in text
    assert "trigram" in text
    assert "WAL" in text


def test_error_page_is_styled_not_a_stack_trace(demo_server: Server, page) -> None:
    watch = PageWatch()
    watch.attach(page)
    response = page.goto(demo_server.url + "/missing-page")
    assert response is not None and response.status == 404
    assert "404" in page.locator("h1").inner_text()
    assert [p for p in watch.problems if "404" not in p] == []


WIDEST = """() => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"""


def test_a_phone_width_never_scrolls_sideways(
    demo_server: Server, demo_sessions: dict[str, str], browser
) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        pages = [
            "/",
            "/?q=redis",
            "/chains",
            "/costs",
            "/memory",
            "/preview?message=redis",
            "/overview",
            f"/sessions/{demo_sessions['middle']}",
            f"/chains/{demo_sessions['middle']}",
        ]
        wide = {}
        for path in pages:
            page.goto(demo_server.url + path)
            page.wait_for_load_state("networkidle")
            width = page.evaluate(WIDEST)
            if width > 390:
                wide[path] = width
        assert wide == {}
    finally:
        context.close()
