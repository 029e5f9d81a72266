"""The JSON API: /api/search and /api/sessions/<id>/messages, fuzzed with Hypothesis."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import hermes_shapes as shapes

RESULT_KEYS = {
    "query",
    "route",
    "bounded",
    "total_sessions",
    "page",
    "per_page",
    "results",
    "took_ms",
}
CARD_KEYS = {
    "session_id",
    "root_session_id",
    "title",
    "source",
    "model",
    "started_at",
    "hit_count",
    "hits",
}
HIT_KEYS = {"message_id", "role", "timestamp", "snippet"}


def test_search_shape(client: FlaskClient) -> None:
    response = client.get("/api/search", query_string={"q": shapes.UNIQUE_WORD})
    assert response.status_code == 200
    body = response.json
    assert RESULT_KEYS <= set(body)
    assert body["route"] == "unicode61" and body["total_sessions"] == 1
    card = body["results"][0]
    assert CARD_KEYS <= set(card) and card["session_id"] == shapes.S_ROOT
    assert HIT_KEYS <= set(card["hits"][0])
    assert card["hit_count"] == 1


def test_search_filters_in_the_url(client: FlaskClient) -> None:
    q = {"q": shapes.CRON_WORD}
    assert client.get("/api/search", query_string=q).json["total_sessions"] == 0
    cron = client.get("/api/search", query_string={**q, "source": "cron"}).json
    assert [r["session_id"] for r in cron["results"]] == [shapes.S_CRON]
    paged = client.get("/api/search", query_string={"q": "pool", "per_page": 1, "page": 2}).json
    assert paged["page"] == 2 and len(paged["results"]) <= 1


def test_bad_parameters_are_400_with_a_message(client: FlaskClient) -> None:
    for params in (
        {"q": "AND OR"},
        {"q": "NOT x"},
        {"sort": "sideways"},
        {"page": "-1"},
        {"days": "many"},
        {"role": "admin"},
        {"after": "not-a-date"},
        {"q": "x", "mode": "vibes"},
    ):
        response = client.get("/api/search", query_string=params)
        assert response.status_code == 400, params
        assert response.json["error"]
    said = client.get("/api/search", query_string={"q": "x", "mode": "vibes"}).json["error"]
    assert "hybrid, words, meaning" in said


def test_empty_query_lists_recent_sessions(client: FlaskClient) -> None:
    body = client.get("/api/search").json
    assert body["route"] == "recent" and body["results"]


def test_session_messages(client: FlaskClient) -> None:
    body = client.get(f"/api/sessions/{shapes.S_CONT1}/messages").json
    assert body["session"]["id"] == shapes.S_CONT1
    assert body["messages"][0]["is_compaction_summary"]
    assert body["neighbours"]["previous"]["id"] == shapes.S_ROOT
    everything = client.get(f"/api/sessions/{shapes.S_TELEGRAM}/messages?all=1").json
    visible = client.get(f"/api/sessions/{shapes.S_TELEGRAM}/messages").json
    assert len(everything["messages"]) > len(visible["messages"])
    missing = client.get("/api/sessions/nope/messages")
    assert missing.status_code == 404 and "nope" in missing.json["error"]


def test_unavailable_store_is_json_at_the_pages_status(tmp_path) -> None:
    from tests.support.app import make_app

    # One status table (web/errors.STATUS_FOR): a missing store is the page's 500 here too
    # (the API said 503 before, the page 500).
    client = make_app(tmp_path / "no-home", tmp_path / "data").test_client()
    response = client.get("/api/search", query_string={"q": "x"})
    assert response.status_code == 500 and response.json["reason"] == "missing"
    assert client.get("/", query_string={"q": "x"}).status_code == 500


NASTY = st.sampled_from(
    [
        '"',
        "(",
        ")",
        "*",
        ":",
        "^",
        "-",
        "+",
        "NOT",
        "AND",
        "OR",
        "NEAR",
        "NEAR(",
        ",",
        "\x00",
        "🙂",
        "数据库",
        "部",
        "\\",
        "'",
        "%",
        "_",
        " ",
    ]
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    q=st.one_of(
        st.text(max_size=300),
        st.lists(NASTY, max_size=40).map("".join),
        st.lists(NASTY, max_size=40).map(" ".join),
    )
)
def test_any_query_is_answered_200_or_400(client: FlaskClient, q: str) -> None:
    response = client.get("/api/search", query_string={"q": q})
    assert response.status_code in (200, 400), (q, response.status_code)
    if response.status_code == 400:
        assert response.json["error"]
    else:
        assert RESULT_KEYS <= set(response.json)


def test_ten_kilobytes_of_junk(client: FlaskClient) -> None:
    junk = ('"( NOT 数据库 ** ^^ :: NEAR(' * 400)[:10_240]
    response = client.get("/api/search", query_string={"q": junk})
    assert response.status_code in (200, 400)
    body = response.json
    assert body.get("error") or any("Shortened" in n for n in body["notes"])


@pytest.mark.parametrize(
    "path, params",
    [
        ("/api/search", {"q": "pool", "after": "0001-01-01"}),
        ("/api/search", {"q": "pool", "before": "0001-01-01"}),
        ("/api/search", {"q": "pool", "after": "9999-12-31T23:59:59"}),
        ("/api/search", {"q": "pool", "page": "٣"}),
        ("/api/search", {"q": "pool", "per_page": "9" * 5000}),
        ("/", {"q": "pool", "after": "0001-01-01"}),
        ("/", {"q": "pool", "before": "9999-12-31T23:59:59"}),
        ("/api/session_search", {"query": "pool", "limit": "²"}),
        ("/api/session_search", {"query": "pool", "limit": "9" * 5000}),
        ("/api/session_search", {"query": "pool", "limit": "٣"}),
    ],
)
def test_numbers_and_dates_out_of_reach_are_a_400_with_a_message(
    client: FlaskClient, path: str, params: dict[str, str]
) -> None:
    response = client.get(path, query_string=params)
    assert response.status_code == 400
    text = response.get_data(as_text=True)
    name = next(k for k in params if k not in ("q", "query"))
    assert name in text and ("whole number" in text or "between" in text or "date" in text)
