"""The demo's story: a stack the user has the agent remember, then overturns (Python, then Go)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from dashboard.demo.build import USER_ENTRIES
from dashboard.demo.pending import _records
from dashboard.demo.plan import DAY, DemoPlanner, PlannedSession, anchor_for
from dashboard.demo.pricing import MODELS
from dashboard.demo.story import MEMORY_CALL_ID, STACK_ENTRY, STACK_OLD_TEXT, go_news, stack_now
from dashboard.hermes.memory_tool import WRITTEN, memory_ops, read_result
from tests.support.app import make_app
from tests.support.demo_homes import demo_home_copy

ANCHOR = "2026-11-30"
# Every other subject of the demo's USER.md: the story mentions none, so those entries
# have no newer mention (only the stack is overturned).
OTHER_SUBJECTS = (
    "Mara",
    "Lindqvist",
    "on-call",
    "Stockholm",
    "timezone",
    "emoji",
    "neovim",
    "fish",
    " uv",
    "中文",
    "Chinese",
    "terraform apply",
    "kubectl",
)


def _plan(seed: int, sessions: int, messages: int, *, story: bool) -> list[PlannedSession]:
    planner = DemoPlanner(seed, anchor_for(ANCHOR), sessions, messages, story=story)
    return list(planner.sessions())


@pytest.mark.parametrize(("seed", "sessions", "messages"), [(7, 30, 600), (11, 400, 12_000)])
def test_the_story_leaves_every_other_session_as_it_was(
    seed: int, sessions: int, messages: int
) -> None:
    with_story = _plan(seed, sessions, messages, story=True)
    without = _plan(seed, sessions, messages, story=False)
    story = [p for p in with_story if p.story]
    assert len(story) == 3 and not any(p.story for p in without)
    assert [p.record for p in with_story if not p.story] == [p.record for p in without]
    assert [p.turns for p in with_story if not p.story] == [p.turns for p in without]
    ids = [p.record.id for p in with_story]
    assert len(set(ids)) == len(ids)
    titles = [p.record.title for p in with_story if p.record.title]
    assert len(set(titles)) == len(titles)


def test_the_story_sits_in_time_order_at_its_ages() -> None:
    anchor = anchor_for(ANCHOR)
    plan = _plan(7, 400, 12_000, story=True)
    story = [(i, p.record) for i, p in enumerate(plan) if p.story]
    ages = [(anchor - r.started_at) / DAY for _, r in story]
    assert 299 < ages[0] < 301 and 39 < ages[1] < 41 and 9 < ages[2] < 11
    # Conversations begin in time order (as message ids grow with time in a real store):
    # each story session after every conversation begun before it, before every later one.
    begins = [
        (i, p.record.started_at) for i, p in enumerate(plan) if p.record.parent_session_id is None
    ]
    for index, record in story:
        assert all(at <= record.started_at for i, at in begins if i < index)
        assert all(at >= record.started_at for i, at in begins if i > index)
    for _, record in story:
        times = [m.timestamp for m in record.messages]
        assert times == sorted(times) and record.started_at < times[0]
        assert record.ended_at is not None and record.ended_at > times[-1]
        assert record.end_reason == "user_exit"
        assert record.model in {m.name for m in MODELS}
        assert record.usage and all(u.at is not None for u in record.usage)
        text = json.dumps([(m.content, m.tool_calls) for m in record.messages], ensure_ascii=False)
        for subject in OTHER_SUBJECTS:
            assert subject not in text, (record.title, subject)


def test_the_first_conversation_writes_the_stack_entry_as_hermes_stores_it() -> None:
    first = next(p for p in _plan(7, 30, 600, story=True) if p.story).record
    assert first.source == "cli" and STACK_ENTRY in USER_ENTRIES
    calls = [m for m in first.messages if m.tool_calls]
    assert len(calls) == 1 and calls[0].role == "assistant"
    (op,) = memory_ops(calls[0].tool_calls, MEMORY_CALL_ID)
    assert (op.action, op.target, op.content) == ("add", "user", STACK_ENTRY)
    result = first.messages[first.messages.index(calls[0]) + 1]
    assert (result.role, result.tool_call_id, result.tool_name) == (
        "tool",
        MEMORY_CALL_ID,
        "memory",
    )
    assert read_result(result.content).status == WRITTEN
    said = first.messages[0]
    assert said.role == "user" and all(w in said.content for w in ("Python 3.12", "FastAPI"))


def test_the_staged_replace_says_what_the_story_says() -> None:
    anchor = anchor_for(ANCHOR)
    replace = next(r for _, r in _records(anchor) if r["action"] == "replace")
    assert replace["payload"]["old_text"] == STACK_OLD_TEXT and STACK_ENTRY.startswith(
        STACK_OLD_TEXT
    )
    assert replace["payload"]["content"] == stack_now(anchor)
    assert "left FastAPI in October" in go_news(anchor) and "in October" in stack_now(anchor)
    # the month the user names is the month of the move, whatever the anchor
    assert "in March" in go_news(anchor_for("2026-05-10"))
    news = [p for p in _plan(7, 30, 600, story=True) if p.story][1].record
    assert news.messages[0].content.startswith(go_news(anchor))
    assert news.ended_at is not None and replace["created_at"] > news.ended_at


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("demo-story")
    # The small home `recall` builds in tests/test_cli.py, through the write API.
    return demo_home_copy(
        tmp_path_factory, base / "home", sessions=30, messages=600, anchor_day=ANCHOR, bulk=False
    )


def test_the_built_home_holds_the_story_and_provenance_links_the_write(
    demo: Path, tmp_path: Path
) -> None:
    app = make_app(demo, tmp_path / "data")
    with app.extensions["recall.reader"].snapshot() as snap:
        conn = snap.conn
        titles = ("Our backend stack", "Port the shipment handler to net/http", "Go package layout")
        rows = [
            conn.execute("SELECT id, started_at FROM sessions WHERE title = ?", (title,)).fetchone()
            for title in titles
        ]
        assert all(rows) and [r[1] for r in rows] == sorted(r[1] for r in rows)
        write = conn.execute(
            "SELECT session_id, id, timestamp FROM messages WHERE role = 'assistant' "
            "AND tool_calls LIKE ?",
            (f"%{MEMORY_CALL_ID}%",),
        ).fetchone()
        assert write[0] == rows[0][0]
        news = conn.execute(
            "SELECT session_id, id, timestamp, role FROM messages WHERE content LIKE ?",
            (go_news(anchor_for(ANCHOR)) + "%",),
        ).fetchone()
        # The Go message is the user's, in the second conversation, later than the write.
        assert news[0] == rows[1][0] and news[3] == "user"
        assert news[1] > write[1] and news[2] > write[2]
    page = app.test_client().get("/memory/USER.md?profile=default").get_data(as_text=True)
    number = USER_ENTRIES.index(STACK_ENTRY) + 1
    block = re.search(
        rf'<details class="memory-provenance" id="provenance-{number}">(.*?)</details>', page, re.S
    )
    assert block is not None
    link = f"/sessions/{write[0]}?at={write[1]}#m{write[1]}"  # one profile: no ?profile
    body = html.unescape(block.group(1))
    assert re.search(r"wrote it</span>\s*<a [^>]*href=\"" + re.escape(link), body), body
    api = app.test_client().get("/api/memory/user/provenance?profile=default").get_json()
    entry = api["entries"][number - 1]
    assert entry["text"] == STACK_ENTRY and entry["written_in"] == [write[0]]
    assert entry["events"][0]["said"] is not None  # where the user said it, linked too


def test_the_python_then_go_pair_is_flagged_and_an_entry_without_newer_words_is_not(
    demo: Path, tmp_path: Path
) -> None:
    """Issue 29's must-show, on the demo home a new user opens first."""
    app = make_app(demo, tmp_path / "data")
    client = app.test_client()
    body = client.get("/api/memory/user/staleness?profile=default").get_json()
    assert body["problem"] is None
    entries = {e["text"]: e for e in body["entries"]}
    stack = entries[STACK_ENTRY]
    assert stack["flagged"] and stack["since_how"] == "written"
    flagged = [m for m in stack["mentions"] if m["may_supersede"]]
    said = " ".join(m["quote"] for m in flagged)
    assert "Go" in said and any(
        "names go where the entry names python" in m["reasons"] for m in flagged
    )
    news = go_news(anchor_for(ANCHOR))
    assert any(news.startswith(m["quote"]) for m in flagged)  # "I'm mostly writing Go now."
    # Every other entry of the demo's USER.md: no newer words overturn it; the
    # timezone entry has no newer mention at all.
    assert [e["text"] for e in body["entries"] if e["flagged"]] == [STACK_ENTRY]
    timezone = next(e for e in body["entries"] if e["text"].startswith("Timezone"))
    assert timezone["mentions"] == [] and not timezone["flagged"]
    page = client.get("/memory/USER.md/staleness?profile=default").get_data(as_text=True)
    assert "1 entry of USER.md may be out of date" in page
