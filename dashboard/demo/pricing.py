"""What the demo's calls cost: its models and providers, their tokens and bills."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from dashboard.store.records import NewMessage, Usage

PRICING_VERSION = "2026-10-snapshot"


@dataclass(frozen=True)
class Model:
    """A model as billed through one provider, with $/M-token prices."""

    name: str
    provider: str
    base_url: str
    price_in: float | None
    price_out: float | None
    price_cache_read: float | None
    price_cache_write: float | None
    # How this provider reports cost: "actual" (billed figure, sometimes with an
    # estimate made beforehand), "estimated" (local price table only),
    # "included" (subscription) or "unknown" (no price known).
    reporting: str
    weight: float


MODELS: tuple[Model, ...] = (
    Model(
        "anthropic/claude-sonnet-4.5",
        "openrouter",
        "https://openrouter.ai/api/v1",
        3.0,
        15.0,
        0.30,
        3.75,
        "actual",
        30,
    ),
    Model(
        "openai/gpt-5",
        "openrouter",
        "https://openrouter.ai/api/v1",
        1.25,
        10.0,
        0.125,
        None,
        "actual",
        10,
    ),
    Model(
        "deepseek/deepseek-v3.2",
        "openrouter",
        "https://openrouter.ai/api/v1",
        0.28,
        0.42,
        0.028,
        None,
        "actual",
        8,
    ),
    Model(
        "claude-opus-4-1",
        "anthropic",
        "https://api.anthropic.com",
        15.0,
        75.0,
        1.50,
        18.75,
        "estimated",
        8,
    ),
    Model(
        "claude-sonnet-4-5",
        "anthropic",
        "https://api.anthropic.com",
        3.0,
        15.0,
        0.30,
        3.75,
        "estimated",
        18,
    ),
    Model(
        "gpt-5-mini", "openai", "https://api.openai.com/v1", 0.25, 2.0, 0.025, None, "estimated", 8
    ),
    Model(
        "Hermes-4-405B",
        "nous",
        "https://inference-api.nousresearch.com/v1",
        1.0,
        3.0,
        None,
        None,
        "included",
        8,
    ),
    Model(
        "llama3.3:70b", "custom", "http://127.0.0.1:11434/v1", None, None, None, None, "unknown", 10
    ),
)
AUX_MODEL = Model(
    "google/gemini-2.5-flash",
    "openrouter",
    "https://openrouter.ai/api/v1",
    0.30,
    2.50,
    0.075,
    None,
    "actual",
    0,
)

COST_SOURCE = {
    "actual": "provider_generation_api",
    "estimated": "official_docs_snapshot",
    "included": "custom_contract",
    "unknown": "none",
}


def usage_rows(
    rng: random.Random,
    model: Model,
    messages: list[NewMessage],
    start: float,
    end: float,
    compressed: bool,
    compactions: Sequence[float] = (),
) -> list[Usage]:
    """The usage rows of a session run on ``model``: its main calls (priced, with the
    bill drifting from the estimate), a compression call when it rotated, one row for
    its in-place compactions, and sometimes a title call; ``rng`` draws every figure."""
    calls = max(1, sum(1 for m in messages if m.role == "assistant"))
    chars = sum(len(m.content or "") for m in messages)
    # Every call re-sends the growing context; most of it is served from cache.
    context = int(chars / 3.6)
    input_total = int(context * calls * rng.uniform(0.35, 0.6)) + 1500 * calls
    cached = model.price_cache_read is not None
    cache_read = int(input_total * rng.uniform(0.55, 0.85)) if cached else 0
    cache_write = int(input_total * rng.uniform(0.03, 0.08)) if model.price_cache_write else 0
    fresh_input = input_total - cache_read - cache_write
    output = int(sum(len(m.content or "") for m in messages if m.role == "assistant") / 3.8)
    reasoning = int(output * rng.uniform(0.2, 0.9)) if "gpt-5" in model.name else 0
    rows = [
        _priced(
            rng,
            model,
            "",
            calls,
            fresh_input,
            output + reasoning,
            cache_read,
            cache_write,
            reasoning,
            start,
            end,
        )
    ]
    if compressed:
        rows.append(_priced(rng, AUX_MODEL, "compression", 1, context, 900, 0, 0, 0, end, end))
    if compactions:  # one usage row sums the in-place compactions' summary calls
        n = len(compactions)
        rows.append(
            _priced(
                rng,
                AUX_MODEL,
                "compression",
                n,
                context * n,
                900 * n,
                0,
                0,
                0,
                compactions[0],
                compactions[-1],
            )
        )
    if rng.random() < 0.6:
        rows.append(_priced(rng, AUX_MODEL, "title_generation", 1, 600, 20, 0, 0, 0, start, start))
    return rows


def _priced(
    rng: random.Random,
    model: Model,
    task: str,
    calls: int,
    fresh_in: int,
    out: int,
    cache_read: int,
    cache_write: int,
    reasoning: int,
    first: float,
    last: float,
) -> Usage:
    estimate = None
    if model.price_in is not None and model.price_out is not None:
        estimate = (
            fresh_in * model.price_in
            + out * model.price_out
            + cache_read * (model.price_cache_read or 0)
            + cache_write * (model.price_cache_write or 0)
        ) / 1_000_000
    status, actual = model.reporting, None
    if status == "actual" and estimate is not None:
        # The bill disagrees with the local table: routing, cache pricing and
        # retries. Users report 1.5-5x; most calls drift a little, some a lot.
        drift = math.exp(rng.gauss(0.35, 0.35))
        actual = round(estimate * drift, 6)
        if rng.random() < 0.4:
            estimate = None  # billed figure arrived; no estimate was recorded
    elif status == "included":
        actual = 0.0
    elif status == "unknown":
        estimate = None
    return Usage(
        model=model.name,
        billing_provider=model.provider,
        billing_base_url=model.base_url,
        billing_mode="api" if status != "included" else "subscription",
        task=task,
        api_calls=calls,
        input_tokens=fresh_in,
        output_tokens=out,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=reasoning,
        estimated_cost_usd=round(estimate, 6) if estimate is not None else None,
        actual_cost_usd=actual,
        cost_status=status,
        cost_source=COST_SOURCE[status],
        pricing_version=PRICING_VERSION if estimate is not None else None,
        at=last,
    )
