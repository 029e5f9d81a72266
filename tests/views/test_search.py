"""The search page: what the result list says about counts, pages and empty results."""

from __future__ import annotations

import html
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from dashboard.search import routes as search_routes
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as shapes
from tests.support.app import make_app
from tests.support.pages import names_shown_as_their_pages
from tests.support.snapshots import count_snapshots


def _client(tmp_path: Path, sessions: int = 12, per_session: int = 3) -> FlaskClient:
    with SessionStore(tmp_path / "home" / "state.db") as store:
        for i in range(sessions):
            sid = store.create_session(
                "cli", session_id=f"s{i:02d}", started_at=1e9 + i, model="gpt-4o"
            )
            store.append_messages(
                sid,
                [
                    NewMessage("user", f"redis note {k}", timestamp=1e9 + i)
                    for k in range(per_session)
                ],
            )
    return make_app(tmp_path / "home", tmp_path / "data").test_client()


def _text(client: FlaskClient, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200
    return " ".join(response.get_data(as_text=True).split())


def test_a_page_past_the_end_says_so_and_links_the_last(tmp_path: Path) -> None:
    html = _text(_client(tmp_path), "/?q=redis&per_page=5&page=999")
    assert "Page 999 is past the end: there are 3 pages of results." in html
    assert re.search(r'href="/\?[^"]*page=3[^"]*"[^>]*>Go to the last page', html)
    assert "page=998" not in html and "Nothing matches" not in html


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ("&model=claude", "with the model filter: there are matches without it."),
        ("&after=2030-01-01", "with the date range: there are matches without it."),
        ("&role=assistant", "with the role filter"),
        ("&source=telegram", "with the source filter"),
        ("", "Nothing matches <code>walrus</code> anywhere in this home."),
    ],
)
def test_no_results_names_the_filter_that_hid_them(tmp_path: Path, args: str, says: str) -> None:
    q = "redis" if args else "walrus"
    html = _text(_client(tmp_path), f"/?q={q}{args}")
    assert says in html
    assert "Try adding the cron or subagent source" not in html


def test_an_empty_home_is_named(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "home" / "state.db"):
        pass
    client = make_app(tmp_path / "home", tmp_path / "data").test_client()
    assert "This home has no conversations yet" in _text(client, "/?q=redis")
    assert "This home has no conversations yet" in _text(client, "/")


def test_one_count_of_matching_messages_on_a_bounded_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_routes, "RANK_WINDOW", 10)
    monkeypatch.setattr(search_routes, "SORT_WINDOW", 10)
    client = _client(tmp_path)
    html = _text(client, "/?q=redis&role=user&exclude=s11")
    counts = set(re.findall(r"(?i)more than ([\d,]+)", html))
    assert counts == {"10"}, counts
    oldest = _text(client, "/?q=redis&sort=oldest")
    assert "Search newer messages" in oldest and "newer_than=" in oldest


def test_a_card_and_its_session_page_count_the_same_matches(tmp_path: Path) -> None:
    from tests.support import hermes_shapes as shapes

    home = tmp_path / "hermes"
    shapes.build_current_views(home / "state.db")
    client = make_app(home, tmp_path / "data").test_client()
    for q in ("pool", "pool NOT size", '"pool size" OR pgbouncer'):
        html = _text(client, f"/?q={q}&source=cli&source=telegram")
        cards = html.split('<article class="card"')[1:]
        assert cards, q
        for card in cards:
            sid = re.search(r'<h3><a href="/sessions/([^"?]+)\?', card)[1]
            badge = re.search(r'class="badge hits">(\d+) hits?( in this chain)?</span>', card)
            link = re.search(r">all (\d+) hits? in this session", card)
            hits_here = card.count(f'href="/sessions/{sid}?') - 1  # less the title link
            if link:
                expected = link[1]
            elif badge and not badge[2]:
                expected = badge[1]
            else:
                expected = str(hits_here)
            session = _text(client, f"/sessions/{sid}?q={q}")
            word = "message" if expected == "1" else "messages"
            assert f"<strong>{expected} {word} match</strong>" in session, (q, sid)


def test_no_endpoint_shows_one_line_instead_of_a_preview_per_card(tmp_path: Path) -> None:
    html = _text(_client(tmp_path), "/?q=redis")
    assert html.count('class="summaries-note"') == 1 and "RECALL_LLM_BASE_URL" in html
    assert "summary-slot" not in html and "Raw preview" not in html
    assert "spinner" not in html.split('id="results"', 1)[1]


def test_a_configured_endpoint_keeps_the_summary_slots(tmp_path: Path, llm_stub) -> None:
    _client(tmp_path)
    client = make_app(tmp_path / "home", tmp_path / "data", LLM_BASE_URL=llm_stub.url).test_client()
    html = _text(client, "/?q=redis")
    assert "summary-slot" in html and "summaries-note" not in html


def test_a_failing_endpoint_still_shows_the_extractive_preview(tmp_path: Path) -> None:
    _client(tmp_path)
    # Nothing listens on this port: every call fails, the card falls back to the preview.
    from tests.support.browser_support import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    client = make_app(
        tmp_path / "home", tmp_path / "data", LLM_BASE_URL=url, LLM_RETRIES=0
    ).test_client()
    html = _text(client, "/summaries/s01?q=redis")
    assert "[Raw preview — summarization unavailable]" in html and "<mark>redis</mark>" in html


@pytest.mark.parametrize("url", ["/?q=redis", "/?q=zzqx", "/"])
def test_the_page_says_what_it_did_in_plain_words(tmp_path: Path, url: str) -> None:
    html = _text(_client(tmp_path), url)
    for jargon in ("unicode61", "trigram", "word index", "in a family", "Exclude session"):
        assert jargon not in html.split("<main", 1)[1], jargon
    if url == "/?q=redis":
        assert "searched whole words" in html


def test_the_filter_panel_opens_for_fields_set_away_from_their_defaults(tmp_path: Path) -> None:
    client = _client(tmp_path)
    assert '<details class="filters" open>' in _text(client, "/?q=redis&sort=oldest")
    assert '<details class="filters" open>' in _text(client, "/?q=redis&summaries=off")
    assert '<details class="filters">' in _text(client, "/?q=redis&sort=relevance&summaries=auto")


def test_the_live_update_carries_the_tab_title(tmp_path: Path) -> None:
    response = _client(tmp_path).get(
        "/?q=redis+pool", headers={"HX-Request": "true", "HX-Target": "results"}
    )
    html = response.get_data(as_text=True)
    assert html.lstrip().startswith("<title>Search: redis pool · Recall</title>")
    assert '<section id="results"' in html and "<form" not in html


def test_gone_sessions_carry_their_badge_and_can_be_filtered(tmp_path: Path) -> None:
    from tests.support import hermes_shapes as shapes
    from tests.support.pages import GONE_BADGE

    ids = shapes.build_gone_home(tmp_path / "home")
    client = make_app(tmp_path / "home", tmp_path / "data").test_client()
    html = _text(client, "/?q=redis&group=session")
    assert html.count(GONE_BADGE) == 1
    only = _text(client, "/?q=redis&group=session&presence=archive")
    assert ids["gone"] in only and ids["kept"] not in only
    still = _text(client, "/?q=redis&group=session&presence=hermes")
    assert ids["kept"] in still and f"/sessions/{ids['gone']}" not in still
    assert 'name="presence"' in html


def test_a_bad_presence_gets_a_clear_400(tmp_path: Path) -> None:
    from tests.support import hermes_shapes as shapes

    shapes.build_gone_home(tmp_path / "home")
    client = make_app(tmp_path / "home", tmp_path / "data").test_client()
    response = client.get("/?q=redis&presence=bogus")
    assert response.status_code == 400
    assert "presence must be one of all, hermes, archive" in response.get_data(as_text=True)


def test_a_hit_before_a_compaction_says_which_and_links_to_that_message(tmp_path: Path) -> None:
    from tests.support import hermes_shapes as hs

    facts = hs.build_epochs_home(tmp_path / "home")
    client = make_app(tmp_path / "home", tmp_path / "data").test_client()
    word_id = facts.word_ids[hs.EPOCH1_WORD]  # the archive keeps the source's id when free
    html = _text(client, f"/?q={hs.EPOCH1_WORD}")
    link = re.search(r'<a class="hit"[^>]*href="([^"]+)"', html)
    assert link is not None
    assert link.group(1).startswith(f"/sessions/{hs.S_EPOCHS}?")
    assert f"at={word_id}" in link.group(1) and link.group(1).endswith(f"#m{word_id}")
    assert "before compaction 1 of 3" in html
    # The page it lands on holds that message.
    page = _text(client, link.group(1).replace("&amp;", "&").split("#")[0])
    assert f'id="m{word_id}"' in page
    # A hit in the live epoch says nothing of compactions.
    live = _text(client, f'/?q="now about {hs.EPOCH_WORDS[-1]}"')
    assert "compaction" not in live.split('<section id="results"')[1]


# -- profiles (issue 17) ---------------------------------------------------------------------


def _profiles_client(tmp_path: Path):
    from tests.support import hermes_shapes as hs

    facts = hs.build_profiles_home(tmp_path / "hermes")
    return make_app(facts.root, tmp_path / "data").test_client(), facts


def _cards(html: str) -> list[str]:
    return re.findall(r'<article class="card".*?</article>', html)


def test_search_all_finds_each_profiles_word_on_a_card_naming_its_profile(
    tmp_path: Path,
) -> None:
    client, facts = _profiles_client(tmp_path)
    for name, word in facts.words.items():
        html = _text(client, f"/?q={word}&source=cron&profile=all")
        (card,) = _cards(html)
        assert f'<span class="profile-label" title="Profile">{name}</span>' in card
        facet = re.search(r'<nav class="profile-facet".*?</nav>', html)
        assert facet is not None
        assert re.findall(
            r'data-profile="([^"]+)"[^>]*>[^<]*<span class="count">\((\d+)\)', facet.group(0)
        ) == [(name, "1")]


def test_the_profile_facet_counts_each_profiles_sessions_and_switches_to_it(
    tmp_path: Path,
) -> None:
    client, facts = _profiles_client(tmp_path)
    html = _text(client, "/?q=job&source=cron&group=session&profile=all")
    cards = _cards(html)
    labels = [re.search(r'class="profile-label"[^>]*>([^<]+)<', c).group(1) for c in cards]
    facet = re.search(r'<nav class="profile-facet".*?</nav>', html).group(0)
    links = re.findall(
        r'<a href="([^"]+)" data-profile="([^"]+)"[^>]*>[^<]*'
        r'<span class="count">\((\d+)\)',
        facet,
    )
    assert {p: int(n) for _, p, n in links} == {p: labels.count(p) for p in set(labels)}
    assert sorted(labels) == ["default", "legacy"]
    for href, name, _ in links:  # each keeps the query and switches the scope
        href = href.replace("&amp;", "&")
        assert "q=job" in href and f"profile={name}" in href and "profile=all" not in href
        scoped = _text(client, href)
        assert len(_cards(scoped)) == labels.count(name)
        assert "profile-label" not in scoped and "profile-facet" not in scoped
    # The shared session id: two cards, two links, one per profile.
    hrefs = {re.search(r'<h3><a href="([^"?]+)', c).group(1) for c in cards}
    assert hrefs == {
        f"/sessions/{hs_id}"
        for hs_id in (facts.said_in["default"], f"legacy:{facts.said_in['legacy']}")
    }
    assert len({re.search(r'id="(card-[^"]+)"', c).group(1) for c in cards}) == 2
    api = client.get("/api/search?q=job&source=cron&group=session&profile=all").get_json()
    assert sorted(r["profile"] for r in api["results"]) == ["default", "legacy"]
    assert dict(api["by_profile"]) == {"default": 1, "legacy": 1}


def test_a_scoped_search_says_nothing_of_another_profiles_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_routes, "RANK_WINDOW", 1)
    monkeypatch.setattr(search_routes, "SORT_WINDOW", 1)
    client, facts = _profiles_client(tmp_path)
    for sort in ("relevance", "newest", "oldest"):
        other = _text(client, f"/?q={facts.words['default']}&sort={sort}&profile=legacy")
        never = _text(client, f"/?q=zyzzogeton&sort={sort}&profile=legacy")
        section, nothing = (
            re.sub(r"· \d+ ms", "", page.split('<section id="results"')[1])
            for page in (other, never)
        )
        assert section.replace(facts.words["default"], "zyzzogeton") == nothing
        assert "older messages" not in section and "newer messages" not in section
        assert "Nothing matches" in section and "anywhere in the profile" in section
    api = client.get(f"/api/search?q={facts.words['default']}&profile=legacy").get_json()
    assert (api["total_matches"], api["bounded"], api["older_than"]) == (0, False, None)


def test_one_profile_shows_no_label_facet_or_profile_parameter(tmp_path: Path) -> None:
    from tests.support import hermes_shapes as hs

    hs.build_current_views(tmp_path / "home" / "state.db")
    client = make_app(tmp_path / "home", tmp_path / "data").test_client()
    html = _text(client, "/?q=the&source=cron&source=cli")
    assert _cards(html)
    assert "profile-label" not in html and "profile-facet" not in html
    assert "profile=" not in html
    api = client.get("/api/search?q=the").get_json()
    assert {r["profile"] for r in api["results"]} == {"default"} and api["by_profile"] == []


def test_the_page_and_the_json_render_one_search_of_one_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = _client(tmp_path, sessions=4)
    opened = count_snapshots(monkeypatch)
    html = client.get("/", query_string={"q": "redis"}).get_data(as_text=True)
    assert len(opened) == 1  # the filters' choices and the results: one snapshot
    shown = re.findall(r'<h3><a href="/sessions/([^"?]+)\?', html)
    del opened[:]
    body = client.get("/api/search", query_string={"q": "redis"}).json
    assert len(opened) == 1
    assert shown == [r["session_id"] for r in body["results"]] == ["s03", "s02", "s01", "s00"]
    assert 'value="cli"' in html  # the source filter, read in the same snapshot
    del opened[:]
    refused = client.get("/", query_string={"q": "NOT redis"})
    assert refused.status_code == 400 and len(opened) == 1
    assert 'value="cli"' in refused.get_data(as_text=True)  # the filters are still offered
    assert client.get("/api/search", query_string={"q": "NOT redis"}).status_code == 400


def test_an_untitled_card_is_named_as_its_conversations_page_names_it(tmp_path: Path) -> None:
    """Issue 24: a card of an untitled session (or chain) shows the name the session page
    of its conversation's first session gives it, the same in the JSON, never the raw id."""
    db = shapes.build_current_views(tmp_path / "home" / "state.db")
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("UPDATE sessions SET title = NULL")
        conn.commit()
    client = make_app(tmp_path / "home", tmp_path / "data").test_client()
    sources = "&".join(f"source={s}" for s in ("cli", "telegram", "cron", "subagent"))
    page = client.get(f"/?{sources}").get_data(as_text=True)
    cards = client.get(f"/api/search?{sources}").get_json()["results"]
    assert len(cards) > 2 and any(c["root_session_id"] == shapes.S_ROOT for c in cards)
    named = names_shown_as_their_pages(client, [(c["root_session_id"], c["name"]) for c in cards])
    assert all(untitled and name != sid for sid, name, untitled in named)
    headings = re.findall(r'<h3><a href="/sessions/([^"?]+)[^"]*">(.*?)</a></h3>', page, re.S)
    assert [(sid, html.unescape(text)) for sid, text in headings] == [
        (c["session_id"], c["name"]) for c in cards
    ]
