"""prices.yaml: the user's prices, read whole or refused with the line that is wrong."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dashboard.costs import overrides
from dashboard.costs.prices import PriceBook, Route
from dashboard.costs.reprice import PRICED, Call, Tokens, reprice
from dashboard.errors import ValidationError

EXAMPLE = """\
# Recall's price overrides: dollars per million tokens. First match wins.
prices:
  - model: llama3.3:70b
    provider: custom
    input: 0.05
    output: 0.10
    note: electricity
  - model: deepseek-chat
    provider: deepseek
    input: 0.14
    output: 0.28
    cache_read: 0.028
    from: 2026-06-01
    to: 2027-01-01
    note: DeepSeek's 2026 list price
  - model: google/gemini-2.5-pro
    provider: openrouter
    input: 1.25
    output: 10
    tiers:
      - above: 200000
        input: 2.5
        output: 15
"""
JUNE = datetime(2026, 6, 2, 12, tzinfo=UTC).timestamp()
MAY = datetime(2026, 5, 30, 12, tzinfo=UTC).timestamp()


def book() -> PriceBook:
    return PriceBook(overrides.parse(EXAMPLE))


def test_an_override_prices_a_local_model_and_names_itself() -> None:
    found = reprice(book(), Route("llama3.3:70b", "custom"), Tokens(2_000_000, 1_000_000), JUNE)
    assert found.status == PRICED and found.usd == pytest.approx(0.05 * 2 + 0.10)
    assert found.source == "prices.yaml" and found.matched == "custom:llama3.3:70b"


def test_dates_and_provider_decide_and_the_table_answers_outside_them() -> None:
    tokens = Tokens(1_000_000, 1_000_000, cache_read=1_000_000)
    deepseek = Route("deepseek/deepseek-chat", "deepseek")  # another spelling, one family
    assert reprice(book(), deepseek, tokens, JUNE).usd == pytest.approx(0.14 + 0.28 + 0.028)
    before = reprice(book(), deepseek, tokens, MAY)
    assert before.source.startswith("genai-prices") and before.usd != pytest.approx(0.448)
    elsewhere = reprice(book(), Route("deepseek-chat", "openrouter"), tokens, JUNE)
    assert elsewhere.source != "prices.yaml"


def test_an_override_tier_applies_per_logged_call() -> None:
    route = Route("google/gemini-2.5-pro", "openrouter")
    calls = [Call(300_000, 1_000), Call(100_000, 1_000)]
    row = Tokens(input=400_000, output=2_000)
    found = reprice(book(), route, row, JUNE, calls=2, logged=calls)
    expected = (300_000 * 2.5 + 1_000 * 15 + 100_000 * 1.25 + 1_000 * 10) / 1e6
    assert found.usd == pytest.approx(expected) and found.tier == "tier applied to 1 of 2 calls"


def test_the_version_changes_with_the_overrides() -> None:
    plain, mine = PriceBook().version, book().version
    assert plain.startswith("genai-prices ") and "+" not in plain
    assert mine.startswith(plain + "+")
    other = PriceBook(overrides.parse(EXAMPLE.replace("0.05", "0.06"))).version
    assert other != mine


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("prices: [\n  - model: x\n   input: 1", "not valid YAML (line 2)"),
        ("prices: 3", "a list under 'prices:'"),
        ("prices:\n  - model: x\n    input: 1\n    output: 2\n    colour: red", "'colour'"),
        ("prices:\n  - input: 1\n    output: 2", "model is missing"),
        ("prices:\n  - model: x\n    input: 1", "input and output"),
        ("prices:\n  - model: x\n    input: -1\n    output: 2", "0 or more"),
        ("prices:\n  - model: x\n    input: .nan\n    output: 2", "0 or more"),
        ("prices:\n  - model: x\n    input: '1'\n    output: 2", "number of dollars"),
        ("prices:\n  - model: x\n    input: 1\n    output: 2\n    from: June", "a day like"),
        (
            "prices:\n  - model: x\n    input: 1\n    output: 2\n"
            "    from: 2026-06-01\n    to: 2026-05-01",
            "'to' must come after",
        ),
        ("prices:\n  - model: x\n    input: 1\n    output: 2\n    tiers: [{input: 2}]", "above:"),
        ("prices:\n  - just a string", "each entry is a mapping"),
    ],
)
def test_a_file_that_cannot_be_read_is_refused_with_where(text: str, words: str) -> None:
    with pytest.raises(ValidationError) as caught:
        overrides.parse(text)
    assert words in str(caught.value)


def test_an_empty_or_missing_file_is_no_overrides(tmp_path: Path) -> None:
    assert overrides.load(tmp_path) == ()
    (tmp_path / "prices.yaml").write_text("# nothing yet\n")
    assert overrides.load(tmp_path) == ()
    (tmp_path / "prices.yaml").write_text("prices:\n#  - model: x\n")  # all commented out
    assert overrides.load(tmp_path) == ()
    (tmp_path / "prices.yaml").write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(ValidationError, match="cannot be read"):
        overrides.load(tmp_path)


def test_save_replaces_the_file_whole_or_not_at_all(tmp_path: Path) -> None:
    saved = overrides.save(tmp_path, EXAMPLE)
    assert len(saved) == 3 and (tmp_path / "prices.yaml").read_text() == EXAMPLE
    before = os.stat(tmp_path / "prices.yaml")
    with pytest.raises(ValidationError):
        overrides.save(tmp_path, "prices:\n  - model: x\n    input: 1\n")
    assert (tmp_path / "prices.yaml").read_text() == EXAMPLE
    assert os.stat(tmp_path / "prices.yaml").st_ino == before.st_ino
    assert [p.name for p in tmp_path.iterdir()] == ["prices.yaml"]  # no temp file left
    assert overrides.load(tmp_path) == saved
