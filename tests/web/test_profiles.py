"""The request's profile (web/profiles.py): ?profile=, the remembered choice, links, 404s."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask import Flask

from tests.support import hermes_shapes as hs
from tests.support.app import make_app


@pytest.fixture
def facts(tmp_path: Path) -> hs.ProfilesFacts:
    return hs.build_profiles_home(tmp_path / "hermes")


@pytest.fixture
def profiles_app(facts: hs.ProfilesFacts, tmp_path: Path) -> Flask:
    return make_app(facts.root, tmp_path / "data")


def _cookie(app: Flask) -> str:
    return f"{app.config['SESSION_COOKIE_NAME']}_profile"


def test_the_switcher_lists_every_profile_and_links_keep_the_choice(profiles_app: Flask) -> None:
    client = profiles_app.test_client()
    page = client.get("/?profile=legacy").get_data(as_text=True)
    assert 'class="profile-switcher"' in page
    assert re.search(r'<strong class="current-profile">legacy</strong>', page)
    for name in ("all", "default", "legacy", "empty"):
        assert f'data-profile="{name}"' in page
    # Every link the page builds stays in the profile (url_defaults), the static files do not.
    assert 'href="/chains?profile=legacy"' in page and 'href="/costs?profile=legacy"' in page
    assert "app.css?profile" not in page


def test_the_choice_is_remembered_for_a_page_opened_without_one(profiles_app: Flask) -> None:
    client = profiles_app.test_client()
    first = client.get("/?profile=legacy")
    assert _cookie(profiles_app) in first.headers.get("Set-Cookie", "")
    again = client.get("/chains").get_data(as_text=True)
    assert '<strong class="current-profile">legacy</strong>' in again
    explicit = client.get("/chains?profile=all").get_data(as_text=True)
    assert '<strong class="current-profile">All profiles</strong>' in explicit
    assert '<strong class="current-profile">All profiles</strong>' in client.get("/").get_data(
        as_text=True
    )


def test_an_unknown_profile_is_a_404_naming_the_profiles(profiles_app: Flask) -> None:
    client = profiles_app.test_client()
    response = client.get("/?profile=%3Cb%3Ework")
    body = response.get_data(as_text=True)
    assert response.status_code == 404
    assert "default, empty, legacy" in body and "<b>work" not in body
    # A stale cookie (a profile since removed) is ignored, not an error.
    client.set_cookie(_cookie(profiles_app), "gone")
    assert client.get("/").status_code == 200


def test_a_session_of_a_profile_opens_by_its_archive_id(profiles_app: Flask) -> None:
    client = profiles_app.test_client()
    legacy = client.get(f"/sessions/legacy:{hs.S_CRON}?profile=legacy")
    assert legacy.status_code == 200 and hs.PROFILE_WORDS["legacy"] in legacy.get_data(as_text=True)
    assert client.get(f"/sessions/{hs.S_CRON}?profile=legacy").status_code == 404
    mine = client.get(f"/sessions/{hs.S_CRON}?profile=default").get_data(as_text=True)
    assert hs.PROFILE_WORDS["default"] in mine and hs.PROFILE_WORDS["legacy"] not in mine


def test_a_served_profile_has_no_switcher_and_no_other_profile(
    facts: hs.ProfilesFacts, tmp_path: Path
) -> None:
    app = make_app(facts.root, tmp_path / "data", PROFILE="legacy")
    client = app.test_client()
    page = client.get("/").get_data(as_text=True)
    assert "profile-switcher" not in page
    assert client.get("/?profile=default").status_code == 404
    assert client.get("/?profile=all").status_code == 200


def test_one_profile_changes_nothing(hermes_home: Path, tmp_path: Path) -> None:
    client = make_app(hermes_home, tmp_path / "data").test_client()
    page = client.get("/").get_data(as_text=True)
    assert "profile-switcher" not in page and "profile=" not in page


def test_a_get_form_carries_the_profile_in_a_field_not_its_action(profiles_app: Flask) -> None:
    page = profiles_app.test_client().get("/?profile=legacy").get_data(as_text=True)
    form = page[page.index('<form id="search-form"') :]
    form = form[: form.index("</form>")]
    # A browser drops the query of a GET form's action: the field carries the choice.
    assert '<input type="hidden" name="profile" value="legacy">' in form
    assert 'action="/"' in form and 'hx-get="/"' in form


def test_switching_drops_what_one_profiles_page_said_after_a_save(profiles_app: Flask) -> None:
    page = profiles_app.test_client().get("/memory/USER.md?profile=legacy&saved=1")
    body = page.get_data(as_text=True)
    link = re.search(r'href="([^"]*)" data-profile="default"', body)
    assert link is not None and "saved" not in link.group(1)
    assert link.group(1).startswith("/memory/USER.md?")


def test_a_session_link_opens_in_its_own_profile_whichever_the_cookie_names(
    facts: hs.ProfilesFacts, tmp_path: Path
) -> None:
    """Issue 24: ``/sessions/<profile>:<id>`` opens that session whatever profile the
    browser last chose, says whose it is, and leaves the choice as it was; with the
    default profile's look-alike id ``legacy:<id>`` each profile keeps its own."""
    crafted = hs.add_lookalike_session(facts)
    app = make_app(facts.root, tmp_path / "data")
    client = app.test_client()
    for chosen, path, owner, word in (
        ("default", f"/sessions/{crafted}", "legacy", facts.words["legacy"]),
        ("legacy", f"/sessions/{hs.S_CRON}", "default", facts.words["default"]),
        ("legacy", f"/sessions/default:{crafted}", "default", hs.LOOKALIKE_WORD),
        ("default", f"/chains/{crafted}", "legacy", None),
    ):
        client.set_cookie(_cookie(app), chosen)
        response = client.get(path)
        page = response.get_data(as_text=True)
        assert response.status_code == 200, (chosen, path)
        assert f'<strong class="current-profile">{owner}</strong>' in page, path
        assert f'<strong class="profile-owner">{owner}</strong>' in page, path
        assert f"you were\n    reading <strong>{chosen}</strong>" in page, path
        assert word is None or word in page
        assert _cookie(app) not in response.headers.get("Set-Cookie", "")  # choice kept
        assert f"profile={owner}" in page  # its links stay in its profile
    client.set_cookie(_cookie(app), "default")
    theirs = client.get(f"/sessions/{crafted}").get_data(as_text=True)
    assert hs.LOOKALIKE_WORD not in theirs  # the legacy session, not the look-alike
    # In its own profile nothing moves; an explicit ?profile= is obeyed (a 404 there).
    own = client.get(f"/sessions/default:{crafted}").get_data(as_text=True)
    assert "profile-moved" not in own and hs.LOOKALIKE_WORD in own
    assert client.get(f"/sessions/default:{crafted}?profile=legacy").status_code == 404
    assert client.get("/sessions/nope").status_code == 404


def test_each_profiles_pages_show_its_own_session_of_a_look_alike_id(
    facts: hs.ProfilesFacts, tmp_path: Path
) -> None:
    crafted = hs.add_lookalike_session(facts)
    client = make_app(facts.root, tmp_path / "data").test_client()
    mine = client.get(f"/?q={hs.LOOKALIKE_WORD}&profile=default").get_data(as_text=True)
    assert f'href="/sessions/default:{crafted}?' in mine
    theirs = client.get(f"/?q={hs.LOOKALIKE_WORD}&profile=legacy").get_data(as_text=True)
    assert "/sessions/" not in theirs
    legacy = client.get(f"/sessions/{crafted}?profile=legacy").get_data(as_text=True)
    assert facts.words["legacy"] in legacy and hs.LOOKALIKE_WORD not in legacy
    default = client.get(f"/sessions/default:{crafted}?profile=default")
    assert default.status_code == 200 and hs.LOOKALIKE_WORD in default.get_data(as_text=True)
    assert client.get(f"/sessions/{crafted}?profile=default").status_code == 404
