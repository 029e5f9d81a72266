"""The session page: transcript, highlights, chain links, and untrusted text kept inert."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from dashboard.web.markdown import highlight, render_markdown
from tests.support import hermes_shapes as shapes
from tests.support import hermes_v31 as hv
from tests.support.app import make_app
from tests.support.pages import GONE_BADGE, IMG, SCRIPT, assert_inert, xss_home
from tests.support.snapshots import count_snapshots


def client_for(tmp_path: Path, shape: str) -> FlaskClient:
    home = tmp_path / "home"
    shapes.SHAPES[shape](home / "state.db")
    return make_app(home, tmp_path / "data").test_client()


def page(client: FlaskClient, path: str, **headers: str) -> str:
    response = client.get(path, headers=headers)
    assert response.status_code == 200, response.status_code
    return response.get_data(as_text=True)


@pytest.mark.parametrize("shape", ["current_views", "seed_inline"])
def test_transcript_page_shows_every_message_with_its_parts(tmp_path: Path, shape: str) -> None:
    client = client_for(tmp_path, shape)
    facts = shapes.EXPECTED[shape]

    root = page(client, f"/sessions/{shapes.S_ROOT}")
    assert "<title>Postgres pool tuning · Recall</title>" in root
    ids = re.findall(r'<li id="m(\d+)" class="msg ', root)
    assert len(ids) == len([m for m in shapes.MESSAGES if m.session == shapes.S_ROOT]) - 1
    assert all(f'href="#m{i}"' in root for i in ids)
    assert root.count('<details class="tool-call"') == 3
    assert '<code class="call-name">terminal</code>' in root
    assert "&#34;command&#34;: &#34;psql -c" in root  # pretty-printed, escaped arguments
    assert '<details class="reasoning">' in root
    assert "anthropic/claude-sonnet-4.5" in root and "compression" in root
    assert "$0.42" in root  # the actual figure
    assert shapes.REWOUND_WORD not in root
    assert f'rel="next" href="/sessions/{shapes.S_CONT1}"' in root
    assert 'rel="prev"' not in root

    middle = page(client, f"/sessions/{shapes.S_CONT1}")
    assert f'rel="prev" href="/sessions/{shapes.S_ROOT}"' in middle
    assert f'rel="next" href="/sessions/{shapes.S_CONT2}"' in middle
    assert "is-summary" in middle and "Context compaction summary" in middle
    # The summary in its own words: no marker, no boilerplate, no end line.
    assert "Goal: stop API timeouts." in middle
    assert facts.summary_prefix not in middle and "Earlier turns were compacted" not in middle
    assert "END OF CONTEXT SUMMARY" not in middle

    tip = page(client, f"/sessions/{shapes.S_CONT2}")
    assert f'rel="prev" href="/sessions/{shapes.S_CONT1}"' in tip and 'rel="next"' not in tip
    assert "Final check: is the pool config committed?" in tip.split("</h1>")[0]
    assert "untitled" in tip

    telegram = page(client, f"/sessions/{shapes.S_TELEGRAM}")
    assert "这是部署失败的截图 screenshot attached" in telegram and "\\x00json" not in telegram
    assert ">structured<" in telegram
    assert ('class="tag tag-compacted"' in telegram) is facts.modern


def test_all_rows_show_rewound_and_hidden_rows_marked(tmp_path: Path) -> None:
    client = client_for(tmp_path, "current_views")
    default = page(client, f"/sessions/{shapes.S_ROOT}")
    assert "Show 1 rewound or hidden row" in default
    everything = page(client, f"/sessions/{shapes.S_ROOT}?all=1")
    assert shapes.REWOUND_WORD in everything
    assert "is-inactive" in everything and "inactive · rewound" in everything
    assert "Hide rewound and hidden rows" in everything
    telegram = page(client, f"/sessions/{shapes.S_TELEGRAM}?all=1")
    assert shapes.HIDDEN_WORD in telegram and "hidden row" in telegram


def test_query_terms_are_marked_and_matches_listed(tmp_path: Path) -> None:
    client = client_for(tmp_path, "current_views")
    html = page(client, f"/sessions/{shapes.S_ROOT}?q={shapes.UNIQUE_WORD}")
    assert f"<mark>{shapes.UNIQUE_WORD}</mark>" in html
    assert "1 message match" in html
    (first_id,) = re.findall(r'<li id="m(\d+)" class="msg role-user', html)[:1]
    nav = html.split('aria-label="Messages matching the query"')[1].split("</nav>")[0]
    assert re.findall(r'href="#m(\d+)"', nav) == [first_id]

    # Operators are not terms; phrases are; matches inside tool call arguments count.
    html = page(client, f'/sessions/{shapes.S_ROOT}?q=NOT+nothing+"pool size"+OR+pgbouncer*')
    assert "<mark>pool size</mark>" in html and "<mark>pgbouncer</mark>" in html
    assert "<mark>OR</mark>" not in html and "<mark>nothing</mark>" not in html
    assert "3 messages match" in html  # two say "pool size", one calls pgbouncer
    # A match is what the query means, not any term anywhere: both terms in one message.
    both = page(client, f'/sessions/{shapes.S_ROOT}?q="pool size"+pgbouncer*')
    assert "<mark>pool size</mark>" in both and "0 messages match" in both
    assert "?q=" in page(client, f"/sessions/{shapes.S_CONT1}?q=pool").split('rel="next"')[1][:90]


def test_highlight_marks_text_nodes_only() -> None:
    html = render_markdown('A [link](https://example.com/href "title") with *href* & amp; <b>')
    marked = str(highlight(html, ["href", "amp", "title", "a", "b"]))
    assert '<a href="https://example.com/href" title="title" rel="noopener' in marked
    assert "<em><mark>href</mark></em>" in marked
    assert "&amp; <mark>amp</mark>;" in marked  # the entity itself is never split
    assert "&lt;<mark>b</mark>&gt;" in marked
    assert str(highlight(html, [])) == str(html) == str(highlight(html, ["", "  "]))
    # A plain str is text, never HTML: it is escaped before anything is marked.
    assert highlight('<b title="x">x</b>', ["x"]) == (
        "&lt;b title=&#34;<mark>x</mark>&#34;&gt;<mark>x</mark>&lt;/b&gt;"
    )


@pytest.mark.parametrize("q", ["", "img", "onerror", "script", "href", "a", "alert mark"])
def test_untrusted_text_is_escaped_everywhere(tmp_path: Path, q: str) -> None:
    home, sid = xss_home(tmp_path)
    client = make_app(home, tmp_path / "data").test_client()
    html = page(client, f"/sessions/{sid}?all=1&q={q}")
    assert_inert(html)
    if not q:
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "&lt;img src=x onerror=alert(1)&gt;" in html
        assert "&lt;div onclick=" in html  # raw HTML in Markdown is shown as text
        assert "[a bad link](javascript:alert(3))" in html
        assert '<a href="https://example.com/docs" rel="noopener noreferrer nofollow">' in html
        assert "<strong>bold</strong>" in html
    else:
        assert "<mark>" in html


def test_unknown_session_is_the_404_page(client: FlaskClient) -> None:
    response = client.get("/sessions/20990101_000000_ffffff")
    assert response.status_code == 404
    html = response.get_data(as_text=True)
    assert "<html" in html and "Not found" in html and "20990101_000000_ffffff" in html
    assert client.get("/sessions/%3Cscript%3E").status_code == 404
    assert "<script>" not in client.get("/sessions/%3Cscript%3E").get_data(as_text=True)


def test_htmx_request_for_the_transcript_gets_only_the_partial(client: FlaskClient) -> None:
    path = f"/sessions/{shapes.S_ROOT}?q=pool"
    body = page(client, path, **{"HX-Request": "true", "HX-Target": "transcript"})
    assert "<html" not in body
    assert body.lstrip().startswith('<section id="transcript"')
    assert "<mark>pool</mark>" in body and "Postgres pool tuning</h1>" not in body
    full = page(client, path)
    assert full.count('id="transcript"') == 1 and "<html" in full


# -- long transcripts come in pages (issue 13, item 22) ----------------------------------


def test_a_long_session_page_shows_one_page_and_lands_on_a_linked_message(
    tmp_path: Path,
) -> None:
    from tests.support.long_homes import long_home

    home, ids, more = long_home(tmp_path)
    client = make_app(home, tmp_path / "data").test_client()
    first = page(client, "/sessions/long-a")
    assert len(re.findall(r'<li id="m\d+" class="msg', first)) == 500
    assert "1,100 messages shown" in first and "page 1 of 3" in first
    assert 'href="/sessions/long-a?page=2"' in first
    # A link to a message lands on the page that holds it, anchors and highlights intact.
    target = ids[1_050]
    there = page(client, f"/sessions/long-a?q=line+1050&at={target}")
    assert f'<li id="m{target}"' in there and "page 3 of 3" in there
    assert "<mark>1050</mark>" in there
    # The matches list counts every page and links across them with at=.
    assert "1,100 messages match" in page(client, "/sessions/long-a?q=talk")
    two = page(client, "/sessions/long-a?q=7+OR+1050")
    assert "2 messages match" in two
    assert f'href="/sessions/long-a?q=7+OR+1050&amp;at={ids[1_050]}#m{ids[1_050]}"' in two
    assert f'href="#m{ids[7]}"' in two  # on this page: a plain anchor
    past = page(client, "/sessions/long-a?page=99")
    assert "Page 99 is past the end: there are 3 pages." in past
    assert client.get("/sessions/long-a?at=x").status_code == 400
    # The stitched transcript pages the same way.
    stitched = page(client, f"/chains/long-b/transcript?at={more[3]}&q=after")
    assert f'id="m{more[3]}"' in stitched and "page 3 of 3" in stitched
    assert "<mark>after</mark>" in stitched and "1,131 messages" in stitched
    assert (
        len(re.findall(r'<li id="m\d+" class="msg', page(client, "/chains/long-b/transcript")))
        == 500
    )


def test_search_hits_link_to_the_page_holding_them(tmp_path: Path) -> None:
    from tests.support.long_homes import long_home

    home, ids, _ = long_home(tmp_path)
    client = make_app(home, tmp_path / "data").test_client()
    results = page(client, "/?q=1050")
    link = re.search(r'class="hit"[^>]*href="([^"]+)"', results)[1].replace("&amp;", "&")
    assert link.endswith(f"#m{ids[1_050]}") and f"at={ids[1_050]}" in link
    assert f'<li id="m{ids[1_050]}"' in page(client, link.split("#")[0])


def test_a_lone_untitled_session_has_a_plain_heading_and_no_chain_part(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with SessionStore(home / "state.db") as store:
        sid = store.create_session("cli")
        store.append_messages(
            sid,
            [
                NewMessage(
                    "user", "# Fix the `deploy.sh` **script**\n\nsee [the docs](https://x.test)"
                ),
                NewMessage("assistant", "Looking."),
            ],
        )
    html = page(make_app(home, tmp_path / "data").test_client(), f"/sessions/{sid}")
    heading = re.search(r'<h1 class="session-title">([^<]*)', html)[1].strip()
    assert heading == "Fix the deploy.sh script see the docs"
    assert "<title>Fix the deploy.sh script see the docs · Recall</title>" in html
    assert "chain: part" not in html and "part 1 of 1" not in html
    assert "data-fold-all hidden" in html  # expand/collapse all: shown by the script


def test_a_chain_segment_still_says_its_part(tmp_path: Path) -> None:
    client = client_for(tmp_path, "current_views")
    html = page(client, f"/sessions/{shapes.S_CONT1}")
    assert re.search(r"chain: part 2 of \d+", html)


def test_the_match_stepper_links_the_first_and_last_match_without_a_script(
    tmp_path: Path,
) -> None:
    from tests.support.long_homes import long_home

    home, ids, _ = long_home(tmp_path)
    html = page(
        make_app(home, tmp_path / "data").test_client(), "/sessions/long-a?q=7+OR+499+OR+1050"
    )
    stepper = html.split('class="match-stepper"', 1)[1].split("</div>", 1)[0]
    assert "3 matches" in stepper
    prev, nxt = re.findall(r'href="([^"]+)"', stepper)
    assert prev.replace("&amp;", "&").endswith(f"at={ids[1_050]}#m{ids[1_050]}")
    assert nxt == f"#m{ids[7]}"


def test_a_session_gone_from_hermes_carries_its_badge(tmp_path: Path) -> None:
    ids = shapes.build_gone_home(tmp_path / "home")
    client = make_app(tmp_path / "home", tmp_path / "data").test_client()
    assert GONE_BADGE in page(client, f"/sessions/{ids['gone']}")
    assert GONE_BADGE not in page(client, f"/sessions/{ids['kept']}")


# -- in-place compaction epochs: dividers, folded tails, the two views (issue 16) --------


def epochs_client(tmp_path: Path) -> tuple[FlaskClient, shapes.EpochFacts]:
    home = tmp_path / "home"
    facts = shapes.build_epochs_home(home)
    return make_app(home, tmp_path / "data").test_client(), facts


def shown_ids(html: str) -> list[int]:
    """The message ids a transcript shows, in order (dividers included)."""
    return [int(i) for i in re.findall(r'<li id="m(\d+)" class="(?:msg|compaction-divider)', html)]


def test_everything_shows_each_message_once_with_a_divider_per_compaction(
    tmp_path: Path,
) -> None:
    client, facts = epochs_client(tmp_path)
    api = client.get(f"/api/sessions/{shapes.S_EPOCHS}/messages").get_json()
    assert api["view"] == "everything" and api["compactions"] == 3
    assert [(m["role"], m["content"]) for m in api["messages"]] == facts.distinct
    html = page(client, f"/sessions/{shapes.S_EPOCHS}")
    assert shown_ids(html) == [m["id"] for m in api["messages"]]
    made = facts.compactions[shapes.S_EPOCHS]
    labels = re.findall(r'<span class="divider-label">(.*?)</span>', html, re.DOTALL)
    assert len(labels) == 3
    for k, (label, (_, archived, _)) in enumerate(zip(labels, made, strict=True), start=1):
        assert label.startswith(f"Compaction {k} of 3 · ")
        assert label.rstrip().endswith(f"· {len(archived)} turns archived")
    # Each divider keeps its carrier's anchor and holds the summary, collapsed.
    carriers = [m["id"] for m in api["messages"] if m["compaction"]]
    for carrier in carriers:
        divider = html.split(f'<li id="m{carrier}" class="compaction-divider"')[1].split("</li>")[0]
        assert '<details class="compaction divider-summary">' in divider
        assert "so far: part" in divider
    # A re-inserted copy is not shown again; its anchor sits on the row it repeats.
    folded = [c for m in api["messages"] for c in m["copies"]]
    assert len(folded) == 6 and not set(folded) & set(shown_ids(html))
    assert all(f'id="m{c}"' in html for c in folded)
    assert shapes.EPOCH_REWOUND_WORD not in html
    assert "Show 2 rewound or hidden rows" in html
    with_rewound = page(client, f"/sessions/{shapes.S_EPOCHS}?all=1")
    assert shapes.EPOCH_REWOUND_WORD in with_rewound and "inactive · rewound" in with_rewound


def test_the_live_view_shows_the_rows_the_agent_is_fed(tmp_path: Path) -> None:
    import sqlite3
    from contextlib import closing

    client, facts = epochs_client(tmp_path)
    with closing(sqlite3.connect(facts.db)) as source:
        active = source.execute(
            "SELECT role, content FROM messages WHERE session_id = ? AND active = 1 ORDER BY id",
            (shapes.S_EPOCHS,),
        ).fetchall()
    api = client.get(f"/api/sessions/{shapes.S_EPOCHS}/messages?view=live").get_json()
    assert api["view"] == "live"
    assert [(m["role"], m["content"]) for m in api["messages"]] == [tuple(r) for r in active]
    assert [m["copy_of"] is not None for m in api["messages"]] == [False, True, True, False, False]
    html = page(client, f"/sessions/{shapes.S_EPOCHS}?view=live")
    assert shown_ids(html) == [m["id"] for m in api["messages"]]
    assert "Compaction 3 of 3 · " in html and "Compaction 1 of 3" not in html
    assert html.count("re-inserted copy") == 2
    assert shapes.EPOCH1_WORD not in html


def test_the_view_toggle_keeps_the_other_parameters(tmp_path: Path) -> None:
    client, _ = epochs_client(tmp_path)
    api = client.get(f"/api/sessions/{shapes.S_EPOCHS}/messages").get_json()
    at = api["messages"][3]["id"]
    html = page(client, f"/sessions/{shapes.S_EPOCHS}?q=noted&at={at}&all=1")
    toggle = html.split('<nav class="view-toggle"')[1].split("</nav>")[0]
    assert 'aria-current="page">Everything</a>' in toggle
    live = re.search(r'href="([^"]*view=live[^"]*)"', toggle).group(1).replace("&amp;", "&")
    assert all(part in live for part in ("q=noted", f"at={at}", "all=1"))
    back = page(client, live)
    toggle = back.split('<nav class="view-toggle"')[1].split("</nav>")[0]
    assert 'aria-current="page">What the agent sees now</a>' in toggle
    everything = re.search(r'href="([^"]*)"[^>]*>Everything<', toggle).group(1)
    assert "view=" not in everything and "q=noted" in everything
    # The highlight form and the rows toggle stay in the view.
    assert '<input type="hidden" name="view" value="live">' in back
    assert "view=live" in back.split('class="toggle-rows"')[1][:200]


def test_a_bad_view_is_a_clear_400(tmp_path: Path) -> None:
    client, _ = epochs_client(tmp_path)
    for path in (
        f"/sessions/{shapes.S_EPOCHS}",
        f"/chains/{shapes.S_EPOCHS}/transcript",
        f"/api/sessions/{shapes.S_EPOCHS}/messages",
    ):
        response = client.get(f"{path}?view=%3Cscript%3E")
        assert response.status_code == 400, path
        body = response.get_data(as_text=True)
        assert "view must be one of everything, live" in body
        assert response.is_json or "<script>" not in body


def test_a_summary_and_its_divider_stay_inert(tmp_path: Path) -> None:
    home = tmp_path / "home"
    facts = shapes.build_epochs_home(home)
    shapes.compact_in_place(facts.db, shapes.S_EPOCHS, f"{SCRIPT} {IMG}", 1.8e9)
    client = make_app(home, tmp_path / "data").test_client()
    for view in ("everything", "live"):
        html = page(client, f"/sessions/{shapes.S_EPOCHS}?view={view}")
        assert "Compaction 4 of 4" in html
        assert_inert(html)
    assert_inert(page(client, f"/chains/{shapes.S_EPOCHS}/transcript"))


def test_a_session_compacted_in_place_links_to_its_epochs_on_the_chain_page(
    tmp_path: Path,
) -> None:
    client, _ = epochs_client(tmp_path)
    html = page(client, f"/sessions/{shapes.S_EPOCHS}")
    link = re.search(r'<a class="chain-part-link" href="([^"]+)"[^>]*>([^<]+)</a>', html)
    assert link is not None
    assert link.group(1) == f"/chains/{shapes.S_EPOCHS}"
    assert link.group(2) == "compacted in place 3 times: 4 epochs"
    # A rotation segment keeps its "part n of m" (its chain page draws the epochs too).
    tip = page(client, f"/sessions/{shapes.S_ROTATED_TIP}")
    # Its part of the chain, and its own in-place compactions beside it.
    assert "chain: part 2 of 2" in tip and "compacted in place 2 times" in tip


def test_the_page_and_the_json_render_one_session_page_of_one_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = client_for(tmp_path, "current_views")
    opened = count_snapshots(monkeypatch)
    html = page(client, f"/sessions/{shapes.S_CONT1}?q=pool")
    # The transcript, its matches and its chain's part and cost: one snapshot.
    assert len(opened) == 1
    assert "chain: part 2 of 3" in html and "<mark>pool</mark>" in html
    del opened[:]
    body = client.get(f"/api/sessions/{shapes.S_CONT1}/messages").json
    assert len(opened) == 1
    assert re.findall(r'<li id="m(\d+)" class="msg', html) == [
        str(m["id"]) for m in body["messages"]
    ]
    assert body["neighbours"]["previous"]["id"] == shapes.S_ROOT


# -- Hermes v31: the same count on every page (issue 24) ------------------------------------


def test_every_page_reads_a_v31_session_compacted_in_place_three_times(tmp_path: Path) -> None:
    """Session page, chain page, chain JSON and transcript API agree, each divider
    shows its summary's own text, and no rotation child shows a divider."""
    facts = hv.build_v31_home(tmp_path / "home")
    client = make_app(facts.root, tmp_path / "data").test_client()
    sid = facts.long_session
    done = facts.compactions[sid]
    html = page(client, f"/sessions/{sid}")
    assert "compacted in place 3 times: 4 epochs" in html
    labels = re.findall(r'<span class="divider-label">Compaction (\d) of (\d)', html)
    assert labels == [("1", "3"), ("2", "3"), ("3", "3")]
    for c in done:
        assert c.summary in html
    assert hv.SUMMARY_BOILERPLATE not in html  # the summaries' own text only
    api = client.get(f"/api/sessions/{sid}/messages").get_json()
    assert api["compactions"] == 3
    assert [m["compaction"] for m in api["messages"] if m["compaction"]] == [1, 2, 3]
    chain = page(client, f"/chains/{sid}")
    assert "compacted in place 3 times" in chain
    body = client.get(f"/api/chains/{sid}").get_json()
    (node,) = [n for n in body["nodes"] if n["session_id"] == sid]
    assert node["compactions"] == 3
    assert [e["summary_opening"] for e in node["epochs"][1:]] == [c.summary for c in done]
    for child in facts.rotation[1:-1]:
        assert "compaction-divider" not in page(client, f"/sessions/{child}"), child
        assert client.get(f"/api/sessions/{child}/messages").get_json()["compactions"] == 0
    tip = page(client, f"/sessions/{facts.rotation[-1]}")
    assert tip.count('class="compaction-divider') == 1


def test_the_page_loads_its_similar_conversations_apart(tmp_path: Path) -> None:
    """The page holds the section's loader; the section is its own request (the meaning
    index is read then, not while the transcript is), empty until the index exists,
    listed once it does; an unknown session is a 404 there too."""
    from dashboard.meaning.builder import MeaningBuilder

    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    client = make_app(home, tmp_path / "data").test_client()
    html = page(client, f"/sessions/{shapes.S_ROOT}")
    assert f'hx-get="/sessions/{shapes.S_ROOT}/similar"' in html
    empty = page(client, f"/sessions/{shapes.S_ROOT}/similar")
    assert 'id="similar"' in empty and "<h2>Similar conversations" not in empty
    MeaningBuilder(tmp_path / "data" / "archive.db").build()
    listed = page(client, f"/sessions/{shapes.S_ROOT}/similar")
    assert "<h2>Similar conversations" in listed and "/sessions/" in listed
    assert client.get("/sessions/20990101_000000_ffffff/similar").status_code == 404
