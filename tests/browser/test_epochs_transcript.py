"""A conversation compacted in place, read in real Chromium: dividers that fold, the
Everything / What the agent sees now toggle both ways and back, a copy's link."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from tests.support import hermes_shapes as hs
from tests.support import hermes_v31 as hv
from tests.support.browser_support import SCREENSHOTS, PageWatch, running_server


def test_the_history_and_what_the_agent_sees_now(tmp_path: Path, page) -> None:
    home = tmp_path / "home"
    facts = hs.build_epochs_home(home)
    watch = PageWatch()
    watch.attach(page)
    args = ["--home", str(home), "--data-dir", str(tmp_path / "data")]
    with running_server(args, tmp_path) as srv:
        everything = httpx.get(f"{srv.url}/api/sessions/{hs.S_EPOCHS}/messages").json()
        rows = page.locator("#transcript li.msg, #transcript li.compaction-divider")
        dividers = page.locator("#transcript li.compaction-divider")
        page.goto(f"{srv.url}/sessions/{hs.S_EPOCHS}")
        assert rows.count() == len(facts.distinct) and dividers.count() == 3
        assert (
            dividers.first.locator(".divider-label").inner_text().startswith("Compaction 1 of 3 · ")
        )
        # Each summary is folded under its divider and opens natively.
        summary = dividers.nth(1).locator("details.divider-summary")
        assert summary.get_attribute("open") is None
        assert not summary.locator(".md").is_visible()
        summary.locator("summary").click()
        assert summary.get_attribute("open") is not None
        assert "so far: part 2" in summary.locator(".md").inner_text()
        summary.locator("summary").click()
        assert summary.get_attribute("open") is None
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        dividers.first.locator("details.divider-summary summary").click()
        page.screenshot(path=str(SCREENSHOTS / "session-epochs.png"), full_page=True)

        # The toggle swaps the transcript in place and pushes the URL, both ways.
        toggle = page.locator("#transcript .view-toggle")
        toggle.get_by_text("What the agent sees now").click()
        page.wait_for_url(re.compile(r"[?&]view=live"))
        page.locator(
            '#transcript .view-toggle a[aria-current="page"]', has_text="What the agent sees now"
        ).wait_for()
        assert rows.count() == 5 and dividers.count() == 1
        assert page.locator("#transcript .tag-copy").count() == 2
        assert hs.EPOCH1_WORD not in page.locator("#transcript").inner_text()
        page.screenshot(path=str(SCREENSHOTS / "session-live.png"), full_page=True)
        toggle.get_by_text("Everything").click()
        page.wait_for_url(re.compile(rf"/sessions/{hs.S_EPOCHS}$"))
        page.locator(
            '#transcript .view-toggle a[aria-current="page"]', has_text="Everything"
        ).wait_for()
        assert dividers.count() == 3

        # Back restores each view.
        page.go_back()
        page.wait_for_url(re.compile(r"[?&]view=live"))
        page.locator(
            '#transcript .view-toggle a[aria-current="page"]', has_text="What the agent sees now"
        ).wait_for()
        assert rows.count() == 5
        page.go_back()
        page.wait_for_url(re.compile(rf"/sessions/{hs.S_EPOCHS}$"))
        page.locator(
            '#transcript .view-toggle a[aria-current="page"]', has_text="Everything"
        ).wait_for()
        assert dividers.count() == 3

        # A link to a re-inserted copy lands on the row it repeats.
        original = next(m for m in everything["messages"] if m["copies"])
        copy = original["copies"][0]
        page.goto(f"{srv.url}/sessions/{hs.S_EPOCHS}?at={copy}#m{copy}")
        assert page.locator(f"#m{original['id']}").is_visible()
        assert page.locator(f"#m{original['id']}").bounding_box()["y"] < 300

        # The stitched transcript has the same dividers and toggle.
        page.goto(f"{srv.url}/chains/{hs.S_EPOCHS}/transcript")
        assert page.locator("#stitched li.compaction-divider").count() == 3
        page.locator("#stitched .view-toggle").get_by_text("What the agent sees now").click()
        page.wait_for_url(re.compile(r"[?&]view=live"))
        page.locator("#stitched .tag-copy").first.wait_for()
        assert page.locator("#stitched li.compaction-divider").count() == 1
    assert watch.problems == []


def test_a_v31_conversation_shows_each_message_once_and_marks_what_repeats(
    tmp_path: Path, page
) -> None:
    """Hermes v31's in-place compactions in Chromium: three dividers (one summary merged
    into a tool call), each retained original shown where it was said and tagged, the
    undone turn absent; the live view tags every re-inserted copy."""
    facts = hv.build_v31_home(tmp_path / "home")
    sid = facts.long_session
    watch = PageWatch()
    watch.attach(page)
    args = ["--home", str(facts.root), "--data-dir", str(tmp_path / "data")]
    with running_server(args, tmp_path) as srv:
        page.goto(f"{srv.url}/sessions/{sid}")
        dividers = page.locator("#transcript li.compaction-divider")
        assert dividers.count() == 3
        labels = dividers.locator(".divider-label").all_inner_texts()
        assert [label.split(" · ")[0] for label in labels] == [
            "Compaction 1 of 3",
            "Compaction 2 of 3",
            "Compaction 3 of 3",
        ]
        superseded = sum(len(c.superseded) for c in facts.compactions[sid])
        assert page.locator("#transcript .msg .tag", has_text="re-inserted later").count() == (
            superseded
        )
        text = page.locator("#transcript").inner_text()
        assert hv.UNDO_MARKER not in text and hv.SUMMARY_BOILERPLATE not in text
        assert text.count(f"move it to {hv.TAIL_MARKER} port 8181") == 1
        dividers.nth(1).locator("details.divider-summary summary").click()
        assert facts.compactions[sid][1].summary in dividers.nth(1).inner_text()
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "session-v31.png"), full_page=True)
        page.goto(f"{srv.url}/sessions/{sid}?view=live")
        live = page.locator("#transcript li.msg, #transcript li.compaction-divider")
        assert live.count() == len(facts.live_order[sid])
        assert page.locator("#transcript .tag-copy").count() == 2  # the last retained tail
    assert watch.problems == []
