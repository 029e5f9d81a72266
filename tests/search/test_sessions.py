"""Stage-1 search over every real state.db shape, imported into Recall's archive first
(as `recall serve` does): routes, grouping, filters, bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.errors import QuerySyntaxError, ValidationError
from dashboard.hermes.home import HermesHome
from dashboard.lineage.graph import Lineage, load_lineage
from dashboard.reader.reader import StateReader
from dashboard.search import routes as search_routes
from dashboard.search.sessions import SearchRequest, search_sessions
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from tests.support import archived
from tests.support import hermes_shapes as shapes
from tests.support import hermes_v31 as hv
from tests.support.archived import archived_reader

ALL_SOURCES = ("cli", "telegram", "cron", "subagent")


@pytest.fixture(scope="module")
def readers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, StateReader]:
    root = tmp_path_factory.mktemp("shapes")
    out = {}
    for name, build in shapes.SHAPES.items():
        build(root / name / "state.db")
        out[name] = archived_reader(root / name)
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
    assert result.route == "unicode61"  # the archive indexes every shape the same way

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
    assert result.route == "trigram"  # whether or not the source had such an index
    found, result = _sessions(reader, shapes.CJK_SHORT)
    assert result.route == "pairs"
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


def test_a_word_the_source_index_missed_is_found_by_words(
    readers: dict[str, StateReader],
) -> None:
    # The source's stale index lacks this row; the archive indexes what it imports.
    found, result = _sessions(readers["stale_index"], shapes.STALE_WORD)
    assert found == {shapes.S_BRANCH}
    assert result.route == "unicode61" and result.notes == []


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
    for bad in (
        {"role": "robot"},
        {"sort": "best"},
        {"page": "0"},
        {"days": "x"},
        {"after": "yesterday"},
        {"per_page": "5000"},
    ):
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
            store.append_messages(
                sid, [NewMessage("user", f"needle number {k} haystack") for k in range(i)]
            )
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
    monkeypatch.setattr(search_routes, "RANK_WINDOW", 100)
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


# -- results that mean what the query says (issue 13, items 9-13) -------------------------


def _store(
    tmp_path: Path, sessions: dict[str, tuple[float, str | None, list[str]]], **extra: dict
) -> StateReader:
    """A Recall store: session id -> (start, title, message texts), one user message each."""
    with SessionStore(tmp_path / "home" / "state.db") as store:
        for sid, (started, title, texts) in sessions.items():
            store.create_session(
                "cli", session_id=sid, started_at=started, title=title, **extra.get(sid, {})
            )
            store.append_messages(
                sid, [NewMessage("user", t, timestamp=started + k) for k, t in enumerate(texts)]
            )
    return StateReader(HermesHome(tmp_path / "home"))


@pytest.fixture
def dockers(tmp_path: Path) -> StateReader:
    return _store(
        tmp_path,
        {
            "compose": (
                1000.0,
                "Docker compose: worker can't reach postgres",
                ["the worker container cannot reach postgres"],
            ),
            "swarm": (2000.0, None, ["docker swarm init on the manager"]),
            "both": (3000.0, None, ["docker compose up, then docker swarm"]),
        },
    )


@pytest.mark.parametrize("q", ["docker NOT compose", "docker -compose"])
def test_not_applies_to_title_matches(dockers: StateReader, q: str) -> None:
    result = dockers.search(SearchRequest(query=q))
    assert [r.session_id for r in result.results] == ["swarm"]
    assert result.total_sessions == 1
    assert dockers.search(SearchRequest(query="docker compose")).results[0].title_match


def test_not_and_session_ids_in_name_matches(dockers: StateReader) -> None:
    found = dockers.search(SearchRequest(query="compose NOT postgres"))
    assert [(r.session_id, r.title_match) for r in found.results] == [("both", False)]
    by_id = dockers.search(SearchRequest(query="compose"))
    assert by_id.results[0].session_id == "compose" and by_id.results[0].title_match
    assert dockers.search(SearchRequest(query="swarm NOT swarm")).results == []


@pytest.fixture
def timeline(tmp_path: Path) -> StateReader:
    """Nine sessions a day apart mentioning 'needle'; the middle one also by title."""
    sessions = {f"d{i}": (86_400.0 * i, None, ["needle in the hay"]) for i in range(1, 10)}
    sessions["d5"] = (86_400.0 * 5, "The needle session", ["nothing to see"])
    return _store(tmp_path, sessions)


def test_sort_orders_title_matches_too(timeline: StateReader) -> None:
    for sort, order in (("newest", range(9, 0, -1)), ("oldest", range(1, 10))):
        result = timeline.search(SearchRequest(query="needle", sort=sort))
        assert [r.session_id for r in result.results] == [f"d{i}" for i in order], sort
    best = timeline.search(SearchRequest(query="needle"))
    assert best.results[0].session_id == "d5"  # best match: title matches first


def test_a_sorted_count_is_the_same_or_says_why_and_offers_the_rest(tmp_path: Path) -> None:
    # 1,500 matches in 60 sessions: newest and oldest read 1,000 of them.
    reader = _store(
        tmp_path,
        {f"s{i:02d}": (1000.0 * i, None, [f"needle {k}" for k in range(25)]) for i in range(60)},
    )
    best = reader.search(SearchRequest(query="needle"))
    assert best.total_sessions == 60 and not best.bounded
    for sort, cursor in (("newest", "older_than"), ("oldest", "newer_than")):
        result = reader.search(SearchRequest(query="needle", sort=sort, per_page=100))
        assert result.total_sessions < 60 and result.bounded
        assert any("the sessions counted are the ones holding them" in n for n in result.notes)
        seen = {r.session_id for r in result.results}
        while getattr(result, cursor) is not None:  # "search older/newer" reads the rest
            result = reader.search(
                SearchRequest(
                    query="needle", sort=sort, per_page=100, **{cursor: getattr(result, cursor)}
                )
            )
            seen |= {r.session_id for r in result.results}
        assert len(seen) == 60, sort


def test_a_bounded_search_offers_more_in_every_order(many: StateReader, monkeypatch) -> None:
    monkeypatch.setattr(search_routes, "RANK_WINDOW", 100)
    monkeypatch.setattr(search_routes, "SORT_WINDOW", 100)
    for sort in ("relevance", "newest", "oldest"):
        result = many.search(SearchRequest(query="haystack", sort=sort, per_page=50))
        assert result.bounded, sort
        assert result.older_than is not None or result.newer_than is not None, sort
    oldest = many.search(SearchRequest(query="haystack", sort="oldest", per_page=100))
    seen, cursor = sum(r.hit_count for r in oldest.results), oldest.newer_than
    while cursor is not None:  # "search newer" walks every match exactly once
        step = many.search(
            SearchRequest(query="haystack", sort="oldest", newer_than=cursor, per_page=100)
        )
        seen += sum(r.hit_count for r in step.results)
        cursor = step.newer_than
    assert seen == sum(range(1, 46))


def test_identical_snippets_are_shown_once(tmp_path: Path) -> None:
    same = "the needle is in the haystack"
    reader = _store(tmp_path, {"dup": (1000.0, None, [same, same, same, "another needle here"])})
    (card,) = reader.search(SearchRequest(query="needle")).results
    snippets = [h.snippet for h in card.hits]
    assert len(snippets) == len(set(snippets)) == 2
    assert card.hit_count == 4  # every matching message still counts


def test_a_card_counts_the_hits_of_its_own_session(readers: dict[str, StateReader]) -> None:
    reader = readers["current_views"]
    result = reader.search(SearchRequest(query="pool", sources=ALL_SOURCES))
    card = next(r for r in result.results if r.root_session_id == shapes.S_ROOT)
    per_session = reader.search(
        SearchRequest(query="pool", sources=ALL_SOURCES, group="session")
    ).results
    own = next(r for r in per_session if r.session_id == card.session_id)
    assert card.session_hit_count == own.hit_count
    assert card.hit_count == sum(
        r.hit_count
        for r in per_session
        if r.root_session_id == shapes.S_ROOT or r.session_id in shapes.COMPACTION_CHAIN
    )


def test_matching_messages_is_the_search_definition(readers: dict[str, StateReader]) -> None:
    reader = readers["current_views"]
    for q in ("pool", '"pool size"', "pool NOT size", "pool OR pgbouncer", "pool*"):
        per_session = reader.search(
            SearchRequest(query=q, sources=ALL_SOURCES, group="session", per_page=100)
        ).results
        for r in per_session:
            assert len(reader.matching_messages(r.session_id, q)) == r.hit_count, (q, r.session_id)


def test_a_page_past_the_end_says_so(many: StateReader) -> None:
    result = many.search(SearchRequest(query="needle", page=999, per_page=10))
    assert result.results == [] and result.past_end
    assert result.pages == 5 and result.total_sessions == 46
    assert not many.search(SearchRequest(query="needle", page=5, per_page=10)).past_end
    browse = many.search(SearchRequest(page=999))
    assert browse.past_end and browse.pages == 3
    assert not many.search(SearchRequest(query="nothingatall")).past_end


@pytest.fixture
def filtered(tmp_path: Path) -> StateReader:
    return _store(
        tmp_path,
        {
            "a": (1_700_000_000.0, None, ["the walrus sings"]),
            "b": (1_700_000_100.0, None, ["plain words"]),
        },
        a={"model": "gpt-4o"},
    )


@pytest.mark.parametrize(
    ("request_fields", "blamed"),
    [
        ({}, ()),
        ({"model": "claude"}, ("model",)),
        ({"after": 1_800_000_000.0}, ("dates",)),
        ({"before": 1_600_000_000.0}, ("dates",)),
        ({"roles": ("assistant",)}, ("role",)),
        ({"sources": ("telegram",)}, ("source",)),
        ({"exclude": ("a",)}, ("exclude",)),
    ],
)
def test_no_results_names_the_filter_that_excluded_them(
    filtered: StateReader, request_fields: dict, blamed: tuple[str, ...]
) -> None:
    hit = filtered.search(SearchRequest(query="walrus"))
    assert hit.results and hit.excluded_by == ()
    result = filtered.search(SearchRequest(query="walrus", **request_fields))
    if blamed:
        assert result.results == [] and result.excluded_by == blamed
    nothing = filtered.search(SearchRequest(query="zebra", **request_fields))
    assert nothing.excluded_by == () and not nothing.home_empty


def test_background_sources_are_blamed_when_they_hold_the_matches(
    readers: dict[str, StateReader],
) -> None:
    result = readers["current_views"].search(SearchRequest(query=shapes.CRON_WORD))
    assert result.results == [] and result.excluded_by == ("source",)


def test_an_empty_home_says_so(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "home" / "state.db"):
        pass
    result = StateReader(HermesHome(tmp_path / "home")).search(SearchRequest(query="walrus"))
    assert result.results == [] and result.home_empty


@pytest.fixture
def symbols(tmp_path: Path) -> StateReader:
    return _store(
        tmp_path,
        {
            "cpp": (1000.0, None, ["I write C++ every day"]),
            "lonec": (2000.0, None, ["the C drive is full"]),
            "csharp": (3000.0, None, ["ported it to C# last year"]),
            "dotnet": (4000.0, None, ["an app on the .NET runtime"]),
            "network": (5000.0, None, ["the net is down"]),
            "nodejs": (6000.0, None, ["install node.js 20"]),
            "nodejs2": (7000.0, None, ["a node js tutorial"]),
        },
    )


@pytest.mark.parametrize(
    ("q", "found", "route"),
    [
        ("C++", {"cpp"}, "trigram"),
        ("c#", {"csharp"}, "scan"),
        (".NET", {"dotnet"}, "trigram"),
        # Symbols inside a word: the word index finds "node js", the text check keeps node.js.
        ("node.js", {"nodejs"}, "unicode61"),
        ("node.js OR tutorial", {"nodejs", "nodejs2"}, "unicode61"),
        ("c", {"cpp", "lonec", "csharp"}, "unicode61"),  # a plain word is still a word
        ("node", {"nodejs", "nodejs2"}, "unicode61"),
    ],
)
def test_terms_with_symbols_match_the_symbols(
    symbols: StateReader, q: str, found: set[str], route: str
) -> None:
    result = symbols.search(SearchRequest(query=q))
    assert {r.session_id for r in result.results} == found
    assert result.route == route
    assert symbols.search(SearchRequest(query=q, sort="newest")).total_sessions == len(found)


# -- in-place compaction epochs (issue 16, item 4) ------------------------------------------


@pytest.fixture(scope="module", params=shapes.EPOCH_FORMS)
def epoch_home(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[shapes.EpochFacts, StateReader, dict[int, int]]:
    """A home compacted in place, its archive's reader, and the archive id of each
    source message id."""
    home = tmp_path_factory.mktemp(f"epochs-{request.param}") / "home"
    facts = shapes.build_epochs_home(home, request.param)
    reader = archived_reader(home)
    with reader.snapshot() as snap:
        ids = {int(r[1]): r[0] for r in snap.conn.execute("SELECT id, src_id FROM messages")}
    return facts, reader, ids


def test_a_word_said_only_in_epoch_one_is_found_before_compaction_1_of_3(
    epoch_home: tuple[shapes.EpochFacts, StateReader, dict[int, int]],
) -> None:
    facts, reader, ids = epoch_home
    result = reader.search(SearchRequest(query=shapes.EPOCH1_WORD))
    (card,) = result.results
    (hit,) = card.hits
    assert (hit.session_id, hit.message_id) == (
        shapes.S_EPOCHS,
        ids[facts.word_ids[shapes.EPOCH1_WORD]],
    )
    assert hit.compaction == (1, 3)
    assert card.hit_count == card.session_hit_count == result.total_matches == 1
    assert result.to_json()["results"][0]["hits"][0]["before_compaction"] == [1, 3]


def test_each_epoch_word_says_which_compaction_it_came_before(
    epoch_home: tuple[shapes.EpochFacts, StateReader, dict[int, int]],
) -> None:
    facts, reader, ids = epoch_home
    for word, compaction in zip(shapes.EPOCH_WORDS, [(2, 3), (3, 3), None], strict=True):
        (card,) = reader.search(SearchRequest(query=f'"now about {word}"')).results
        (hit,) = card.hits
        assert hit.message_id == ids[facts.word_ids[word]], word
        assert hit.compaction == compaction, word
    # A rotation chain whose tip compacted in place: the tip's own compactions.
    result = reader.search(SearchRequest(query=f'"still on {shapes.ROTATED_WORD}"'))
    (hit,) = result.results[0].hits
    assert hit.session_id == shapes.S_ROTATED_TIP and hit.compaction == (1, 2)


def test_a_word_in_a_duplicated_tail_counts_once(
    epoch_home: tuple[shapes.EpochFacts, StateReader, dict[int, int]],
) -> None:
    facts, reader, ids = epoch_home
    # Said in epochs 2 and 3, then kept as the tail the next compaction re-inserted:
    # four rows each (the original and its copy, two messages), two messages read.
    for word in shapes.EPOCH_WORDS[:2]:
        for group in ("chain", "session"):
            result = reader.search(SearchRequest(query=word, group=group))
            (card,) = result.results
            assert card.hit_count == card.session_hit_count == 2, (word, group)
            assert result.total_matches == 2, (word, group)
            originals = {ids[facts.word_ids[word]], ids[facts.word_ids[word]] + 1}
            assert {h.message_id for h in card.hits} == originals, (word, group)
        assert len(reader.matching_messages(shapes.S_EPOCHS, word)) == 2, word


def test_the_rewound_word_is_not_found(
    epoch_home: tuple[shapes.EpochFacts, StateReader, dict[int, int]],
) -> None:
    _, reader, _ = epoch_home
    result = reader.search(SearchRequest(query=shapes.EPOCH_REWOUND_WORD))
    assert result.results == [] and result.total_matches == 0


def test_a_new_compaction_is_counted_on_the_next_search(tmp_path: Path) -> None:
    """The epochs a search reads are kept between searches until the session changes."""
    with SessionStore(tmp_path / "home" / "state.db") as store:
        sid = store.create_session("cli", session_id="inplace", started_at=1000.0)
        store.append_messages(
            sid,
            [
                NewMessage("user", "the marmot plan", timestamp=1001.0),
                NewMessage("assistant", "noted", timestamp=1002.0),
            ],
        )
        store.compact_in_place(sid, "so far: the plan", at=1003.0)
        reader = StateReader(HermesHome(tmp_path / "home"))
        (hit,) = reader.search(SearchRequest(query="marmot")).results[0].hits
        assert hit.compaction == (1, 1)
        store.append_messages(sid, [NewMessage("user", "more", timestamp=1004.0)])
        store.compact_in_place(sid, "so far: more", at=1005.0)
        (card,) = reader.search(SearchRequest(query="marmot")).results
        assert [h.compaction for h in card.hits] == [(1, 2)]
        assert card.hit_count == 1  # the original, its copy and the copy's copy: one message


# -- profiles (issue 17): every profile searched at once, or one alone ----------------------


@pytest.fixture
def profiles_reader(tmp_path: Path) -> tuple[shapes.ProfilesFacts, StateReader]:
    return archived.profiles_reader(tmp_path)


def test_every_result_names_its_profile_and_all_counts_them(
    profiles_reader: tuple[shapes.ProfilesFacts, StateReader],
) -> None:
    facts, reader = profiles_reader
    for name, word in facts.words.items():
        result = reader.search(SearchRequest(query=word, sources=ALL_SOURCES))
        assert [(r.session_id, r.profile) for r in result.results] == [
            (f"{'' if name == 'default' else name + ':'}{facts.said_in[name]}", name)
        ]
        assert result.by_profile == ((name, 1),)
        assert result.to_json()["results"][0]["profile"] == name
    # "job" is in both profiles' cron session: one card each, the same source id apart.
    both = reader.search(SearchRequest(query="job", group="session", sources=("cron",)))
    assert {(r.session_id, r.profile) for r in both.results} == {
        (shapes.S_CRON, "default"),
        (f"legacy:{shapes.S_CRON}", "legacy"),
    }
    assert dict(both.by_profile) == {"default": 1, "legacy": 1}
    assert dict(both.to_json()["by_profile"]) == {"default": 1, "legacy": 1}
    # The empty query lists every profile's sessions (it counts none per profile).
    recent = reader.search(SearchRequest(sources=ALL_SOURCES, group="session"))
    assert {r.profile for r in recent.results} == {"default", "legacy"}
    assert recent.by_profile == ()
    # One profile's reader names its profile on every result, and counts nothing by profile.
    legacy = reader.scoped("legacy").search(SearchRequest(query="job", sources=("cron",)))
    assert [r.profile for r in legacy.results] == ["legacy"] and legacy.by_profile == ()


def test_a_scoped_search_learns_nothing_of_another_profiles_matches(
    profiles_reader: tuple[shapes.ProfilesFacts, StateReader], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The FTS indexes span every profile: a window counted there would say that another
    profile has the word (bounded, "search older", a match count) with no result shown."""
    facts, reader = profiles_reader
    for window in ("RANK_WINDOW", "SORT_WINDOW"):
        monkeypatch.setattr(search_routes, window, 1)
    legacy = reader.scoped("legacy")

    def answer(word: str, sort: str) -> dict[str, object]:
        found = legacy.search(SearchRequest(query=word, sort=sort, sources=ALL_SOURCES))
        shown = found.to_json()
        return {k: v for k, v in shown.items() if k not in ("query", "normalized", "took_ms")}

    for sort in ("relevance", "newest", "oldest"):
        # The other profile's word reads exactly as a word no profile ever said.
        found = answer(facts.words["default"], sort)
        assert found == answer("zyzzogeton", sort), sort
        assert (found["results"], found["total_matches"], found["bounded"]) == ([], 0, False)
        # Its own word, with the window of one: the window counts its own rows only.
        own = legacy.search(
            SearchRequest(query=facts.words["legacy"], sort=sort, sources=ALL_SOURCES)
        )
        assert own.bounded and own.total_matches == 2, sort
        assert {r.profile for r in own.results} == {"legacy"}, sort


# -- Hermes v31: one message is one message_uid (issue 24) -----------------------------------


@pytest.fixture(scope="module")
def v31_home(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[hv.V31Facts, StateReader, dict[int, int]]:
    facts = hv.build_v31_home(tmp_path_factory.mktemp("v31") / "home")
    reader = archived_reader(facts.root)
    with reader.snapshot() as snap:
        ids = {int(r[1]): r[0] for r in snap.conn.execute("SELECT id, src_id FROM messages")}
    return facts, reader, ids


def test_a_v31_marker_counts_once_per_message_in_the_epoch_it_was_said_in(
    v31_home: tuple[hv.V31Facts, StateReader, dict[int, int]],
) -> None:
    """Head copies, superseded tail originals and their live copies are each one message:
    every count says so, and every hit carries the compaction it came before."""
    facts, reader, ids = v31_home
    compactions = len(facts.compactions[facts.long_session])
    for marker in facts.markers.values():
        if marker.session != facts.long_session or marker.word == hv.UNDO_MARKER:
            continue
        expected = (marker.epoch, compactions) if marker.epoch <= compactions else None
        for group in ("chain", "session"):
            result = reader.search(SearchRequest(query=marker.word, group=group))
            (card,) = result.results
            assert card.hit_count == result.total_matches == marker.messages, (marker, group)
            assert [h.compaction for h in card.hits] == [expected] * marker.messages, marker
            assert {h.message_id for h in card.hits} <= {ids[r] for r in marker.rows}
        said = reader.matching_messages(facts.long_session, marker.word)
        assert len(said) == marker.messages, marker.word
    assert facts.markers[hv.HEAD_MARKER].messages == 2  # said twice in the head
    assert facts.markers[hv.TAIL_MARKER].messages == 1  # an original and its copies


def test_a_v31_turn_taken_back_is_not_found(
    v31_home: tuple[hv.V31Facts, StateReader, dict[int, int]],
) -> None:
    _, reader, _ = v31_home
    result = reader.search(SearchRequest(query=hv.UNDO_MARKER))
    assert result.results == [] and result.total_matches == 0


def test_a_rotation_child_s_head_copy_is_the_message_its_root_said(
    v31_home: tuple[hv.V31Facts, StateReader, dict[int, int]],
) -> None:
    """Every child of the rotation chain opens with the root's first rows (same uid):
    one message, counted and shown once, in the root, in either grouping."""
    facts, reader, ids = v31_home
    marker = facts.markers[hv.ROTATION_MARKER]
    assert marker.messages == 1 and len(marker.rows) > 1
    for group in ("chain", "session"):
        result = reader.search(SearchRequest(query=marker.word, group=group))
        (card,) = result.results
        (hit,) = card.hits
        assert result.total_matches == card.hit_count == 1, group
        assert (hit.session_id, hit.message_id) == (facts.rotation[0], ids[marker.rows[0]])


def test_names_and_the_recent_browse_read_an_index_not_the_sessions_rows(
    readers: dict[str, StateReader],
) -> None:
    """A session row carries its system prompt: matching names (every search) and the
    recent browse scan the covering index of names and starts (migration 9) instead."""
    reader = readers["current_views"]
    with reader.snapshot() as snap:
        ran: list[str] = []
        snap.conn.set_trace_callback(ran.append)
        try:
            for query in ("pool", ""):
                search_sessions(
                    snap.conn, snap.state, SearchRequest(query=query), load_lineage(snap.conn)
                )
        finally:
            snap.conn.set_trace_callback(None)
        ordered = [sql for sql in ran if "FROM sessions s WHERE" in sql and "started_at" in sql]
        assert len(ordered) >= 2, ran
        for sql in ordered:
            plan = " ".join(r[3] for r in snap.conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
            assert "COVERING INDEX idx_sessions_names" in plan, (sql, plan)
