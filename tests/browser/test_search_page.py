"""The search page in real Chromium: live results, URL state, Back, untrusted text."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from tests.support.browser_support import SCREENSHOTS, PageWatch, Server, running_server
from tests.support.llm_stub import StubLLM

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'


def test_typing_updates_results_without_a_page_load(demo_server: Server, page) -> None:
    watch = PageWatch()
    watch.attach(page)
    page.goto(demo_server.url + "/")
    assert "most recent first" in page.locator("#results").inner_text()
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads

    box = page.locator("#q")
    box.fill("redis")
    page.wait_for_url("**/?*q=redis*")
    page.wait_for_selector("#results .card mark")
    assert page.evaluate("window.__sameDocument") is True
    assert "searched whole words" in page.locator(".result-meta").inner_text()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "search-results.png"), full_page=False)

    page.wait_for_timeout(1100)  # a pause: the next search is a history entry of its own
    box.fill("docker")
    page.wait_for_url("**/?*q=docker*")
    expect(page.locator("#results mark").first).to_have_text(re.compile("docker", re.I))

    page.go_back()
    page.wait_for_url("**/?*q=redis*")
    expect(page.locator("#q")).to_have_value("redis")
    expect(page.locator("#results mark").first).to_have_text(re.compile("redis", re.I))
    assert watch.problems == []


def test_filters_and_pages_keep_the_url(demo_server: Server, page) -> None:
    page.goto(demo_server.url + "/?q=the&sort=newest")
    assert page.locator("input[name=sort][value=newest]").is_checked()
    next_link = page.locator(".pager a[rel=next]")
    if next_link.count():
        next_link.click()
        page.wait_for_url("**page=2*")
        assert "sort=newest" in page.url and "q=the" in page.url


def test_unusable_query_shows_a_message(demo_server: Server, page) -> None:
    page.goto(demo_server.url + "/")
    page.locator("#q").fill("AND OR")
    page.wait_for_selector("#results .notice.error")
    assert "Nothing to search for" in page.locator("#results").inner_text()


def test_slash_focuses_the_search_box(demo_server: Server, page) -> None:
    page.goto(demo_server.url + "/overview")
    page.goto(demo_server.url + "/")
    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    root = tmp_path_factory.mktemp("hostile")
    with SessionStore(root / "home" / "state.db") as store:
        sid = store.create_session("cli", title=f"pwn {SCRIPT}")
        store.append_messages(
            sid,
            [
                NewMessage("user", f"xsscheck {SCRIPT} and {IMG} end"),
                NewMessage("assistant", f"Quoting it back: xsscheck `{SCRIPT}` {IMG}"),
            ],
        )
    with running_server(["--home", str(Path(root / "home"))], root) as server:
        yield server, sid


def test_untrusted_text_stays_text(hostile_server: tuple[Server, str], page) -> None:
    server, sid = hostile_server
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(server.url + "/?q=xsscheck")
    page.wait_for_selector("#results .card mark")
    results = page.locator("#results").inner_text()
    assert SCRIPT in results and "onerror=alert(1)" in results
    assert (
        page.locator("#results img").count() == 0 and page.locator("#results script").count() == 0
    )
    page.goto(f"{server.url}/sessions/{sid}?q=xsscheck")
    transcript = page.locator("#transcript").inner_text()
    assert SCRIPT in transcript and "onerror=alert(1)" in transcript
    assert page.locator("#transcript img").count() == 0
    page.goto(server.url + "/")  # the title in the recent list
    assert SCRIPT in page.locator("#results").inner_text()
    assert dialogs == []


def test_a_summary_button_replaces_only_its_slot(tmp_path: Path, page) -> None:
    # A session id is data: "zz, #main" used as a CSS selector would target <main> too.
    sid = "zz, #main"
    with SessionStore(tmp_path / "home" / "state.db") as store:
        store.create_session("cli", session_id=sid, title="Selector trouble")
        store.append_messages(sid, [NewMessage("user", "walrus selector test")])
        other = store.create_session("cli", title="Another walrus")
        store.append_messages(other, [NewMessage("user", "walrus again")])
    args = ["--home", str(tmp_path / "home"), "--data-dir", str(tmp_path / "data")]
    with (
        StubLLM() as stub,
        running_server(args, tmp_path, {"RECALL_LLM_BASE_URL": stub.url}) as server,
    ):
        page.goto(server.url + "/?q=walrus&summaries=button")
        expect(page.locator("#results .card")).to_have_count(2)
        card = page.locator(".card", has_text="Selector trouble")
        card.locator(".summary-button").click()
        expect(
            card.locator(".summary-slot .summary-label, .summary-slot .summary-text")
        ).to_have_count(1)
        expect(page.locator("main #results .card")).to_have_count(2)
        expect(page.locator("#search-form")).to_have_count(1)
        other_card = page.locator(".card", has_text="Another walrus")
        expect(other_card.locator(".summary-button")).to_have_count(1)


RELOAD_MS = 30_000  # a full page load of the demo home under load


def test_typing_replaces_the_history_entry_until_a_pause(demo_server: Server, page) -> None:
    page.goto(demo_server.url + "/")
    before = page.evaluate("history.length")
    box = page.locator("#q")
    box.click()
    page.keyboard.type("kubernetes ingress", delay=333)  # 3 keys a second
    page.wait_for_url(re.compile(r"q=kubernetes(\+|%20)ingress(&|$)"))
    page.wait_for_timeout(1500)  # a pause: the entry stays
    assert page.evaluate("history.length") - before == 1
    assert "kubernetes ingress" in page.title()
    # A second burst after the pause is a new entry; Back returns to the first.
    box.press("End")
    page.keyboard.type(" tls", delay=333)
    page.wait_for_url(re.compile(r"q=kubernetes(\+|%20)ingress(\+|%20)tls(&|$)"))
    assert page.evaluate("history.length") - before == 2
    # Back reloads the page (no history cache: historyCacheSize 0), which on a loaded
    # machine takes longer than expect's default 5 s; the old page shows until then.
    page.go_back()
    page.wait_for_url(re.compile(r"q=kubernetes(\+|%20)ingress(&|$)"))
    expect(page.locator("#q")).to_have_value("kubernetes ingress", timeout=RELOAD_MS)
    page.go_back()
    page.wait_for_url(re.compile(r"/$"))
    expect(page.locator("#results")).to_contain_text("most recent first", timeout=RELOAD_MS)
    # Submitting what is already shown adds no entry.
    page.goto(demo_server.url + "/?q=redis")
    before = page.evaluate("history.length")
    page.locator("#q").press("Enter")
    page.wait_for_timeout(800)
    assert page.evaluate("history.length") == before


def test_a_back_before_the_scripts_have_run_still_shows_its_own_page(
    demo_server: Server, page
) -> None:
    """The race the test above met under load, made certain: the first Back reloads the
    page, the second lands while the reloaded page's scripts are still loading."""
    page.goto(demo_server.url + "/")
    box = page.locator("#q")
    box.fill("redis")
    page.wait_for_url("**/?*q=redis*")
    page.wait_for_timeout(1100)  # a pause: the next search is a history entry of its own
    box.fill("docker")
    page.wait_for_url("**/?*q=docker*")
    held = []  # the reloaded page's htmx (and so its app.js, run after it), held back
    page.route("**/vendor/htmx.min.js", lambda route: held.append(route), times=1)
    # Waits end at commit: the reloaded page never reaches "load" while its script is held.
    page.go_back(wait_until="commit")
    page.wait_for_url("**/?*q=redis*", wait_until="commit")
    expect(page.locator("#q")).to_have_value("redis", timeout=RELOAD_MS)
    for _ in range(RELOAD_MS // 100):  # the handler runs while Playwright waits
        if held:
            break
        page.wait_for_timeout(100)
    assert len(held) == 1
    page.go_back(wait_until="commit")  # the reloaded page has no script running yet
    page.wait_for_url(re.compile(r"/$"), wait_until="commit")
    held[0].continue_()
    expect(page.locator("#results")).to_contain_text("most recent first", timeout=RELOAD_MS)
    expect(page.locator("#q")).to_have_value("")


def test_next_page_scrolls_to_the_new_results(demo_server: Server, page) -> None:
    page.set_viewport_size({"width": 1280, "height": 700})
    page.goto(demo_server.url + "/?q=the&summaries=off")
    next_link = page.locator(".pager a[rel=next]")
    next_link.scroll_into_view_if_needed()
    next_link.click()
    page.wait_for_url("**page=2*")
    first = page.locator("#results .card").first
    first.wait_for()
    top = first.bounding_box()["y"]
    assert 0 <= top < 700, top  # the new page's first card is on screen


def test_back_from_a_session_restores_the_card_it_was_opened_from(
    demo_server: Server, page
) -> None:
    page.set_viewport_size({"width": 1280, "height": 700})
    page.goto(demo_server.url + "/?q=the&summaries=off&page=2")
    # Open a card far down the page, come Back: the same card is where it was.
    card = page.locator("#results .card").nth(8)
    card.scroll_into_view_if_needed()
    page.mouse.wheel(0, 150)
    page.wait_for_timeout(200)
    before = card.bounding_box()["y"]
    card.locator("h3 a").click()
    page.wait_for_url("**/sessions/**")
    page.go_back()
    page.wait_for_url("**page=2*")
    page.locator("#results .card").nth(8).wait_for()
    page.wait_for_timeout(300)
    after = page.locator("#results .card").nth(8).bounding_box()["y"]
    assert abs(after - before) < 40, (before, after)


def _overlaps(a: dict, b: dict) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


@pytest.mark.parametrize("width", [1280, 390])
def test_the_filter_panel_does_not_overlap(demo_server: Server, page, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(demo_server.url + "/?q=redis")
    panel = page.locator("details.filters")
    panel.locator("summary").click()
    boxes = [f.bounding_box() for f in panel.locator("fieldset").all()]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not _overlaps(a, b), (a, b)
    for fieldset in panel.locator("fieldset").all():
        outer = fieldset.bounding_box()
        for control in fieldset.locator("select, input").all():
            inner = control.bounding_box()
            assert inner["x"] >= outer["x"] and inner["x"] + inner["width"] <= (
                outer["x"] + outer["width"]
            ), (inner, outer)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"search-filters-{width}.png"))


@pytest.mark.parametrize("args", ["group=session", "summaries=off", "sort=oldest"])
def test_the_filter_panel_starts_open_when_sort_group_or_summaries_are_set(
    demo_server: Server, page, args: str
) -> None:
    page.goto(f"{demo_server.url}/?q=redis&{args}")
    assert page.locator("details.filters").get_attribute("open") is not None


def test_the_caret_lands_after_the_query(demo_server: Server, page) -> None:
    page.goto(demo_server.url + "/?q=redis")
    assert page.evaluate("document.activeElement.id") == "q"
    assert page.evaluate("[q.selectionStart, q.selectionEnd]") == [5, 5]


def test_the_url_leaves_out_empty_fields(demo_server: Server, page) -> None:
    page.goto(demo_server.url + "/?q=redis")
    page.locator("details.filters > summary").click()
    page.locator("input[name=sort][value=newest]").check()
    page.wait_for_url("**sort=newest*")
    query = page.url.split("?", 1)[1]
    assert all(not part.endswith("=") for part in query.split("&")), query
    assert "model=" not in query and "exclude=" not in query


def test_the_page_uses_plain_words(demo_server: Server, page) -> None:
    for url in ("/?q=redis", "/?q=数据库", "/?q=部署", "/?q=部", "/"):
        page.goto(demo_server.url + url)
        text = page.locator("main").inner_text()
        for jargon in ("unicode61", "trigram", "word index", "in a family", "Exclude session"):
            assert jargon not in text, (url, jargon)
    page.goto(demo_server.url + "/?q=部")
    assert "searched every message" in page.locator(".result-meta").inner_text()
    page.goto(demo_server.url + "/?q=部署")
    assert "parts of words that begin with" in page.locator(".result-meta").inner_text()


def test_the_model_facet_counts_and_groups_spellings(demo_server: Server, page) -> None:
    page.goto(demo_server.url + "/")
    options = page.locator("select[name=model] option").all_text_contents()
    sonnet = [o for o in options if "sonnet-4" in o]
    assert len(sonnet) == 1, options  # anthropic/claude-sonnet-4.5 and claude-sonnet-4-5
    assert re.search(r"\(\d+[,)]", sonnet[0]), sonnet
    sources = page.locator("fieldset", has_text="Source").text_content()
    assert re.search(r"cli\s*\(\d+\)", sources), sources
    page.locator("details.filters > summary").click()
    page.locator("select[name=model]").select_option(label=sonnet[0])
    page.wait_for_url("**model=*")
    models = set(page.locator("#results .card-meta").all_inner_texts())
    spellings = {
        s
        for s in ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5")
        if any(s in m for m in models)
    }
    assert spellings == {"anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"}, models


def test_j_and_k_move_between_cards(demo_server: Server, page) -> None:
    page.goto(demo_server.url + "/?q=redis&summaries=button")
    titles = page.locator("#results .card h3 a")
    page.locator("body").click(position={"x": 5, "y": 400})
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.closest('.card') !== null")
    first = page.evaluate("document.activeElement.href")
    assert first == titles.nth(0).evaluate("a => a.href")
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.href") == titles.nth(1).evaluate("a => a.href")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.href") == titles.nth(2).evaluate("a => a.href")
    page.keyboard.press("k")
    assert page.evaluate("document.activeElement.href") == titles.nth(1).evaluate("a => a.href")
    page.keyboard.press("ArrowUp")
    assert page.evaluate("document.activeElement.href") == first
    # Typing in the box, arrows stay the box's.
    page.locator("#q").click()
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.id") == "q"


def test_a_card_is_one_or_two_tab_stops(demo_server: Server, page) -> None:
    page.goto(demo_server.url + "/?q=redis")
    titles = page.locator("#results .card h3 a")
    titles.nth(0).focus()
    stops = 0
    while page.evaluate("document.activeElement.href") != titles.nth(1).evaluate("a => a.href"):
        page.keyboard.press("Tab")
        stops += 1
        assert stops <= 2, page.evaluate("document.activeElement.outerHTML")


@pytest.fixture(scope="module")
def epochs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, object]]:
    """A home compacted in place three times (tests/hermes_shapes.build_epochs_home)."""
    from tests.support import hermes_shapes as hs

    root = tmp_path_factory.mktemp("epochs")
    facts = hs.build_epochs_home(root / "home")
    with running_server(
        ["--home", str(root / "home"), "--data-dir", str(root / "data")], root
    ) as server:
        yield server, facts


def test_a_hit_before_a_compaction_lands_on_that_message(
    epochs_server: tuple[Server, object], page
) -> None:
    from tests.support import hermes_shapes as hs

    server, facts = epochs_server
    watch = PageWatch()
    watch.attach(page)
    page.set_viewport_size({"width": 1280, "height": 600})
    word = hs.EPOCH_WORDS[1]  # said in epoch 3, then re-inserted as the live tail
    page.goto(f"{server.url}/?q={word}")
    card = page.locator("#results .card")
    expect(card).to_have_count(1)
    expect(card.locator(".badge.hits")).to_have_text("2 hits")  # the copies are not hits again
    first = card.locator("a.hit").first
    expect(first.locator(".hit-epoch")).to_have_text("before compaction 3 of 3")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "search-epochs.png"), full_page=False)
    first.click()
    target = facts.word_ids[word]  # the archive keeps the source's ids when free
    page.wait_for_url(f"**/sessions/{hs.S_EPOCHS}?*#m{target}")
    message = page.locator(f"#m{target}")
    expect(message).to_be_in_viewport()
    expect(message).to_contain_text(word)
    assert watch.problems == []
