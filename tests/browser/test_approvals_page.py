"""The approvals inbox in real Chromium over a real ``recall serve``: each kind of staged
write approved or rejected through the page, the file left as Hermes would leave it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support import hermes_shapes as shapes
from tests.support.browser_support import SCREENSHOTS, PageWatch, running_server
from tests.support.pending_records import T0, USER, hermes_apply, stage, write_memory
from tests.support.real_hermes import PINNED, install_into


@pytest.mark.parametrize("hermes_installed", [False, True], ids=["by-recall", "by-hermes"])
def test_each_kind_approved_or_rejected_through_the_page(
    tmp_path: Path, page, hermes_installed: bool
) -> None:
    """Without Hermes, Recall's writer applies; with a real Hermes installed in the home
    (as its installer lays it out), the page goes through Hermes's own approval code."""
    home = tmp_path / "hermes"
    if hermes_installed:
        install_into(home)
    by = f" by Hermes {PINNED}" if hermes_installed else ""
    shapes.build_current_views(home / "state.db")
    write_memory(home, "USER.md", USER)
    write_memory(home, "MEMORY.md", ["Prod runs k3s", "The flaky test is test_eta"])
    records = {
        "add1": stage(home, "add1", "add", content="Has two cats", created_at=T0),
        "rep1": stage(
            home,
            "rep1",
            "replace",
            old_text="Python",
            content="Writes Go now",
            origin="background_review",
            newer=True,
            created_at=T0 + 60,
        ),
        "rm1": stage(
            home,
            "rm1",
            "remove",
            target="memory",
            old_text="flaky",
            origin="background_review",
            created_at=T0 + 120,
        ),
        "batch1": stage(
            home,
            "batch1",
            "batch",
            created_at=T0 + 180,
            operations=[
                {"action": "remove", "old_text": "bank"},
                {"action": "add", "content": "Retired"},
            ],
        ),
        "guarded": stage(home, "guarded", "add", content="x", guard=True, created_at=T0 + 240),
    }
    payloads = {k: json.loads(p.read_text())["payload"] for k, p in records.items()}
    env = {"HOME": str(tmp_path / "user")}
    with running_server(
        ["--home", str(home), "--data-dir", str(tmp_path / "data")], tmp_path, env
    ) as server:
        watch = PageWatch()
        watch.attach(page)
        page.goto(f"{server.url}/memory/pending")
        expect(page.locator(".pending-badge")).to_have_text("5 waiting")
        if not hermes_installed:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "approvals.png"), full_page=True)
        expected = {
            "USER.md": "\n§\n".join(USER),
            "MEMORY.md": (home / "memories" / "MEMORY.md").read_text(),
        }
        for record_id, decision, name in (
            ("rep1", "Approve", "USER.md"),
            ("add1", "Reject", None),
            ("rm1", "Approve", "MEMORY.md"),
            ("batch1", "Approve", "USER.md"),
        ):
            card = page.locator(f'article[data-id="{record_id}"]')
            card.get_by_role("button", name=decision).click()
            page.wait_for_url("**/memory/pending?done=*")
            expect(page.locator("p.notice[role=status]")).to_contain_text(
                ("Approved" if decision == "Approve" else "Rejected") + by
            )
            if name is not None:
                expected[name] = hermes_apply(
                    expected[name], payloads[record_id], 2200 if name == "MEMORY.md" else 1375
                )
            for file_name, text in expected.items():
                assert (home / "memories" / file_name).read_text() == text, (record_id, file_name)
            assert not records[record_id].exists()
        guarded = page.locator('article[data-id="guarded"]')
        expect(guarded).to_contain_text("write guard")
        # Recall cannot check a guard; a Hermes that is here decides it
        assert guarded.get_by_role("button", name="Approve").count() == int(hermes_installed)
        expect(page.locator(".pending-badge")).to_have_text("1 waiting")
        assert watch.problems == []
