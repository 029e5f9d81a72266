"""The memory page's newer conversations: what the user said after each entry, flagged
when it may overturn it, judged by the model on request, never edited for them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.support.app import make_app
from tests.support.hermes_shapes import _epoch
from tests.support.llm_stub import StubLLM
from tests.support.memory_homes import S_FIRST, MemoryHomeFacts
from tests.support.stale_homes import (
    DAYS_SAID,
    GO_QUOTE,
    GO_SAID,
    NOT_MENTIONED,
    S_GO,
    S_RUST_BEFORE,
    S_STAGING,
    S_SUMMARY,
    S_WORK_DAYS,
    STAGING_SAID,
    build_stale_home,
)

ORIGIN = {"Origin": "http://localhost"}
HTMX = {"HX-Request": "true", "HX-Target": "memory-staleness"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[MemoryHomeFacts, Flask]:
    base = tmp_path_factory.mktemp("staleness")
    facts = build_stale_home(base / "hermes")
    return facts, make_app(facts.root, base / "data")


@pytest.fixture
def client(built: tuple[MemoryHomeFacts, Flask]) -> FlaskClient:
    return built[1].test_client()


def said_in(app: Flask, session_id: str, text: str) -> int:
    """The archive's id of the user message ``text`` of ``session_id`` (archive ids are
    Recall's own: a profile's rows are numbered as they were imported)."""
    with app.extensions["recall.reader"].snapshot() as snap:
        row = snap.conn.execute(
            "SELECT id FROM messages WHERE session_id = ? AND role = 'user' AND content = ?",
            (session_id, text),
        ).fetchone()
    assert row is not None, (session_id, text)
    return row[0]


def entries_of(client: FlaskClient, which: str, profile: str = "default") -> dict[str, dict]:
    response = client.get(f"/api/memory/{which}/staleness?profile={profile}")
    assert response.status_code == 200
    body = response.get_json()
    assert body["problem"] is None
    return {e["text"]: e for e in body["entries"]}


def test_the_python_then_go_pair_is_flagged_with_the_users_words(
    client: FlaskClient, built: tuple[MemoryHomeFacts, Flask]
) -> None:
    entry = entries_of(client, "user")["Writes mostly Python"]
    assert entry["flagged"] and entry["since_how"] == "written"
    assert entry["since"] == pytest.approx(_epoch(S_FIRST) + 60, abs=5)  # the batch's call
    first = entry["mentions"][0]
    assert (first["session_id"], first["message_id"]) == (S_GO, said_in(built[1], S_GO, GO_SAID))
    assert first["may_supersede"] and first["quote"] == GO_QUOTE
    assert "names go where the entry names python" in first["reasons"]
    sessions = {m["session_id"] for m in entry["mentions"]}
    assert S_RUST_BEFORE not in sessions  # said before the entry was written
    assert S_SUMMARY not in sessions  # a compaction summary is not the user's words
    assert S_FIRST not in sessions  # where it was written: the user's words agree


def test_an_entry_no_newer_conversation_speaks_to_is_not_flagged(client: FlaskClient) -> None:
    entries = entries_of(client, "user")
    for text in NOT_MENTIONED:
        assert entries[text]["mentions"] == [] and not entries[text]["flagged"]


def test_a_conversation_on_the_subject_without_a_change_is_listed_unflagged(
    client: FlaskClient, built: tuple[MemoryHomeFacts, Flask]
) -> None:
    entry = entries_of(client, "memory")["Deploys go through staging first"]
    assert not entry["flagged"]
    staging = [m for m in entry["mentions"] if m["session_id"] == S_STAGING]
    assert staging and staging[0]["message_id"] == said_in(built[1], S_STAGING, STAGING_SAID)
    assert staging[0]["text"] == STAGING_SAID and not staging[0]["may_supersede"]


def test_each_profile_is_read_against_its_own_conversations(
    client: FlaskClient, built: tuple[MemoryHomeFacts, Flask]
) -> None:
    work = entries_of(client, "user", "work")["Works night shifts"]
    assert work["flagged"]
    assert [(m["session_id"], m["message_id"]) for m in work["mentions"]][0] == (
        f"work:{S_WORK_DAYS}",
        said_in(built[1], f"work:{S_WORK_DAYS}", DAYS_SAID),
    )
    assert work["mentions"][0]["quote"] == DAYS_SAID
    # the default profile has no such entry, and never the work profile's words
    default = entries_of(client, "user")
    assert all(
        not m["session_id"].startswith("work:") for e in default.values() for m in e["mentions"]
    )


def test_the_memory_page_loads_the_list_and_marks_the_flagged_entry(client: FlaskClient) -> None:
    page = client.get("/memory/USER.md?profile=default").get_data(as_text=True)
    assert 'hx-get="/memory/USER.md/staleness' in page and 'id="stale-mark-2"' in page
    part = client.get("/memory/USER.md/staleness?profile=default", headers=HTMX)
    html = part.get_data(as_text=True)
    assert part.status_code == 200 and not html.lstrip().lower().startswith("<!doctype")
    assert "1 entry of USER.md may be out of date" in html
    assert "I&#39;m mostly writing Go now." in html
    # the flagged entry's mark is swapped into the memory page out of band
    assert re.search(r'id="stale-mark-2"[^>]*hx-swap-oob="true"', html)
    # one click opens that entry's editor, focused; nothing is edited for the user
    edit = re.search(r'href="([^"]*edit=2[^"]*)"', html)
    assert edit
    opened = client.get(edit[1].replace("&amp;", "&")).get_data(as_text=True)
    assert re.search(r'<details class="memory-entry-edit" open>', opened)
    assert re.search(r'id="entry-value-2"[^>]*autofocus', opened)


def test_the_list_is_a_page_of_its_own_without_javascript(client: FlaskClient) -> None:
    page = client.get("/memory/USER.md/staleness?profile=default").get_data(as_text=True)
    assert page.lstrip().lower().startswith("<!doctype") and 'id="memory-staleness"' in page
    assert "hx-swap-oob" not in page


def test_under_all_profiles_one_must_be_chosen(client: FlaskClient) -> None:
    assert client.get("/memory/USER.md/staleness?profile=all").status_code == 400
    assert client.get("/api/memory/user/staleness?profile=all").status_code == 400
    assert client.get("/memory/NOTES.md/staleness?profile=default").status_code == 404
    odd = client.get("/memory/USER.md?profile=default&edit=twelve")
    assert odd.status_code == 400 and "edit" in odd.get_data(as_text=True)


def test_without_an_archive_the_list_says_why(tmp_path: Path) -> None:
    memories = tmp_path / "hermes" / "memories"
    memories.mkdir(parents=True)
    (memories / "USER.md").write_text("Prefers Python", encoding="utf-8")
    client = make_app(tmp_path / "hermes", tmp_path / "data").test_client()
    html = client.get("/memory/USER.md/staleness").get_data(as_text=True)
    assert "newer conversations cannot be looked for" in html


def ask_the_model(client: FlaskClient, page: str):
    """POST the judge form with the token of ``page`` (a page carrying one)."""
    html = client.get(page).get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', html)[1]
    return client.post(
        "/memory/USER.md/staleness/judge?profile=default",
        data={"csrf_token": token},
        headers=ORIGIN,
    )


def verdicts(body: dict) -> str:
    """The stub model's answer: a message saying "now" supersedes, others agree."""
    prompt = body["messages"][-1]["content"]
    lines = [line for line in prompt.splitlines() if re.match(r"^\d+\.", line)]
    return json.dumps(
        [
            {
                "n": int(line.split(".")[0]),
                "verdict": "supersedes" if " now" in line else "agrees",
                "why": "Said later <b>in bold</b>",
            }
            for line in lines
        ]
    )


def test_the_model_judges_on_request_with_the_token_and_its_answer_is_labelled(
    built: tuple[MemoryHomeFacts, Flask], tmp_path: Path
) -> None:
    with StubLLM(reply=verdicts) as llm:
        app = make_app(built[0].root, tmp_path / "data", LLM_BASE_URL=llm.url)
        client = app.test_client()
        page = client.get("/memory/USER.md/staleness?profile=default", headers=HTMX)
        html = page.get_data(as_text=True)
        assert "to judge them" in html and llm.requests == []  # a GET never asks the model
        token = re.search(r'name="csrf_token" value="([^"]+)"', html)[1]
        url = "/memory/USER.md/staleness/judge?profile=default"
        assert client.post(url, data={}, headers={**ORIGIN, **HTMX}).status_code == 403
        assert client.post(url, data={"csrf_token": token}, headers=HTMX).status_code == 403
        judged = client.post(url, data={"csrf_token": token}, headers={**ORIGIN, **HTMX})
        html = judged.get_data(as_text=True)
        assert judged.status_code == 200
        asked = len(llm.requests)
        assert asked >= 1
        assert GO_SAID in llm.requests[0]["body"]["messages"][-1]["content"] or any(
            GO_SAID in r["body"]["messages"][-1]["content"] for r in llm.requests
        )
        assert "the model's judgement" in html and "supersedes it" in html
        assert "&lt;b&gt;in bold&lt;/b&gt;" in html  # the model's words are text, not markup
        # kept: the page shows the verdicts again without asking the model
        again = client.get("/memory/USER.md/staleness?profile=default", headers=HTMX)
        assert "supersedes it" in again.get_data(as_text=True) and len(llm.requests) == asked


def test_a_model_that_fails_or_answers_nonsense_says_so_and_nothing_changes(
    built: tuple[MemoryHomeFacts, Flask], tmp_path: Path
) -> None:
    before = (built[0].root / "memories" / "USER.md").read_bytes()
    for stub in (StubLLM(mode="error500"), StubLLM(reply=lambda body: "I think it is fine.")):
        with stub as llm:
            app = make_app(built[0].root, tmp_path / "data", LLM_BASE_URL=llm.url)
            client = app.test_client()
            judged = ask_the_model(client, "/memory/USER.md/staleness?profile=default")
            assert judged.status_code == 200
            assert "The model could not judge this entry" in judged.get_data(as_text=True)
    assert (built[0].root / "memories" / "USER.md").read_bytes() == before


def test_without_a_model_there_is_no_button_and_a_post_says_why(client: FlaskClient) -> None:
    html = client.get("/memory/USER.md/staleness?profile=default").get_data(as_text=True)
    assert "to judge them" not in html
    token = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert token is None
    answer = ask_the_model(client, "/memory/USER.md?profile=default")
    assert "No summary endpoint is configured." in answer.get_data(as_text=True)
