"""Rows priced again, checked against genai-prices' own calculator (an independent path:
its ``calc_price`` reads the same table through its own arithmetic, tiers and dates)."""

from __future__ import annotations

from datetime import UTC, datetime

import genai_prices as gp
import pytest
from genai_prices import data_snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from dashboard.costs.prices import PriceBook, Route, table_version
from dashboard.costs.reprice import FREE, INCLUDED, PRICED, UNPRICED, Call, Tokens, reprice

NOV = datetime(2026, 11, 2, 14, tzinfo=UTC)
# The routes of the demo and the Hermes shapes that the table prices (issue 28 survey).
ROUTES = [
    Route("anthropic/claude-sonnet-4.5", "openrouter", "https://openrouter.ai/api/v1"),
    Route("openai/gpt-5", "openrouter"),
    Route("deepseek/deepseek-v3.2", "openrouter"),
    Route("google/gemini-2.5-flash", "openrouter"),
    Route("claude-opus-4-1", "anthropic"),
    Route("claude-sonnet-4-5", "anthropic"),
    Route("gpt-5-mini", "openai"),
    Route("openai/gpt-4.1-nano", "openrouter"),
    Route("openai/gpt-4.1-mini", "openrouter"),
    Route("deepseek/deepseek-chat", "deepseek"),
]


def independent(route_matched: str, call: Tokens, when: datetime) -> float:
    """genai-prices' own price of one call (its input is the whole prompt)."""
    provider, model = route_matched.split(":", 1)
    usage = gp.Usage(
        input_tokens=call.prompt,
        cache_read_tokens=call.cache_read,
        cache_write_tokens=call.cache_write,
        output_tokens=call.output,
    )
    price = gp.calc_price(usage, model, provider_id=provider, genai_request_timestamp=when)
    return float(price.total_price)


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.provider}:{r.model}")
def test_every_known_route_is_priced_as_the_table_prices_it(route: Route) -> None:
    book = PriceBook()
    tokens = Tokens(input=12_000, output=900, cache_read=40_000, cache_write=2_000)
    found = reprice(book, route, tokens, NOV.timestamp(), calls=4)
    assert found.status == PRICED and found.source == table_version()
    assert found.usd == pytest.approx(independent(found.matched, tokens, NOV), rel=1e-12)
    assert found.tier == "" and found.unsized == 0


@settings(max_examples=60, deadline=None)
@given(
    input_=st.integers(0, 150_000),
    output=st.integers(0, 40_000),
    cache_read=st.integers(0, 40_000),
    cache_write=st.integers(0, 9_000),
    route=st.sampled_from(ROUTES),
    day=st.integers(0, 400),
)
def test_any_row_below_the_tiers_matches_the_calculator(
    input_: int, output: int, cache_read: int, cache_write: int, route: Route, day: int
) -> None:
    when = datetime(2025, 12, 1, 12, tzinfo=UTC).timestamp() + day * 86_400
    tokens = Tokens(input_, output, cache_read, cache_write)
    found = reprice(PriceBook(), route, tokens, when)
    expected = independent(found.matched, tokens, datetime.fromtimestamp(when, UTC))
    assert found.usd == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_a_dated_price_is_the_one_in_force_on_the_day_of_the_calls() -> None:
    """gpt-5.6-luna costs $1/M input until 2026-07-29 and $0.2/M from 2026-07-30; Sonnet
    4.6 loses its long-context tier on 2026-03-13 (both dated in the table)."""
    luna = Route("gpt-5.6-luna", "openai")
    tokens = Tokens(input=100_000, output=5_000)
    book = PriceBook()
    for day in ("2026-07-29", "2026-07-30"):
        when = datetime.fromisoformat(f"{day}T12:00:00+00:00")
        found = reprice(book, luna, tokens, when.timestamp())
        assert found.usd == pytest.approx(independent(found.matched, tokens, when)), day
    july = [
        reprice(book, luna, tokens, datetime(2026, 7, d, 12, tzinfo=UTC).timestamp()).usd
        for d in (29, 30)
    ]
    assert july[0] == pytest.approx(july[1] * 5)

    sonnet = Route("claude-sonnet-4-6", "anthropic")
    call = Call(250_000, 2_000)
    for day, tiered in (("2026-03-12", True), ("2026-03-14", False)):
        when = datetime.fromisoformat(f"{day}T12:00:00+00:00")
        found = reprice(book, sonnet, call.tokens, when.timestamp(), calls=1, logged=[call])
        assert found.usd == pytest.approx(independent(found.matched, call.tokens, when)), day
        assert (found.tier != "") is tiered, (day, found.tier)


def test_tiers_apply_per_logged_call_as_the_calculator_prices_each_call() -> None:
    """Sonnet 4.5 through OpenRouter: above 200k prompt tokens a call costs the tier's
    rates for all its tokens. Three calls, one above: the row is their sum exactly."""
    route = Route("anthropic/claude-sonnet-4.5", "openrouter")
    calls = [Call(250_000, 3_000, cache_read=60_000), Call(90_000, 800), Call(120_000, 1_000)]
    row = Tokens(
        input=sum(c.tokens.input for c in calls),
        output=sum(c.output for c in calls),
        cache_read=sum(c.cache_read for c in calls),
    )
    found = reprice(PriceBook(), route, row, NOV.timestamp(), calls=3, logged=calls)
    each = [independent(found.matched, c.tokens, NOV) for c in calls]
    assert found.usd == pytest.approx(sum(each), rel=1e-12)
    assert found.tier == "tier applied to 1 of 3 calls" and found.unsized == 0
    # Priced as one row (the sum passes 200k), the tier would apply to every token.
    assert independent(found.matched, row, NOV) > sum(each) * 1.3


def test_without_call_sizes_the_base_is_used_and_said() -> None:
    route = Route("anthropic/claude-sonnet-4.5", "openrouter")
    row = Tokens(input=400_000, output=9_000)
    found = reprice(PriceBook(), route, row, NOV.timestamp(), calls=5)
    base = independent(found.matched, Tokens(input=100_000, output=2_250), NOV) * 4
    assert found.usd == pytest.approx(base)
    assert found.tier.startswith("tier not applied") and found.unsized == 5
    partly = reprice(PriceBook(), route, row, NOV.timestamp(), calls=5, logged=[Call(230_000, 100)])
    assert partly.unsized == 4 and "1 of 5 calls" in partly.tier
    assert partly.usd > found.usd


def test_a_row_whose_whole_prompt_is_below_the_tier_needs_no_call_sizes() -> None:
    route = Route("anthropic/claude-sonnet-4.5", "openrouter")
    found = reprice(PriceBook(), route, Tokens(input=150_000, output=10), NOV.timestamp(), calls=9)
    assert found.tier == "" and found.unsized == 0


def test_reasoning_has_its_own_price_only_where_the_table_gives_one() -> None:
    plain = Route("openai/gpt-5", "openrouter")
    with_reasoning = Tokens(input=1_000, output=5_000, reasoning=4_000)
    without = Tokens(input=1_000, output=5_000)
    book = PriceBook()
    at = NOV.timestamp()
    assert reprice(book, plain, with_reasoning, at).usd == reprice(book, plain, without, at).usd
    deep = Route("perplexity/sonar-deep-research", "openrouter")
    found = reprice(book, deep, with_reasoning, at)
    usage = gp.Usage(input_tokens=1_000, output_tokens=5_000, output_reasoning_tokens=4_000)
    provider, model = found.matched.split(":", 1)
    price = gp.calc_price(usage, model, provider_id=provider, genai_request_timestamp=NOV)
    assert found.usd == pytest.approx(float(price.total_price))
    assert found.usd != reprice(book, deep, without, at).usd


@pytest.mark.parametrize(
    ("route", "status", "words"),
    [
        (Route("llama3.3:70b", "custom", "http://127.0.0.1:11434/v1"), UNPRICED, "local model"),
        (Route("qwen3-32b", "openai", "http://192.168.1.20:8000/v1"), UNPRICED, "local model"),
        (Route("local/qwen3-32b", "custom"), UNPRICED, "local model"),
        (Route("deepseek/deepseek-chat-v3.1:free", "openrouter"), FREE, "free"),
        (Route("no-such-model-anywhere", "openrouter"), UNPRICED, "prices.yaml"),
    ],
)
def test_what_the_table_cannot_price_says_why(route: Route, status: str, words: str) -> None:
    found = reprice(PriceBook(), route, Tokens(1_000, 100), NOV.timestamp())
    assert found.status == status and words in found.reason
    assert found.usd == (0.0 if status == FREE else None)


def test_nous_is_priced_as_openrouter_resells_its_models_and_says_so() -> None:
    found = reprice(
        PriceBook(), Route("Hermes-4-405B", "nous"), Tokens(1_000, 100), NOV.timestamp()
    )
    assert found.status == PRICED
    assert (
        found.matched
        == "openrouter:nousresearch/hermes-4-405b (OpenRouter's price of nous's model)"
    )
    usage = gp.Usage(input_tokens=1_000, output_tokens=100)
    price = gp.calc_price(
        usage, "nousresearch/hermes-4-405b", provider_id="openrouter", genai_request_timestamp=NOV
    )
    assert found.usd == pytest.approx(float(price.total_price))


def test_included_rows_stay_included() -> None:
    found = reprice(PriceBook(), ROUTES[0], Tokens(1_000, 100), NOV.timestamp(), included=True)
    assert (found.status, found.usd) == (INCLUDED, None)


def test_a_downloaded_table_is_refused() -> None:
    """genai-prices' updater (started by another library) swaps a table in: no figure."""
    snapshot = data_snapshot.get_snapshot()
    data_snapshot.set_custom_snapshot(snapshot)
    try:
        with pytest.raises(RuntimeError, match="offline"):
            table_version()
    finally:
        data_snapshot.set_custom_snapshot(None)
    assert table_version() == f"genai-prices {gp.__version__}"


def test_the_table_version_is_the_pinned_one() -> None:
    from importlib.metadata import requires

    pinned = [r for r in requires("recall-dashboard") or [] if r.startswith("genai-prices")]
    assert pinned == [f"genai-prices=={gp.__version__}"]


def test_pricing_never_touches_the_network() -> None:
    """A fresh interpreter whose every socket use raises: the table loads from its wheel
    and prices (an audit hook sees every socket call Python makes)."""
    import subprocess
    import sys

    script = """
import sys
def refuse(event, args):
    if event.startswith("socket.") or event in ("urllib.Request", "http.client.connect"):
        raise RuntimeError(f"network: {event}")
sys.addaudithook(refuse)
from dashboard.costs.prices import PriceBook, Route
from dashboard.costs.reprice import Tokens, reprice
found = reprice(PriceBook(), Route("anthropic/claude-sonnet-4.5", "openrouter"),
                Tokens(1000, 100), 1.79e9)
print(found.status, found.source)
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "priced"
