"""The chain page in real Chromium: the picture's bars are links, tooltips carry figures."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from dashboard.store.readonly import readonly_uri
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as hs
from tests.support.browser_support import SCREENSHOTS, PageWatch, Server, running_server
from tests.support.chain_homes import SEGMENTS, ChainHome, build_chain_home


def longest_line(db: Path) -> list[str]:
    """The demo's longest continuation line (parent ended by compression, same source)."""
    with closing(sqlite3.connect(readonly_uri(db), uri=True)) as conn:
        rows = conn.execute(
            "SELECT s.id, s.parent_session_id FROM sessions s JOIN sessions p"
            " ON p.id = s.parent_session_id"
            " WHERE p.end_reason = 'compression' AND s.source = p.source"
        ).fetchall()
    parent_of = dict(rows)
    best: list[str] = []
    for child in parent_of:
        line = [child]
        while line[0] in parent_of and len(line) < 100:
            line.insert(0, parent_of[line[0]])
        best = max(best, line, key=len)
    return best


def test_clicking_a_bar_opens_its_session(demo_server: Server, page) -> None:
    watch = PageWatch()
    watch.attach(page)
    line = longest_line(demo_server.log.parent / "data" / "demo-home" / "state.db")
    assert len(line) >= 3
    focus, target = line[-1], line[1]
    page.goto(f"{demo_server.url}/chains/{focus}")
    assert page.locator("svg.chain-svg").is_visible()
    assert page.locator(f".chain-part:has-text('part {len(line)} of {len(line)}')").count() == 1
    bar = page.locator(f'svg.chain-svg a[data-session-id="{target}"] rect.bar')
    bar.hover()  # the bar's figures show in its HTML panel (its native title is removed)
    panel = page.locator(f'.seg-panel[data-session-id="{target}"]')
    assert panel.is_visible() and "part 2 of" in panel.inner_text()
    assert page.locator(f'svg.chain-svg a[data-session-id="{target}"] > title').count() == 0
    bar.click()
    page.wait_for_url(f"{demo_server.url}/sessions/{target}")
    assert page.locator(".session-id").inner_text() == target
    # The session page says where it sits and links back to the chain.
    back = page.locator(".chain-part-link")
    assert back.inner_text() == f"chain: part 2 of {len(line)}"
    back.click()
    page.wait_for_url(f"{demo_server.url}/chains/{target}")
    assert page.locator("svg.chain-svg a.is-focus").get_attribute("data-session-id") == target
    assert watch.problems == []


def test_twelve_segment_chain_reads_cleanly(tmp_path: Path, browser) -> None:
    chain = build_chain_home(tmp_path / "home")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    watch = PageWatch()
    watch.attach(page)
    args = ["--home", str(chain.home), "--data-dir", str(tmp_path / "data")]
    try:
        with running_server(args, tmp_path) as srv:
            page.goto(f"{srv.url}/chains/{chain.line[4]}")
            svg = page.locator("svg.chain-svg")
            assert svg.locator("a").count() == SEGMENTS + 3
            box = svg.bounding_box()
            assert box and box["width"] > 1000  # drawn at full column width, not squeezed
            # Rows stay apart: each bar's row is at least 16 px below the previous one.
            tops = [svg.locator("rect.bar").nth(i).bounding_box()["y"] for i in range(SEGMENTS)]
            assert all(b - a >= 16 for a, b in zip(tops, tops[1:], strict=False))
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "chain.png"))

            page.locator(f'svg.chain-svg a[data-session-id="{chain.branch_mid}"] rect.bar').click()
            page.wait_for_url(f"{srv.url}/sessions/{chain.branch_mid}")
            page.go_back()
            page.locator(".chain-links a", has_text="Stitched transcript").click()
            page.wait_for_url(f"{srv.url}/chains/{chain.line[4]}/transcript#part-5")
            assert page.locator(".stitch-part").count() == SEGMENTS
            page.locator("#part-2 .stitch-summary > summary").click()
            assert page.locator("#part-2 .stitch-summary .md").is_visible()
            page.screenshot(path=str(SCREENSHOTS / "chain-transcript.png"))
            assert watch.problems == []
    finally:
        context.close()


def _untitled_root_home(tmp_path: Path) -> ChainHome:
    """The 12-segment chain with an untitled first segment; later parts titled "… #n"."""
    chain = build_chain_home(tmp_path / "home", title=None)
    with SessionStore(chain.db) as store:
        store.set_title(chain.line[2], "Long refactor #3")
        store.set_title(chain.line[4], "Long refactor #5")
    return chain


FOCUSED = """() => {
  const a = document.activeElement;
  return a && a.closest && a.closest('svg.chain-svg a') ? a.getAttribute('data-session-id') : null;
}"""


def test_segment_details_show_on_focus_hover_and_tap(tmp_path: Path, browser) -> None:
    """Item 10: the heading is the conversation's title; each bar's figures are an HTML
    panel shown on keyboard focus, on hover and on a tap (not a native tooltip only)."""
    chain = _untitled_root_home(tmp_path)
    args = ["--home", str(chain.home), "--data-dir", str(tmp_path / "data")]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    watch = PageWatch()
    watch.attach(page)
    try:
        with running_server(args, tmp_path) as srv:
            page.goto(f"{srv.url}/chains/{chain.line[4]}")
            assert page.locator("h1#chain-title").inner_text().startswith("Long refactor")
            assert chain.line[0] not in page.locator("h1#chain-title").inner_text()
            assert chain.line[0] in page.locator(".chain-root-id").inner_text()
            assert page.title().startswith("Chain · Long refactor")
            # Row labels: the title where there is one, else the segment's name (its
            # first words after the summary, as its own page names it), never its id.
            labels = page.locator("svg.chain-svg text.row-label").all_text_contents()
            assert labels[:5] == [
                "step 1: run the tests",
                "step 2: run the tests",
                "Long refactor #3",
                "step 4: run the tests",
                "Long refactor #5",
            ]

            # Keyboard: Tab reaches the bars; the focused bar's panel is visible.
            for _ in range(80):
                page.keyboard.press("Tab")
                if page.evaluate(FOCUSED):
                    break
            first = page.evaluate(FOCUSED)
            assert first == chain.line[0]
            panel = page.locator(f'.seg-panel[data-session-id="{first}"]')
            assert panel.is_visible() and "part 1 of 12" in panel.inner_text()
            page.keyboard.press("Tab")
            second = page.evaluate(FOCUSED)
            assert second == chain.line[1]
            assert page.locator(f'.seg-panel[data-session-id="{second}"]').is_visible()
            assert not panel.is_visible()
            assert page.locator(".seg-panel:visible").count() == 1

            # Hover: the panel of the bar under the pointer.
            page.locator(f'svg.chain-svg a[data-session-id="{chain.line[6]}"] rect.bar').hover()
            hovered = page.locator(f'.seg-panel[data-session-id="{chain.line[6]}"]')
            assert hovered.is_visible() and "part 7 of 12" in hovered.inner_text()
            assert "cost: unknown" in hovered.inner_text().lower()
            assert watch.problems == []
    finally:
        context.close()


def test_a_phone_scrolls_the_picture_and_a_tap_shows_details(tmp_path: Path, browser) -> None:
    chain = _untitled_root_home(tmp_path)
    args = ["--home", str(chain.home), "--data-dir", str(tmp_path / "data")]
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True
    )
    page = context.new_page()
    try:
        with running_server(args, tmp_path) as srv:
            url = f"{srv.url}/chains/{chain.line[4]}"
            page.goto(url)
            # No horizontal scroll of the page; the picture scrolls in its own box.
            widths = page.evaluate(
                "() => [document.documentElement.scrollWidth, window.innerWidth]"
            )
            assert widths[0] <= widths[1], widths
            reach = page.evaluate(
                """() => {
                  const svg = document.querySelector('svg.chain-svg');
                  const box = svg.closest('.chain-scroll');
                  box.scrollLeft = box.scrollWidth;
                  const r = svg.getBoundingClientRect(), b = box.getBoundingClientRect();
                  return {right: r.right, boxRight: b.right, left: r.left,
                          scrollable: box.scrollWidth > box.clientWidth,
                          overflow: getComputedStyle(box).overflowX};
                }"""
            )
            assert reach["scrollable"] and reach["overflow"] == "auto", reach
            assert abs(reach["right"] - reach["boxRight"]) < 2, reach  # the end is reachable
            page.evaluate("() => { document.querySelector('.chain-scroll').scrollLeft = 0; }")
            # A tap on a bar shows its details instead of leaving the page; a second opens it.
            bar = page.locator(f'svg.chain-svg a[data-session-id="{chain.line[2]}"] rect.row-hit')
            bar.tap()
            panel = page.locator(f'.seg-panel[data-session-id="{chain.line[2]}"]')
            assert panel.is_visible() and "Long refactor #3" in panel.inner_text()
            assert page.url == url
            box = panel.bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= 391  # on screen
            panel.locator("a", has_text="Open session").tap()
            page.wait_for_url(f"{srv.url}/sessions/{chain.line[2]}")
    finally:
        context.close()


def test_chains_index_sorts_by_link(demo_server: Server, nojs_page) -> None:
    """The /chains index is one table sorted by server-side links (no JavaScript needed)."""
    page = nojs_page
    page.goto(f"{demo_server.url}/chains")
    assert page.locator("table.chains-table").count() == 1
    page.locator("table.chains-table th a", has_text="Segments").click()
    page.wait_for_url("**sort=segments**")
    header = page.locator("table.chains-table th", has_text="Segments")
    assert header.get_attribute("aria-sort") == "descending"
    counts = [int(t) for t in page.locator("table.chains-table td.segments").all_inner_texts()]
    assert counts == sorted(counts, reverse=True) and len(counts) > 1
    page.locator("table.chains-table th a", has_text="Segments").click()
    page.wait_for_url("**dir=asc**")
    counts = [int(t) for t in page.locator("table.chains-table td.segments").all_inner_texts()]
    assert counts == sorted(counts)
    assert header.get_attribute("aria-sort") == "ascending"


IN_VIEW = """(el) => {
  const r = el.getBoundingClientRect();
  return r.bottom > 0 && r.top < window.innerHeight;
}"""


def test_an_in_place_chain_draws_its_epochs_and_an_epoch_opens_the_transcript_there(
    tmp_path: Path, browser
) -> None:
    """Issue 16: a conversation that only compacted in place is a chain of epochs; its
    bar is split at each compaction and a click on an epoch lands on its carrier."""
    home = tmp_path / "home"
    hs.build_epochs_home(home, "current_views")
    args = ["--home", str(home), "--data-dir", str(tmp_path / "data")]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    watch = PageWatch()
    watch.attach(page)
    try:
        with running_server(args, tmp_path) as srv:
            page.goto(f"{srv.url}/chains")
            page.locator(f'a[href="/chains/{hs.S_EPOCHS}"]').click()
            page.wait_for_url(f"{srv.url}/chains/{hs.S_EPOCHS}")
            assert "compacted in place 3 times" in page.locator(".chain-where").inner_text()
            epochs = page.locator("svg.chain-svg a.epoch")
            assert epochs.count() == 4
            assert page.locator("svg.chain-svg .compaction-mark").count() == 3
            # The pieces run left to right, each after the one before.
            xs = [epochs.nth(i).locator("rect").bounding_box()["x"] for i in range(4)]
            assert xs == sorted(xs) and len(set(xs)) == 4
            third = page.locator('svg.chain-svg a.epoch[data-epoch="3"]')
            third.locator("rect").hover()
            panel = page.locator('.seg-panel[data-epoch="3"]')
            assert panel.is_visible()
            assert "Epoch 3 of 4" in panel.inner_text()
            assert "so far: part 2" in panel.inner_text()
            # Keyboard: an epoch is a tab stop of its own, its panel shows on focus.
            page.mouse.move(0, 0)
            page.locator('svg.chain-svg a.epoch[data-epoch="2"]').focus()
            assert page.locator('.seg-panel[data-epoch="2"]').is_visible()
            assert not panel.is_visible()
            third.locator("rect").hover()
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "chain-epochs.png"), full_page=True)
            carrier = parse_qs(urlsplit(third.get_attribute("href")).query)["at"][0]
            third.locator("rect").click()
            page.wait_for_url(f"{srv.url}/sessions/{hs.S_EPOCHS}?at={carrier}#m{carrier}")
            message = page.locator(f"#m{carrier}")
            assert message.count() == 1 and message.evaluate(IN_VIEW)
            # It lands on the divider of the compaction that opened epoch 3, its summary
            # folded until asked for.
            assert "Compaction 2 of 3" in message.inner_text()
            assert "so far: part 2" not in message.inner_text()
            message.locator("summary").first.click()
            assert "so far: part 2" in message.inner_text()
            assert watch.problems == []
    finally:
        context.close()
