"""The archive page: prune radar, the sessions only the archive holds, deleting one."""

from __future__ import annotations

import re
import sqlite3
import time
from contextlib import closing
from datetime import datetime
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from dashboard.archive import listing as listing_module
from dashboard.archive import prune_radar as radar_module
from dashboard.archive.importer import sync
from dashboard.store.session_store import SessionStore
from tests.support import hermes_v31 as v31
from tests.support.app import make_app
from tests.support.pages import GONE_BADGE, names_shown_as_their_pages
from tests.support.pruned_homes import archived_home, fts_ok
from tests.support.snapshots import count_snapshots
from tests.support.source_checks import assert_untouched, digests

ORIGIN = {"Origin": "http://localhost"}


def _client(tmp_path: Path) -> tuple[FlaskClient, dict[str, str], Path, Path]:
    home, archive, ids = archived_home(tmp_path)
    client = make_app(home.root, tmp_path / "data", ARCHIVE=str(archive)).test_client()
    return client, ids, archive, home.state_db


def _html(client: FlaskClient, url: str, status: int = 200) -> str:
    response = client.get(url)
    assert response.status_code == status, response.get_data(as_text=True)[:500]
    return " ".join(response.get_data(as_text=True).split())


def _token(html: str) -> str:
    """The form's token, or the page's (every page carries one for HTMX)."""
    found = re.search(r'name="csrf_token" value="([^"]+)"', html) or re.search(
        r'<meta name="csrf-token" content="([^"]+)">', html
    )
    return found.group(1)


def test_the_page_shows_the_radar_and_the_sessions_only_the_archive_holds(
    tmp_path: Path,
) -> None:
    client, ids, _, _ = _client(tmp_path)
    html = _html(client, "/archive")
    assert '<a href="/archive" aria-current="page">Archive</a>' in html
    radar = html.split('id="prune-radar"', 1)[1].split("</section>", 1)[0]
    assert re.findall(r'data-session="([^"]+)"', radar) == [ids["old"]]
    assert "retention_days" in radar and "30 days" in radar
    assert "safely archived" in radar
    listing = html.split('id="archived"', 1)[1]
    shown = re.findall(r'href="/sessions/([^"?]+)"', listing)
    assert shown == [ids["older"], ids["ancient"]]
    assert listing.count(GONE_BADGE) == 2
    assert f'href="/archive/sessions/{ids["ancient"]}/delete"' in listing


def test_the_list_filter_and_its_bad_values(tmp_path: Path) -> None:
    client, ids, _, _ = _client(tmp_path)
    still = _html(client, "/archive?presence=hermes")
    assert ids["recent"] in still and f'/sessions/{ids["ancient"]}"' not in still
    assert ids["old"] in _html(client, "/archive?presence=all")
    for bad in ("presence=gone", "page=0", "page=x"):
        html = _html(client, f"/archive?{bad}", status=400)
        assert "must be" in html


def test_a_warning_when_a_doomed_session_is_not_archived(tmp_path: Path) -> None:
    home, _, ids = archived_home(tmp_path)
    # An archive no sync has filled yet (the background syncer not started).
    client = make_app(
        home.root, tmp_path / "data", ARCHIVE=str(tmp_path / "none.db"), SYNC="background"
    ).test_client()
    html = _html(client, "/archive")
    assert "recall archive sync" in html and "not archived" in html
    assert ids["old"] in html


def test_delete_confirms_then_removes_the_session_never_touching_the_source(
    tmp_path: Path,
) -> None:
    client, ids, archive, source = _client(tmp_path)
    before = digests(source)
    sid = ids["ancient"]
    confirm = _html(client, f"/archive/sessions/{sid}/delete")
    assert "Prune case ancient" in confirm and "4 messages" in confirm and "1 usage row" in confirm
    token = _token(confirm)
    url = f"/archive/sessions/{sid}/delete"
    assert client.post(url, headers=ORIGIN).status_code == 403  # no token
    assert client.post(url, data={"csrf_token": token}).status_code == 403  # no origin
    assert (
        client.post(
            url, data={"csrf_token": token}, headers={"Origin": "http://evil.example"}
        ).status_code
        == 403
    )
    assert _html(client, "/archive").count(GONE_BADGE) == 2
    done = client.post(url, data={"csrf_token": token}, headers=ORIGIN)
    assert done.status_code == 303 and done.headers["Location"].endswith(f"/archive?deleted={sid}")
    after = _html(client, f"/archive?deleted={sid}")
    assert f"Deleted {sid}" in after and after.count(GONE_BADGE) == 1
    _html(client, f"/archive/sessions/{sid}/delete", status=404)
    assert client.post(url, data={"csrf_token": token}, headers=ORIGIN).status_code == 404
    fts_ok(archive)
    assert_untouched(source, before)


def test_a_session_hermes_still_has_is_refused_with_the_reason(tmp_path: Path) -> None:
    client, ids, _, _ = _client(tmp_path)
    confirm = _html(client, f"/archive/sessions/{ids['recent']}/delete")
    assert "still in Hermes" in confirm and 'type="submit"' not in confirm
    token = _token(_html(client, "/archive"))
    refused = client.post(
        f"/archive/sessions/{ids['recent']}/delete", data={"csrf_token": token}, headers=ORIGIN
    )
    assert refused.status_code == 409
    assert "still in Hermes" in refused.get_data(as_text=True)
    assert ids["recent"] in _html(client, "/archive?presence=hermes")


def test_an_unknown_session_is_a_404_page(tmp_path: Path) -> None:
    client, _, _, _ = _client(tmp_path)
    html = _html(client, "/archive/sessions/nope/delete", status=404)
    assert "not in the archive" in html


def test_the_page_without_an_archive_says_how_to_make_one(tmp_path: Path) -> None:
    home, _, _ = archived_home(tmp_path)
    # Before the (background) syncer's first pass, no archive exists yet.
    client = make_app(
        home.root, tmp_path / "data", ARCHIVE=str(tmp_path / "none.db"), SYNC="background"
    ).test_client()
    assert "recall archive sync" in _html(client, "/archive")
    assert not (tmp_path / "none.db").exists()


def _radar(html: str) -> str:
    return html.split('id="prune-radar"', 1)[1].split("</section>", 1)[0]


@pytest.mark.parametrize(
    ("config", "sentence"),
    [
        (
            "sessions:\n  auto_prune: false\n  retention_days: 30\n",
            "Hermes won't delete anything here: auto-prune is off in config.yaml.",
        ),
        (
            "sessions:\n  retention_days: 0\n",
            "Hermes won't delete anything here: retention_days is 0 in config.yaml, which "
            "keeps every session.",
        ),
    ],
)
def test_a_home_nothing_prunes_gets_one_calm_sentence(
    tmp_path: Path, config: str, sentence: str
) -> None:
    home, archive, ids = archived_home(tmp_path)
    home.config_yaml.write_text(config, encoding="utf-8")
    # Even with no archive at all: nothing is at risk, so nothing to warn about.
    for where in (archive, tmp_path / "none.db"):
        client = make_app(home.root, tmp_path / "data", ARCHIVE=str(where)).test_client()
        radar = _radar(_html(client, "/archive"))
        assert sentence in radar
        assert 'role="alert"' not in radar and "not archived" not in radar
        assert "data-session" not in radar and ids["old"] not in radar


def test_on_a_v31_home_each_row_says_why_it_goes_and_when_it_crossed(tmp_path: Path) -> None:
    facts = v31.build_v31_home(tmp_path / "home", now=time.time())
    archive = tmp_path / "archive.db"
    with SessionStore(archive) as store:
        sync(store, facts.db, facts.root)
    client = make_app(facts.root, tmp_path / "data", ARCHIVE=str(archive)).test_client()
    radar = _radar(_html(client, "/archive"))
    rows = {
        sid: " ".join(re.sub(r"<[^>]+>", " ", row).split())
        for sid, row in re.findall(r'<tr data-session="([^"]+)"[^>]*>(.*?)</tr>', radar)
    }
    assert set(rows) == facts.prune_deleted
    ids = facts.sessions

    def day(ts: float) -> str:
        return datetime.fromtimestamp(ts).strftime("%Y-%m-%d")

    old = rows[ids["old"]]
    assert "idle 199 days; past 90 days on" in old and "chain" not in old
    assert day(facts.last_activity[ids["old"]] + 90 * 86_400) in old
    tip = facts.last_activity[ids["old_lineage_2"]]
    for name in ("old_lineage_1", "old_lineage_2"):
        assert f"goes with its chain of 2 (all idle since {day(tip)}" in rows[ids[name]]
        assert f"past 90 days on {day(tip + 90 * 86_400)}" in rows[ids[name]]
    assert all("safely archived" in row for row in rows.values())
    kept = "Idle for more than 90 days but kept: 3 pinned or in a pinned chain, 1 not ended, 3 in"
    assert f"{kept} a chain still in use." in radar


# -- profiles (issue 17) ---------------------------------------------------------------------


def test_every_profile_has_its_radar_and_a_profile_column_and_one_profile_its_own(
    tmp_path: Path,
) -> None:
    from tests.support import hermes_shapes as hs

    facts = hs.build_profiles_home(tmp_path / "hermes")
    legacy_config = facts.root / "profiles" / "legacy" / "config.yaml"
    legacy_config.write_text("sessions:\n  retention_days: 36500\n", encoding="utf-8")
    client = make_app(facts.root, tmp_path / "data").test_client()
    html = _html(client, "/archive?profile=all&presence=all")
    radars = {
        m.group(1): m.group(0)
        for m in re.finditer(
            r'<section id="prune-radar-([^"]+)" class="prune-radar".*?</section>', html
        )
    }
    assert set(radars) == {"default", "legacy", "empty"}
    assert "36,500 days" in radars["legacy"] and "90 days" in radars["default"]
    doomed = re.findall(r'data-session="([^"]+)"', radars["default"])
    assert doomed and not re.findall(r'data-session="([^"]+)"', radars["legacy"])
    # A doomed session links to its own archived copy, never to another profile's.
    links = re.findall(r'href="/sessions/([^"?]+)', radars["default"])
    assert links and not any(link.startswith("legacy:") for link in links)
    listing = html.split('id="archived"', 1)[1]
    rows = re.findall(r"<tr>.*?</tr>", listing.split("<tbody>")[1])
    profiles = {
        re.search(r'href="/sessions/([^"?]+)', r).group(1): re.search(
            r'<td class="profile">([^<]+)</td>', r
        ).group(1)
        for r in rows
    }
    for sid in facts.shared_ids:  # one id, two sessions, each with its profile
        assert profiles[sid] == "default" and profiles[f"legacy:{sid}"] == "legacy"
    # One profile: its own radar (its config), only its sessions, no column.
    legacy = _html(client, "/archive?profile=legacy&presence=all")
    assert legacy.count('class="prune-radar"') == 1 and "36,500 days" in legacy
    listed = re.findall(r'href="/sessions/([^"?]+)', legacy.split('id="archived"', 1)[1])
    assert listed and all(sid.startswith("legacy:") for sid in listed)
    assert '<td class="profile">' not in legacy
    # Another profile's session cannot be previewed for deletion from here.
    assert client.get(f"/archive/sessions/{hs.S_ROOT}/delete?profile=legacy").status_code == 404


def test_one_profile_archive_page_has_no_profile_column(tmp_path: Path) -> None:
    client, ids, _, _ = _client(tmp_path)
    html = _html(client, "/archive?presence=all")
    assert 'id="prune-radar"' in html and '<td class="profile">' not in html
    assert ">Profile</th>" not in html


def test_the_radar_and_the_listing_read_the_archive_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, ids, archive, _ = _client(tmp_path)
    opened = count_snapshots(monkeypatch)
    own: list[Path] = []  # the archive opened by the radar or the listing themselves
    # The listing opens the archive (Recall's own file), the radar the source beside it.
    for module, opener in ((listing_module, "open_own_readonly"), (radar_module, "open_readonly")):
        original = getattr(module, opener)

        def recorded(path: Path, *args: object, _open=original, **kwargs: object):
            own.append(Path(path))
            return _open(path, *args, **kwargs)

        monkeypatch.setattr(module, opener, recorded)
    html = _html(client, "/archive")
    assert len(opened) == 1  # one snapshot for the listing and the radar's check
    assert archive.resolve() not in [p.resolve() for p in own]  # only the source beside it
    assert "safely archived" in html and f'/sessions/{ids["ancient"]}"' in html


def test_untitled_sessions_are_named_as_their_pages_name_them(tmp_path: Path) -> None:
    """Issue 24: the radar, the listing and the delete page name an untitled session as
    its own page does, never by its id alone."""
    client, ids, archive, _ = _client(tmp_path)
    with closing(sqlite3.connect(archive)) as conn:
        conn.execute("UPDATE sessions SET title = NULL")
        conn.commit()
    html = _html(client, "/archive?presence=all")
    radar = html.split('id="prune-radar"', 1)[1].split("</section>", 1)[0]
    listing = html.split('id="archived"', 1)[1]
    link = r'<a href="/sessions/([^"?]+)[^"]*">(.*?)</a>'
    shown = re.findall(link, radar) + re.findall(link, listing)
    assert {ids["old"], ids["older"], ids["ancient"]} <= {sid for sid, _ in shown}
    named = names_shown_as_their_pages(client, shown)
    assert all(untitled and name != sid for sid, name, untitled in named)
    confirm = _html(client, f"/archive/sessions/{ids['ancient']}/delete")
    heading = re.search(r"<h1>Delete “(.*?)” from Recall's archive\?</h1>", confirm).group(1)
    names_shown_as_their_pages(client, [(ids["ancient"], heading)])
