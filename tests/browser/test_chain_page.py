"""The chain page in real Chromium: the picture's bars are links, tooltips carry figures."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from dashboard.repository.readonly import readonly_uri
from tests.browser_support import SCREENSHOTS, PageWatch, Server, running_server
from tests.test_chains import SEGMENTS, build_chain_home


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
    assert (
        "part 2 of"
        in page.locator(f'svg.chain-svg a[data-session-id="{target}"] > title').text_content()
    )
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
