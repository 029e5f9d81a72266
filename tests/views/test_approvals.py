"""The approvals inbox: pending memory writes listed, approved and rejected with CSRF."""

from __future__ import annotations

import html
import re
from pathlib import Path
from urllib.parse import unquote_plus

import pytest
from flask.testing import FlaskClient

from tests.support.app import make_app
from tests.support.pending_records import DELIMITER, T0, hermes_apply, stage, write_memory

ORIGIN = {"Origin": "http://localhost"}
USER = ["Lives in Lisbon", "Prefers Python for scripts"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    from tests.support import hermes_shapes as shapes

    root = tmp_path / "home"
    shapes.build_current_views(root / "state.db")
    write_memory(root, "USER.md", USER)
    stage(root, "add1", "add", content="Has two cats", created_at=T0)
    stage(
        root,
        "rep1",
        "replace",
        old_text="Python",
        content="Mostly writes Go now",
        origin="background_review",
        newer=True,
        created_at=T0 + 60,
    )
    stage(root, "guarded", "add", content="x", guard=True, created_at=T0 + 120)
    stage(root, "skill", "create", subsystem="skills", content="---")
    return root


@pytest.fixture
def client(home: Path, tmp_path: Path) -> FlaskClient:
    return make_app(home, tmp_path / "data").test_client()


def article(page: str, record_id: str) -> str:
    start = page.index(f'data-id="{record_id}"')
    return page[start : page.index("</article>", start)]


def form(page: str, record_id: str, decision: str) -> dict[str, str]:
    part = article(page, record_id)
    action = re.search(rf'action="([^"]*/{decision})"', part)
    assert action, (record_id, decision)
    token = re.search(r'name="csrf_token" value="([^"]+)"', part)[1]
    digest = re.search(r'name="digest" value="([^"]+)"', part)[1]
    return {"url": html.unescape(action[1]), "csrf_token": token, "digest": digest}


def post(client: FlaskClient, f: dict[str, str]):
    return client.post(f["url"], data={k: v for k, v in f.items() if k != "url"}, headers=ORIGIN)


def test_the_inbox_lists_each_write_with_its_diff_and_the_header_counts_them(
    client: FlaskClient,
) -> None:
    page = client.get("/memory/pending").get_data(as_text=True)
    assert re.search(r'class="pending-badge"[^>]*>3 waiting<', page)
    rep = article(page, "rep1")
    assert "replace" in rep and "USER.md" in rep and "background review (no transcript)" in rep
    assert '<span class="diff-add">+Mostly writes Go now</span>' in rep
    assert '<span class="diff-del">-Prefers Python for scripts</span>' in rep
    guarded = article(page, "guarded")
    assert "write guard" in guarded and "Approve</button>" not in guarded
    assert "Reject</button>" in guarded
    assert "Skill writes waiting" in page and "<code>skill</code>" in page
    # Every page carries the count; a page of another screen too.
    assert "3 waiting" in client.get("/costs").get_data(as_text=True)


def test_approve_applies_as_hermes_and_reject_removes_only_the_record(
    client: FlaskClient, home: Path
) -> None:
    page = client.get("/memory/pending").get_data(as_text=True)
    before = (home / "memories" / "USER.md").read_text()
    response = post(client, form(page, "rep1", "approve"))
    assert response.status_code == 303 and "Approved" in response.headers["Location"]
    payload = {
        "action": "replace",
        "target": "user",
        "old_text": "Python",
        "content": "Mostly writes Go now",
    }
    assert (home / "memories" / "USER.md").read_text() == hermes_apply(before, payload, 1375)
    assert not (home / "pending" / "memory" / "rep1.json").exists()
    page = client.get("/memory/pending").get_data(as_text=True)
    after_approval = (home / "memories" / "USER.md").read_text()
    assert post(client, form(page, "add1", "reject")).status_code == 303
    assert not (home / "pending" / "memory" / "add1.json").exists()
    assert (home / "memories" / "USER.md").read_text() == after_approval
    assert "1 waiting" in client.get("/memory/pending").get_data(as_text=True)


def test_a_decision_needs_the_token_and_this_site_and_the_record_as_shown(
    client: FlaskClient, home: Path
) -> None:
    page = client.get("/memory/pending").get_data(as_text=True)
    f = form(page, "add1", "approve")
    no_token = {k: v for k, v in f.items() if k != "csrf_token"}
    assert post(client, no_token).status_code == 403
    forged = client.post(
        f["url"],
        data={"csrf_token": f["csrf_token"], "digest": f["digest"]},
        headers={"Origin": "http://evil.example"},
    )
    assert forged.status_code == 403
    stage(home, "add1", "add", content="Has three cats", created_at=T0)  # restaged
    changed = post(client, f)
    assert changed.status_code == 409 and "changed on disk" in changed.get_data(as_text=True)
    assert (home / "memories" / "USER.md").read_text() == DELIMITER.join(USER)
    gone = {**f, "url": f["url"].replace("add1", "nosuch")}
    assert post(client, gone).status_code == 404


def test_a_write_hermes_would_refuse_says_why_and_changes_nothing(
    client: FlaskClient, home: Path
) -> None:
    stage(home, "nomatch", "remove", old_text="Berlin", created_at=T0 + 200)
    page = client.get("/memory/pending").get_data(as_text=True)
    part = article(page, "nomatch")
    assert "Hermes would refuse it: no entry matches &#39;Berlin&#39;" in part
    assert "Approve</button>" not in part
    assert (home / "memories" / "USER.md").read_text() == DELIMITER.join(USER)


def test_the_memory_editor_warns_of_writes_waiting_for_its_file(client: FlaskClient) -> None:
    page = client.get("/memory/USER.md").get_data(as_text=True)
    note = page[page.index('class="notice memory-pending"') :]
    note = note[note.index(">") + 1 :]
    note = " ".join(re.sub(r"<[^>]+>", " ", note[: note.index("</p>")]).split())
    assert note.startswith("3 staged writes to USER.md wait for approval.")  # add1, rep1, guarded
    assert 'href="/memory/pending"' in page
    assert 'class="notice memory-pending"' not in client.get("/memory/MEMORY.md").get_data(
        as_text=True
    )


def test_a_pending_folder_that_cannot_be_listed_breaks_no_page(
    client: FlaskClient, home: Path
) -> None:
    import shutil

    shutil.rmtree(home / "pending" / "memory")
    (home / "pending" / "memory").symlink_to("memory")  # a loop: listing fails for root too
    assert client.get("/costs").status_code == 200
    page = client.get("/memory/pending").get_data(as_text=True)
    assert "<code>memory</code> cannot be listed" in page


def test_with_hermes_installed_the_page_decides_through_its_own_code(
    home: Path, tmp_path: Path, monkeypatch
) -> None:
    from dashboard.hermes import installation
    from tests.support.real_hermes import PINNED, install_into

    monkeypatch.delenv(installation.ENV_PYTHON, raising=False)
    installation.forget()
    install_into(home)
    client = make_app(home, tmp_path / "data").test_client()
    page = client.get("/memory/pending").get_data(as_text=True)
    assert f"Decisions go through <strong>Hermes {PINNED}</strong>" in page
    guarded = article(page, "guarded")  # Recall cannot check its guard; Hermes decides
    assert "Hermes&#39;s own code decides it" in guarded and "Approve</button>" in guarded
    before = (home / "memories" / "USER.md").read_text()
    response = post(client, form(page, "rep1", "approve"))
    assert response.status_code == 303
    assert f"Approved by Hermes {PINNED}" in unquote_plus(response.headers["Location"])
    payload = {"action": "replace", "old_text": "Python", "content": "Mostly writes Go now"}
    assert (home / "memories" / "USER.md").read_text() == hermes_apply(before, payload, 1375)
    page = client.get("/memory/pending").get_data(as_text=True)
    refused = post(client, form(page, "add1", "reject"))
    assert refused.status_code == 303 and not (home / "pending" / "memory" / "add1.json").exists()
    installation.forget()


def bulk_form(page: str, decision: str) -> dict:
    """The "all at once" form of ``decision`` as the page shows it: its records."""
    start = page.index('<details class="pending-bulk">')
    part = page[start : page.index("</details>", start)]
    action = re.search(rf'action="([^"]*/{decision})"', part)
    assert action, decision
    form = part[action.start() : part.index("</form>", action.start())]
    return {
        "url": html.unescape(action[1]),
        "csrf_token": re.search(r'name="csrf_token" value="([^"]+)"', form)[1],
        "record": re.findall(r'name="record" value="([^"]+)"', form),
    }


def test_approve_all_applies_each_oldest_first_and_leaves_what_it_cannot(
    client: FlaskClient, home: Path
) -> None:
    page = client.get("/memory/pending").get_data(as_text=True)
    f = bulk_form(page, "approve")
    assert sorted(r.split()[0] for r in f["record"]) == ["add1", "rep1"]  # not the guarded one
    before = (home / "memories" / "USER.md").read_text()
    response = post(client, f)
    assert response.status_code == 303
    assert "Approved 2 of 2" in unquote_plus(response.headers["Location"])
    add = {"action": "add", "target": "user", "content": "Has two cats"}
    replace = {"action": "replace", "old_text": "Python", "content": "Mostly writes Go now"}
    expected = hermes_apply(hermes_apply(before, add, 1375), replace, 1375)
    assert (home / "memories" / "USER.md").read_text() == expected
    assert sorted(p.name for p in (home / "pending" / "memory").glob("*.json")) == ["guarded.json"]


def test_reject_all_drops_every_record_shown_and_keeps_one_staged_again(
    client: FlaskClient, home: Path
) -> None:
    page = client.get("/memory/pending").get_data(as_text=True)
    f = bulk_form(page, "reject")
    assert len(f["record"]) == 3
    stage(home, "add1", "add", content="Has three cats", created_at=T0)  # staged again
    response = post(client, f)
    body = response.get_data(as_text=True)
    assert response.status_code == 200 and "Rejected 2 of 3" in body
    assert "add1: the record changed on disk" in body
    assert sorted(p.name for p in (home / "pending" / "memory").glob("*.json")) == ["add1.json"]
    assert (home / "pending" / "skills" / "skill.json").exists()  # skills are Hermes's
    assert (home / "memories" / "USER.md").read_text() == DELIMITER.join(USER)
    no_token = {k: v for k, v in f.items() if k != "csrf_token"}
    assert post(client, no_token).status_code == 403
    assert post(client, {**f, "record": []}).status_code == 400
