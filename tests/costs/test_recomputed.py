"""Every usage row priced again (issue 28), through the archive and both ways of summing
(SQLite's one-day groups and the rows read one by one; the rollup is held equal to them
by test_rollup), checked against genai-prices' own calculator row by row."""

from __future__ import annotations

from collections import defaultdict
from contextlib import closing
from datetime import date, datetime
from pathlib import Path

import genai_prices as gp
import pytest

from dashboard.costs import book as price_book
from dashboard.costs.days import DayClock
from dashboard.costs.prices import PriceBook, Route
from dashboard.costs.reprice import PRICED, reprice
from dashboard.costs.spend import Spend
from dashboard.costs.usage import read_rows
from dashboard.store.readonly import open_readonly
from tests.support import hermes_shapes as shapes
from tests.support.archived import archive_home
from tests.support.cost_homes import (
    SONNET,
    SONNET_AT_ONE,
    TURN,
    base_rate,
    calculator,
    long_context_home,
    months_by_model,
    own_prices,
)
from tests.support.demo_homes import demo_home_copy


@pytest.fixture(autouse=True)
def table_only() -> None:
    """No prices.yaml: the table alone (a test that configures one sets it back)."""
    price_book.configure(None)


def month(db: Path) -> Spend:
    return months_by_model(db, date(2026, 11, 1), date(2026, 12, 1))


def test_a_long_context_call_is_priced_at_its_tier_from_the_log(tmp_path: Path) -> None:
    db = long_context_home(tmp_path / "home")
    each = [
        calculator(SONNET, "openrouter", c.prompt, c.cache_read, 0, c.output, c.at) for c in TURN
    ]
    found = month(db)
    (cell,) = found.rows
    assert cell.recomputed.usd == pytest.approx(sum(each), rel=1e-9)
    assert cell.recomputed.unsized_calls == 0
    # Hermes priced every call at the base rate: it under-estimated by the tier's surcharge.
    assert cell.recomputed.estimate_ratio == pytest.approx(cell.estimated_usd / sum(each))
    assert cell.recomputed.estimate_ratio < 0.8
    assert found.price_table == f"genai-prices {gp.__version__}"
    assert found.totals.recomputed.usd == cell.recomputed.usd


def test_without_the_log_the_tier_is_not_applied_and_said(tmp_path: Path) -> None:
    db = long_context_home(tmp_path / "home", logged=False)
    (cell,) = month(db).rows
    base = sum(base_rate(c) for c in TURN)
    assert cell.recomputed.usd == pytest.approx(base, rel=1e-9)
    assert cell.recomputed.unsized_calls == 3  # the row's calls, none sized
    # Hermes's estimate was the base rate too: no drift to show.
    assert cell.recomputed.estimate_ratio == pytest.approx(1.0)


def test_calls_hermes_priced_unknown_are_priced_and_counted(tmp_path: Path) -> None:
    db = long_context_home(tmp_path / "home", hermes_unknown=True)
    (cell,) = month(db).rows
    assert cell.estimated_usd is None and cell.effective_usd is None
    assert cell.status_mix["unknown"] == 3
    assert cell.recomputed.recovered_calls == 3
    assert cell.recomputed.recovered_usd == cell.recomputed.usd > 0


def rows_by_hand(db: Path, book: PriceBook) -> dict[str, float]:
    """Each model's recomputation, row by row through genai-prices' calculator
    (rows below every tier; the route as our lookup matched it)."""
    out: dict[str, float] = defaultdict(float)
    with closing(open_readonly(db)) as conn:
        found = conn.execute(
            "SELECT coalesce(model, ''), coalesce(billing_provider, ''), "
            "coalesce(billing_base_url, ''), coalesce(last_seen, first_seen), input_tokens, "
            "output_tokens, cache_read_tokens, cache_write_tokens, cost_status "
            "FROM session_model_usage"
        ).fetchall()
    for model, provider, url, at, inp, out_t, cr, cw, status in found:
        if status == "included" or at is None:
            continue
        route = Route(model, provider, url)
        again = reprice(book, route, shapes_tokens(inp, out_t, cr, cw), at)
        if again.status != PRICED:
            continue
        assert again.source.startswith("genai-prices")
        provider_id, matched = again.matched.split(":", 1)
        by_hand = at_base_rates(matched, provider_id, inp, cr, cw, out_t, at)
        out[model or "unknown"] += by_hand
    return out


UNIT = 100_000  # tokens: below every tier


def at_base_rates(
    model: str, provider: str, inp: int, cr: int, cw: int, out: int, at: float
) -> float:
    """A row at its base rates by the calculator: whole when its prompt is below every
    tier, else from the calculator's price of 100k tokens of each kind (a row sums
    calls; priced whole it would cross a tier no call crossed)."""
    if inp + cr + cw <= UNIT * 2:
        return calculator(model, provider, inp + cr + cw, cr, cw, out, at)

    def per_token(prompt: int, read: int, write: int, output: int) -> float:
        return calculator(model, provider, prompt, read, write, output, at) / UNIT

    return (
        inp * per_token(UNIT, 0, 0, 0)
        + cr * per_token(UNIT, UNIT, 0, 0)
        + cw * per_token(UNIT, 0, UNIT, 0)
        + out * per_token(0, 0, 0, UNIT)
    )


def shapes_tokens(inp: int, out: int, cr: int, cw: int):
    from dashboard.costs.reprice import Tokens

    return Tokens(inp, out, cr, cw)


@pytest.fixture(scope="module")
def demo_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("recomputed") / "demo"
    demo_home_copy(tmp_path_factory, home, sessions=120, messages=4000, anchor_day="2026-11-30")
    return home / "state.db"


def test_the_demo_s_months_add_up_to_its_rows_priced_by_the_calculator(demo_archive: Path) -> None:
    """Month by model, both summing paths (one-day rows in SQL, the rest one by one):
    each cell is its rows' figures from genai-prices' own calculator."""
    expected = rows_by_hand(demo_archive, PriceBook())
    found = months_by_model(demo_archive, date(2025, 1, 1), date(2027, 1, 1))
    # A row spends on the days of its calls (costs.days): compared by model over all time.
    shown: dict[str, float] = defaultdict(float)
    for cell in found.rows:
        if cell.recomputed.usd is not None:
            shown[cell.key] += cell.recomputed.usd
    assert set(shown) == set(expected)
    for key, value in expected.items():
        assert shown[key] == pytest.approx(value, rel=1e-9, abs=1e-9), key


def coverage(db: Path) -> tuple[int, int, list[str]]:
    """(rows recomputed, rows with a known model, the models left unpriced): a known
    model is named, not on the user's own machine and not included in a plan."""
    with closing(open_readonly(db)) as conn:
        rows = read_rows(conn, DayClock(datetime.now().astimezone().tzinfo), book=PriceBook())
        routes = dict(
            (rid, Route(m, p, u))
            for rid, m, p, u in conn.execute(
                "SELECT rowid, coalesce(model, ''), coalesce(billing_provider, ''), "
                "coalesce(billing_base_url, '') FROM session_model_usage"
            )
        )
    known = [
        (rid, row)
        for rid, row in rows.items()
        if routes[rid].model and not routes[rid].local and row.status != "included"
    ]
    priced = [rid for rid, row in known if row.r is not None]
    missing = sorted({routes[rid].model for rid, row in known if row.r is None})
    return len(priced), len(known), missing


def test_the_demo_prices_every_row_of_a_known_model(demo_archive: Path) -> None:
    priced, known, missing = coverage(demo_archive)
    assert known > 100 and priced / known >= 0.95, missing


@pytest.mark.parametrize(
    "build", [shapes.build_cost_facts, shapes.build_current_views, shapes.build_seed_external]
)
def test_every_hermes_shape_prices_its_rows_of_a_known_model(tmp_path: Path, build) -> None:
    home = tmp_path / "home"
    build(home / "state.db")
    db = archive_home(home)
    priced, known, missing = coverage(db)
    assert known and priced / known >= 0.95, (priced, known, missing)


def test_a_new_prices_yaml_prices_the_rows_again(tmp_path: Path) -> None:
    db = long_context_home(tmp_path / "home")
    before = month(db).rows[0].recomputed.usd
    with own_prices(tmp_path / "data", SONNET_AT_ONE) as path:
        after = month(db)
        tokens = sum(c.prompt + c.output for c in TURN)
        assert after.rows[0].recomputed.usd == pytest.approx(tokens / 1e6)
        assert after.rows[0].recomputed.own_usd == after.rows[0].recomputed.usd
        assert after.price_table.startswith(f"genai-prices {gp.__version__}+")
        path.write_text("prices: [broken\n")
        broken = month(db)
        assert broken.rows[0].recomputed.usd == pytest.approx(before)
        assert "not valid YAML" in broken.price_problem


def test_a_session_s_cost_carries_recall_s_price_with_its_tier(tmp_path: Path) -> None:
    """The session and chain pages' figure (usage.session_costs): the same recomputation,
    the logged long-context call at its tier."""
    from dashboard.costs.usage import session_costs

    db = long_context_home(tmp_path / "home")
    each = [
        calculator(SONNET, "openrouter", c.prompt, c.cache_read, 0, c.output, c.at) for c in TURN
    ]
    with closing(open_readonly(db)) as conn:
        cost = session_costs(conn, ["long"])["long"]
    assert cost.recomputed == pytest.approx(sum(each), rel=1e-9)
    assert cost.estimated == pytest.approx(sum(base_rate(c) for c in TURN))
