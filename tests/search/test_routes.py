"""The query router: routes from the query and the archive's state, never the source's layout."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dashboard.errors import QuerySyntaxError
from dashboard.hermes.home import HermesHome
from dashboard.reader.reader import StateReader
from dashboard.search import routes as search_routes
from dashboard.search.query import parse_query
from dashboard.search.routes import Route, plan_routes
from dashboard.search.sessions import SearchRequest
from dashboard.store.schema import TRIGRAM_PENDING_KEY
from dashboard.store.state import TRIGRAM_INDEX, WORD_INDEX
from tests.support import hermes_shapes as shapes
from tests.support.archived import archive_home, archived_reader

STILL_BUILDING = "The index of word parts is still being built (the import is finishing)"


@pytest.mark.parametrize(
    ("q", "ready", "pending"),
    [
        ("redis", ["unicode61", "trigram"], ["unicode61", "scan"]),
        ("数据库连接", ["trigram"], ["scan"]),
        ("部署", ["pairs"], ["scan"]),
        ("部", ["scan"], ["scan"]),
        ("a部", ["pairs"], ["scan"]),
        ("部a", ["scan"], ["scan"]),  # a pair ending in ASCII: the index has no tail of it
        ("部署 OR 回滚", ["scan"], ["scan"]),  # no one pair every match holds
        ("docker部署", ["trigram"], ["scan"]),
        ("C++", ["trigram", "scan"], ["scan"]),
        ("c#", ["scan"], ["scan"]),
        ("node.js", ["unicode61", "trigram"], ["unicode61", "scan"]),
        ("re", ["unicode61"], ["unicode61", "scan"]),  # too short for trigram either way
    ],
)
def test_routes_follow_the_query_and_whether_the_trigram_index_is_built(
    q: str, ready: list[str], pending: list[str]
) -> None:
    parsed = parse_query(q)
    for trigram_ready, expected in ((True, ready), (False, pending)):
        routes, _ = plan_routes(parsed, trigram_ready)
        assert [r.name for r in routes] == expected, (q, trigram_ready)
        tables = {r.name: r.table for r in routes}
        assert tables.get("unicode61", WORD_INDEX) == WORD_INDEX
        assert tables.get("trigram", TRIGRAM_INDEX) == TRIGRAM_INDEX
        assert tables.get("scan") is None


def test_the_notes_say_why_a_query_was_scanned() -> None:
    _, notes = plan_routes(parse_query("数据库连接"), trigram_ready=False)
    assert notes == [
        f"{STILL_BUILDING}, so Chinese, Japanese and Korean terms were found by searching "
        "every message."
    ]
    for query in ("部", "部署 OR 回滚"):
        _, notes = plan_routes(parse_query(query), trigram_ready=True)
        assert notes == [
            "Chinese, Japanese and Korean terms this short are found by reading every message."
        ]
    # A pair's pieces are an index: nothing to excuse.
    assert plan_routes(parse_query("部署"), trigram_ready=True)[1] == []
    # A built index of word parts is never said to be missing: a short term is the reason.
    _, notes = plan_routes(parse_query("数据库连接 db"), trigram_ready=True)
    assert notes and "too short" in notes[0] and "no index" not in notes[0]
    _, notes = plan_routes(parse_query("redis"), trigram_ready=True)
    assert notes == []


@pytest.fixture(scope="module")
def pending(tmp_path_factory: pytest.TempPathFactory) -> StateReader:
    """Today's Hermes shape imported, its archive as a first import leaves it before its
    last step: ``fts_trigram_pending`` set, so the trigram index does not answer yet."""
    root = tmp_path_factory.mktemp("pending")
    shapes.build_current_views(root / "home" / "state.db")
    path = archive_home(root / "home")
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("INSERT INTO state_meta(key, value) VALUES (?, '1')", (TRIGRAM_PENDING_KEY,))
    return StateReader(HermesHome(root / "home"), path=path)


@pytest.fixture(scope="module")
def ready(tmp_path_factory: pytest.TempPathFactory) -> StateReader:
    root = tmp_path_factory.mktemp("ready")
    shapes.build_current_views(root / "home" / "state.db")
    return archived_reader(root / "home")


def test_while_the_trigram_index_is_pending_cjk_is_scanned_and_says_so(
    pending: StateReader, ready: StateReader
) -> None:
    result = pending.search(SearchRequest(query=shapes.CJK_PHRASE, group="session"))
    assert result.route == "scan"
    assert {r.session_id for r in result.results} == {shapes.S_TELEGRAM}
    assert any(n.startswith(STILL_BUILDING) for n in result.notes)
    built = ready.search(SearchRequest(query=shapes.CJK_PHRASE, group="session"))
    assert built.route == "trigram" and not any(STILL_BUILDING in n for n in built.notes)
    assert {r.session_id for r in built.results} == {shapes.S_TELEGRAM}


def test_while_the_trigram_index_is_pending_a_part_of_a_word_is_scanned(
    pending: StateReader, ready: StateReader
) -> None:
    part = shapes.UNIQUE_WORD[1:-1]  # no whole word: the word index finds nothing
    answers = {}
    for name, reader in (("pending", pending), ("ready", ready)):
        result = reader.search(SearchRequest(query=part, group="session"))
        assert {r.session_id for r in result.results} == {shapes.S_ROOT}, name
        (card,) = result.results
        # The session page counts what the card counts, by the same route.
        assert len(reader.matching_messages(shapes.S_ROOT, part)) == card.hit_count > 0
        answers[name] = result.route
    assert answers == {"pending": "scan", "ready": "trigram"}


@pytest.mark.parametrize(
    "query",
    [
        shapes.UNIQUE_WORD,  # found
        shapes.CRON_WORD,  # only in a cron session: hidden by the default source filter
        "qwxzzyv",  # in no message
        '"pool overnight"',  # words that exist, a phrase that does not
        "qwxz*",  # a prefix of nothing
    ],
)
def test_probing_the_index_first_answers_as_the_full_read_does(
    tmp_path: Path, query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query the index cannot match stops at one probe; the answer (cards, counts,
    notes, the filters that hide matches) is the one the ranked, filtered read gives."""
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    reader = archived_reader(home)

    def answer() -> tuple[object, ...]:
        result = reader.search(SearchRequest(query=query))
        cards = [
            (c.session_id, c.hit_count, [h.message_id for h in c.hits]) for c in result.results
        ]
        return cards, result.total_matches, result.route, result.notes, result.excluded_by

    probed = answer()
    monkeypatch.setattr(search_routes, "index_matches", lambda conn, route: True)
    assert answer() == probed


def test_the_probe_says_whether_an_index_holds_any_match(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    with closing(sqlite3.connect(archive_home(home))) as conn:
        word = Route(
            "unicode61", WORD_INDEX, parse_query(shapes.UNIQUE_WORD).fts_match("unicode61")
        )
        none = Route("unicode61", WORD_INDEX, parse_query("qwxzzyv").fts_match("unicode61"))
        assert search_routes.index_matches(conn, word) is True
        assert search_routes.index_matches(conn, none) is False
        assert search_routes.index_matches(conn, Route("scan", None, None)) is True


@pytest.fixture(scope="module")
def trigram_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("trigram")
    shapes.build_current_views(root / "home" / "state.db")
    return archive_home(root / "home")


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_missing_piece_of_a_word_is_only_said_when_nothing_matches(
    trigram_archive: Path, data: st.DataObject
) -> None:
    """The shortcut for the index of word parts (a three-character piece no message
    holds ends the search) never hides a match: whenever it says so, the full query
    finds nothing; parts of real words, typos and AND/OR/NOT of them."""
    with closing(sqlite3.connect(f"file:{trigram_archive}?mode=ro", uri=True)) as conn:
        texts = [
            r[0] for r in conn.execute("SELECT content FROM messages WHERE length(content) > 8")
        ]
        words = sorted({w for t in texts for w in re.findall(r"[A-Za-z_.-]{3,}", t)})
        part = st.builds(
            lambda w, i, n: w[i : i + n] if len(w[i : i + n]) >= 3 else w,
            st.sampled_from(words),
            st.integers(0, 6),
            st.integers(3, 9),
        )
        typo = st.text("abcdefghijklmnopqrstuvwxyz.-", min_size=3, max_size=8)
        term = st.one_of(part, typo)
        a, b = data.draw(term), data.draw(term)
        query = data.draw(st.sampled_from([a, f"{a} {b}", f"{a} OR {b}", f"{a} NOT {b}"]))
        try:
            parsed = parse_query(query)
        except QuerySyntaxError:
            return
        match = parsed.fts_match("trigram")
        if match is None:
            return
        route = Route("trigram", TRIGRAM_INDEX, match)
        found = conn.execute(
            f"SELECT count(*) FROM {TRIGRAM_INDEX} WHERE {TRIGRAM_INDEX} MATCH ?", (match,)
        ).fetchone()[0]
        if search_routes.missing_trigram(conn, route, parsed):
            assert found == 0, query


def test_the_terms_every_match_needs() -> None:
    def needed(q: str) -> list[str]:
        return sorted(t.text for t in parse_query(q).required_terms())

    assert needed("alpha beta") == ["alpha", "beta"]
    assert needed("alpha OR beta") == []
    assert needed("(alpha beta) OR (alpha gamma)") == ["alpha"]
    assert needed("alpha NOT beta") == ["alpha"]
    assert needed("NEAR(alpha beta, 3) gamma") == ["alpha", "beta", "gamma"]


def test_a_missing_piece_ends_the_search_and_a_present_one_does_not(
    trigram_archive: Path,
) -> None:
    with closing(sqlite3.connect(f"file:{trigram_archive}?mode=ro", uri=True)) as conn:
        for query, missing in (("qzx" + shapes.UNIQUE_WORD, True), (shapes.UNIQUE_WORD, False)):
            parsed = parse_query(query)
            route = Route("trigram", TRIGRAM_INDEX, parsed.fts_match("trigram"))
            assert search_routes.missing_trigram(conn, route, parsed) is missing, query
