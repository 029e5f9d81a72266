"""A usage row priced again: its tokens at the prices in force on the day of its calls.

Hermes counts a row's ``input_tokens`` without the cache (a call's prompt is input +
cache read + cache write) and its reasoning inside ``output_tokens``; the arithmetic
here follows. A row is priced at its base rates from its token totals. Tiers are per
call (a call whose whole prompt passes 200k costs the tier's rate for every token), so:

* a row whose *whole* prompt total is at or below the first tier cannot hold a call
  above it: exact, no tier to apply;
* else the calls Hermes logged for it (hermes/agent_log.py: each call's prompt, cache
  and output) add what their tier costs above the base: exact when every call was
  logged, else "tier applied to 3 of 7 calls";
* with no logged call, the base alone and "tier not applied" said.

Included (plan) rows stay included; a model without a price stays unknown and says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dashboard.costs.prices import NoPrice, PriceBook, Rate, Rates, Route

PRICED, INCLUDED, FREE, UNPRICED = "priced", "included", "free", "unpriced"


@dataclass(frozen=True)
class Tokens:
    """A row's (or one call's) tokens as Hermes counts them."""

    input: int = 0  # without cache reads and writes
    output: int = 0  # reasoning included
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0

    @property
    def prompt(self) -> int:
        """The whole prompt: what a tier's threshold is measured on."""
        return self.input + self.cache_read + self.cache_write


@dataclass(frozen=True)
class Call:
    """One logged call of a row: its whole prompt, cache and output."""

    prompt: int
    output: int
    cache_read: int = 0
    cache_write: int = 0

    @property
    def tokens(self) -> Tokens:
        uncached = max(self.prompt - self.cache_read - self.cache_write, 0)
        return Tokens(uncached, self.output, self.cache_read, self.cache_write)


@dataclass(frozen=True)
class Repriced:
    """What Recall says a row should have cost, and how it knows."""

    status: str  # PRICED, INCLUDED, FREE or UNPRICED
    usd: float | None  # None unless priced or free
    source: str = ""  # "genai-prices 0.2.3" or "prices.yaml"; "" when not priced
    matched: str = ""  # what priced it: "openrouter:anthropic/claude-sonnet-4.5"
    tier: str = ""  # "" (no tier could apply, or none did), else how it was applied
    unsized: int = 0  # calls a tier may apply to that no log gave a size for
    reason: str = ""  # why it is not priced


def cost_at(tokens: Tokens, rates: Rates, prompt: int | None = None) -> float:
    """``tokens`` at ``rates``, every rate read for a call whose prompt is ``prompt``
    (None: the base rates). Cache without its own price is charged as input;
    reasoning without its own price is output."""

    def rate(r: Rate | None, fallback: Rate) -> float:
        chosen = r if r is not None else fallback
        return chosen.base if prompt is None else chosen.at(prompt)

    output = tokens.output
    total = 0.0
    if rates.reasoning is not None and tokens.reasoning:
        reasoning = min(tokens.reasoning, output)
        total += reasoning * rate(rates.reasoning, rates.output)
        output -= reasoning
    total += tokens.input * rate(rates.input, rates.input)
    total += output * rate(rates.output, rates.output)
    total += tokens.cache_read * rate(rates.cache_read, rates.input)
    total += tokens.cache_write * rate(rates.cache_write, rates.input)
    return total


def reprice(
    book: PriceBook,
    route: Route,
    tokens: Tokens,
    at: float,
    *,
    calls: int = 1,
    logged: Sequence[Call] = (),
    included: bool = False,
) -> Repriced:
    """Price one usage row (``calls``: its API calls; ``logged``: the ones agent.log
    gave a size for; ``at``: when its calls were, for the prices in force then)."""
    if included:
        return Repriced(INCLUDED, None, reason="included in a plan")
    rates = book.rates(route, at)
    if isinstance(rates, NoPrice):
        if rates.kind == "free":
            return Repriced(FREE, 0.0, reason=rates.reason)
        return Repriced(UNPRICED, None, reason=rates.reason)
    usd = cost_at(tokens, rates)
    tier, unsized = "", 0
    start = rates.tier_start
    if start is not None and tokens.prompt > start:
        # Some call may have passed the threshold: add what each logged one's tier cost.
        above = [c for c in logged if c.prompt > start]
        usd += sum(cost_at(c.tokens, rates, c.prompt) - cost_at(c.tokens, rates) for c in above)
        unsized = max(calls - len(logged), 0)
        if not logged:
            tier = f"tier not applied: no call's size was logged (tier above {start:,} tokens)"
        elif unsized:
            tier = (
                f"tier checked for {len(logged)} of {calls} calls ({len(above)} above "
                f"{start:,} tokens); the rest logged no size"
            )
        elif above:
            tier = f"tier applied to {len(above)} of {len(logged)} calls"
    return Repriced(PRICED, usd, rates.source, rates.matched, tier, unsized)
