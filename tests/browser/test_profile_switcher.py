"""The header's profile switcher in real Chromium, over issue 17's three-profile home.

On every page of the navigation and on a session page: pick ``legacy`` from the
header, then ``all``; the URL says each choice, the page shows that profile's data,
Back restores the one before, and a page opened without ``?profile=`` reads the
remembered choice. With one profile there is no switcher at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Page, expect

from dashboard.views import NAVIGATION
from tests.support import hermes_shapes as hs
from tests.support.browser_support import SCREENSHOTS, PageWatch, Server, running_server

LEGACY_WORD, DEFAULT_WORD = hs.PROFILE_WORDS["legacy"], hs.PROFILE_WORDS["default"]
LABELS = {"default": "default", "legacy": "legacy", "all": "All profiles"}
PHONE = {"width": 375, "height": 740}


@pytest.fixture(scope="module")
def profiles_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``recall serve`` over the default, legacy and empty profiles of one Hermes home."""
    root = tmp_path_factory.mktemp("profiles")
    hs.build_profiles_home(root / "hermes")
    env = {"HOME": str(root / "user"), "HERMES_HOME": ""}
    args = ["--home", str(root / "hermes"), "--data-dir", str(root / "data")]
    with running_server(args, root, env) as server:
        yield server


def _linked(page: Page) -> set[str]:
    """The sessions and chains the page's content links to, by id."""
    hrefs = page.locator("#main a[href^='/sessions/'], #main a[href^='/chains/']").evaluate_all(
        "links => links.map(a => a.getAttribute('href'))"
    )
    return {urlparse(h).path.split("/")[2] for h in hrefs}


def _links_only(profile: str) -> Callable[[Page], None]:
    """The page links sessions, every one of them ``profile``'s (legacy's carry its prefix)."""

    def check(page: Page) -> None:
        ids = _linked(page)
        assert ids, "the page links no session"
        theirs = {i for i in ids if i.startswith("legacy:")}
        assert theirs == (ids if profile == "legacy" else set()), sorted(ids)

    return check


def _found(expected: set[str]) -> Callable[[Page], None]:
    """Exactly these sessions are linked (a search's cards)."""

    def check(page: Page) -> None:
        expect(page.locator("#results")).to_be_attached()
        assert _linked(page) == expected

    return check


def _says(text: str, not_text: str) -> Callable[[Page], None]:
    def check(page: Page) -> None:
        expect(page.locator("#main")).to_contain_text(text)
        expect(page.locator("#main")).not_to_contain_text(not_text)

    return check


LEGACY_CRON = f"legacy:{hs.S_CRON}"
# Per page: where it starts, and what it shows in each profile (missing: only the URL
# and the switcher's label are checked; a page of one session switches to the search
# page of the profile picked, switch_url's rule).
CASES: dict[str, tuple[str, dict[str, Callable[[Page], None]]]] = {
    "search, legacy's word": (
        f"/?q={LEGACY_WORD}&source=cron&mode=words",
        {"default": _found(set()), "legacy": _found({LEGACY_CRON}), "all": _found({LEGACY_CRON})},
    ),
    "search, default's word": (
        f"/?q={DEFAULT_WORD}&source=cron&mode=words",
        {"default": _found({hs.S_CRON}), "legacy": _found(set()), "all": _found({hs.S_CRON})},
    ),
    "chains": ("/chains", {"default": _links_only("default"), "legacy": _links_only("legacy")}),
    "costs": ("/costs", {"default": _links_only("default"), "legacy": _links_only("legacy")}),
    "memory": (
        "/memory",
        {
            "default": _says("The default profile's user", "legacy profile"),
            "legacy": _says("The legacy profile's user", "default profile"),
        },
    ),
    "preview": (
        "/preview",
        {
            "default": _says("The default profile's user", "legacy profile"),
            "legacy": _says("The legacy profile's user", "default profile"),
        },
    ),
    "overview": (
        "/overview",
        {
            "default": _says("hermes/state.db", "profiles/legacy"),
            "legacy": _says("profiles/legacy/state.db", "hermes/state.db"),
        },
    ),
    "archive": ("/archive", {"default": _links_only("default"), "legacy": _links_only("legacy")}),
    "session": (
        f"/sessions/{hs.S_CRON}",
        {"default": _says(DEFAULT_WORD, LEGACY_WORD), "legacy": _links_only("legacy")},
    ),
}


def _profile_in_url(page: Page) -> str | None:
    found = parse_qs(urlparse(page.url).query).get("profile")
    return found[0] if found else None


def _shows(page: Page, profile: str, checks: dict[str, Callable[[Page], None]]) -> None:
    expect(page.locator(".profile-switcher .current-profile")).to_have_text(LABELS[profile])
    if profile in checks:
        checks[profile](page)


def _pick(page: Page, profile: str) -> None:
    """Open the header's switcher and follow its link to ``profile``."""
    switcher = page.locator("header .profile-switcher")
    switcher.locator("summary").click()
    link = switcher.get_by_role("link", name=LABELS[profile], exact=True)
    expect(link).to_be_visible()
    with page.expect_navigation():
        link.click()


def _nav_paths(page: Page) -> list[str]:
    """The paths of the header's navigation, as the page links them."""
    hrefs = page.locator("header nav a").evaluate_all(
        "links => links.map(a => a.getAttribute('href'))"
    )
    return [urlparse(h).path for h in hrefs]


def test_every_page_of_the_navigation_is_a_case(profiles_server: Server, page: Page) -> None:
    page.goto(profiles_server.url + "/")
    nav = _nav_paths(page)
    assert len(nav) == len(NAVIGATION)
    assert set(nav) <= {urlparse(path).path for path, _ in CASES.values()}


@pytest.mark.parametrize("case", list(CASES))
def test_switching_profile_from_the_header_and_back(
    profiles_server: Server, page: Page, case: str
) -> None:
    path, checks = CASES[case]
    watch = PageWatch()
    watch.attach(page)
    sep = "&" if "?" in path else "?"
    page.goto(f"{profiles_server.url}{path}{sep}profile=default")
    first = page.url
    _shows(page, "default", checks)

    _pick(page, "legacy")
    assert _profile_in_url(page) == "legacy"
    _shows(page, "legacy", checks)
    legacy_url = page.url

    # Another page opened without ?profile= reads the remembered choice, and its
    # links keep it.
    other = page.context.new_page()
    other_watch = PageWatch()
    other_watch.attach(other)
    other.goto(f"{profiles_server.url}{urlparse(legacy_url).path}")
    expect(other.locator(".profile-switcher .current-profile")).to_have_text("legacy")
    nav = other.locator("header nav a").first.get_attribute("href") or ""
    assert parse_qs(urlparse(nav).query).get("profile") == ["legacy"]
    other.close()

    _pick(page, "all")
    assert _profile_in_url(page) == "all"
    _shows(page, "all", checks)

    page.go_back()
    assert page.url == legacy_url
    _shows(page, "legacy", checks)
    page.go_back()
    assert page.url == first
    _shows(page, "default", checks)
    assert watch.problems == [] and other_watch.problems == []


def test_the_switcher_closes_on_escape_shows_focus_and_fits_a_phone(
    profiles_server: Server, browser
) -> None:
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    watch = PageWatch()
    watch.attach(page)
    try:
        page.goto(f"{profiles_server.url}/chains?profile=all")
        switcher = page.locator("header .profile-switcher")
        summary = switcher.locator("summary")
        summary.focus()
        page.keyboard.press("Enter")
        expect(switcher).to_have_attribute("open", "")
        menu = switcher.locator("ul")
        box = menu.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "profile-switcher-phone.png"))

        # Tab walks the menu's links; the focused one is visibly marked.
        page.keyboard.press("Tab")
        focused = page.evaluate("() => document.activeElement.textContent.trim()")
        assert focused == "All profiles"
        outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
        assert outline not in ("none", "")

        # Escape closes it and gives the focus back to its button.
        page.keyboard.press("Escape")
        expect(switcher).not_to_have_attribute("open", "")
        assert page.evaluate("() => document.activeElement.tagName") == "SUMMARY"
        summary_outline = page.evaluate(
            "() => getComputedStyle(document.activeElement).outlineStyle"
        )
        assert summary_outline not in ("none", "")

        # A click elsewhere closes it too.
        summary.click()
        expect(switcher).to_have_attribute("open", "")
        page.mouse.click(4, PHONE["height"] - 4)  # below the menu, on no link
        expect(switcher).not_to_have_attribute("open", "")

        # Keyboard only: open, step down to legacy, follow it.
        summary.focus()
        page.keyboard.press("Enter")
        for _ in range(2):  # All profiles, default
            page.keyboard.press("Tab")
        page.keyboard.press("Tab")
        expect(page.locator(":focus")).to_have_text("empty")
        page.keyboard.press("Tab")
        expect(page.locator(":focus")).to_have_text("legacy")
        with page.expect_navigation():
            page.keyboard.press("Enter")
        assert _profile_in_url(page) == "legacy"
        assert watch.problems == []
    finally:
        context.close()


def test_the_open_switcher_in_a_screenshot(profiles_server: Server, page: Page) -> None:
    watch = PageWatch()
    watch.attach(page)
    page.goto(f"{profiles_server.url}/?profile=legacy")
    page.locator("header .profile-switcher summary").click()
    menu = page.locator("header .profile-switcher ul")
    expect(menu).to_be_visible()
    current = menu.locator("a[aria-current='true']")
    expect(current).to_have_text("legacy")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "profile-switcher.png"))
    assert watch.problems == []


def test_a_home_with_one_profile_has_no_switcher(tmp_path: Path, page: Page) -> None:
    hs.build_current_views(tmp_path / "hermes" / "state.db")
    env = {"HOME": str(tmp_path / "user"), "HERMES_HOME": ""}
    args = ["--home", str(tmp_path / "hermes"), "--data-dir", str(tmp_path / "data")]
    watch = PageWatch()
    watch.attach(page)
    with running_server(args, tmp_path, env) as server:
        page.goto(server.url + "/")
        for path in _nav_paths(page):
            page.goto(server.url + path)
            expect(page.locator("header nav")).to_be_visible()
            expect(page.locator(".profile-switcher")).to_have_count(0)
            hrefs = page.locator("a[href]").evaluate_all(
                "links => links.map(a => a.getAttribute('href'))"
            )
            assert not [h for h in hrefs if "profile=" in h], path
        page.goto(f"{server.url}/sessions/{hs.S_CRON}")
        expect(page.locator(".profile-switcher")).to_have_count(0)
    assert watch.problems == []
