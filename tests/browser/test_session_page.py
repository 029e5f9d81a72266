"""The session page in real Chromium: clean load, native disclosure, HTMX, inert payloads."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect

from tests.support.browser_support import SCREENSHOTS, PageWatch, Server, running_server
from tests.support.pages import IMG, SCRIPT, xss_home


def test_session_page_reads_cleanly(demo_server: Server, demo_sessions: dict[str, str], page):
    watch = PageWatch()
    watch.attach(page)
    sid = demo_sessions["middle"]
    page.goto(f"{demo_server.url}/sessions/{sid}")
    assert page.locator(".session-id").inner_text() == sid
    assert page.locator("#transcript li.msg").count() > 2
    assert page.locator(".chain-prev").is_visible() and page.locator(".chain-next").is_visible()
    assert page.locator(".is-summary").first.is_visible()

    # Tool calls are collapsed and open natively, without any script of ours.
    call = page.locator("details.tool-call").first
    assert call.get_attribute("open") is None
    assert not call.locator("pre").is_visible()
    call.locator("summary").click()
    assert call.get_attribute("open") is not None and call.locator("pre").is_visible()
    call.locator("summary").click()
    assert call.get_attribute("open") is None

    # Highlight through the form: HTMX swaps the transcript and pushes the URL.
    words = re.findall(r"[A-Za-z]{6,}", page.locator(".role-user .md").nth(1).inner_text())
    box = page.locator(".find-in-session input[name=q]")
    box.fill(words[0])
    box.press("Enter")
    page.wait_for_url(re.compile(r"[?&]q="))
    page.locator("#transcript mark").first.wait_for()
    assert page.locator("#transcript").count() == 1
    first_match = page.locator(".match-list a").first
    target = first_match.get_attribute("href")
    first_match.click()
    assert page.url.endswith(target)
    assert page.locator(target).is_visible()
    assert page.locator(f"{target} mark").count() > 0

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.goto(f"{demo_server.url}/sessions/{sid}?q={words[0]}")
    page.screenshot(path=str(SCREENSHOTS / "session.png"))

    page.locator(".chain-next").click()
    page.wait_for_load_state("networkidle")
    assert page.locator(".chain-prev").get_attribute("href").startswith(f"/sessions/{sid}")
    assert watch.problems == []


def test_payloads_in_messages_stay_text_in_the_browser(tmp_path: Path, browser) -> None:
    home, sid = xss_home(tmp_path)
    context = browser.new_context()
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    watch = PageWatch()
    watch.attach(page)
    args = ["--home", str(home), "--data-dir", str(tmp_path / "data")]
    try:
        with running_server(args, tmp_path) as srv:
            for query in ("", "?all=1&q=img+onerror+script"):
                page.goto(f"{srv.url}/sessions/{sid}{query}")
                summaries = page.locator("#transcript details > summary")
                for i in range(summaries.count()):
                    if summaries.nth(i).locator("xpath=..").get_attribute("open") is None:
                        summaries.nth(i).click()
                page.wait_for_timeout(200)
                text = page.locator("#transcript").inner_text()
                assert SCRIPT in text and IMG in text
                assert "[a bad link](javascript:alert(3))" in text
                assert page.locator("#transcript img, #transcript script").count() == 0
                assert IMG in page.locator("h1").inner_text()
    finally:
        context.close()
    assert dialogs == []
    assert watch.problems == []  # not even a script the CSP had to refuse


def test_a_link_to_a_message_lands_on_its_page(tmp_path: Path, page) -> None:
    from tests.support.long_homes import long_home

    home, ids, more = long_home(tmp_path)
    watch = PageWatch()
    watch.attach(page)
    args = ["--home", str(home), "--data-dir", str(tmp_path / "data")]
    with running_server(args, tmp_path) as srv:
        # A bare anchor (an old link, a bookmark): the script asks for the right page.
        target = ids[1_050]
        page.goto(f"{srv.url}/sessions/long-a?q=1050#m{target}")
        page.wait_for_url(re.compile(rf"at={target}"))
        page.locator(f"#m{target} mark").first.wait_for()
        assert page.locator(f"#m{target}").is_visible()
        assert page.url.endswith(f"#m{target}") and "q=1050" in page.url
        # The list of matches links across pages.
        page.goto(f"{srv.url}/sessions/long-a?q=7+OR+1050")
        page.locator(".match-list a", has_text="page 3").click()
        page.wait_for_url(re.compile(rf"#m{target}$"))
        assert page.locator(f"#m{target}").is_visible()
        # Next page through HTMX keeps the highlight.
        page.goto(f"{srv.url}/sessions/long-a?q=talk")
        page.locator("#transcript .pager a[rel=next]").first.click()
        page.wait_for_url(re.compile(r"page=2"))
        assert page.locator(f"#m{ids[500]} mark").count() > 0
        # The stitched transcript: a bare anchor of its last page.
        page.goto(f"{srv.url}/chains/long-b/transcript#m{more[3]}")
        page.wait_for_url(re.compile(rf"at={more[3]}"))
        assert page.locator(f"#m{more[3]}").is_visible()
    assert watch.problems == []


def test_the_match_stepper_walks_every_match_across_pages(tmp_path: Path, page) -> None:
    from tests.support.long_homes import long_home

    home, ids, _ = long_home(tmp_path)
    watch = PageWatch()
    watch.attach(page)
    args = ["--home", str(home), "--data-dir", str(tmp_path / "data")]
    wanted = [ids[7], ids[499], ids[1_050]]  # pages 1, 1 and 3

    def on_screen(message_id: int) -> bool:
        box = page.locator(f"#m{message_id}").bounding_box()
        return box is not None and 0 <= box["y"] < page.viewport_size["height"]

    with running_server(args, tmp_path) as srv:
        page.goto(f"{srv.url}/sessions/long-a?q=7+OR+499+OR+1050")
        stepper = page.locator(".match-stepper")
        expect(stepper).to_contain_text("3 matches")
        page.locator("body").click(position={"x": 5, "y": 5})
        page.keyboard.press("n")
        expect(stepper).to_contain_text("match 1 of 3")
        assert on_screen(wanted[0])
        page.keyboard.press("n")
        expect(stepper).to_contain_text("match 2 of 3")
        assert on_screen(wanted[1])
        # The stepper stays in sight while the page scrolls (sticky).
        box = stepper.bounding_box()
        assert box is not None and 0 <= box["y"] < 80
        page.keyboard.press("n")  # on page 3
        page.wait_for_url(re.compile(rf"at={wanted[2]}"))
        expect(stepper).to_contain_text("match 3 of 3")
        assert on_screen(wanted[2])
        page.keyboard.press("N")  # back to page 1
        page.wait_for_url(re.compile(rf"#m{wanted[1]}$"))
        expect(stepper).to_contain_text("match 2 of 3")
        assert on_screen(wanted[1])
        stepper.get_by_role("link", name="Previous match").click()
        expect(stepper).to_contain_text("match 1 of 3")
        assert on_screen(wanted[0])
    assert watch.problems == []


def test_a_lone_untitled_session_reads_plainly(tmp_path: Path, page) -> None:
    from dashboard.store.records import NewMessage
    from dashboard.store.session_store import SessionStore

    home = tmp_path / "home"
    with SessionStore(home / "state.db") as store:
        sid = store.create_session("cli")
        store.append_messages(
            sid,
            [
                NewMessage("user", "Fix the `deploy.sh` **script**, see [docs](https://x.test)"),
                NewMessage(
                    "assistant",
                    "Looking.",
                    tool_calls=[
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path": "deploy.sh"}'},
                        }
                    ],
                ),
                NewMessage(
                    "tool",
                    "#!/bin/sh\n" + "echo step\n" * 30,
                    tool_call_id="c1",
                    tool_name="read_file",
                ),
                NewMessage("assistant", "Done.", reasoning="thinking about it " * 20),
            ],
        )
    args = ["--home", str(home), "--data-dir", str(tmp_path / "data")]
    with running_server(args, tmp_path) as srv:
        page.goto(f"{srv.url}/sessions/{sid}")
        heading = page.locator("h1.session-title").inner_text()
        assert heading.startswith("Fix the deploy.sh script, see docs"), heading
        assert "`" not in heading and "**" not in heading
        assert "chain" not in page.locator(".session-meta").inner_text()
        folded = page.locator(
            "#transcript details.tool-call, #transcript details.tool-result,"
            " #transcript details.reasoning"
        )
        assert folded.count() == 3
        page.get_by_role("button", name="Expand all").click()
        for i in range(3):
            assert folded.nth(i).get_attribute("open") is not None
        page.get_by_role("button", name="Collapse all").click()
        for i in range(3):
            assert folded.nth(i).get_attribute("open") is None


def test_a_chain_segment_still_says_its_part(demo_server: Server, demo_sessions, page) -> None:
    page.goto(f"{demo_server.url}/sessions/{demo_sessions['middle']}")
    assert re.search(r"part \d+ of \d+", page.locator(".session-meta").inner_text())
