"""The archive page in real Chromium: the prune radar lists exactly what Hermes will delete."""

from __future__ import annotations

import re
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from playwright.sync_api import expect

from dashboard.archive.importer import sync
from dashboard.hermes.home import HermesHome
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as shapes
from tests.support import hermes_v31 as v31
from tests.support.browser_support import SCREENSHOTS, PageWatch, running_server
from tests.support.pruned_homes import mark_gone, prune_from_source
from tests.support.source_checks import assert_untouched, digests


def test_the_radar_lists_exactly_what_the_configured_retention_deletes(
    tmp_path: Path, page
) -> None:
    now = time.time()
    ids = shapes.build_prune_home(tmp_path / "home", now, last_auto_prune=now - 7200)
    home = HermesHome(tmp_path / "home")
    archive = tmp_path / "archive.db"
    with SessionStore(archive) as store:
        sync(store, home.state_db, home.root)
    # Since the sync Hermes deleted one more session (its row is marked gone), and a new
    # old session arrived: the server's syncer copies it before the page opens (the
    # radar's warning for a session not archived is tests/test_views_archive.py's).
    prune_from_source(home, ids["ancient"])
    mark_gone(archive, ids["ancient"])
    late = _add_old_session(home, now - 45 * 86_400)
    before = digests(home.state_db)
    watch = PageWatch()
    watch.attach(page)
    args = ["--home", str(home.root), "--data-dir", str(tmp_path / "data")]
    with running_server(args, tmp_path, {"RECALL_ARCHIVE": str(archive)}) as server:
        page.goto(f"{server.url}/archive")
        expect(page.locator("header nav a[aria-current=page]")).to_have_text("Archive")
        rows = page.locator("#prune-radar tr[data-session]")
        doomed = [rows.nth(i).get_attribute("data-session") for i in range(rows.count())]
        # Oldest first; "ancient" is gone already.
        assert doomed == [ids["older"], late, ids["old"]]
        for sid in (ids["older"], late, ids["old"]):
            expect(page.locator(f'#prune-radar tr[data-session="{sid}"]')).to_contain_text(
                "safely archived"
            )
        expect(page.locator("#prune-radar")).not_to_contain_text("not archived")
        radar = page.locator("#prune-radar").inner_text()
        assert "30 days" in radar
        assert "but kept: 1 pinned or in a pinned chain, 1 not ended." in radar
        listing = page.locator("#archived")
        expect(listing.locator(".tag-gone")).to_have_count(1)
        expect(listing.locator(".tag-gone")).to_contain_text(
            "deleted from Hermes on 2026-09-14 — kept in Recall's archive"
        )
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "archive.png"), full_page=True)

        # The confirm step names the session; confirming deletes it from the archive only.
        listing.get_by_role("link", name="Delete…").click()
        expect(page.locator("h1")).to_contain_text("Prune case ancient")
        expect(page.locator(".confirm-delete")).to_contain_text("4 messages and 1 usage row")
        page.get_by_role("button", name="Delete for good").click()
        expect(page.locator(".notice[role=status]")).to_contain_text(f"Deleted {ids['ancient']}")
        expect(page.locator("#archived .tag-gone")).to_have_count(0)
    assert watch.problems == []
    assert_untouched(home.state_db, before)


def test_the_radar_says_why_each_v31_session_goes_and_the_demo_home_is_calm(
    tmp_path: Path, page, demo_server
) -> None:
    """On a v31 home: exactly Hermes's deleted set, each row with its reason; the demo
    home: one calm sentence and no table."""
    facts = v31.build_v31_home(tmp_path / "home", now=time.time())
    archive = tmp_path / "archive.db"
    with SessionStore(archive) as store:
        sync(store, facts.db, facts.root)
    watch = PageWatch()
    watch.attach(page)
    args = ["--home", str(facts.root), "--data-dir", str(tmp_path / "data")]
    with running_server(args, tmp_path, {"RECALL_ARCHIVE": str(archive)}) as server:
        page.goto(f"{server.url}/archive")
        rows = page.locator("#prune-radar tr[data-session]")
        expect(rows).to_have_count(len(facts.prune_deleted))
        listed = {rows.nth(i).get_attribute("data-session") for i in range(rows.count())}
        assert listed == facts.prune_deleted
        ids = facts.sessions
        for name in ("old_lineage_1", "old_lineage_2"):
            row = page.locator(f'#prune-radar tr[data-session="{ids[name]}"]')
            expect(row.locator(".radar-why")).to_contain_text("goes with its chain of 2")
            expect(row).to_contain_text("safely archived")
        why = page.locator(f'#prune-radar tr[data-session="{ids["old"]}"] .radar-why')
        expect(why).to_have_text(re.compile(r"^idle 199 days;\s+past 90 days on \d{4}-\d{2}-\d{2}"))
        for name in ("rotation_1", "compacted_last_week", "active_month_later", "pinned_2"):
            expect(page.locator(f'#prune-radar tr[data-session="{ids[name]}"]')).to_have_count(0)
        expect(page.locator("#prune-radar .radar-spared")).to_contain_text(
            "3 pinned or in a pinned chain, 1 not ended, 3 in a chain still in use"
        )
        expect(page.locator("#prune-radar .radar-never")).to_have_count(0)
    page.goto(f"{demo_server.url}/archive")
    expect(page.locator("#prune-radar .radar-never")).to_have_text(
        "Hermes won't delete anything here: this is Recall's demo home, and no Hermes runs on it."
    )
    expect(page.locator("#prune-radar table")).to_have_count(0)
    expect(page.locator("#prune-radar [role=alert]")).to_have_count(0)
    expect(page.locator("#prune-radar")).not_to_contain_text("not archived")
    assert watch.problems == []


def _add_old_session(home: HermesHome, started: float) -> str:
    """An old ended session Hermes wrote since the last sync (as Hermes writes rows)."""
    sid = "20260101_000000_fedcba"
    with closing(sqlite3.connect(home.state_db)) as conn:
        conn.execute(
            "INSERT INTO sessions (id, source, started_at, ended_at, end_reason, message_count)"
            " VALUES (?, 'cli', ?, ?, 'user_exit', 1)",
            (sid, started, started + 60),
        )
        conn.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'user', ?, ?)",
            (sid, "a late question", started + 1),
        )
        conn.commit()
    return sid


def test_a_session_marked_gone_shows_its_badge_on_its_page(tmp_path: Path, page) -> None:
    ids = shapes.build_gone_home(tmp_path / "home")
    watch = PageWatch()
    watch.attach(page)
    args = ["--home", str(tmp_path / "home"), "--data-dir", str(tmp_path / "data")]
    with running_server(args, tmp_path) as server:
        page.goto(f"{server.url}/sessions/{ids['gone']}")
        badge = page.locator(".session-meta .tag-gone")
        expect(badge).to_be_visible()
        expect(badge).to_have_text("deleted from Hermes on 2026-09-14 — kept in Recall's archive")
        page.goto(f"{server.url}/sessions/{ids['kept']}")
        expect(page.locator(".tag-gone")).to_have_count(0)
        page.goto(f"{server.url}/?q=redis&presence=archive")
        cards = page.locator("#results article.card")
        expect(cards).to_have_count(1)
        expect(cards.first.locator(".tag-gone")).to_be_visible()
    assert watch.problems == []
