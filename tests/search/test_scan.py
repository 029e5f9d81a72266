"""A two-character term's lookup through the trigram index's pieces (scan.pair_rows)
answers exactly what the scan (scan.scan_rows, unbounded) answers: the same rows in the
same order, the same window and the same place to continue, on texts built to reach
every case the pieces alone cannot see."""

from __future__ import annotations

import json
import random
import sqlite3
from dataclasses import replace
from itertools import product

import pytest

from dashboard.errors import QuerySyntaxError
from dashboard.hermes.content import JSON_PREFIX
from dashboard.hermes.home import HermesHome
from dashboard.reader.reader import StateReader
from dashboard.search import scan
from dashboard.search.filters import request_filters
from dashboard.search.query import parse_query
from dashboard.search.row_map import RowMapCache
from dashboard.search.rows import Rows
from dashboard.search.sessions import SearchRequest
from dashboard.store.schema import CJK_TAIL_INDEX, CJK_TAIL_ROWS, PAIR_TAIL
from dashboard.text import CJK, CJK_RANGES
from tests.support import hermes_shapes as shapes
from tests.support.archived import archive_home

EVERY_SOURCE = ("cli", "telegram", "discord", "cron", "subagent", "api", "web", "slack")
# Two CJK characters that pair up, two more, an ASCII letter in both cases, the
# punctuation and space Chinese text ends with: every pair of them is a query.
ALPHABET = "部署在了aA。 "
PAIRS = ["部署", "署部", "在了", "了部", "a部", "A署", "部在"]


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 7)))


def _message(rng: random.Random) -> dict[str, object]:
    """A message holding random text where search reads it: plain content (often ending
    in a CJK character, so with no piece starting at its last pair), structured content
    (not in the trigram index at all), a tool call's arguments, a role to filter on."""
    kind = rng.randrange(6)
    role = rng.choice(("user", "assistant", "tool"))
    if kind == 0:
        parts = [{"type": "text", "text": _text(rng)}]
        return {"role": role, "content": JSON_PREFIX + json.dumps(parts, ensure_ascii=False)}
    if kind == 1:
        call = [{"id": "c", "function": {"name": "terminal", "arguments": _text(rng)}}]
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": json.dumps(call, ensure_ascii=False),
        }
    return {"role": role, "content": _text(rng)}


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> StateReader:
    root = tmp_path_factory.mktemp("pairs")
    home = root / "home"
    shapes.build_current_views(home / "state.db")
    rng = random.Random(26)
    for n, session in enumerate((shapes.S_ROOT, shapes.S_TELEGRAM) * 20):
        turn = [_message(rng) for _ in range(8)]
        shapes.append_messages(home / "state.db", session, turn, 2e9 + n)
    return StateReader(HermesHome(home), path=archive_home(home, root / "archive.db"))


def _requests() -> list[SearchRequest]:
    queries = [*PAIRS, "部署 在了", "部署 NOT 了部", '"部署在"  部署', "部署 aA"]
    out = []
    for query in queries:
        base = SearchRequest(query=query, sources=EVERY_SOURCE)
        out += [
            base,
            replace(base, sort="newest"),
            replace(base, sort="oldest"),
            replace(base, roles=("user",)),
            replace(base, sources=("cli",)),
        ]
    return out


def _plain(rows: Rows) -> tuple[object, ...]:
    # A cut window's total is "just past the window" for the lookup (an index's read, as
    # Rows says), the window for a scan, whose bound is the messages read.
    total = None if rows.bounded else rows.total
    return ([(r[0], r[1], bool(r[4])) for r in rows.rows], total, rows.bounded, rows.cutoff)


@pytest.mark.parametrize("window", [5_000, 7])
def test_a_pairs_lookup_is_the_unbounded_scan(
    reader: StateReader, monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    """Every request, with a window that holds every match and one that cuts them (and
    the page after the cut), with and without the row map."""
    monkeypatch.setattr(scan, "SCAN_ROWS", 10**9)
    monkeypatch.setattr(scan, "SCAN_WINDOW", window)
    found = cut = 0
    cache = RowMapCache()
    with reader.snapshot() as snap:
        conn = snap.conn
        row_map = cache.get(conn, snap.state)
        for request in _requests():
            parsed = parse_query(request.query)
            assert scan.pair_anchor(parsed) is not None, request.query
            filters = request_filters(request)
            expected = scan.scan_rows(conn, parsed, request, filters)
            for page in range(3):
                for mapped in (None, row_map):
                    got = scan.pair_rows(conn, parsed, request, filters, row_map=mapped)
                    assert _plain(got) == _plain(expected), (request, page, mapped is None)
                found += bool(expected.rows)
                if not expected.bounded:
                    break
                cut += 1
                side = "newer_than" if request.sort == "oldest" else "older_than"
                request = replace(request, **{side: expected.cutoff})
                expected = scan.scan_rows(conn, parsed, request, filters)
    assert found > 40 and (cut > 10 if window == 7 else cut == 0)


def test_the_cases_the_pieces_miss_are_in_the_texts(reader: StateReader) -> None:
    """The comparison above is worth something only if the texts hold each case the
    pieces of the trigram index cannot answer alone."""
    with reader.snapshot() as snap:
        conn = snap.conn

        def count(sql: str, *params: object) -> int:
            return conn.execute(
                f"SELECT count(*) FROM main.messages WHERE {sql}", params
            ).fetchone()[0]

        assert count(f"{PAIR_TAIL} = '部署' AND {CJK_TAIL_ROWS}") > 0  # ends with the pair
        assert count(f"{PAIR_TAIL} = 'A署' AND {CJK_TAIL_ROWS}") > 0  # upper case at the end
        assert count("content >= char(0) AND content < char(1) AND instr(content, '部署')") > 0
        assert count("instr(tool_calls, '部署')") > 0


@pytest.mark.parametrize("sort", ["relevance", "oldest"])
@pytest.mark.parametrize("edge", [None, 3])
@pytest.mark.parametrize("older_than", [None, 10])
def test_the_rows_past_the_pieces_are_read_from_their_indexes(
    reader: StateReader, sort: str, edge: int | None, older_than: int | None
) -> None:
    """Each arm reads its partial index, whatever bounds it is given (were a condition to
    drift from its index's, or SQLite to prefer the id range, every pair's lookup would
    read the text of every message in it)."""
    request = SearchRequest(query="部署", sort=sort, older_than=older_than)
    with reader.snapshot() as snap:
        plan = snap.conn.execute(
            "EXPLAIN QUERY PLAN " + scan.ends_sql(2, request, edge), ("部署", "部署")
        ).fetchall()
    steps = [step[-1] for step in plan]
    assert any(CJK_TAIL_INDEX in step for step in steps), steps
    assert any("idx_messages_structured" in step for step in steps), steps


def test_a_pair_with_more_pieces_than_the_bound_is_scanned(
    reader: StateReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scan, "PAIR_PIECES", 1)
    request = SearchRequest(query="部署", sources=EVERY_SOURCE)
    parsed = parse_query(request.query)
    with reader.snapshot() as snap:
        assert scan.pair_pieces(snap.conn, "部署") is None
        got = scan.pair_rows(snap.conn, parsed, request, request_filters(request))
    assert got.scanned and got.rows


def test_the_vocabulary_table_is_made_on_a_read_only_connection(reader: StateReader) -> None:
    with reader.snapshot() as snap:
        assert scan.pair_pieces(snap.conn, "部署")
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            snap.conn.execute("CREATE TEMP TABLE t (x)")  # still query_only afterwards


def test_the_tail_index_covers_every_cjk_character() -> None:
    """schema.CJK_TAIL_ROWS and the parser's CJK pattern read one list of ranges."""
    conn = sqlite3.connect(":memory:")
    for low, high in CJK_RANGES:
        for point in (low, high, (low + high) // 2):
            ch = chr(point)
            assert CJK.match(ch)
            sql = CJK_TAIL_ROWS.replace("content", "?")
            assert conn.execute(f"SELECT {sql}", (ch,) * sql.count("?")).fetchone()[0] == 1
    for ch in ("a", "。", "é", "\U0001f600"):
        sql = CJK_TAIL_ROWS.replace("content", "?")
        assert conn.execute(f"SELECT {sql}", (ch,) * sql.count("?")).fetchone()[0] == 0


def test_every_pair_of_the_alphabet_is_answered_as_the_scan_does(
    reader: StateReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All 64 pairs, one request each (a pair the anchor refuses is not asked)."""
    monkeypatch.setattr(scan, "SCAN_ROWS", 10**9)
    asked = 0
    with reader.snapshot() as snap:
        for a, b in product(ALPHABET.strip(), repeat=2):
            request = SearchRequest(query=a + b, sources=EVERY_SOURCE)
            try:
                parsed = parse_query(request.query)
            except QuerySyntaxError:  # punctuation only
                continue
            if scan.pair_anchor(parsed) is None:
                continue
            filters = request_filters(request)
            expected = scan.scan_rows(snap.conn, parsed, request, filters)
            got = scan.pair_rows(snap.conn, parsed, request, filters)
            assert _plain(got) == _plain(expected), a + b
            asked += 1
    assert asked >= 20
