"""Words and meaning together (search/hybrid.py) on a real archive with its meaning
index built by the real embedder."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dashboard.errors import NotFoundError
from dashboard.hermes.home import HermesHome
from dashboard.meaning.builder import MeaningBuilder
from dashboard.reader.reader import StateReader
from dashboard.search.hybrid import MEANING_WEIGHT, RRF_K, fuse
from dashboard.search.sessions import SearchRequest
from tests.support import hermes_shapes as shapes
from tests.support.archived import archive_home, profiles_reader

EVERY_SOURCE = ("cli", "telegram", "discord", "cron", "subagent", "api", "web", "slack")
SAID = "The docker containers cannot reach the postgres database over the compose network."
REPLY = "Put both services on one compose network and use the service name as the host."
# Worded away from what was said: not one of its words.
ASKED = "when my boxes could not talk to each other"
# Two conversations about one thing in different words, and nothing else: each is the
# other's nearest.
TWINS = {
    "20360101_000000_aaaaaa": (
        "my nginx reverse proxy returns 502 bad gateway for the upstream app",
        "the upstream container is not listening on the port nginx proxies to",
    ),
    "20360102_000000_bbbbbb": (
        "bad gateway errors from nginx in front of the web service",
        "point proxy_pass at the service's real port and reload nginx",
    ),
}


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> StateReader:
    root = tmp_path_factory.mktemp("hybrid")
    home = root / "home"
    shapes.build_current_views(home / "state.db")
    shapes.append_turn(home / "state.db", shapes.S_ROOT, SAID, REPLY, 2e9)
    for n, (sid, turn) in enumerate(TWINS.items()):
        shapes.start_session(home / "state.db", sid, 2.1e9 + n)
        shapes.append_turn(home / "state.db", sid, *turn, 2.1e9 + n)
    path = archive_home(home, root / "archive.db")
    assert MeaningBuilder(path).build().ready
    return StateReader(HermesHome(home), path=path)


def _ask(reader: StateReader, query: str, **kw: object) -> dict:
    return reader.search(SearchRequest(query=query, sources=EVERY_SOURCE, **kw)).to_json()


def test_a_paraphrase_is_found_by_meaning_and_not_by_words(reader: StateReader) -> None:
    words = _ask(reader, ASKED, mode="words")
    assert words["results"] == [] and words["meaning_index"] is None
    for mode in ("meaning", "hybrid"):
        found = _ask(reader, ASKED, mode=mode)
        assert found["mode"] == mode and "meaning" in found["routes"]
        assert found["meaning_index"]["ready"] is True
        top = found["results"][0]
        assert shapes.S_ROOT in (top["session_id"], top["root_session_id"]), mode
        hit = top["hits"][0]
        assert hit["similar"] is True and "<mark>" not in hit["snippet"]
        assert "docker containers" in hit["snippet"] or "compose network" in hit["snippet"]


def test_words_keep_their_hits_in_hybrid(reader: StateReader) -> None:
    """A query whose words match: hybrid's cards hold words-only's first cards, and a hit
    with the words is marked, not called similar."""
    words = _ask(reader, "postgres", mode="words")
    hybrid = _ask(reader, "postgres", mode="hybrid")
    assert words["results"]
    first = {r["root_session_id"] for r in words["results"][:3]}
    assert first <= {r["root_session_id"] for r in hybrid["results"]}
    marked = [h for r in hybrid["results"] for h in r["hits"] if "<mark>" in h["snippet"]]
    assert marked and not any(h["similar"] for h in marked)
    assert hybrid["routes"][-1] == "meaning" and hybrid["total_matches"] >= words["total_matches"]


def test_filters_hold_for_what_meaning_finds(reader: StateReader) -> None:
    found = _ask(reader, ASKED, mode="meaning")
    assert any(r["session_id"] == shapes.S_ROOT for r in found["results"])
    for kw in ({"exclude": (shapes.S_ROOT,)}, {"roles": ("tool",)}, {"sources": ("telegram",)}):
        narrowed = reader.search(
            replace(SearchRequest(query=ASKED, sources=EVERY_SOURCE, mode="meaning"), **kw)
        ).to_json()
        sessions = {r["session_id"] for r in narrowed["results"]}
        roles = {h["role"] for r in narrowed["results"] for h in r["hits"]}
        if "roles" in kw:
            assert narrowed["results"] and roles == {"tool"}, kw
        else:
            assert shapes.S_ROOT not in sessions, kw


def test_chinese_queries_keep_their_word_routes_and_add_meaning(reader: StateReader) -> None:
    words = _ask(reader, "数据库连接", mode="words")
    found = _ask(reader, "数据库连接", mode="hybrid")
    assert found["routes"] == [words["route"], "meaning"] and words["route"] == "trigram"
    first = {r["root_session_id"] for r in words["results"][:3]}
    assert first and first <= {r["root_session_id"] for r in found["results"][:3]}


def test_an_index_being_built_says_so_and_searches_by_words(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    path = archive_home(home, tmp_path / "archive.db")
    assert MeaningBuilder(path, batch=2).step() > 0  # one batch of many
    found = StateReader(HermesHome(home), path=path).search(
        SearchRequest(query="postgres", sources=EVERY_SOURCE)
    )
    shown = found.to_json()
    assert shown["meaning_index"]["ready"] is False
    assert 0 < shown["meaning_index"]["covered"] < shown["meaning_index"]["total"]
    assert shown["routes"] == [found.route] and found.results
    assert any("meaning index is being built" in n for n in found.notes)


def test_the_fusion_order() -> None:
    words = [(1, "a", -9.0, 0.0, 0), (2, "a", -5.0, 0.0, 0), (3, "b", -1.0, 0.0, 0)]
    meaning = [(4, "c", -0.9, 0.0, 0), (2, "a", -0.8, 0.0, 0)]
    rows, similar = fuse(words, meaning)
    # Words' first cards (sessions a, b) lead; 2, found by both, passes what only one found.
    assert [r[0] for r in rows] == [1, 2, 3, 4]
    assert similar == {4}
    assert rows[1][2] == pytest.approx(-(1 / (RRF_K + 2) + MEANING_WEIGHT / (RRF_K + 2)))
    many = [(i, "a", 0.0, 0.0, 0) for i in range(10, 20)]
    rows, _ = fuse(many, [(99, "b", 0.0, 0.0, 0)])
    assert [r[0] for r in rows].index(99) == 7  # below words' first seven


def test_words_first_cards_stay_ahead_of_meanings() -> None:
    """Words' rows of one card, then a second and a third card far down its list:
    meaning's many look-alikes rank above words' 8th row, never above those cards."""
    words = [(i, "a", 0.0, 0.0, 0) for i in range(20)]
    words += [(100, "b", 0.0, 0.0, 0), (101, "c1", 0.0, 0.0, 0), (102, "c2", 0.0, 0.0, 0)]
    meaning = [(200 + i, f"m{i}", 0.0, 0.0, 0) for i in range(30)]
    chain = {"c1": "c", "c2": "c"}
    rows, similar = fuse(words, meaning, lambda sid: chain.get(sid, sid))
    order = [r[0] for r in rows]
    assert order[:3] == [0, 100, 101]  # the best row of each of words' first 3 cards
    assert order.index(102) > order.index(200)  # a 4th row of card c: no longer kept
    assert similar == {200 + i for i in range(30)}


def test_one_profiles_search_by_meaning_keeps_to_its_profile(tmp_path: Path) -> None:
    """The vectors are the whole archive's; a profile's reader shows its own rows only."""
    _, reader = profiles_reader(tmp_path)
    reader.search(SearchRequest(query="x"))  # the inline sync fills the archive
    assert MeaningBuilder(tmp_path / "data" / "archive.db").build().ready
    every = reader.scoped("all").search(
        SearchRequest(query=ASKED, sources=EVERY_SOURCE, mode="meaning")
    )
    assert {r.profile for r in every.results} >= {"default", "legacy"}
    for profile in ("default", "legacy"):
        found = reader.scoped(profile).search(
            SearchRequest(query=ASKED, sources=EVERY_SOURCE, mode="meaning")
        )
        assert found.results and {r.profile for r in found.results} == {profile}


def test_similar_conversations_are_the_nearest_other_ones(reader: StateReader) -> None:
    first, second = TWINS
    found = reader.similar_sessions(first)
    assert found and found[0].session_id == second
    assert first not in {f.session_id for f in found}
    assert [f.score for f in found] == sorted((f.score for f in found), reverse=True)
    assert all(f.messages >= 1 and f.name for f in found)
    with pytest.raises(NotFoundError):
        reader.similar_sessions("no-such-session")


def test_a_new_message_not_yet_embedded_leaves_search_by_meaning_on(tmp_path: Path) -> None:
    """On a busy home the index is a moment behind each new message: hybrid still asks
    meaning then (words only is for an index being built, not one a row behind)."""
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    shapes.append_turn(home / "state.db", shapes.S_ROOT, SAID, REPLY, 2e9)
    path = archive_home(home, tmp_path / "archive.db")
    assert MeaningBuilder(path).build().ready
    shapes.append_turn(home / "state.db", shapes.S_ROOT, "one more question", "an answer", 2.2e9)
    archive_home(home, path)  # synced; not embedded yet
    reader = StateReader(HermesHome(home), path=path)
    with reader.snapshot() as snap:
        status = reader.meaning.status(snap.conn)
    assert not status.ready and status.built
    found = reader.search(SearchRequest(query=ASKED, sources=EVERY_SOURCE, mode="hybrid"))
    assert "meaning" in found.to_json()["routes"]
    assert not any("being built" in n for n in found.notes)
