"""What may be out of date, in real Chromium over a real ``recall serve``: the memory
page loads its newer conversations after itself, marks the flagged entry, links the
message that overturns it, and opens that entry's editor in one click."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path

from playwright.sync_api import expect

from dashboard.store.readonly import readonly_uri
from tests.support.browser_support import SCREENSHOTS, PageWatch, running_server
from tests.support.stale_homes import GO_QUOTE, GO_SAID, NOT_MENTIONED, S_GO, build_stale_home


def test_the_flagged_entry_links_your_newer_words_and_opens_its_editor(
    tmp_path: Path, page
) -> None:
    facts = build_stale_home(tmp_path / "hermes")
    data = tmp_path / "data"
    args = ["--home", str(facts.root), "--data-dir", str(data)]
    with running_server(args, tmp_path, {"HOME": str(tmp_path / "user")}) as server:
        watch = PageWatch()
        watch.attach(page)
        page.goto(f"{server.url}/memory/USER.md?profile=default")
        section = page.locator("#memory-staleness")
        expect(section).to_contain_text("1 entry of USER.md may be out of date")
        mark = page.locator("#stale-mark-2 a")  # swapped in beside entry 2, out of band
        expect(mark).to_have_text("may be out of date")
        # the mark sits under the entry's text: never squeezing it into the number's column
        text = page.locator("#entry-2 pre.memory-text").bounding_box()
        assert text is not None and text["width"] > 300 and text["height"] < 80
        flagged = section.locator("#stale-2")
        expect(flagged.locator(".stale-says")).to_contain_text("Writes mostly Python")
        expect(flagged.locator(".stale-flag q")).to_have_text(GO_QUOTE)
        for text in NOT_MENTIONED:  # no newer word on them: not in the list at all
            expect(section.locator(".stale-says", has_text=text)).to_have_count(0)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        flagged.scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOTS / "memory_staleness.png"))

        with closing(sqlite3.connect(readonly_uri(data / "archive.db"), uri=True)) as conn:
            (go_id,) = conn.execute(
                "SELECT id FROM messages WHERE session_id = ? AND content = ?", (S_GO, GO_SAID)
            ).fetchone()
        flagged.get_by_role("link", name="open the message").click()
        page.wait_for_url(re.compile(rf"/sessions/{S_GO}\?.*#m{go_id}$"))
        expect(page.locator(f"#m{go_id}")).to_contain_text(GO_SAID)
        page.go_back()

        expect(page.locator("#stale-2")).to_be_visible()
        page.locator("#stale-2").get_by_role("link", name="Edit entry 2").click()
        page.wait_for_url(re.compile(r"/memory/USER\.md\?.*edit=2"))
        expect(page.locator("#entry-2 details.memory-entry-edit")).to_have_attribute("open", "")
        expect(page.locator("#entry-value-2")).to_be_focused()
        expect(page.locator("#entry-value-2")).to_have_value(
            re.compile(r"^\s*Writes mostly Python$")
        )
        assert (facts.root / "memories" / "USER.md").read_text().count("Writes mostly Python") == 1
        assert watch.problems == []
