"""The user's own prices: ``prices.yaml`` in Recall's data directory.

For what the table cannot know: a local or custom model, a negotiated rate, a gap
(OpenRouter's Gemini 2.5 Pro long-context tier before 2026-10-19, Nous's API). Dollars
per million tokens, as every price list writes them::

    # Recall's price overrides: dollars per million tokens. First match wins.
    prices:
      - model: deepseek-chat        # as Hermes records it, or any spelling of it
        provider: deepseek          # optional: only calls through this provider
        input: 0.14
        output: 0.28
        cache_read: 0.028
        from: 2026-06-01            # optional: in force from this day (UTC) ...
        to: 2027-01-01              # ... until this day, not included
        note: DeepSeek's 2026 list price
      - model: google/gemini-2.5-pro
        provider: openrouter
        input: 1.25
        output: 10
        tiers:                      # a whole call above the prompt size costs these
          - above: 200000
            input: 2.5
            output: 15

A model matches by its exact spelling or by its family (``claude-sonnet-4.5`` and
``anthropic/claude-sonnet-4-5`` are one model). A file that cannot be read is
refused whole, with the line that is wrong: half a price list would misprice quietly.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import yaml

from dashboard.costs.prices import Rate, Rates, Route
from dashboard.errors import ConflictError, ValidationError
from dashboard.hermes.conventions import TOKEN_KINDS
from dashboard.hermes.model_names import model_family
from dashboard.store.atomic import atomic_write

FILE_NAME = "prices.yaml"
SOURCE = "prices.yaml"
_RATE_KEYS = TOKEN_KINDS  # a price per kind of token
_KEYS = frozenset(("model", "provider", "from", "to", "note", "tiers", *_RATE_KEYS))


@dataclass(frozen=True)
class Override:
    """One entry of prices.yaml, read and checked."""

    model: str
    provider: str  # "" matches every provider
    start: str  # ISO day, "" for always
    end: str  # ISO day, not included; "" for never
    rates: Rates

    def matches(self, route: Route, day: str) -> bool:
        """True for ``route``'s calls on ``day`` (ISO, UTC)."""
        if self.start and day < self.start or self.end and day >= self.end:
            return False
        return self.matches_route(route)

    def matches_route(self, route: Route) -> bool:
        """True for ``route``'s calls on some day."""
        if self.provider and self.provider.casefold() != route.provider.strip().casefold():
            return False
        return self.model == route.model.strip() or model_family(self.model) == model_family(
            route.model
        )


def parse(text: str) -> tuple[Override, ...]:
    """The overrides ``text`` (prices.yaml's content) holds; :class:`ValidationError`
    naming the entry and the field when any of it cannot be read."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise ValidationError(f"prices.yaml is not valid YAML{line}") from exc
    if data is None:
        return ()
    # ``prices:`` with nothing under it (every entry commented out) is an empty list.
    if not isinstance(data, dict) or not isinstance(data.get("prices") or [], list):
        raise ValidationError("prices.yaml must hold a list under 'prices:'")
    return tuple(_entry(i, e) for i, e in enumerate(data.get("prices") or [], start=1))


def load(data_dir: Path) -> tuple[Override, ...]:
    """The overrides of ``data_dir``'s prices.yaml; none when there is no file."""
    path = data_dir / FILE_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(f"prices.yaml cannot be read: {exc}") from exc
    return parse(text)


NO_FILE = "none"  # the digest of a prices.yaml that does not exist


def on_disk(data_dir: Path) -> tuple[str | None, str]:
    """prices.yaml's text (None: no file) and its digest, which a save names."""
    try:
        data = (data_dir / FILE_NAME).read_bytes()
    except FileNotFoundError:
        return None, NO_FILE
    except OSError as exc:
        raise ValidationError(f"prices.yaml cannot be read: {exc.strerror or exc}") from exc
    return data.decode("utf-8", errors="replace"), hashlib.sha256(data).hexdigest()


def save(data_dir: Path, text: str, base_digest: str | None = None) -> tuple[Override, ...]:
    """Check ``text`` and replace prices.yaml with it atomically; a text that does not
    parse is refused, and so is a file that changed since ``base_digest`` (the digest of
    the file the edit started from, :func:`on_disk`): the file is then left as it was."""
    overrides = parse(text)
    if base_digest is not None and on_disk(data_dir)[1] != base_digest:
        raise ConflictError(
            "prices.yaml changed on disk since this page was loaded: nothing was saved"
        )
    data_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(data_dir / FILE_NAME, text.encode("utf-8"))
    return overrides


def _entry(number: int, entry: object) -> Override:
    where = f"prices.yaml, entry {number}"
    if not isinstance(entry, dict):
        raise ValidationError(f"{where}: each entry is a mapping (model:, input:, output:)")
    unknown = sorted(set(map(str, entry)) - _KEYS)
    if unknown:
        raise ValidationError(f"{where}: unknown field {unknown[0]!r}")
    model = str(entry.get("model") or "").strip()
    if not model:
        raise ValidationError(f"{where}: model is missing")
    where = f"{where} ({model})"
    base = {k: _price(where, k, entry.get(k)) for k in _RATE_KEYS}
    if base["input"] is None or base["output"] is None:
        raise ValidationError(f"{where}: input and output prices are both needed")
    tiers = _tiers(where, entry.get("tiers"))
    rates = {
        k: None
        if base[k] is None
        else Rate(
            base[k] * 1e-6,  # type: ignore[operator]
            tuple((start, t[k] * 1e-6) for start, t in tiers if t.get(k) is not None),
        )
        for k in _RATE_KEYS
    }
    start, end = _day(where, "from", entry.get("from")), _day(where, "to", entry.get("to"))
    if start and end and end <= start:
        raise ValidationError(f"{where}: 'to' must come after 'from'")
    note = str(entry.get("note") or "").strip()
    provider = str(entry.get("provider") or "").strip()
    return Override(
        model,
        provider,
        start,
        end,
        Rates(
            input=rates["input"],  # type: ignore[arg-type]
            output=rates["output"],  # type: ignore[arg-type]
            cache_read=rates["cache_read"],
            cache_write=rates["cache_write"],
            reasoning=rates["reasoning"],
            source=SOURCE,
            matched=f"{provider or 'any provider'}:{model}",
            note=note,
        ),
    )


def _price(where: str, name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"{where}: {name} must be a number of dollars per million tokens")
    if not value >= 0 or value == float("inf"):
        raise ValidationError(f"{where}: {name} must be 0 or more")
    return float(value)


def _tiers(where: str, value: object) -> list[tuple[int, dict[str, float]]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValidationError(f"{where}: tiers is a list of entries with 'above:'")
    tiers: list[tuple[int, dict[str, float]]] = []
    for tier in value:
        if not isinstance(tier, dict) or not isinstance(tier.get("above"), int):
            raise ValidationError(f"{where}: each tier needs 'above:' (prompt tokens)")
        unknown = sorted(set(map(str, tier)) - {"above", *_RATE_KEYS})
        if unknown:
            raise ValidationError(f"{where}: unknown tier field {unknown[0]!r}")
        prices = {k: p for k in _RATE_KEYS if (p := _price(where, k, tier.get(k))) is not None}
        tiers.append((int(tier["above"]), prices))
    tiers.sort(key=lambda t: t[0])
    return tiers


def _day(where: str, name: str, value: object) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, date):
        return value.isoformat()
    try:
        return date.fromisoformat(str(value)).isoformat()
    except ValueError as exc:
        raise ValidationError(f"{where}: {name} must be a day like 2026-06-01") from exc
