"""The chain page, its picture, the stitched transcript and the chain API."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from dashboard.lineage.chains import Chain, Segment
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from dashboard.web.lineage_svg import render_chain_svg
from tests.support import hermes_shapes as shapes
from tests.support.app import make_app
from tests.support.chain_homes import SEGMENTS, T0, ChainHome, build_chain_home
from tests.support.pages import IMG, SCRIPT, assert_inert, names_shown_as_their_pages
from tests.support.snapshots import count_snapshots

EVIL = f"Refactor {SCRIPT} {IMG}"


@pytest.fixture
def chain_home(tmp_path: Path) -> ChainHome:
    return build_chain_home(tmp_path / "home", title=EVIL)


@pytest.fixture
def chain_client(chain_home: ChainHome, tmp_path: Path) -> FlaskClient:
    return make_app(chain_home.home, tmp_path / "data").test_client()


def page(client: FlaskClient, path: str, **headers: str) -> str:
    response = client.get(path, headers=headers)
    assert response.status_code == 200, (path, response.status_code)
    return response.get_data(as_text=True)


def svg_of(html: str) -> str:
    start = html.index("<svg")
    return html[start : html.index("</svg>", start) + 6]


class SvgLinks(HTMLParser):
    """Each ``<a>`` of the picture: its href, classes and the text of its first ``<title>``."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str]] = []
        self._in_a = False
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "a":
            self._in_a = True
            self.links.append(
                {"href": a.get("href") or "", "class": a.get("class") or "", "title": ""}
            )
        elif tag == "title" and self._in_a and not self.links[-1]["title"]:
            self._in_title = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._in_a = False
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.links[-1]["title"] += data


def links_of(svg: str) -> list[dict[str, str]]:
    parser = SvgLinks()
    parser.feed(svg)
    return parser.links


def test_chain_page_draws_every_segment_as_a_linked_bar(
    chain_client: FlaskClient, chain_home: ChainHome
) -> None:
    focus = chain_home.line[4]
    html = page(chain_client, f"/chains/{focus}")
    svg = svg_of(html)
    assert 'role="img"' in svg and 'aria-labelledby="chain-svg-title chain-svg-desc"' in svg
    assert '<title id="chain-svg-title">' in svg and '<desc id="chain-svg-desc">' in svg

    links = links_of(svg)
    everyone = [*chain_home.line, chain_home.branch_tip, chain_home.branch_mid, chain_home.delegate]
    assert [link["href"] for link in links] == [f"/sessions/{sid}" for sid in everyone]
    assert svg.count('<rect class="bar ') == len(everyone)
    # Each bar's tooltip carries its figures; an unknown cost is "unknown", never $0.
    fifth = links[4]["title"]
    assert "part 5 of 12 · continuation" in fifth and "messages 5 · tool calls 1" in fifth
    assert "input 1,000 · output 100" in fifth and "cost: unknown" in fifth
    assert "(30 min)" in fifth and "ended: compression" in fifth
    assert "cost: $0.05 (estimated)" in links[-1]["title"] and "delegation" in links[-1]["title"]
    assert "$0.00" not in svg

    # The focus row is highlighted, the tip marked, off-line rows set apart.
    assert [link["href"] for link in links if "is-focus" in link["class"].split()] == [
        f"/sessions/{focus}"
    ]
    assert [link["href"] for link in links if "is-tip" in link["class"].split()] == [
        f"/sessions/{chain_home.line[-1]}"
    ]
    assert svg.count('class="row-focus"') == 2  # the row and its legend swatch
    assert svg.count('class="tip-ring"') == 2 and ">tip</text>" in svg
    assert sum("off-line" in link["class"] for link in links) == 3

    # Connectors: one per link to a parent, each kind its own class; a legend for the
    # kinds drawn only (issue 14, item 10).
    edges = re.findall(r'<path class="edge edge-(\w+)"', svg)
    assert sorted(edges) == sorted(["continuation"] * 11 + ["branch"] * 2 + ["delegation"])
    legend = re.findall(r'<line class="edge edge-(\w+)"', svg)
    assert legend == ["continuation", "branch", "delegation"]
    assert ">reset</text>" not in svg and "unknown link" not in svg
    assert "tip (latest segment)" in svg and "this session" in svg

    # Time axis: round times of day across the family's six hours.
    ticks = re.findall(r'<text class="axis-text"[^>]*>([^<]+)</text>', svg)
    assert len(ticks) >= 4 and all(re.search(r"\d\d:\d\d$", t) for t in ticks)


def test_chain_page_table_and_totals(chain_client: FlaskClient, chain_home: ChainHome) -> None:
    html = page(chain_client, f"/chains/{chain_home.line[4]}")
    assert "part 5 of 12" in html and "15 sessions in the whole family" in html
    assert f'href="/chains/{chain_home.line[4]}/transcript#part-5"' in html
    assert f'href="/api/chains/{chain_home.line[4]}"' in html
    table = html[html.index('<table class="grid chain-segments">') :]
    table = table[: table.index("</table>")]
    rows = re.findall(r'<tr class="seg-row seg-(\w+)([^"]*)"', table)
    assert len(rows) == SEGMENTS + 3
    assert [kind for kind, _ in rows].count("continuation") == SEGMENTS - 1
    assert sum("is-focus" in extra for _, extra in rows) == 1
    assert table.count('href="/sessions/') == SEGMENTS + 3
    assert "Part 4 covered step 4." in table and "30 min" in table
    assert 'title="No price is known for these calls">unknown</span>' in table
    assert "$0.05" in table

    totals = html[html.index('<table class="grid narrow chain-totals">') :]
    totals = totals[: totals.index("</table>")]

    def row(label: str) -> list[str]:
        cells = re.search(rf"<th scope=\"row\">{label}</th>(.*?)</tr>", totals, re.S).group(1)
        return [
            re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", cells)
        ]

    assert row("Segments") == ["12", "15"]
    assert row("Compressions") == ["11", "11"]
    assert row("Compacted in place") == ["0", "0"]
    assert row("Messages") == [
        str(SEGMENTS * 4 + SEGMENTS - 1),
        str(SEGMENTS * 4 + SEGMENTS - 1 + 12),
    ]
    assert row("Duration") == ["5 h 59 min", "6 h 00 min"]
    assert row("Input tokens") == ["12,000", "12,000"]
    assert row("Cost") == ["unknown", "$0.05"]
    assert row("Estimated") == ["unknown", "$0.05"]
    assert row("Billed") == ["unknown", "unknown"]
    assert row("Coverage") == [
        "billed for 0 of 12 segments, no price for 12",
        "billed for 0 of 15 segments, no price for 14",
    ]


def test_untrusted_titles_stay_text_in_the_picture_and_the_page(
    chain_client: FlaskClient, chain_home: ChainHome
) -> None:
    for path in (
        f"/chains/{chain_home.line[0]}",
        f"/chains/{chain_home.line[0]}/transcript",
        f"/sessions/{chain_home.line[0]}",
    ):
        html = page(chain_client, path)
        assert_inert(html)
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    svg = svg_of(page(chain_client, f"/chains/{chain_home.line[0]}"))
    assert "<script" not in svg and "<img" not in svg
    assert "Refactor &lt;script&gt;" in svg
    assert "style=" not in svg  # the CSP allows no inline style; classes only


def test_unknown_ids_are_404(chain_client: FlaskClient) -> None:
    for path in ("/chains/nope", "/chains/nope/transcript"):
        response = chain_client.get(path)
        assert response.status_code == 404
        assert "nope" in response.get_data(as_text=True)
    response = chain_client.get("/api/chains/nope")
    assert response.status_code == 404 and "nope" in response.get_json()["error"]


def test_htmx_request_for_the_chain_gets_only_the_partial(
    chain_client: FlaskClient, chain_home: ChainHome
) -> None:
    path = f"/chains/{chain_home.line[1]}"
    full = page(chain_client, path)
    partial = page(chain_client, path, **{"HX-Request": "true", "HX-Target": "chain"})
    assert "<html" in full and "<html" not in partial
    assert partial.lstrip().startswith('<section id="chain"')
    assert svg_of(partial) == svg_of(full)


def test_stitched_transcript_page(chain_client: FlaskClient, chain_home: ChainHome) -> None:
    html = page(chain_client, f"/chains/{chain_home.line[2]}/transcript")
    assert html.count('<section class="stitch-part') == SEGMENTS
    assert html.count('<details class="compaction stitch-summary"') == SEGMENTS - 1
    ids = re.findall(r'id="m(\d+)"', html)
    assert len(ids) == len(set(ids)) == SEGMENTS * 4 + SEGMENTS - 1
    assert 'class="msg role-user is-summary' not in html  # summaries are dividers only
    assert html.index("step 1: run the tests") < html.index("step 12: run the tests")
    assert 'stitch-part is-focus" id="part-3"' in html
    assert "Try the other approach" not in html  # a branch is another conversation


def test_stitched_transcript_shows_inactive_rows_only_when_asked(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    client = make_app(home, tmp_path / "data").test_client()
    shown = page(client, f"/chains/{shapes.S_CONT1}/transcript")
    everything = page(client, f"/chains/{shapes.S_CONT1}/transcript?all=1")
    assert shapes.REWOUND_WORD not in shown and "Show 1 rewound or hidden row" in shown
    assert shapes.REWOUND_WORD in everything and "inactive · rewound" in everything
    assert "Hide rewound and hidden rows" in everything
    assert shown.count('class="stitch-part') == 3


def test_stitched_transcript_of_in_place_epochs_and_its_live_view(tmp_path: Path) -> None:
    home = tmp_path / "home"
    facts = shapes.build_epochs_home(home)
    client = make_app(home, tmp_path / "data").test_client()
    html = page(client, f"/chains/{shapes.S_EPOCHS}/transcript")
    labels = re.findall(r'<span class="divider-label">Compaction (\d) of 3 ', html)
    assert labels == ["1", "2", "3"]
    ids = re.findall(r'<li id="m(\d+)" class="(?:msg|compaction-divider)', html)
    assert len(ids) == len(set(ids)) == len(facts.distinct)
    assert shapes.EPOCH_REWOUND_WORD not in html and "Show 2 rewound or hidden rows" in html
    toggle = html.split('<nav class="view-toggle"')[1].split("</nav>")[0]
    assert f'href="/chains/{shapes.S_EPOCHS}/transcript?view=live"' in toggle
    live = page(client, f"/chains/{shapes.S_EPOCHS}/transcript?view=live")
    assert len(re.findall(r'<li id="m\d+" class="(?:msg|compaction-divider)', live)) == 5
    assert 'aria-current="page">What the agent sees now</a>' in live
    # A rotation chain whose tip compacted in place: the rotation summary opens part 2,
    # the tip's own compactions are dividers inside it.
    tip = page(client, f"/chains/{shapes.S_ROTATED_TIP}/transcript")
    assert tip.count('<details class="compaction stitch-summary"') == 1
    assert re.findall(r'<span class="divider-label">Compaction (\d) of 2 ', tip) == ["1", "2"]
    # Said once in the transcript; the untitled tip's part heading is named by it too.
    heading = re.compile(r"<h2 id=\"part-\d+-title\">.*?</h2>", re.S)
    assert f"still on {shapes.ROTATED_WORD}" in "".join(heading.findall(tip))
    assert heading.sub("", tip).count(f"still on {shapes.ROTATED_WORD}") == 1
    tip_live = page(client, f"/chains/{shapes.S_ROTATED_TIP}/transcript?view=live")
    assert "The agent no longer sees this segment" in tip_live
    assert f"the {shapes.ROTATED_WORD} plan" not in tip_live and "live turn" in tip_live


def test_chain_api_shape(chain_client: FlaskClient, chain_home: ChainHome) -> None:
    body = chain_client.get(f"/api/chains/{chain_home.line[3]}").get_json()
    assert body["root"] == chain_home.line[0] and body["tip"] == chain_home.line[-1]
    assert body["line"] == chain_home.line and body["warnings"] == []
    assert len(body["nodes"]) == SEGMENTS + 3
    keys = {
        "session_id",
        "parent_session_id",
        "kind",
        "started_at",
        "ended_at",
        "end_reason",
        "message_count",
        "input_tokens",
        "output_tokens",
        "estimated_cost_usd",
        "actual_cost_usd",
    }
    assert all(keys <= set(node) for node in body["nodes"])
    by_id = {n["session_id"]: n for n in body["nodes"]}
    assert by_id[chain_home.delegate]["kind"] == "delegation"
    assert by_id[chain_home.delegate]["estimated_cost_usd"] == pytest.approx(0.05)
    assert by_id[chain_home.line[1]]["parent_session_id"] == chain_home.line[0]
    assert by_id[chain_home.line[1]]["estimated_cost_usd"] is None
    assert by_id[chain_home.line[0]]["started_at"] == T0
    assert body["totals"]["compressions"] == SEGMENTS - 1
    assert body["totals"]["estimated_cost_usd"] is None
    assert body["totals"]["messages"] == SEGMENTS * 4 + SEGMENTS - 1


def test_session_page_says_which_part_it_is(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    client = make_app(home, tmp_path / "data").test_client()
    html = page(client, f"/sessions/{shapes.S_CONT1}")
    assert f'href="/chains/{shapes.S_CONT1}"' in html and "chain: part 2 of 3" in html
    # A session in no chain says nothing about parts (issue 14, item 9).
    assert "part 1 of 1" not in page(client, f"/sessions/{shapes.S_CRON}")
    chain = page(client, f"/chains/{shapes.S_SUBAGENT}")
    assert "off the continuation line" in chain and "part 1 of 1" in chain


def test_picture_of_one_segment_and_of_two_hundred(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with SessionStore(home / "state.db") as store:
        store.create_session("cli", session_id="solo", started_at=T0, title="Alone")
        store.append_messages("solo", [NewMessage("user", "hi", timestamp=T0 + 1)])
        last = store.create_session("cli", session_id="long-000", started_at=T0)
        for i in range(1, 200):
            last = store.compress(last, f"summary {i}", child_id=f"long-{i:03d}", at=T0 + i * 600)
    client = make_app(home, tmp_path / "data").test_client()

    solo = svg_of(page(client, "/chains/solo"))
    assert len(links_of(solo)) == 1 and "part 1 of 1" in solo
    assert re.search(r'<rect class="bar bar-root" x="[\d.]+" y="[\d.]+" width="([\d.]+)"', solo)

    big = page(client, "/chains/long-100")
    svg = svg_of(big)
    links = links_of(svg)
    assert len(links) == 200 and "part 101 of 200" in big
    height = int(re.search(r'viewBox="0 0 \d+ (\d+)"', svg).group(1))
    assert 200 * 16 <= height <= 200 * 18 + 120  # rows stay 16-18 px: the picture grows
    widths = [
        float(w)
        for w in re.findall(r'<rect class="bar [^"]*" x="[\d.]+" y="[\d.]+" width="([\d.]+)"', svg)
    ]
    assert len(widths) == 200 and min(widths) >= 4  # every bar visible and clickable
    # Thirty-three hours: the axis labels days and times without crowding.
    ticks = re.findall(r'<text class="axis-text" x="([\d.]+)"', svg)
    xs = [float(x) for x in ticks]
    assert 3 <= len(xs) <= 12 and all(b - a >= 100 for a, b in zip(xs, xs[1:], strict=False))


def test_render_chain_svg_takes_a_url_builder_and_tolerates_missing_times() -> None:
    segs = (
        Segment("a", None, "root", 0, title="A", started_at=None),
        Segment("b", "a", "reset", 1, started_at=None, is_tip=True),
        Segment("c", "a", "unknown", 1, started_at=100.0, ended_at=50.0),
    )
    chain = Chain("a", "a", "b", segs, ("a",))
    svg = str(render_chain_svg(chain, lambda sid: f"/x/{sid}?a=1&b=2"))
    assert 'href="/x/a?a=1&amp;b=2"' in svg
    assert '<path class="edge edge-reset"' in svg and '<path class="edge edge-unknown"' in svg
    assert re.findall(r'<line class="edge edge-(\w+)"', svg) == ["reset", "unknown"]
    assert "nan" not in svg.lower().replace("unknown", "")


def test_chain_api_for_a_damaged_file_names_the_problem(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with SessionStore(home / "state.db") as store:
        store.create_session("cli", session_id="A", started_at=T0)
        store.create_session("cli", session_id="B", started_at=T0 + 10, parent_session_id="A")
    with closing(sqlite3.connect(home / "state.db")) as conn, conn:
        conn.execute("UPDATE sessions SET parent_session_id='B' WHERE id='A'")
    body = make_app(home, tmp_path / "data").test_client().get("/api/chains/A").get_json()
    assert any("cycle" in w for w in body["warnings"])
    assert {n["session_id"] for n in body["nodes"]} == {"A", "B"}


def test_chain_totals_and_the_session_page_agree_on_cost(tmp_path: Path) -> None:
    # Item 3: effective spend with its coverage; the session page shows the table's figure.
    from tests.support.chain_homes import build_priced_chain

    line = build_priced_chain(tmp_path / "home")
    client = make_app(tmp_path / "home", tmp_path / "data").test_client()
    html = page(client, f"/chains/{line[4]}")
    totals = html[html.index('<table class="grid narrow chain-totals">') :]
    totals = re.sub(r"<[^>]+>", " ", totals[: totals.index("</table>")])
    totals = " ".join(totals.split())
    assert "Cost $0.98" in totals
    assert "billed for 2 of 10 segments, partly for 7, no price for 1" in totals
    table = html[html.index('<table class="grid chain-segments">') :]
    table = table[: table.index("</table>")]
    row = re.search(rf'href="/sessions/{line[4]}".*?</tr>', table, re.S).group(0)
    shown = " ".join(re.sub(r"<[^>]+>", " ", row).split())
    assert "$0.10 partly billed" in shown
    session = " ".join(re.sub(r"<[^>]+>", " ", page(client, f"/sessions/{line[4]}")).split())
    assert "Cost $0.10 partly billed" in session
    body = client.get(f"/api/chains/{line[4]}").get_json()
    assert body["totals"]["effective_cost_usd"] == pytest.approx(0.985)
    coverage = "billed for 2 of 10 segments, partly for 7, no price for 1"
    assert body["totals"]["cost_coverage"] == coverage
    (node,) = [n for n in body["nodes"] if n["session_id"] == line[4]]
    assert node["effective_cost_usd"] == pytest.approx(0.105) and node["cost_status"] == "partial"
    index = " ".join(re.sub(r"<[^>]+>", " ", page(client, "/chains?sort=cost")).split())
    assert index.index("$0.98") < index.index("$0.60")


def test_heading_panels_and_sortable_index(tmp_path: Path) -> None:
    """Item 10: the conversation's title heads the page; each bar has a details panel;
    /chains is one table sorted by links."""
    chain = build_chain_home(tmp_path / "home", title=None)
    with SessionStore(chain.db) as store:
        store.set_title(chain.line[1], "Long refactor #2")
    client = make_app(chain.home, tmp_path / "data").test_client()
    html = page(client, f"/chains/{chain.line[3]}")
    assert re.search(r'<h1 id="chain-title">Long refactor</h1>', html)
    assert f"<code>{chain.line[0]}</code>" in html
    assert "<title>Chain · Long refactor · Recall</title>" in html
    panels = re.findall(r'<div class="seg-panel" id="(seg-panel-\d+)" role="tooltip" hidden', html)
    assert len(panels) == SEGMENTS + 3
    described = re.findall(r'<a class="seg [^"]*"[^>]*aria-describedby="([^"]+)"', html)
    assert described == panels
    assert 'tabindex="0"' in html
    index = page(client, "/chains?sort=cost&dir=asc")
    assert 'aria-sort="ascending"><a href="/chains?sort=cost&amp;dir=desc"' in index
    assert index.count('<table class="grid chains-table">') == 1
    assert ">Long refactor</a>" in index
    assert client.get("/chains?sort=price").status_code == 400


def test_a_chain_segment_gone_from_hermes_carries_its_badge(tmp_path: Path) -> None:
    from tests.support.pages import GONE_BADGE

    ids = shapes.build_gone_home(tmp_path / "home")
    client = make_app(tmp_path / "home", tmp_path / "data").test_client()
    assert page(client, f"/chains/{ids['child']}").count(GONE_BADGE) == 1


def test_a_chain_whose_latest_segment_is_gone_carries_the_badge_in_the_index(
    tmp_path: Path,
) -> None:
    from tests.support.pages import GONE_BADGE

    ids = shapes.build_gone_home(tmp_path / "home")
    client = make_app(tmp_path / "home", tmp_path / "data").test_client()
    assert GONE_BADGE not in page(client, "/chains")  # its tip is still in Hermes
    with SessionStore(tmp_path / "home" / "state.db") as store:
        store.core.write(
            lambda c: c.execute(
                "UPDATE sessions SET gone_from_source_at=? WHERE id=?",
                (shapes.GONE_AT, ids["child"]),
            )
        )
    assert page(client, "/chains").count(GONE_BADGE) == 1


@pytest.fixture
def epochs_client(tmp_path: Path) -> tuple[FlaskClient, shapes.EpochFacts, Path]:
    facts = shapes.build_epochs_home(tmp_path / "home", "current_views")
    shapes.add_epoch_usage(facts)
    client = make_app(tmp_path / "home", tmp_path / "data").test_client()
    return client, facts, tmp_path / "data" / "archive.db"


def archive_ids(archive: Path) -> dict[int, int]:
    """The archive's id of each source message id."""
    with closing(sqlite3.connect(f"file:{archive}?mode=ro", uri=True)) as conn:
        return {int(src): aid for aid, src in conn.execute("SELECT id, src_id FROM messages")}


def test_chain_api_lists_each_sessions_epochs(
    epochs_client: tuple[FlaskClient, shapes.EpochFacts, Path],
) -> None:
    client, facts, archive = epochs_client
    body = client.get(f"/api/chains/{shapes.S_EPOCHS}").get_json()
    ids = archive_ids(archive)
    (node,) = body["nodes"]
    made = facts.compactions[shapes.S_EPOCHS]
    assert node["compactions"] == 3 and body["compactions_in_place"] == 3
    assert body["totals"]["compactions_in_place"] == 3
    epochs = node["epochs"]
    assert [e["number"] for e in epochs] == [1, 2, 3, 4]
    assert [e["compacted_at"] for e in epochs] == [at for at, _, _ in made] + [None]
    assert [e["live"] for e in epochs] == [False, False, False, True]
    # Boundaries: epoch 1 opens at the first row, each later one at its carrier.
    carriers = [ids[w[0]] for _, _, w in made]
    assert [e["summary_message_id"] for e in epochs] == [None, *carriers]
    assert [e["first_message_id"] for e in epochs[1:]] == carriers
    assert [e["last_message_id"] for e in epochs[:3]] == [c - 1 for c in carriers]
    assert [e["archived"] for e in epochs] == [len(a) for _, a, _ in made] + [0]
    assert sum(e["rows"] for e in epochs) == len(facts.distinct)
    assert [e["summary_opening"] for e in epochs] == [
        None,
        "so far: part 1",
        "so far: part 2",
        "so far: part 3",
    ]
    assert epochs[1]["link"] == f"/sessions/{shapes.S_EPOCHS}?at={carriers[0]}#m{carriers[0]}"
    first = epochs[0]["first_message_id"]
    assert epochs[0]["link"] == f"/sessions/{shapes.S_EPOCHS}?at={first}#m{first}"
    # Cost: only usage rows lying inside one epoch are its; the rest are counted apart.
    assert [e["cost"]["usage_rows"] for e in epochs] == [1, 0, 0, 1]
    assert epochs[0]["cost"]["estimated_cost_usd"] == pytest.approx(0.002)
    assert epochs[1]["cost"]["effective_cost_usd"] is None
    assert node["unattributed_usage_rows"] == 1


def test_chain_api_of_a_rotated_chain_carries_the_tips_epochs(
    epochs_client: tuple[FlaskClient, shapes.EpochFacts, Path],
) -> None:
    client, _, _ = epochs_client
    body = client.get(f"/api/chains/{shapes.S_ROTATED}").get_json()
    by_id = {n["session_id"]: n for n in body["nodes"]}
    # The first segment never compacted in place: nothing to split, no epochs listed.
    assert [len(by_id[s]["epochs"]) for s in body["line"]] == [0, 3]
    assert [by_id[s]["compactions"] for s in body["line"]] == [0, 2]
    assert by_id[shapes.S_ROTATED_TIP]["kind"] == "continuation"


def test_chain_page_splits_an_in_place_bar_at_each_compaction_and_links_each_epoch(
    epochs_client: tuple[FlaskClient, shapes.EpochFacts, Path],
) -> None:
    client, facts, archive = epochs_client
    html = page(client, f"/chains/{shapes.S_EPOCHS}")
    ids = archive_ids(archive)
    carriers = [ids[w[0]] for _, _, w in facts.compactions[shapes.S_EPOCHS]]
    svg = svg_of(html)
    epochs = [link for link in links_of(svg) if "epoch" in link["class"].split()]
    assert [e["href"] for e in epochs[1:]] == [
        f"/sessions/{shapes.S_EPOCHS}?at={c}#m{c}" for c in carriers
    ]
    assert epochs[0]["title"].startswith("Epoch 1 of 4")
    assert "compaction 1 of 3" in epochs[0]["title"] and "live" in epochs[3]["title"]
    assert svg.count('class="compaction-mark"') == 3
    assert "1 segment, 4 epochs" in svg and "3 in-place compactions" in svg
    # Each compaction's time is written under the picture, at its mark.
    times = re.findall(r'<text class="compaction-time"[^>]*>([^<]*)</text>', svg)
    made = facts.compactions[shapes.S_EPOCHS]
    assert times == [datetime.fromtimestamp(at).strftime("%H:%M") for at, _, _ in made]
    # The page says what it is and lists each epoch's figures, links included.
    assert "compacted in place 3 times" in html
    table = html[html.index('class="grid chain-epochs"') :]
    assert all(f'href="/sessions/{shapes.S_EPOCHS}?at={c}#m{c}"' in table for c in carriers)
    assert "so far: part 2" in table
    assert "not attributable" in table  # no usage row lies inside epochs 2 and 3


def test_an_untrusted_summary_stays_text_in_the_epoch_picture_and_table(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with SessionStore(home / "state.db") as store:
        sid = store.create_session("cli", session_id="inplace", title=EVIL)
        store.append_messages(sid, [NewMessage("user", "hello"), NewMessage("assistant", "hi")])
        store.compact_in_place(sid, EVIL)
        store.append_messages(sid, [NewMessage("user", "more")])
    html = page(make_app(home, tmp_path / "data").test_client(), f"/chains/{sid}")
    assert "compacted in place once" in html
    assert_inert(html)


def test_chains_index_lists_an_in_place_conversation_with_its_epochs(
    epochs_client: tuple[FlaskClient, shapes.EpochFacts, Path],
) -> None:
    client, _, _ = epochs_client
    html = page(client, "/chains?sort=epochs")
    row = html[html.index(f'href="/chains/{shapes.S_EPOCHS}"') :].split("</tr>", 1)[0]
    assert "Long in-place conversation" in row and "in place" in row
    assert re.search(r'class="num epochs">4<', row)
    assert 'href="/chains?sort=epochs&amp;dir=asc"' in html  # sortable, now descending


# -- profiles (issue 17) ---------------------------------------------------------------------


def test_chains_of_every_profile_have_a_profile_column_and_pages_name_it(
    tmp_path: Path,
) -> None:
    facts = shapes.build_profiles_home(tmp_path / "hermes")
    client = make_app(facts.root, tmp_path / "data").test_client()
    html = " ".join(page(client, "/chains?profile=all&sort=profile&dir=asc").split())
    sorted_by = 'aria-sort="ascending"><a href="/chains?profile=all&amp;sort=profile&amp;dir=desc"'
    assert sorted_by in html
    rows = re.findall(r"<tr>.*?</tr>", html.split("<tbody>")[1])
    named = [re.search(r'<td class="profile">([^<]+)</td>', r).group(1) for r in rows]
    assert named == sorted(named) and {"default", "legacy"} <= set(named)
    tips = {re.search(r'href="/chains/([^"?]+)', r).group(1) for r in rows}
    assert {shapes.S_CONT2, f"legacy:{shapes.S_CONT2}"} <= tips  # one source id, two chains
    # The chain page and the session page say whose they are.
    chain = page(client, f"/chains/legacy:{shapes.S_CONT2}?profile=all")
    assert '<span class="profile-label" title="Profile">legacy</span>' in chain
    session = page(client, f"/sessions/legacy:{shapes.S_CONT2}?profile=all")
    assert '<span class="profile-label" title="Profile">legacy</span>' in session
    assert '<span class="profile-label" title="Profile">default</span>' in page(
        client, f"/sessions/{shapes.S_CONT2}?profile=all"
    )
    # One profile's pages: its chains only, no column, no label.
    scoped = page(client, "/chains?profile=legacy")
    assert "legacy:" in scoped and f'href="/chains/{shapes.S_CONT2}' not in scoped
    assert '<td class="profile">' not in scoped and ">Profile</a></th>" not in scoped
    assert "profile-label" not in page(client, f"/chains/legacy:{shapes.S_CONT2}?profile=legacy")


def test_one_profile_chains_show_no_profile_column(
    chain_client: FlaskClient, chain_home: ChainHome
) -> None:
    html = page(chain_client, "/chains")
    assert '<td class="profile">' not in html and ">Profile" not in html
    assert "profile-label" not in page(chain_client, f"/chains/{chain_home.line[0]}")
    assert "profile-label" not in page(chain_client, f"/sessions/{chain_home.line[0]}")
    assert chain_client.get("/chains?sort=profile").status_code == 200


def test_each_chain_screen_and_its_json_read_one_snapshot(
    chain_client: FlaskClient, chain_home: ChainHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = count_snapshots(monkeypatch)
    tip = chain_home.line[-1]
    html = page(chain_client, f"/chains/{tip}")
    assert len(opened) == 1
    del opened[:]
    body = chain_client.get(f"/api/chains/{tip}").json
    assert len(opened) == 1
    for node in body["nodes"]:  # the page and the JSON show the same segments
        assert f"/sessions/{node['session_id']}" in html
    for path in ("/chains", f"/chains/{tip}/transcript?q=pool"):
        del opened[:]
        page(chain_client, path)
        assert len(opened) == 1, path


def test_an_untitled_chain_and_its_segments_are_named_as_their_pages_name_them(
    tmp_path: Path,
) -> None:
    """Issue 24: the chains index, the chain page (and its JSON) and the session page's
    neighbours name an untitled session as its own page does, never by its id alone."""
    db = shapes.build_current_views(tmp_path / "home" / "state.db")
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("UPDATE sessions SET title = NULL")
        conn.commit()
    client = make_app(tmp_path / "home", tmp_path / "data").test_client()
    index = page(client, "/chains")
    rows = re.findall(r'<a href="/chains/[^"?]+[^"]*" title="([^"]+)">(.*?)</a>', index, re.S)
    assert any(root == shapes.S_ROOT for root, _ in rows)
    names = names_shown_as_their_pages(client, rows)
    assert all(untitled and name != sid for sid, name, untitled in names)
    chain = page(client, f"/chains/{shapes.S_CONT2}")
    heading = re.search(r'<h1 id="chain-title">(.*?)</h1>', chain, re.S).group(1)
    segments = re.findall(
        r'<td class="seg-title"><a href="/sessions/([^"?]+)[^"]*">(.*?)</a>', chain, re.S
    )
    named = names_shown_as_their_pages(client, [(shapes.S_ROOT, heading), *segments])
    assert len(named) > 3 and all(name != sid for sid, name, _ in named)
    assert f"first segment <code>{shapes.S_ROOT}</code>" in chain
    nodes = client.get(f"/api/chains/{shapes.S_CONT2}").get_json()["nodes"]
    assert {n["session_id"]: n["name"] for n in nodes} == {s: n for s, n, _ in named[1:]}
    session = page(client, f"/sessions/{shapes.S_CONT1}")
    around = re.findall(
        r'<a class="chain-(?:prev|next)" rel="(?:prev|next)" href="/sessions/([^"?]+)[^"]*">'
        r'\s*<span class="chain-dir">[^<]*</span>\s*<span class="chain-name">(.*?)</span>',
        session,
    )
    assert [sid for sid, _ in around] == [shapes.S_ROOT, shapes.S_CONT2]
    names_shown_as_their_pages(client, around)
