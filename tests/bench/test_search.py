"""bench/search.py's df mix and verdict: drawn from a real demo home's word index."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.search import (
    DF_BANDS,
    DF_CLASSES,
    OR_TERMS,
    MixQuery,
    Timing,
    adjacent_pair,
    df_bands,
    draw_df_mix,
    matching,
    prefix_of,
    slow_queries,
    verdict,
    vocabulary,
)
from dashboard.demo.build import build_demo_home

MESSAGES = 6_000


@pytest.fixture(scope="module")
def home_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("df-mix") / "home"
    build_demo_home(home, sessions=60, messages=MESSAGES, seed=7, anchor_day="2026-11-30")
    return home / "state.db"


@pytest.fixture
def readonly(home_db: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(f"file:{home_db}?mode=ro", uri=True)
    yield conn
    conn.close()


def test_adjacent_pair_takes_the_next_word_else_the_previous() -> None:
    assert adjacent_pair("Then the Pool size grew", "pool") == "pool size"
    assert adjacent_pair("raise the pool", "pool") == "the pool"
    assert adjacent_pair("pool_size=5", "pool") == "pool size"  # _ separates, as in unicode61
    assert adjacent_pair("pool 42 部署", "pool") is None  # no plain word beside it
    assert adjacent_pair("42 pool, then pool again", "pool") == "pool then"
    assert adjacent_pair("the pools", "pool") is None  # a word, not a substring


def test_df_bands_keep_plain_words_by_their_share_of_messages() -> None:
    vocab = {
        "zstd": 1,  # in one message: a typo's frequency, not a rare word to draw
        "restic": 30,
        "ab": 30,  # rare and mid words have 3+ letters
        "x86": 30,
        "部署": 30,
        "pool": 200,  # between the rare and the mid band
        "redis": 2_500,
        "the": 40_000,
        "a": 15_000,  # common words may be short
    }
    bands = {"rare": ["restic"], "mid": ["redis"], "common": ["a", "the"]}
    assert df_bands(vocab, 50_000) == bands  # rare from 1 message by share: 2 at least


def test_prefix_of_cuts_four_or_more_letters() -> None:
    rng = random.Random(1)
    assert prefix_of("pool", rng) is None
    prefixes = {prefix_of("timeout", rng) for _ in range(50)}
    assert prefixes == {"time*", "timeo*", "timeou*"}


def _timing(api_ms: float, naive_ms: float) -> Timing:
    return Timing(MixQuery("mid", "redis"), api_ms, api_ms, naive_ms, "unicode61", "3")


def test_slow_means_more_than_naive_plus_ten_ms() -> None:
    timings = [_timing(20.0, 10.0), _timing(20.1, 10.0), _timing(5.0, 50.0)]
    assert slow_queries(timings) == [timings[1]]


def test_verdict_passes_only_both_goals() -> None:
    assert verdict(6.0, 0) == "ratio_p95=6.0 (target >= 6) slow_queries=0 (target 0) PASS"
    assert verdict(5.9, 0).endswith("FAIL")
    assert verdict(12.0, 1) == "ratio_p95=12.0 (target >= 6) slow_queries=1 (target 0) FAIL"


def test_df_mix_from_a_read_only_home_is_seeded(home_db: Path) -> None:
    def draw(seed: int) -> list[MixQuery]:
        conn = sqlite3.connect(f"file:{home_db}?mode=ro", uri=True)
        try:
            return draw_df_mix(conn, seed)
        finally:
            conn.close()

    first = draw(26)
    assert draw(26) == first
    assert draw(27) != first
    assert len(first) == sum(DF_CLASSES.values()) == 40
    assert [q.kind for q in first] == [k for k, n in DF_CLASSES.items() for _ in range(n)]
    assert len({q.text for q in first}) == len(first)


def test_df_mix_classes_hold_what_they_say(readonly: sqlite3.Connection) -> None:
    mix = draw_df_mix(readonly)
    by_kind: dict[str, list[MixQuery]] = {}
    for q in mix:
        by_kind.setdefault(q.kind, []).append(q)
        assert q.df == matching(readonly, q.text)
    for band, (low, high) in DF_BANDS.items():
        for q in by_kind[band]:
            assert low * MESSAGES <= q.df <= high * MESSAGES and q.text.isalpha()
    mid = set(df_bands(vocabulary(readonly), MESSAGES)["mid"])
    for q in by_kind["and"]:
        assert 2 <= len(q.text.split()) <= 3 and set(q.text.split()) <= mid
    for q in by_kind["or"]:
        assert len(q.text.split(" OR ")) == OR_TERMS
    for q in by_kind["phrase"]:  # two adjacent words of a message: found
        assert q.text.startswith('"') and len(q.text.split()) == 2 and q.df >= 1
    for q in by_kind["prefix"]:
        stem = q.text.removesuffix("*")
        assert len(stem) >= 4 and any(w.startswith(stem) and w != stem for w in mid)
