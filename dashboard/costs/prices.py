"""What a model's tokens cost on a day: the pinned price table, then the user's overrides.

The table is ``genai-prices`` (pydantic's, MIT), pinned in pyproject.toml and read
from its wheel only: its opt-in updater is never started, and :func:`table_version`
refuses a process where another library swapped a downloaded table in. Measured on the
demo and the Hermes shapes (notes of issue 28): it prices every usage row of a known
model there, OpenRouter ids at OpenRouter's own prices, with long-context tiers and
dated prices; ``model-prices`` covers the labs' own APIs only.

A model is looked up as Hermes spelled it, then without its route's ``vendor/``
prefix, then by :func:`~dashboard.hermes.model_names.model_family` last (that
spelling turns ``gemini-2.5`` into ``gemini-2-5``, which no table knows), each with
the row's provider first (its id, then its base URL), then without. Before any lookup:

* a route to the user's own machine (provider ``custom``, a localhost base URL) is a
  local model: no price unless the user gives one (a table would price a local
  ``qwen3-32b`` at Alibaba's API price);
* an OpenRouter ``:free`` variant is free (a lookup without the suffix would find
  the paid model);

and a provider the table lacks but whose models OpenRouter resells at the provider's own
list price (Nous: ``nousresearch/hermes-4-405b``) is priced from that entry, and says so.

Overrides (``prices.yaml`` in the data directory, read by :mod:`costs.overrides`) come
first, the first that matches.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Protocol
from urllib.parse import urlsplit

import genai_prices
from genai_prices import data_snapshot
from genai_prices import types as gp

from dashboard.hermes.model_names import model_family

TABLE = "genai-prices"
PER_TOKEN = 1e-6  # the table's prices are per million tokens
_TABLE_FIELDS = {
    "input": "input_mtok",
    "output": "output_mtok",
    "cache_read": "cache_read_mtok",
    "cache_write": "cache_write_mtok",
    "reasoning": "output_reasoning_mtok",
}
# Providers the table does not list, priced by the same models' OpenRouter entries, whose
# price is the serving provider's list price: Nous's API serves its Hermes models there.
STAND_INS = {"nous": "nousresearch/"}
LOCAL_PROVIDERS = frozenset(("custom", "local", "ollama", "lmstudio", "llamacpp", "vllm"))


def table_version() -> str:
    """The table's name and version, as every figure computed from it carries it.

    Raises RuntimeError when the process's table is not the wheel's (another library
    started genai-prices' updater, which swaps a downloaded table in): a figure must
    never come from the network.
    """
    if getattr(data_snapshot, "_custom_snapshot", None) is not None:
        raise RuntimeError("genai-prices holds a downloaded table; Recall prices offline only")
    return f"{TABLE} {genai_prices.__version__}"


@dataclass(frozen=True)
class Rate:
    """One kind of token's price in dollars per token: a base, and the rates that
    replace it for a whole call whose prompt is above a threshold (a cliff: past
    200k prompt tokens *every* token of the call costs the tier's rate)."""

    base: float
    tiers: tuple[tuple[int, float], ...] = ()  # (prompt tokens above which, rate), rising

    def at(self, prompt: int) -> float:
        """The rate for a call whose whole prompt is ``prompt`` tokens."""
        rate = self.base
        for start, tier_rate in self.tiers:
            if prompt > start:
                rate = tier_rate
        return rate


@dataclass(frozen=True)
class Rates:
    """What one model's tokens cost on one day, and who said so."""

    input: Rate
    output: Rate
    cache_read: Rate | None  # None: the table names none (charged as input)
    cache_write: Rate | None
    reasoning: Rate | None  # None: reasoning is output, at the output rate
    source: str  # "genai-prices 0.2.3" or "prices.yaml"
    matched: str  # what priced it: "openrouter:anthropic/claude-sonnet-4.5"
    note: str = ""  # the override's own note

    @functools.cached_property
    def tier_start(self) -> int | None:
        """The smallest prompt above which some rate changes; None: no tiers."""
        starts = [s for r in self.all_rates() for s, _ in r.tiers]
        return min(starts) if starts else None

    def all_rates(self) -> list[Rate]:
        return [r for r in (self.input, self.output, self.cache_read, self.cache_write) if r]


@dataclass(frozen=True)
class NoPrice:
    """Why a model has no price: ``free`` is a price ($0), the rest are unknown."""

    kind: str  # "local", "free", "missing"
    reason: str


FREE_SUFFIX = ":free"


@dataclass(frozen=True)
class Route:
    """How a usage row names its model and where the calls went."""

    model: str
    provider: str = ""
    base_url: str = ""

    @property
    def local(self) -> bool:
        """True for the user's own machine: provider ``custom`` (Hermes's name for a
        self-hosted endpoint) or a loopback/private base URL."""
        if self.provider.casefold() in LOCAL_PROVIDERS:
            return True
        host = urlsplit(self.base_url).hostname if "//" in self.base_url else None
        if not host:
            return False
        if host == "localhost" or host.endswith(".local"):
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return address.is_loopback or address.is_private


class PriceOverride(Protocol):
    """A price the user gave (costs.overrides.Override)."""

    rates: Rates

    def matches(self, route: Route, day: str) -> bool: ...

    def matches_route(self, route: Route) -> bool: ...


@dataclass
class PriceBook:
    """The table and the overrides, with each lookup kept (a month has a few hundred
    (model, provider, day) triples; a row's lookup is then a dict read)."""

    overrides: Sequence[PriceOverride] = ()  # first match wins
    problem: str = ""  # why the user's overrides are not in use (a prices.yaml refused)
    _cache: dict[tuple[Route, int], Rates | NoPrice] = field(default_factory=dict)
    _tier_starts: dict[Route, int | None] = field(default_factory=dict)

    @functools.cached_property
    def version(self) -> str:
        """The table's version and, when there are overrides, a digest of them: a figure
        computed from this book carries it, and a cache keyed on it is rebuilt when
        either changes."""
        table = table_version()
        if not self.overrides:
            return table
        text = "\n".join(repr(o) for o in self.overrides)
        return f"{table}+{hashlib.sha256(text.encode()).hexdigest()[:12]}"

    def tier_start_of(self, route: Route) -> int | None:
        """The smallest prompt above which any price of ``route`` changes, on any day
        (its overrides' tiers and every dated price the table holds for it); None: no
        tier. A row whose whole prompt is at or below it holds no call past a tier."""
        if route not in self._tier_starts:
            starts = [
                start
                for o in self.overrides
                if o.matches_route(route)
                for rate in o.rates.all_rates()
                for start, _ in rate.tiers
            ]
            if not route.local and not route.model.endswith(FREE_SUFFIX):
                found = _table_lookup(route) or _stand_in_lookup(route)
                if found is not None:
                    starts += _table_tier_starts(found[1])
            self._tier_starts[route] = min(starts) if starts else None
        return self._tier_starts[route]

    @property
    def key(self) -> tuple[str, str]:
        """What an answer computed from this book depends on: its figures (the version)
        and what it says of the user's file (a refused prices.yaml prices as none)."""
        return (self.version, self.problem)

    def rates(self, route: Route, at: float) -> Rates | NoPrice:
        """The prices in force for ``route`` at ``at`` (epoch seconds, read as a UTC day
        — tables date prices by day)."""
        key = (route, int(at // 86_400))  # the UTC day, as a number: no date is built
        found = self._cache.get(key)
        if found is None:
            day = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d")
            found = self._cache[key] = self._look_up(route, day)
        return found

    def _look_up(self, route: Route, day: str) -> Rates | NoPrice:
        for override in self.overrides:
            if override.matches(route, day):
                return override.rates
        if route.model.endswith(FREE_SUFFIX):
            return NoPrice("free", "an OpenRouter free variant")
        if route.local:
            return NoPrice("local", "a local model: give it a price in prices.yaml")
        found = _table_lookup(route)
        stand_in = ""
        if found is None:
            found = _stand_in_lookup(route)
            if found is not None:
                stand_in = f" (OpenRouter's price of {route.provider}'s model)"
        if found is None:
            return NoPrice("missing", f"not in {table_version()}: give it a price in prices.yaml")
        provider, model = found
        when = datetime.fromisoformat(day).replace(hour=12, tzinfo=UTC)
        prices = model.get_prices(when)
        rates = {name: _rate(getattr(prices, f, None)) for name, f in _TABLE_FIELDS.items()}
        if rates["input"] is None or rates["output"] is None:
            return NoPrice("missing", f"{table_version()} has no token prices for {model.id}")
        return Rates(
            input=rates["input"],
            output=rates["output"],
            cache_read=rates["cache_read"],
            cache_write=rates["cache_write"],
            reasoning=rates["reasoning"],
            source=table_version(),
            matched=f"{provider.id}:{model.id}{stand_in}",
        )


def _table_tier_starts(model: gp.ModelInfo) -> list[int]:
    """Every tier start of ``model``'s prices, dated ones included."""
    prices = model.prices if isinstance(model.prices, list) else [model.prices]
    starts: list[int] = []
    for entry in prices:
        values = getattr(entry, "prices", entry)
        for name in _TABLE_FIELDS.values():
            value = getattr(values, name, None)
            if isinstance(value, gp.TieredPrices):
                starts += [int(t.start) for t in value.tiers]
    return starts


def spellings(model: str) -> list[str]:
    """The spellings a model is looked up under, in order (see the module)."""
    raw = model.strip()
    if raw.casefold().startswith("openrouter/"):
        raw = raw[len("openrouter/") :]
    tail = raw.rsplit("/", 1)[-1]
    out = [raw, tail, tail.split(":", 1)[0], model_family(raw)]
    return [s for i, s in enumerate(out) if s and s not in out[:i]]


def _stand_in_lookup(route: Route) -> tuple[gp.Provider, gp.ModelInfo] | None:
    """The OpenRouter entry standing in for a provider the table lacks (STAND_INS)."""
    prefix = STAND_INS.get(route.provider.strip().casefold())
    if prefix is None:
        return None
    tail = route.model.strip().rsplit("/", 1)[-1].casefold()
    return _table_lookup(Route(prefix + tail, "openrouter"))


def _table_lookup(route: Route) -> tuple[gp.Provider, gp.ModelInfo] | None:
    """The table's provider and model for ``route`` (see the module for the order)."""
    snapshot = data_snapshot.get_snapshot()
    provider = route.provider.strip().casefold() or None
    url = route.base_url.strip() or None
    ways: list[tuple[str | None, str | None]] = []
    if provider:
        ways.append((provider, None))
    if url:
        ways.append((None, url))
    ways.append((None, None))
    for spelling in spellings(route.model):
        for provider_id, api_url in ways:
            try:
                return snapshot.find_provider_model(spelling, None, provider_id, api_url)
            except LookupError:
                continue
    return None


def _rate(value: Decimal | gp.TieredPrices | None) -> Rate | None:
    """The table's price of one kind of token as a :class:`Rate` (dollars a token)."""
    if value is None:
        return None
    if isinstance(value, gp.TieredPrices):
        tiers = tuple((int(t.start), float(t.price) * PER_TOKEN) for t in value.tiers)
        return Rate(float(value.base) * PER_TOKEN, tiers)
    return Rate(float(value) * PER_TOKEN)
