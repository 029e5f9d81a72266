"""The prices page: every route and what prices it; prices.yaml edited whole or not at all."""

from __future__ import annotations

import hashlib
import html
import json
import re
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from dashboard.costs import book as price_book
from tests.support.app import make_app
from tests.support.cost_homes import NOV, long_context_home

ORIGIN = {"Origin": "http://localhost"}
NOVEMBER = {"from": "2026-11-01", "to": "2026-12-01"}
LOCAL = "llama3.3:70b"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The long-context home, plus calls to a local model nothing prices."""
    import sqlite3
    from contextlib import closing

    home = tmp_path / "home"
    long_context_home(home)
    with closing(sqlite3.connect(home / "state.db")) as conn, conn:
        conn.execute(
            "INSERT INTO session_model_usage (session_id, model, billing_provider, "
            "billing_base_url, task, api_call_count, input_tokens, output_tokens, "
            "estimated_cost_usd, cost_status, first_seen, last_seen) VALUES ('long', ?, "
            "'custom', 'http://127.0.0.1:11434/v1', '', 4, 2000000, 1000000, 0, 'unknown', "
            "?, ?)",
            (LOCAL, NOV + 100, NOV + 100),
        )
    return home


@pytest.fixture
def client(home: Path, tmp_path: Path) -> FlaskClient:
    yield make_app(home, tmp_path / "data").test_client()
    price_book.configure(None)


def field(page: str, name: str) -> str:
    match = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert match, name
    return html.unescape(match.group(1))


def load(client: FlaskClient) -> tuple[str, str, str]:
    page = client.get("/costs/prices").get_data(as_text=True)
    return page, field(page, "csrf_token"), field(page, "base_sha256")


def post(client: FlaskClient, token: str, base: str, text: str):
    form = {"csrf_token": token, "base_sha256": base, "text": text}
    return client.post("/costs/prices", data=form, headers=ORIGIN)


def flat(text: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


def recomputed(client: FlaskClient) -> dict:
    body = json.loads(client.get("/api/costs", query_string=NOVEMBER).get_data(as_text=True))
    return body["totals"]["recomputed"]


def test_the_page_lists_what_prices_each_route_and_what_nothing_prices(
    client: FlaskClient,
) -> None:
    page, _, base = load(client)
    unpriced = page[page.index('class="grid prices-unpriced"') :]
    unpriced = flat(unpriced[: unpriced.index("</table>")])
    assert f"{LOCAL} custom 4 a local model" in unpriced
    assert f'- model: "{LOCAL}" provider: "custom" input: 0 output: 0' in unpriced
    priced = page[page.index('class="grid prices-priced"') :]
    priced = flat(priced[: priced.index("</table>")])
    assert re.search(r"anthropic/claude-sonnet-4\.5 openrouter \d+ genai-prices", priced)
    assert "openrouter:anthropic/claude-sonnet-4.5" in priced
    assert base == "none" and "# Recall's price overrides" in html.unescape(page)


def test_a_saved_price_prices_the_calls_again(client: FlaskClient, tmp_path: Path) -> None:
    before = recomputed(client)
    assert before["unpriced_calls"] == 4
    _, token, base = load(client)
    text = f"prices:\n  - model: {LOCAL}\n    provider: custom\n    input: 0.5\n    output: 1\n"
    response = post(client, token, base, text)
    assert response.status_code == 303 and response.headers["Location"].endswith("saved=1")
    assert (tmp_path / "data" / "prices.yaml").read_text() == text
    after = recomputed(client)
    assert after["unpriced_calls"] == 0
    assert after["usd"] == pytest.approx(before["usd"] + 2 * 0.5 + 1 * 1)
    assert before["own_usd"] is None and after["own_usd"] == pytest.approx(2.0)
    page = client.get("/costs/prices?saved=1").get_data(as_text=True)
    assert "prices.yaml saved" in page
    priced = page[page.index('class="grid prices-priced"') :]
    assert f"{LOCAL} custom 4 prices.yaml custom:{LOCAL}" in flat(priced)
    if 'class="grid prices-unpriced"' in page:
        unpriced = page[page.index('class="grid prices-unpriced"') :]
        assert LOCAL not in unpriced[: unpriced.index("</table>")]


def test_a_price_list_that_does_not_read_is_refused_and_kept_on_the_page(
    client: FlaskClient, tmp_path: Path
) -> None:
    _, token, base = load(client)
    text = f"prices:\n  - model: {LOCAL}\n    input: cheap\n    output: 1\n"
    response = post(client, token, base, text)
    page = response.get_data(as_text=True)
    assert response.status_code == 400
    assert f"Not saved: prices.yaml, entry 1 ({LOCAL}): input must be a number" in flat(page)
    assert html.escape(text, quote=False) in page  # the typed text, whole
    assert not (tmp_path / "data" / "prices.yaml").exists()


def test_a_file_changed_on_disk_is_never_overwritten(client: FlaskClient, tmp_path: Path) -> None:
    _, token, base = load(client)
    theirs = "prices:\n  - model: a\n    input: 1\n    output: 2\n"
    (tmp_path / "data" / "prices.yaml").write_text(theirs)
    mine = "prices:\n  - model: b\n    input: 1\n    output: 2\n"
    response = post(client, token, base, mine)
    page = response.get_data(as_text=True)
    assert response.status_code == 409 and "changed on disk" in page
    assert (tmp_path / "data" / "prices.yaml").read_text() == theirs
    assert html.escape(mine, quote=False) in page and html.escape(theirs, quote=False) in page
    # With the digest of the file as it is now, the save goes through.
    digest = hashlib.sha256(theirs.encode()).hexdigest()
    assert field(page, "base_sha256") == digest
    again = post(client, token, digest, mine)
    assert again.status_code == 303
    assert (tmp_path / "data" / "prices.yaml").read_text() == mine


def test_a_save_needs_the_form_token_and_this_site(client: FlaskClient, tmp_path: Path) -> None:
    _, token, base = load(client)
    text = "prices: []\n"
    form = {"base_sha256": base, "text": text}
    assert client.post("/costs/prices", data=form, headers=ORIGIN).status_code == 403
    evil = {"Origin": "http://evil.example"}
    forged = client.post("/costs/prices", data={**form, "csrf_token": token}, headers=evil)
    assert forged.status_code == 403
    assert not (tmp_path / "data" / "prices.yaml").exists()
    big = {**form, "csrf_token": token, "text": "#" * (256 * 1024 + 1)}
    assert client.post("/costs/prices", data=big, headers=ORIGIN).status_code == 400


def test_the_example_a_new_user_sees_saves_as_no_prices() -> None:
    from dashboard.costs.overrides import parse
    from dashboard.views.prices import EXAMPLE

    assert parse(EXAMPLE) == ()
    uncommented = "\n".join(
        line.replace("#  -", "  -").replace("#    ", "    ") for line in EXAMPLE.splitlines()
    )
    assert [o.model for o in parse(uncommented)] == ["llama3.3:70b", "google/gemini-2.5-pro"]
