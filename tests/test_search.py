"""Stage-1 search over every real state.db shape: routes, grouping, filters, bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.repository import search as search_module
from dashboard.repository.errors import QuerySyntaxError, ValidationError
from dashboard.repository.home import HermesHome
from dashboard.repository.lineage import Lineage
from dashboard.repository.reader import StateReader
from dashboard.repository.search import SearchRequest
from dashboard.repository.store import NewMessage, SessionStore
from tests import hermes_shapes as shapes

ALL_SOURCES = ("cli", "telegram", "cron", "subagent")


@pytest.fixture(scope="module")
def readers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, StateReader]:
    root = tmp_path_factory.mktemp("shapes")
    out = {}
    for name, build in shapes.SHAPES.items():
        build(root / name / "state.db")
        out[name] = StateReader(HermesHome(root / name))
    return out


def _sessions(reader: StateReader, q: str, **kw) -> tuple[set[str], object]:
    result = reader.search(SearchRequest(query=q, group="session", **kw))
    return {r.session_id for r in result.results}, result


SHAPE_NAMES = sorted(shapes.SHAPES)


@pytest.mark.parametrize("shape", SHAPE_NAMES)
def test_english_word_phrase_prefix_not_or(readers: dict[str, StateReader], shape: str) -> None:
    reader = readers[shape]
    found, result = _sessions(reader, shapes.UNIQUE_WORD)
    assert found == {shapes.S_ROOT}
    hit = result.results[0].hits[0]
    assert f"<mark>{shapes.UNIQUE_WORD}</mark>" in hit.snippet
    assert result.route == ("scan" if shapes.EXPECTED[shape].fts_stale else "unicode61")

    found, _ = _sessions(reader, '"connection pool"')
    assert shapes.S_ROOT in found
    found, _ = _sessions(reader, shapes.UNIQUE_WORD[:6] + "*")
    assert found == {shapes.S_ROOT}
    found_all, _ = _sessions(reader, "pool")
    found_not, _ = _sessions(reader, f"pool NOT {shapes.UNIQUE_WORD}")
    assert shapes.S_ROOT in found_all
    assert found_not <= found_all
    found_or, _ = _sessions(reader, f"{shapes.UNIQUE_WORD} OR {shapes.COMPACTED_WORD}")
    assert found_or == {shapes.S_ROOT, shapes.S_TELEGRAM}


@pytest.mark.parametrize("shape", SHAPE_NAMES)
def test_chinese_three_plus_and_two_characters(readers: dict[str, StateReader], shape: str) -> None:
    reader = readers[shape]
    found, result = _sessions(reader, shapes.CJK_PHRASE)
    assert shapes.S_TELEGRAM in found, result.notes
    facts = shapes.EXPECTED[shape]
    expected_route = "scan" if facts.fts_stale or not facts.has_trigram else "trigram"
    assert result.route == expected_route
    found, result = _sessions(reader, shapes.CJK_SHORT)
    assert result.route == "scan"
    assert shapes.S_TELEGRAM in found
    assert any("<mark>部署</mark>" in h.snippet for r in result.results for h in r.hits)


@pytest.mark.parametrize("shape", SHAPE_NAMES)
def test_term_only_in_tool_calls(readers: dict[str, StateReader], shape: str) -> None:
    found, result = _sessions(readers[shape], shapes.TOOL_CALL_WORD)
    assert found == {shapes.S_ROOT}, (result.route, result.notes)
    assert shapes.TOOL_CALL_WORD in result.results[0].hits[0].snippet


@pytest.mark.parametrize("shape", SHAPE_NAMES)
def test_visible_rows_only(readers: dict[str, StateReader], shape: str) -> None:
    reader = readers[shape]
    found, _ = _sessions(reader, shapes.COMPACTED_WORD)  # active=0, compacted=1: archived, visible
    assert found == {shapes.S_TELEGRAM}
    assert _sessions(reader, shapes.REWOUND_WORD)[0] == set()  # rewound: never shown
    assert _sessions(reader, shapes.HIDDEN_WORD)[0] == set()  # display_kind='hidden'


def test_stale_index_falls_back_to_a_scan(readers: dict[str, StateReader]) -> None:
    found, result = _sessions(readers["stale_index"], shapes.STALE_WORD)
    assert found == {shapes.S_BRANCH}
    assert result.route == "scan"
    assert any("stale" in n for n in result.notes)


def test_wal_only_rows_are_searchable(readers: dict[str, StateReader]) -> None:
    found, _ = _sessions(readers["current_views"], shapes.WAL_WORD)
    assert found == {shapes.S_BRANCH}


def test_cron_and_subagent_hidden_unless_asked(readers: dict[str, StateReader]) -> None:
    reader = readers["current_views"]
    assert _sessions(reader, shapes.CRON_WORD)[0] == set()
    found, _ = _sessions(reader, shapes.CRON_WORD, sources=("cron",))
    assert found == {shapes.S_CRON}


def test_filters(readers: dict[str, StateReader]) -> None:
    reader = readers["current_views"]
    everything, _ = _sessions(reader, "pool", sources=ALL_SOURCES)
    users, _ = _sessions(reader, "pool", sources=ALL_SOURCES, roles=("user",))
    assert users and users <= everything
    telegram, _ = _sessions(reader, "pool OR 部署", sources=("telegram",))
    assert telegram and all(s in (shapes.S_TELEGRAM, shapes.S_BRANCH) for s in telegram)
    without, _ = _sessions(reader, shapes.UNIQUE_WORD, exclude=(shapes.S_ROOT,))
    assert without == set()
    late, _ = _sessions(reader, "pool", sources=ALL_SOURCES, after=2e9)
    assert late == set()


def test_grouped_by_chain_root_by_default(readers: dict[str, StateReader]) -> None:
    reader = readers["current_views"]
    chain = set(shapes.COMPACTION_CHAIN)
    by_session, _ = _sessions(reader, "pool", sources=ALL_SOURCES)
    grouped = reader.search(SearchRequest(query="pool", sources=ALL_SOURCES))
    roots = {r.root_session_id for r in grouped.results}
    assert len(by_session & chain) >= 2
    assert shapes.S_ROOT in roots and not (roots & (chain - {shapes.S_ROOT}))
    card = next(r for r in grouped.results if r.root_session_id == shapes.S_ROOT)
    assert card.hit_count >= len(card.hits)


def test_title_and_id_matches_come_first(readers: dict[str, StateReader]) -> None:
    reader = readers["current_views"]
    result = reader.search(SearchRequest(query=shapes.S_CRON, sources=ALL_SOURCES))
    assert result.results and result.results[0].session_id == shapes.S_CRON
    assert result.results[0].title_match


def test_empty_query_lists_recent_chain_roots(readers: dict[str, StateReader]) -> None:
    reader = readers["current_views"]
    result = reader.search(SearchRequest())
    assert result.route == "recent"
    ids = [r.session_id for r in result.results]
    assert shapes.S_CONT1 not in ids and shapes.S_CONT2 not in ids  # roots only
    assert shapes.S_CRON not in ids  # background sources hidden
    starts = [r.started_at for r in result.results]
    assert starts == sorted(starts, reverse=True)
    assert all(r.preview or r.title for r in result.results)
    every = reader.search(SearchRequest(group="session", sources=ALL_SOURCES))
    assert every.total_sessions == len(shapes.SESSION_IDS)


def test_unusable_query_raises(readers: dict[str, StateReader]) -> None:
    with pytest.raises(QuerySyntaxError):
        readers["seed_inline"].search(SearchRequest(query="AND OR ()"))


def test_request_parsing() -> None:
    args = {"q": " redis ", "role": "user,tool", "days": "7", "sort": "newest", "page": "2"}
    req = SearchRequest.from_params(args.get, lambda k: [args[k]] if k in args else [], now=1e9)
    assert req.query == "redis" and req.roles == ("user", "tool") and req.page == 2
    assert req.after == 1e9 - 7 * 86400 and req.sort == "newest"
    for bad in ({"role": "robot"}, {"sort": "best"}, {"page": "0"}, {"days": "x"},
                {"after": "yesterday"}, {"per_page": "5000"}):  # fmt: skip
        with pytest.raises(ValidationError):
            SearchRequest.from_params(bad.get, lambda k, b=bad: [b[k]] if k in b else [])


def test_chain_root_survives_cycles() -> None:
    cycle = Lineage.from_parents({"a": "b", "b": "c", "c": "a"})
    assert cycle.root("a") in {"a", "b", "c"}
    assert set(cycle.family("a")) == {"a", "b", "c"}
    assert Lineage.from_parents({"x": "missing"}).root("x") == "missing"
    assert Lineage.from_parents({}).root("solo") == "solo"


# -- ranking, pagination and bounds on a store of our own ---------------------------------


@pytest.fixture
def many(tmp_path: Path) -> StateReader:
    """45 sessions mentioning 'needle' 1..45 times, plus one with it in the title."""
    with SessionStore(tmp_path / "home" / "state.db") as store:
        for i in range(1, 46):
            sid = store.create_session("cli", session_id=f"s{i:02d}", started_at=1000.0 + i)
            store.append_messages(sid, [NewMessage("user", f"needle number {k} haystack")
                                        for k in range(i)])  # fmt: skip
        titled = store.create_session("cli", session_id="titled", started_at=10.0)
        store.set_title(titled, "All about the needle")
    return StateReader(HermesHome(tmp_path / "home"))


def test_pagination_covers_every_matching_session(many: StateReader) -> None:
    seen = []
    page = 1
    while True:
        result = many.search(SearchRequest(query="needle", per_page=10, page=page))
        if not result.results:
            break
        seen += [r.session_id for r in result.results]
        page += 1
    assert len(seen) == len(set(seen)) == 46
    assert result.total_sessions == 46 and not result.bounded
    assert seen[0] == "titled"  # the title match comes first


def test_hit_counts_are_exact_below_the_bound(many: StateReader) -> None:
    result = many.search(SearchRequest(query="needle", per_page=100))
    counts = {r.session_id: r.hit_count for r in result.results}
    assert counts["s45"] == 45 and counts["s07"] == 7
    assert all(len(r.hits) <= 3 for r in result.results)


def test_newest_and_oldest_sorts(many: StateReader) -> None:
    newest = many.search(SearchRequest(query="haystack", sort="newest", per_page=5))
    oldest = many.search(SearchRequest(query="haystack", sort="oldest", per_page=5))
    assert [r.session_id for r in newest.results] == ["s45", "s44", "s43", "s42", "s41"]
    assert [r.session_id for r in oldest.results] == ["s01", "s02", "s03", "s04", "s05"]


def test_common_terms_bound_the_ranking_work(many: StateReader, monkeypatch) -> None:
    monkeypatch.setattr(search_module, "RANK_WINDOW", 100)
    result = many.search(SearchRequest(query="haystack", per_page=50))
    # The count stops just past the window: counting every match of a very common
    # word would cost more than the search.
    assert result.bounded and result.total_matches == 101
    assert result.ranked_matches == 100 and result.older_than is not None
    assert any("only the newest 100 were ranked" in n for n in result.notes)
    older = many.search(SearchRequest(query="haystack", older_than=result.older_than))
    assert {r.session_id for r in older.results} - {r.session_id for r in result.results}
    everything = sum(range(1, 46))
    seen, cursor = 0, None
    while True:  # "search older" walks every match exactly once
        step = many.search(SearchRequest(query="haystack", older_than=cursor, per_page=100))
        seen += sum(r.hit_count for r in step.results)
        if not step.bounded:
            break
        cursor = step.older_than
    assert seen == everything


def test_a_request_can_rank_fewer_matches(many: StateReader) -> None:
    # An agent's prefetch ranks only the newest matches (s45 holds the newest 45).
    narrow = many.search(SearchRequest(query="haystack", per_page=50, rank_window=40))
    assert narrow.bounded and narrow.ranked_matches == 40
    assert [r.session_id for r in narrow.results] == ["s45"]
    wide = many.search(SearchRequest(query="haystack", per_page=50, rank_window=10_000))
    assert not wide.bounded and len(wide.results) == 45  # never more than the default


def test_below_the_bound_order_is_exact_bm25(many: StateReader) -> None:
    import sqlite3

    result = many.search(SearchRequest(query="number", group="session", per_page=100))
    conn = sqlite3.connect(f"file:{many.path}?mode=ro", uri=True)
    try:
        best: dict[str, float] = {}
        for sid, rank in conn.execute(
            "SELECT m.session_id, f.rank FROM messages_fts f JOIN messages m "
            "ON m.id = f.rowid WHERE messages_fts MATCH 'number' ORDER BY f.rank"
        ):
            best.setdefault(sid, rank)
    finally:
        conn.close()
    order = [r.session_id for r in result.results]
    assert set(order) == set(best)
    scores = [best[s] for s in order]
    assert scores == sorted(scores)


def test_snippets_escape_before_marking(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "h" / "state.db") as store:
        sid = store.create_session("cli")
        store.append_messages(
            sid,
            [NewMessage("user", 'xss <script>alert(1)</script> "><img src=x onerror=alert(1)>')],
        )
    reader = StateReader(HermesHome(tmp_path / "h"))
    for q in ("xss", "script", "onerror", "img"):
        snippet = reader.search(SearchRequest(query=q)).results[0].hits[0].snippet
        assert "<script" not in snippet and "<img" not in snippet
        assert "&lt;" in snippet and "<mark>" in snippet
