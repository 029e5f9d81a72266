"""The query parser: syntax, repairs, and every output run against real FTS5 tables."""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dashboard.errors import QuerySyntaxError, ValidationError
from dashboard.search.query import (
    NOTHING_TO_SEARCH,
    ONLY_EXCLUSIONS,
    ParsedQuery,
    Term,
    highlight_terms,
    parse_query,
)
from dashboard.search.related import terms_query

JSON_ROW = "\x00json:" + json.dumps(
    [{"type": "text", "text": "Kubernetes rollout restarted 部署完成"}], ensure_ascii=False
)
# rowid -> (content, tool_name)
ROWS: dict[int, tuple[str, str | None]] = {
    1: ("docker compose up failed", None),
    2: ("docker swarm init", None),
    3: ("connection refused by the redis pool", None),
    4: ("the redis server keeps a large connection pool", None),
    5: ("edit my-app.config.ts then restart", None),
    6: ("deployment finished", None),
    7: ("数据库连接池满了，请检查配置", None),
    8: ("我们明天部署到生产环境", None),
    9: (JSON_ROW, None),
    10: ("learning c++ and ssh user@host", None),
    11: ('He said "hello world" twice', None),
    12: ("podman pod create", "terminal"),
    13: ("Ärger mit dem Server", None),
    # Symbols the word index drops: a lone "c", C#, .NET and node.js (issue 13, item 13).
    14: ("the C drive is full", None),
    15: ("ported it to C# last year", None),
    16: ("an ASP.NET app on the .NET runtime", None),
    17: ("install node.js 20", None),
    18: ("a node js tutorial", None),
}
COLUMNS = ["content", "tool_name"]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    """An on-disk file with a unicode61 table, a trigram table and a plain table."""
    conn = sqlite3.connect(tmp_path_factory.mktemp("query") / "fts.db")
    conn.executescript(
        """
        CREATE VIRTUAL TABLE words USING fts5(content);
        CREATE VIRTUAL TABLE grams USING fts5(content, tokenize='trigram');
        CREATE TABLE plain (id INTEGER PRIMARY KEY, content TEXT, tool_name TEXT);
        """
    )
    for rowid, (content, tool) in ROWS.items():
        conn.execute("INSERT INTO words(rowid, content) VALUES (?, ?)", (rowid, content))
        conn.execute("INSERT INTO grams(rowid, content) VALUES (?, ?)", (rowid, content))
        conn.execute("INSERT INTO plain VALUES (?, ?, ?)", (rowid, content, tool))
    conn.commit()
    yield conn
    conn.close()


def match(conn: sqlite3.Connection, table: str, expression: str) -> set[int]:
    sql = f"SELECT rowid FROM {table} WHERE {table} MATCH ?"
    return {row[0] for row in conn.execute(sql, (expression,))}


def scan(conn: sqlite3.Connection, query: ParsedQuery) -> set[int]:
    where, params = query.scan_sql(COLUMNS)
    return {row[0] for row in conn.execute(f"SELECT id FROM plain WHERE {where}", params)}


# --- syntax and repairs: (typed, display, unicode61, trigram, repairs) ------------------

NEAR_NOTE = "A NEAR distance is a whole number from 0 to 1000; used 10."
SYNTAX = [
    ("docker", "docker", '"docker"', '"docker"', ()),
    ("docker compose", "docker compose", '"docker" AND "compose"', '"docker" AND "compose"', ()),
    (
        '"connection refused"',
        '"connection refused"',
        '"connection refused"',
        '"connection refused"',
        (),
    ),
    ("deploy*", "deploy*", '"deploy"*', '"deploy"', ()),
    ('"redis pool"*', '"redis pool"*', '"redis pool"*', '"redis pool"', ()),
    ("docker OR podman", "docker OR podman", '"docker" OR "podman"', '"docker" OR "podman"', ()),
    ("docker or podman", "docker or podman", '"docker" AND "or" AND "podman"', None, ()),
    (
        "docker AND compose",
        "docker compose",
        '"docker" AND "compose"',
        '"docker" AND "compose"',
        (),
    ),
    (
        "docker NOT compose",
        "docker NOT compose",
        '"docker" NOT "compose"',
        '"docker" NOT "compose"',
        (),
    ),
    (
        "docker NOT compose swarm",
        "docker swarm NOT compose",
        '"docker" AND "swarm" NOT "compose"',
        '"docker" AND "swarm" NOT "compose"',
        (),
    ),
    (
        "docker (compose OR swarm)",
        "docker AND (compose OR swarm)",
        '"docker" AND ("compose" OR "swarm")',
        '"docker" AND ("compose" OR "swarm")',
        (),
    ),
    (
        "(docker OR podman) NOT (compose swarm)",
        "(docker OR podman) NOT (compose swarm)",
        '("docker" OR "podman") NOT ("compose" AND "swarm")',
        '("docker" OR "podman") NOT ("compose" AND "swarm")',
        (),
    ),
    (
        "NEAR(redis pool, 3)",
        "NEAR(redis pool, 3)",
        'NEAR("redis" "pool", 3)',
        '"redis" AND "pool"',
        (),
    ),
    (
        "NEAR(redis pool)",
        "NEAR(redis pool, 10)",
        'NEAR("redis" "pool", 10)',
        '"redis" AND "pool"',
        (),
    ),
    ("NEAR(redis)", "redis", '"redis"', '"redis"', ()),
    ('"foo""bar"', '"foo""bar"', '"foo""bar"', '"foo""bar"', ()),
    ("“smart quotes”", '"smart quotes"', '"smart quotes"', '"smart quotes"', ()),
    ("数据库连接池", "数据库连接池", '"数据库连接池"', '"数据库连接池"', ()),
    ("部署", "部署", '"部署"', None, ()),
    (
        "怎么部署，数据库？",
        "怎么部署 数据库",
        '"怎么部署" AND "数据库"',
        '"怎么部署" AND "数据库"',
        (),
    ),
    (
        "why was it refused?",
        "why was it refused",
        '"why" AND "was" AND "it" AND "refused"',
        None,
        (),
    ),
    ("hello, world", "hello world", '"hello" AND "world"', '"hello" AND "world"', ()),
    ("docker Docker docker", "docker", '"docker"', '"docker"', ()),
    ("near(a b)", "near a b", '"near" AND "a" AND "b"', None, ()),
    ('"AND" "NEAR"', '"AND" "NEAR"', '"AND" AND "NEAR"', '"AND" AND "NEAR"', ()),
    # repairs
    (
        '"connection refused',
        '"connection refused"',
        '"connection refused"',
        '"connection refused"',
        ("Closed an unbalanced quote.",),
    ),
    (
        "(docker (compose",
        "docker compose",
        '"docker" AND "compose"',
        '"docker" AND "compose"',
        ("Closed an unbalanced parenthesis.",),
    ),
    ("docker))", "docker", '"docker"', '"docker"', ("Removed an unmatched closing parenthesis.",)),
    ("docker ()", "docker", '"docker"', '"docker"', ("Removed empty parentheses.",)),
    ("docker AND", "docker", '"docker"', '"docker"', ("Removed a dangling AND.",)),
    ("AND docker", "docker", '"docker"', '"docker"', ("Removed a dangling AND.",)),
    (
        "docker AND AND swarm",
        "docker swarm",
        '"docker" AND "swarm"',
        '"docker" AND "swarm"',
        ("Removed a dangling AND.",),
    ),
    ("OR docker", "docker", '"docker"', '"docker"', ("Removed a dangling OR.",)),
    ("docker OR", "docker", '"docker"', '"docker"', ("Removed a dangling OR.",)),
    ("docker NOT", "docker", '"docker"', '"docker"', ("Removed a dangling NOT.",)),
    (
        "docker AND OR swarm",
        "docker OR swarm",
        '"docker" OR "swarm"',
        '"docker" OR "swarm"',
        ("Removed a dangling AND.",),
    ),
    (
        "NOT compose docker",
        "docker NOT compose",
        '"docker" NOT "compose"',
        '"docker" NOT "compose"',
        ("Moved NOT compose after the terms it excludes from.",),
    ),
    (
        "docker OR NOT compose",
        "docker",
        '"docker"',
        '"docker"',
        ("Dropped NOT compose: beside OR it has nothing to exclude from.",),
    ),
    (
        "my-app.config.ts",
        '"my-app.config.ts"',
        '"my-app.config.ts"',
        '"my-app.config.ts"',
        ("Searched my-app.config.ts as text: punctuation in a word is not query syntax.",),
    ),
    (
        "c++ user@host a:b ^x",
        '"c++" "user@host" "a:b" "^x"',
        '"c++" AND "user@host" AND "a:b" AND "^x"',
        None,
        ("Searched c++, user@host, a:b, … as text: punctuation in a word is not query syntax.",),
    ),
    (
        "docker {} + - ***",
        "docker",
        '"docker"',
        '"docker"',
        ("Ignored {}, +, -, …: no letters or digits to search for.",),
    ),
    (
        'docker "..."',
        "docker",
        '"docker"',
        '"docker"',
        ('Ignored "...": no letters or digits to search for.',),
    ),
    (
        "dock\x00er\u200b \x07compose",
        "docker compose",
        '"docker" AND "compose"',
        '"docker" AND "compose"',
        ("Removed invisible control characters.",),
    ),
    (
        "NEAR(redis pool, x)",
        "NEAR(redis pool, 10)",
        'NEAR("redis" "pool", 10)',
        '"redis" AND "pool"',
        (NEAR_NOTE,),
    ),
    (
        "NEAR(redis pool,)",
        "NEAR(redis pool, 10)",
        'NEAR("redis" "pool", 10)',
        '"redis" AND "pool"',
        (NEAR_NOTE,),
    ),
    (
        "NEAR(redis pool, 99999)",
        "NEAR(redis pool, 10)",
        'NEAR("redis" "pool", 10)',
        '"redis" AND "pool"',
        (NEAR_NOTE,),
    ),
    (
        "NEAR(redis OR (pool), 3)",
        "NEAR(redis pool, 3)",
        'NEAR("redis" "pool", 3)',
        '"redis" AND "pool"',
        ("Ignored operators and parentheses inside NEAR(...).",),
    ),
    ("docker NEAR()", "docker", '"docker"', '"docker"', ("Removed an empty NEAR().",)),
]


@pytest.mark.parametrize(("typed", "display", "unicode61", "trigram", "repairs"), SYNTAX)
def test_syntax_and_repairs(
    db: sqlite3.Connection,
    typed: str,
    display: str,
    unicode61: str,
    trigram: str | None,
    repairs: tuple[str, ...],
) -> None:
    query = parse_query(typed)
    assert query.display == display
    assert query.fts_match("unicode61") == unicode61
    assert query.fts_match("trigram") == trigram
    assert query.repairs == repairs
    # Every generated expression is valid FTS5, and display means what unicode61 means.
    assert match(db, "words", display) == match(db, "words", unicode61)
    if trigram is not None:
        match(db, "grams", trigram)
    scan(db, query)
    # display is canonical: read back, it parses to itself with nothing to repair.
    again = parse_query(display)
    assert (again.display, again.repairs) == (display, ())


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("AND OR ()", NOTHING_TO_SEARCH),
        ('"""', NOTHING_TO_SEARCH),
        ('""', NOTHING_TO_SEARCH),
        ("***", NOTHING_TO_SEARCH),
        ("NOT", NOTHING_TO_SEARCH),
        ("NEAR()", NOTHING_TO_SEARCH),
        (", , ;", NOTHING_TO_SEARCH),
        ("\x00\x01 AND", NOTHING_TO_SEARCH),
        ("NOT docker", ONLY_EXCLUSIONS),
        ("NOT docker NOT compose", ONLY_EXCLUSIONS),
        ("(NOT docker) OR NOT compose", ONLY_EXCLUSIONS),
    ],
)
def test_unsearchable_input_raises(typed: str, message: str) -> None:
    with pytest.raises(QuerySyntaxError) as caught:
        parse_query(typed)
    assert str(caught.value) == message
    assert isinstance(caught.value, ValidationError)


@pytest.mark.parametrize("typed", ["", "   ", "\n\t"])
def test_blank_input_is_empty_not_an_error(typed: str) -> None:
    query = parse_query(typed)
    assert query.empty
    assert (query.display, query.positive, query.repairs) == ("", (), ())
    assert query.fts_match("unicode61") is None
    assert query.fts_match("trigram") is None
    assert query.highlight_terms() == []
    with pytest.raises(ValueError):
        query.scan_sql(COLUMNS)


def test_raw_is_the_trimmed_input() -> None:
    query = parse_query("  NOT compose docker  ")
    assert query.raw == "NOT compose docker"
    assert not query.empty


# --- what each query finds in real tables -----------------------------------------------

# (typed, rows via unicode61, rows via trigram or None when trigram cannot answer, scan rows)
FINDS = [
    ("docker", {1, 2}, {1, 2}, {1, 2}),
    ("my-app.config.ts", {5}, {5}, {5}),
    ("deploy*", {6}, {6}, {6}),
    ("docker NOT compose", {2}, {2}, {2}),
    ("NOT compose docker", {2}, {2}, {2}),
    ("docker OR podman", {1, 2, 12}, {1, 2, 12}, {1, 2, 12}),
    ("NEAR(redis pool, 3)", {3}, {3, 4}, {3, 4}),
    ("NEAR(redis pool, 10)", {3, 4}, {3, 4}, {3, 4}),
    ('"connection refused"', {3}, {3}, {3}),
    ("connection refused", {3}, {3}, {3}),
    ('"refused connection"', set(), set(), set()),
    # unicode61 reads "c++" and "c#" as the word "c": the router must not send them there.
    ("c++", {10, 14, 15}, {10}, {10}),
    ("c#", {10, 14, 15}, None, {15}),
    (".NET", {16}, {16}, {16}),
    ("node.js", {17, 18}, {17}, {17}),
    ("docker -compose", {2}, {2}, {2}),
    ('docker -"compose up"', {2}, {2}, {2}),
    ("user@host", {10}, {10}, {10}),
    ('"hello world"', {11}, {11}, {11}),
    ("数据库连接池", set(), {7}, {7}),
    ("数据库", set(), {7}, {7}),
    ("部署", set(), None, {8, 9}),
    ("kubernetes", {9}, set(), {9}),  # the trigram tokenizer stops at the NUL
    ("Ärger", {13}, {13}, {13}),
    ("terminal", set(), set(), {12}),  # only the scan looks at tool_name
    ("(docker OR podman) NOT (compose OR pod)", {2}, {2}, {2}),
]


@pytest.mark.parametrize(("typed", "words", "grams", "scanned"), FINDS)
def test_finds_expected_rows(
    db: sqlite3.Connection,
    typed: str,
    words: set[int],
    grams: set[int] | None,
    scanned: set[int],
) -> None:
    query = parse_query(typed)
    assert match(db, "words", query.fts_match("unicode61") or "") == words
    trigram = query.fts_match("trigram")
    assert (None if trigram is None else match(db, "grams", trigram)) == grams
    assert scan(db, query) == scanned


@pytest.mark.parametrize(
    ("typed", "display"),
    [
        ("docker -compose", "docker NOT compose"),
        ('docker -"compose up"', 'docker NOT "compose up"'),
        ("docker -(compose OR swarm)", "docker NOT (compose OR swarm)"),
        ("docker - compose", "docker compose"),  # a lone dash is punctuation
        ("my-app.config.ts", '"my-app.config.ts"'),  # a dash inside a word is text
        ("docker --force", 'docker "--force"'),
        ("exit -1", 'exit "-1"'),  # a negative number, not an exclusion
    ],
)
def test_a_leading_dash_excludes(typed: str, display: str) -> None:
    assert parse_query(typed).display == display


def test_a_leading_dash_alone_is_only_an_exclusion() -> None:
    with pytest.raises(QuerySyntaxError, match="NOT only excludes"):
        parse_query("-compose")


@pytest.mark.parametrize(
    ("text", "symbols"),
    [
        ("C++", True),
        ("c#", True),
        (".NET", True),
        ("node.js", True),
        ("pg_stat", True),
        ("docker", False),
        ("connection refused", False),
        ("数据库", False),
        ("Ärger", False),
    ],
)
def test_terms_with_symbols(text: str, symbols: bool) -> None:
    assert Term(text, "word").has_symbols is symbols


@pytest.mark.parametrize(
    ("text", "edge"),
    [
        ("C++", True),
        ("c#", True),
        (".NET", True),
        ("--force", True),
        ("-1", True),
        ("node.js", False),
        ("pg_stat_activity", False),
        ("my-app.config.ts", False),
        ("docker-compose up", False),
        ("docker", False),
    ],
)
def test_symbols_the_word_index_loses(text: str, edge: bool) -> None:
    assert Term(text, "word").symbols_at_edge is edge


TITLES = {
    "s1": "Docker compose: worker can't reach postgres",
    "s2": "Docker swarm notes",
    "s3": None,
    "s4": "Podman pods",
}


@pytest.mark.parametrize(
    ("typed", "named"),
    [
        ("docker", {"s1", "s2"}),
        ("docker NOT compose", {"s2"}),
        ("docker -compose", {"s2"}),
        ("docker OR podman", {"s1", "s2", "s4"}),
        ("s3", {"s3"}),  # the exact session id
        ("s3 NOT docker", {"s3"}),
        ("podman NOT s4", set()),
        ("3", set()),  # an id is matched whole, not as a substring
    ],
)
def test_name_sql_reads_the_whole_query(typed: str, named: set[str]) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, title TEXT)")
    conn.executemany("INSERT INTO sessions VALUES (?, ?)", TITLES.items())
    where, params = parse_query(typed).name_sql("s.title", "s.id")
    found = {r[0] for r in conn.execute(f"SELECT s.id FROM sessions s WHERE {where}", params)}
    assert found == named


def test_scan_sql_shape() -> None:
    query = parse_query('Docker NOT "Compose Up" OR NEAR(redis pool)')
    sql, params = query.scan_sql(["m.content", "m.tool_name"])
    assert params == ["docker", "docker", "compose up", "compose up"] + ["redis"] * 2 + ["pool"] * 2
    assert sql.count("?") == len(params)
    assert "instr(lower(coalesce(m.tool_name, '')), ?) > 0" in sql
    assert "Docker" not in sql and "redis" not in sql  # user values are parameters only


def test_scan_lowercases_ascii_only_like_sqlite() -> None:
    # SQLite's lower() leaves Ä alone; a Python-lowered "ärger" would never match it.
    assert parse_query("ÄRGER").scan_sql(["c"])[1] == ["Ärger"]


def test_nul_prefixed_json_content(db: sqlite3.Connection) -> None:
    """Characterise SQLite on ``"\\x00json:"`` rows: instr reads past the NUL, LIKE does not."""

    def count(sql: str, *params: str) -> int:
        where = f"id = 9 AND {sql}"
        return db.execute(f"SELECT count(*) FROM plain WHERE {where}", params).fetchone()[0]

    assert count("instr(lower(coalesce(content, '')), ?) > 0", "kubernetes") == 1
    assert count("instr(lower(coalesce(content, '')), ?) > 0", "部署完成") == 1
    assert count("content LIKE ?", "%kubernetes%") == 0
    assert count("length(content) = 0") == 1  # text functions that stop at NUL see ""
    assert match(db, "words", '"kubernetes"') == {9}
    assert match(db, "grams", '"kubernetes"') == set()


def test_terms_and_flags() -> None:
    query = parse_query('deploy* "connection refused" NOT compose OR NEAR(redis pool)')
    assert query.positive == (
        Term("deploy", "prefix"),
        Term("connection refused", "phrase"),
        Term("redis", "word"),
        Term("pool", "word"),
    )
    assert query.negative == (Term("compose", "word"),)
    assert " OR " in query.display and "NEAR(" in query.display
    assert " OR " not in parse_query("docker").display
    with pytest.raises(ValueError):
        query.fts_match("porter")  # type: ignore[arg-type]


def test_highlight_terms_longest_first_without_case_duplicates() -> None:
    query = parse_query('pool "connection refused" Redis NOT docker redis deploy*')
    assert query.highlight_terms() == ["connection refused", "deploy", "Redis", "pool"]


@pytest.mark.parametrize(
    ("text", "cjk", "short"),
    [
        ("docker", False, False),
        ("部署", True, True),
        ("库", True, True),
        ("数据库连接池", True, False),
        ("docker部署", True, False),
        ("カタカナ", True, False),
        ("한국", True, True),
        ("Ärger", False, False),
    ],
)
def test_cjk_flags(text: str, cjk: bool, short: bool) -> None:
    term = Term(text, "word")
    assert (term.cjk, term.short_cjk) == (cjk, short)


# --- limits ----------------------------------------------------------------------------


def test_long_input_is_cut_at_a_word_boundary() -> None:
    query = parse_query("alpha beta gamma", max_chars=8)
    assert query.display == "alpha"
    assert query.repairs == ("Shortened the query to its first 8 characters.",)


def test_too_many_terms_keeps_the_first(db: sqlite3.Connection) -> None:
    typed = "(one two (three NEAR(four five six, 2) seven) eight OR nine"
    query = parse_query(typed, max_terms=5)
    assert [t.text for t in query.positive] == ["one", "two", "three", "four", "five"]
    assert query.display == "one two three NEAR(four five, 2)"
    assert "Searched the first 5 terms; ignored the rest." in query.repairs
    match(db, "words", query.fts_match("unicode61") or "")


def test_deep_nesting_is_flattened() -> None:
    query = parse_query("(" * 5000 + "docker" + ")" * 5000, max_chars=20_000)
    assert query.display == "docker"
    assert query.repairs == ("Flattened parentheses nested deeper than 8.",)


def test_ten_kilobytes_of_junk(db: sqlite3.Connection) -> None:
    rng = random.Random(1234)
    pieces = ['"', "(", ")", "*", ":", "^", "-", "\x00", "AND", "OR", "NOT", "NEAR(", ",", " "]
    pieces += ["docker", "部署", "数据库", "🎉", "c++", "x", "5"]
    junk = "".join(rng.choice(pieces) for _ in range(8000))[:10_240]
    assert len(junk) == 10_240
    try:
        query = parse_query(junk)
    except QuerySyntaxError:
        return
    assert "Shortened the query to its first 500 characters." in query.repairs
    assert len(query.positive) + len(query.negative) <= 32
    assert_runs(db, query)


# --- property: anything accepted runs ----------------------------------------------------

OPERATOR_WORDS = ["AND", "OR", "NOT", "NEAR", "NEAR(", "or", "and", "*", "^", "-", ",", ":"]
WORDS = ["docker", "redis", "pool", "部署", "数据库连接池", "🎉", "my-app.ts", "5", "x", '""']
ALPHABET = '"()*:^-+{},.?\x00\x1a\u200b \t\n\u201c\u201dab部署数据库🎉é_09'


def assert_runs(db: sqlite3.Connection, query: ParsedQuery) -> None:
    unicode61 = query.fts_match("unicode61")
    assert unicode61 is not None and query.positive
    assert match(db, "words", query.display) == match(db, "words", unicode61)
    trigram = query.fts_match("trigram")
    if trigram is not None:
        match(db, "grams", trigram)
    scan(db, query)


queries = st.one_of(
    st.text(max_size=120),
    st.text(alphabet=ALPHABET, max_size=60),
    st.lists(st.sampled_from(OPERATOR_WORDS + WORDS + list('()"')), max_size=16).map(" ".join),
    st.lists(st.sampled_from(OPERATOR_WORDS + WORDS + list('()"')), max_size=16).map("".join),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(typed=queries)
def test_anything_accepted_is_valid_fts5(db: sqlite3.Connection, typed: str) -> None:
    try:
        query = parse_query(typed)
    except QuerySyntaxError:
        return
    if query.empty:
        assert not typed.strip() or query.repairs
        return
    assert_runs(db, query)
    # display is canonical: read back, it parses to itself with nothing to repair.
    again = parse_query(query.display, max_chars=10 * len(query.display))
    assert (again.display, again.repairs) == (query.display, ())


# -- a message as a query --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "What did we decide about the redis caching strategy last week?",
            '"decide" OR "redis" OR "caching" OR "strategy" OR "week"',
        ),
        ("上次我们讨论的redis缓存策略是什么", '"redis" OR "缓存策略"'),
        ('Fix "the" (NOT) AND OR NEAR(x) bug*', '"fix" OR "near" OR "bug"'),
        ("ok, and then?", ""),
        ("", ""),
        ("Ärger with 2026 and 42", '"Ärger"'),  # case is the index's business
    ],
)
def test_terms_query(message: str, expected: str) -> None:
    assert terms_query(message) == expected
    if expected:
        assert parse_query(expected).display == expected  # nothing read as syntax


def test_terms_query_keeps_the_longest_terms() -> None:
    words = "alpha bravo charlie deltadelta echoechoecho foxtrot golfgolf hotel indiaindia juliet"
    chosen = terms_query(words, max_terms=4)
    assert chosen == '"deltadelta" OR "echoechoecho" OR "golfgolf" OR "indiaindia"'


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_any_message_becomes_a_safe_query(message: str) -> None:
    query = terms_query(message)
    if not query:
        return
    parsed = parse_query(query)  # never a syntax error, whatever the message held
    terms = query.split(" OR ")
    assert 1 <= len(terms) <= 8 and len(parsed.positive) == len(terms)
    assert all(t.startswith('"') and t.endswith('"') and len(t) >= 5 for t in terms)


def test_highlight_terms_are_the_parsers_positive_terms() -> None:
    assert sorted(highlight_terms('pool AND "read replica" OR time*')) == [
        "pool",
        "read replica",
        "time",
    ]
    assert sorted(highlight_terms("NEAR(pool worker, 5)")) == ["pool", "worker"]
    assert sorted(highlight_terms("a NOT b c")) == ["a", "c"]
    assert sorted(highlight_terms('unbalanced "quote here')) == ["quote here", "unbalanced"]
    assert sorted(highlight_terms("and or not")) == ["and", "not", "or"]  # lower case: words
    assert highlight_terms("数据库 部署 部署") == ["数据库", "部署"]
    assert highlight_terms('"" * ( )') == []  # unusable: nothing to mark, no error
    assert highlight_terms("NOT only") == []
