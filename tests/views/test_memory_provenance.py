"""The memory page says where each entry came from: the memory calls in the archive."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.support import hermes_shapes as shapes
from tests.support.app import make_app
from tests.support.memory_homes import (
    MEMORY_ENTRIES,
    NO_TRANSCRIPT,
    S_THIRD,
    USER_ENTRIES,
    WORK_USER_ENTRIES,
    WRITTEN_BY,
    MemoryHomeFacts,
    build_memory_home,
    memory_call,
    user,
)

NO_CALL = "No conversation in Recall's archive has a memory call that wrote it"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[MemoryHomeFacts, Flask]:
    base = tmp_path_factory.mktemp("provenance")
    facts = build_memory_home(base / "hermes")
    return facts, make_app(facts.root, base / "data")


@pytest.fixture
def client(built: tuple[MemoryHomeFacts, Flask]) -> FlaskClient:
    return built[1].test_client()


def _blocks(page: str) -> dict[int, str]:
    """Each entry's provenance block by the entry's number."""
    found = re.findall(
        r'<details class="memory-provenance" id="provenance-(\d+)">(.*?)</details>', page, re.S
    )
    return {int(n): html.unescape(body) for n, body in found}


def _message_of(app: Flask, call_id: str) -> tuple[str, int]:
    """The archive's session and message id of the assistant row making ``call_id``."""
    with app.extensions["recall.reader"].snapshot() as snap:
        row = snap.conn.execute(
            "SELECT session_id, id FROM messages WHERE role = 'assistant' AND tool_calls LIKE ?",
            (f'%"{call_id}"%',),
        ).fetchone()
    assert row is not None, call_id
    return row[0], row[1]


def _user_message(app: Flask, session_id: str, text: str) -> int:
    with app.extensions["recall.reader"].snapshot() as snap:
        row = snap.conn.execute(
            "SELECT id FROM messages WHERE session_id = ? AND role = 'user' AND content = ?",
            (session_id, text),
        ).fetchone()
    return row[0]


def _link(session_id: str, message_id: int, profile: str) -> str:
    return f"/sessions/{session_id}?at={message_id}&profile={profile}#m{message_id}"


def _calls_linked(block: str) -> list[str]:
    return re.findall(r'class="memory-provenance-call" href="([^"]+)"', block)


@pytest.mark.parametrize(
    ("name", "entries"), [("USER.md", USER_ENTRIES), ("MEMORY.md", MEMORY_ENTRIES)]
)
def test_every_entry_written_by_a_call_links_to_the_exact_message(
    built: tuple[MemoryHomeFacts, Flask], client: FlaskClient, name: str, entries: tuple[str, ...]
) -> None:
    facts, app = built
    blocks = _blocks(client.get(f"/memory/{name}?profile=default").get_data(as_text=True))
    assert sorted(blocks) == list(range(1, len(entries) + 1))
    for number, text in enumerate(entries, 1):
        if text not in WRITTEN_BY:
            continue
        session_id, message_id = _message_of(app, WRITTEN_BY[text])
        link = _link(session_id, message_id, "default")
        wrote = re.search(r"wrote it</span>\s*<a [^>]*href=\"" + re.escape(link), blocks[number])
        assert wrote, (text, link, blocks[number])
        assert "written by the agent in" in blocks[number] and NO_CALL not in blocks[number]
        # where the user said it: the user message before the call, linked too
        words = facts.said[WRITTEN_BY[text]]
        said_id = _user_message(app, session_id, words)
        assert f'href="{_link(session_id, said_id, "default")}"' in blocks[number]
        assert words in blocks[number]
    # the link lands on the message
    session_id, message_id = _message_of(app, "call_porto")
    page = client.get(_link(session_id, message_id, "default")).get_data(as_text=True)
    assert f'id="m{message_id}"' in page


def test_the_replace_shows_the_earlier_version_and_the_remove_is_history(
    built: tuple[MemoryHomeFacts, Flask], client: FlaskClient
) -> None:
    app = built[1]
    blocks = _blocks(client.get("/memory/USER.md?profile=default").get_data(as_text=True))
    porto, cat = blocks[1], blocks[4]
    lisbon = _link(*_message_of(app, "call_lisbon"), "default")
    assert "wrote an earlier version" in porto and lisbon in porto and "“Lives in Lisbon”" in porto
    assert "replaced the entry holding “Lisbon”" in porto
    # the cat: added (batch), removed, added again: three calls, in order, two conversations
    linked = _calls_linked(cat)
    expected = [_message_of(app, c) for c in ("call_batch", "call_forget_cat", "call_cat_again")]
    assert linked == [_link(s, m, "default") for s, m in expected]
    assert "removed it" in cat and "written by the agent in 2 conversations" in cat
    assert "operation 3 of a batch" in cat


def test_entries_without_a_call_say_there_is_no_transcript_and_a_failed_call_never_wrote(
    built: tuple[MemoryHomeFacts, Flask], client: FlaskClient
) -> None:
    app = built[1]
    blocks = _blocks(client.get("/memory/USER.md?profile=default").get_data(as_text=True))
    for text in NO_TRANSCRIPT:
        block = blocks[USER_ENTRIES.index(text) + 1]
        assert NO_CALL in block and "background review" in block
        assert "wrote it</span>" not in block
    ada = blocks[USER_ENTRIES.index("Name: Ada") + 1]
    failed = _link(*_message_of(app, "call_ada_failed"), "default")
    assert "failed to write it" in ada and failed in ada and "failed: Memory at 1,370" in ada
    staged = _blocks(client.get("/memory/MEMORY.md?profile=default").get_data(as_text=True))[2]
    assert "staged for approval" in staged and "wrote it</span>" in staged


def test_one_profiles_calls_are_never_another_profiles_provenance(
    built: tuple[MemoryHomeFacts, Flask], client: FlaskClient
) -> None:
    app = built[1]
    work_session, work_message = _message_of(app, "call_work_batch")
    assert work_session.startswith("work:")
    default = client.get("/memory/USER.md?profile=default").get_data(as_text=True)
    assert "work:" not in "".join(_blocks(default).values())
    # the same texts written in the work profile only: the default file's have no link there
    shifts = _blocks(default)[USER_ENTRIES.index("Works night shifts") + 1]
    assert NO_CALL in shifts
    short = _blocks(default)[USER_ENTRIES.index("Prefers short answers") + 1]
    assert _calls_linked(short) == [_link(*_message_of(app, "call_batch"), "default")]
    work = _blocks(client.get("/memory/USER.md?profile=work").get_data(as_text=True))
    assert sorted(work) == [1, 2]
    for number, _text in enumerate(WORK_USER_ENTRIES, 1):
        assert _calls_linked(work[number]) == [_link(work_session, work_message, "work")]
    assert "mem00" not in "".join(work.values())


def test_an_entry_the_background_review_wrote_appeared_between_two_revisions(
    tmp_path: Path,
) -> None:
    facts = build_memory_home(tmp_path / "hermes")
    client = make_app(facts.root, tmp_path / "data").test_client()
    first = client.get("/memory/USER.md?profile=default").get_data(as_text=True)
    assert "It was already there at" in _blocks(first)[6]  # the oldest revision kept
    user_md = facts.root / "memories" / "USER.md"
    user_md.write_text(user_md.read_text(encoding="utf-8") + "\n§\nDrinks green tea", "utf-8")
    page = client.get("/memory/USER.md?profile=default").get_data(as_text=True)
    tea = _blocks(page)[7]
    assert NO_CALL in tea
    assert re.search(
        r"It appeared between .* \(revision #1, without it\) and .* "
        r"\(revision #2, written outside Recall\)",
        tea,
        re.S,
    )


def test_without_an_archive_the_page_shows_the_file_and_says_why_there_is_no_provenance(
    tmp_path: Path,
) -> None:
    memories = tmp_path / "hermes" / "memories"
    memories.mkdir(parents=True)
    (memories / "USER.md").write_text("Name: Ada\n§\nLives in Lisbon", encoding="utf-8")
    response = make_app(tmp_path / "hermes", tmp_path / "data").test_client().get("/memory")
    page = response.get_data(as_text=True)
    assert response.status_code == 200 and 'id="entry-2"' in page
    assert "Where the entries came from cannot be shown" in page and _blocks(page) == {}


def test_a_call_synced_in_after_the_page_was_read_shows_on_the_next_load(tmp_path: Path) -> None:
    facts = build_memory_home(tmp_path / "hermes")
    app = make_app(facts.root, tmp_path / "data")
    client = app.test_client()
    assert (
        NO_CALL in _blocks(client.get("/memory/USER.md?profile=default").get_data(as_text=True))[6]
    )
    at = shapes._epoch(S_THIRD) + 600
    shapes.append_messages(
        facts.root / "state.db",
        S_THIRD,
        [
            user("I work night shifts now."),
            *memory_call(
                "call_shifts",
                '{"success": true}',
                action="add",
                target="user",
                content="Works night shifts",
            ),
        ],
        at,
    )
    block = _blocks(client.get("/memory/USER.md?profile=default").get_data(as_text=True))[6]
    assert _calls_linked(block) == [_link(*_message_of(app, "call_shifts"), "default")]


def test_a_rewound_call_still_wrote_and_its_link_shows_rewound_rows(tmp_path: Path) -> None:
    """A rewind takes turns out of the conversation, not the write out of the file."""
    facts = build_memory_home(tmp_path / "hermes")
    db = facts.root / "state.db"
    shapes.append_messages(
        db,
        S_THIRD,
        [
            user("Note that I work night shifts."),
            *memory_call(
                "call_rewound",
                '{"success": true}',
                action="add",
                target="user",
                content="Works night shifts",
            ),
        ],
        shapes._epoch(S_THIRD) + 900,
    )
    assert shapes.rewind(db, S_THIRD, 3, shapes._epoch(S_THIRD) + 960) == 3
    app = make_app(facts.root, tmp_path / "data")
    client = app.test_client()
    block = _blocks(client.get("/memory/USER.md?profile=default").get_data(as_text=True))[6]
    session_id, message_id = _message_of(app, "call_rewound")
    link = f"/sessions/{session_id}?at={message_id}&all=1&profile=default#m{message_id}"
    assert _calls_linked(block) == [link] and NO_CALL not in block
    assert f'id="m{message_id}"' in client.get(link).get_data(as_text=True)
    # the user's words were rewound with the call: still found, linked with all=1
    said_id = _user_message(app, session_id, "Note that I work night shifts.")
    said = f"/sessions/{session_id}?at={said_id}&all=1&profile=default#m{said_id}"
    assert f'the user said it <a href="{said}">' in block
    api = client.get("/api/memory/user/provenance?profile=default").get_json()
    event = next(e for e in api["entries"][5]["events"] if e["message_id"] == message_id)
    assert event["said"]["message_id"] == said_id and event["said"]["rewound"] is True


def test_the_api_answers_the_same_provenance_as_the_page(
    built: tuple[MemoryHomeFacts, Flask], client: FlaskClient
) -> None:
    app = built[1]
    body = client.get("/api/memory/user/provenance?profile=default").get_json()
    assert body["problem"] is None
    entries = {e["text"]: e for e in body["entries"]}
    assert list(entries) == list(USER_ENTRIES)
    session_id, message_id = _message_of(app, "call_porto")
    porto = entries["Lives in Porto (moved from Lisbon)"]
    wrote = [e for e in porto["events"] if e["role"] == "wrote"]
    assert [(e["session_id"], e["message_id"], e["action"]) for e in wrote] == [
        (session_id, message_id, "replace")
    ]
    assert wrote[0]["said"]["words"] == ["porto", "moved"]
    assert entries["Name: Ada"]["no_transcript"] and entries["Works night shifts"]["no_transcript"]
    assert [e["status"] for e in entries["Name: Ada"]["events"]] == ["failed"]
    memory = client.get("/api/memory/memory/provenance?profile=default").get_json()
    staged = memory["entries"][1]["events"][0]
    assert (staged["status"], staged["pending_id"]) == ("staged", "mem_20260803_uv")
    fresh = app.test_client()  # no profile cookie: all profiles, so whose file?
    assert fresh.get("/api/memory/user/provenance").status_code == 400
