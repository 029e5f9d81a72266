"""Where each memory entry came from, in real Chromium over a real ``recall serve``.

The home is :func:`memory_homes.build_memory_home`'s: the entries its ``memory`` calls
wrote (``WRITTEN_BY``), and the ones no call wrote (``NO_TRANSCRIPT``). Every link is
followed by a click, and the message it lands on is checked against the archive, read
here with sqlite3 (not through Recall), by the call's own id.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import expect

from dashboard.store.readonly import readonly_uri
from tests.support.browser_support import SCREENSHOTS, PageWatch, Server, running_server
from tests.support.memory_homes import (
    MEMORY_ENTRIES,
    NO_TRANSCRIPT,
    USER_ENTRIES,
    WORK_USER_ENTRIES,
    WRITTEN_BY,
    MemoryHomeFacts,
    build_memory_home,
)

FILES = {"USER.md": ("user", USER_ENTRIES), "MEMORY.md": ("memory", MEMORY_ENTRIES)}
PROFILE_FILES = {
    "default": FILES,
    "work": {"USER.md": ("user", WORK_USER_ENTRIES), "MEMORY.md": ("memory", ())},
}
ADDED_OUTSIDE = "Drinks green tea"  # written by hand while the server runs


class Archive:
    """The archive ``recall serve`` keeps, read with sqlite3 (read-only)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _one(self, sql: str, *args: object) -> tuple:
        with closing(sqlite3.connect(readonly_uri(self.path), uri=True)) as conn:
            row = conn.execute(sql, args).fetchone()
        assert row is not None, (sql, args)
        return row

    def call(self, call_id: str) -> tuple[str, int]:
        """The session and message id of the assistant row making ``call_id``."""
        return self._one(
            "SELECT session_id, id FROM messages WHERE role = 'assistant' AND tool_calls LIKE ?",
            f'%"{call_id}"%',
        )

    def user_message(self, session_id: str, text: str) -> int:
        return self._one(
            "SELECT id FROM messages WHERE session_id = ? AND role = 'user' AND content = ?",
            session_id,
            text,
        )[0]


@dataclass(frozen=True)
class Write:
    """A successful ``memory`` call that wrote an entry, as the fixture's rows hold it."""

    call_id: str
    action: str
    said: str | None  # the user's row just before the call's, in its session


def _written_by_calls(home: Path, entries: dict[str, tuple[str, ...]]) -> dict[str, Write]:
    """Each entry of ``entries`` (by target) that a successful ``memory`` call in the
    home's state.db wrote, with the newest such call: read from the fixture's rows, an
    ``add`` or ``replace`` (a batch's operations one by one) whose stripped content is
    the entry and whose result does not say ``success: false``."""
    with closing(sqlite3.connect(readonly_uri(home / "state.db"), uri=True)) as conn:
        results = {
            call_id: json.loads(content)
            for call_id, content in conn.execute(
                "SELECT tool_call_id, content FROM messages WHERE role = 'tool'"
                " AND tool_name = 'memory'"
            )
        }
        rows = conn.execute(
            "SELECT session_id, role, content, tool_calls FROM messages ORDER BY timestamp, id"
        ).fetchall()
    written: dict[str, Write] = {}
    last_said: dict[str, str] = {}
    for session_id, role, content, tool_calls in rows:
        if role == "user":
            last_said[session_id] = content
        if role != "assistant" or not tool_calls:
            continue
        for call in json.loads(tool_calls):
            if call["function"]["name"] != "memory" or not results[call["id"]]["success"]:
                continue
            args = json.loads(call["function"]["arguments"])
            for op in args.get("operations") or [args]:
                text = (op.get("content") or "").strip()
                if op["action"] in ("add", "replace") and text in entries[args["target"]]:
                    written[text] = Write(call["id"], op["action"], last_said.get(session_id))
    return written


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[MemoryHomeFacts, Server, Archive]]:
    root = tmp_path_factory.mktemp("provenance")
    facts = build_memory_home(root / "hermes")
    data = root / "data"
    args = ["--home", str(facts.root), "--data-dir", str(data)]
    with running_server(args, root, {"HOME": str(root / "user")}) as server:
        yield facts, server, Archive(data / "archive.db")


def _link(session_id: str, message_id: int, profile: str = "default") -> str:
    return f"/sessions/{session_id}?at={message_id}&profile={profile}#m{message_id}"


def _follow(page, link, session_id: str, message_id: int, profile: str = "default") -> None:
    """Click ``link``: the session page at ``message_id``, shown and outlined as the
    page's target (``.msg:target``), then back to the memory page."""
    assert link.get_attribute("href") == _link(session_id, message_id, profile)
    link.click()
    page.wait_for_url(re.compile(rf"/sessions/{re.escape(session_id)}\?.*#m{message_id}$"))
    expect(page.locator(".session-id")).to_have_text(session_id)
    target = page.locator(f"#m{message_id}")
    expect(target).to_be_visible()
    assert page.evaluate("document.querySelector(':target')?.id") == f"m{message_id}"
    assert target.evaluate("e => getComputedStyle(e).outlineStyle") == "solid"
    box = target.bounding_box()
    assert box is not None and 0 <= box["y"] < page.viewport_size["height"]
    page.go_back()
    page.wait_for_url(re.compile(r"/memory/"))


def _open(page, number: int):
    """Entry ``number``'s "Where it came from", opened by a click on its summary."""
    block = page.locator(f"#provenance-{number}")
    expect(block).to_be_visible()
    if block.get_attribute("open") is None:
        block.locator("summary").click()
    expect(block).to_have_attribute("open", "")
    return block


def _memory_ops(home: Path) -> list[tuple[str, str, dict]]:
    """Every ``memory`` operation in the home's state.db, oldest first: (call id,
    target, operation), a batch's operations one by one."""
    with closing(sqlite3.connect(readonly_uri(home / "state.db"), uri=True)) as conn:
        rows = conn.execute(
            "SELECT tool_calls FROM messages WHERE role = 'assistant'"
            " AND tool_calls IS NOT NULL ORDER BY timestamp, id"
        ).fetchall()
    ops = []
    for (tool_calls,) in rows:
        for call in json.loads(tool_calls):
            if call["function"]["name"] == "memory":
                args = json.loads(call["function"]["arguments"])
                ops += [(call["id"], args["target"], op) for op in args.get("operations") or [args]]
    return ops


def _calls_about(home: Path, target: str, text: str) -> list[str]:
    """The ids of the calls that wrote, replaced or removed ``text`` or an earlier version
    of it (through a replace's ``old_text``), oldest first: what the page lists."""
    ops = [(c, op) for c, t, op in _memory_ops(home) if t == target]
    versions = {text}
    for *_, content, _earlier_id, earlier_text in reversed(_replace_chains(home)):
        if content in versions:
            versions.add(earlier_text)
    about = []
    for call_id, op in ops:
        content, old_text = (op.get("content") or "").strip(), op.get("old_text")
        if content in versions or (old_text and any(old_text in v for v in versions)):
            if call_id not in about:
                about.append(call_id)
    return about


def _replace_chains(home: Path) -> list[tuple[str, str, str, str, str]]:
    """From the fixture's rows: each ``replace`` call, its ``old_text``, its content, and
    the newest earlier call whose content holds ``old_text`` with that content (the
    earlier version)."""
    seen: list[tuple[str, str]] = []  # (call id, content) of each write so far
    chains = []
    for call_id, _target, op in _memory_ops(home):
        if op["action"] == "replace":
            earlier = [c for c in seen if op["old_text"] in c[1]]
            if earlier:
                chains.append((call_id, op["old_text"], op["content"], *earlier[-1]))
        if op.get("content"):
            seen.append((call_id, op["content"].strip()))
    return chains


@pytest.mark.parametrize("profile", ["default", "work"])
def test_every_entry_a_memory_call_wrote_links_to_its_message(served, page, profile) -> None:
    facts, server, archive = served
    files = PROFILE_FILES[profile]
    home = facts.root if profile == "default" else facts.work
    written = _written_by_calls(home, dict(files.values()))
    if profile == "default":  # the fixture's rows agree with its own account of them
        assert {text: w.call_id for text, w in written.items()} == WRITTEN_BY
        assert all(facts.said[w.call_id] == w.said for w in written.values())
    else:
        assert set(written) == set(WORK_USER_ENTRIES)
    watch = PageWatch()
    watch.attach(page)
    checked = []
    for name, (t, entries) in files.items():
        page.goto(f"{server.url}/memory/{name}?profile={profile}")
        for number, text in enumerate(entries, 1):
            if text not in written:
                continue
            write = written[text]
            session_id, message_id = archive.call(write.call_id)
            block = _open(page, number)
            expect(block.locator("summary")).to_contain_text("written by the agent in")
            # every call about it, in order: each link goes to the call's own message
            links = block.locator("a.memory-provenance-call")
            expected = [_link(*archive.call(c), profile) for c in _calls_about(home, t, text)]
            assert [links.nth(i).get_attribute("href") for i in range(links.count())] == expected
            wrote = block.locator(".memory-provenance-event", has_text="wrote it").last
            expect(wrote.locator(".tag")).to_have_text("wrote it")
            link = wrote.locator("a.memory-provenance-call")
            expect(link).to_contain_text(write.action)
            _follow(page, link, session_id, message_id, profile)
            # the user's words just before the call: quoted, linked to their own message
            assert write.said is not None
            said_id = archive.user_message(session_id, write.said)
            assert said_id < message_id
            said = _open(page, number).locator(".memory-provenance-event", has_text="wrote it")
            said = said.last.locator(".memory-provenance-said")
            expect(said).to_contain_text("the user said it")
            expect(said.locator("q")).to_have_text(write.said)
            _follow(page, said.locator("a"), session_id, said_id, profile)
            checked.append(text)
    assert sorted(checked) == sorted(written)
    assert watch.problems == []


def test_a_replace_shows_the_version_it_replaced(served, page) -> None:
    facts, server, archive = served
    chains = _replace_chains(facts.root)
    assert chains  # the fixture has one: Lisbon -> Porto
    watch = PageWatch()
    watch.attach(page)
    page.goto(f"{server.url}/memory/USER.md?profile=default")
    for call_id, old_text, content, earlier_id, earlier_text in chains:
        assert WRITTEN_BY[content] == call_id
        number = USER_ENTRIES.index(content) + 1
        block = _open(page, number)
        wrote = block.locator(".memory-provenance-event", has_text="wrote it")
        expect(wrote).to_contain_text(f"replaced the entry holding “{old_text}”")
        earlier = block.locator(".memory-provenance-event", has_text="wrote an earlier version")
        expect(earlier.locator(".tag")).to_have_text("wrote an earlier version")
        expect(earlier).to_contain_text(f"“{earlier_text}”")
        session_id, message_id = archive.call(earlier_id)
        _follow(page, earlier.locator("a.memory-provenance-call"), session_id, message_id)
        _open(page, number)  # as it was before the click: the screenshot's view
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "memory_provenance.png"))
    assert watch.problems == []


def test_entries_no_call_wrote_name_the_background_review_and_when_they_appeared(
    served, page
) -> None:
    facts, server, archive = served
    written = _written_by_calls(facts.root, dict(FILES.values()))
    without = [text for text in USER_ENTRIES if text not in written]
    assert without == list(NO_TRANSCRIPT)
    watch = PageWatch()
    watch.attach(page)
    page.goto(f"{server.url}/memory/USER.md?profile=default")
    for text in without:
        block = _open(page, USER_ENTRIES.index(text) + 1)
        expect(block.locator("summary")).to_contain_text(
            "the background review or by hand (no transcript)"
        )
        none = block.locator(".memory-provenance-none")
        expect(none).to_contain_text("written by the background review")
        expect(none).to_contain_text("It was already there at")  # the oldest revision kept
        expect(block.locator(".tag", has_text="wrote it")).to_have_count(0)
    # the failed add of the name never wrote it, and links to its call
    ada = _open(page, USER_ENTRIES.index("Name: Ada") + 1)
    failed = ada.locator(".memory-provenance-event", has_text="failed to write it")
    _follow(page, failed.locator("a.memory-provenance-call"), *archive.call("call_ada_failed"))

    # written by hand (or the review) while Recall runs: between two revisions
    user_md = facts.root / "memories" / "USER.md"
    before = user_md.read_text(encoding="utf-8")
    user_md.write_text(before + "\n§\n" + ADDED_OUTSIDE, encoding="utf-8")
    try:
        page.goto(f"{server.url}/memory/USER.md?profile=default")
        expect(page.locator(f"#entry-{len(USER_ENTRIES) + 1} .memory-text")).to_have_text(
            ADDED_OUTSIDE
        )
        tea = _open(page, len(USER_ENTRIES) + 1)
        expect(tea.locator("summary")).to_contain_text("(no transcript)")
        expect(tea.locator(".memory-provenance-none")).to_contain_text(
            re.compile(
                r"It appeared between .+ \(revision #\d+, without it\) and .+"
                r" \(revision #\d+, written outside Recall\)"
            )
        )
    finally:
        user_md.write_text(before, encoding="utf-8")
    assert watch.problems == []
