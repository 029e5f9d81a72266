"""Stage 2: summaries against a real OpenAI-compatible stub server on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask

from dashboard.hermes.home import HermesHome
from dashboard.reader.reader import StateReader
from dashboard.store.recalldb import RecallData
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from dashboard.summaries.llm import LLMConfig, Summarizer
from dashboard.summaries.service import RAW_PREVIEW_LABEL, SummaryService, session_search_result
from tests.support.app import make_app
from tests.support.llm_stub import StubLLM

SECRET = "sk-test-DO-NOT-LEAK-4f2a9c"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """12 sessions about the redis pool, one message each turn."""
    with SessionStore(tmp_path / "home" / "state.db") as store:
        for i in range(12):
            sid = store.create_session("cli", session_id=f"s{i:02d}", started_at=1_700_000_000 + i)
            store.append_messages(
                sid,
                [
                    NewMessage("user", f"redis pool exhausted again on worker {i}"),
                    NewMessage(
                        "assistant", f"Raise max_connections to {20 + i} and reuse one pool."
                    ),
                ],
            )
    return tmp_path / "home"


def service_for(home: Path, stub: StubLLM | None, **config: object) -> SummaryService:
    settings = {
        "LLM_BASE_URL": stub.url if stub else None,
        "LLM_MODEL": "stub-model",
        "LLM_API_KEY": SECRET,
        **config,
    }
    return SummaryService(
        StateReader(HermesHome(home)),
        RecallData(home / "recall" / "recall.db"),
        Summarizer(LLMConfig.from_mapping(settings)),
    )


@pytest.fixture
def slow_stub() -> Iterator[StubLLM]:
    with StubLLM(delay=0.4) as stub:
        yield stub


def test_concurrency_never_exceeds_the_limit(home: Path, slow_stub: StubLLM) -> None:
    service = service_for(home, slow_stub, SUMMARY_CONCURRENCY=3)
    try:
        ids = [f"s{i:02d}" for i in range(12)]
        summaries = service.summarize_many(ids, "redis pool")
    finally:
        service.close()
    assert [s.kind for s in summaries] == ["model"] * 12
    assert len(slow_stub.requests) == 12
    assert slow_stub.max_in_flight == 3  # reached, never exceeded


def test_the_limit_is_capped_at_five(home: Path, slow_stub: StubLLM) -> None:
    service = service_for(home, slow_stub, SUMMARY_CONCURRENCY=50)
    try:
        service.summarize_many([f"s{i:02d}" for i in range(12)], "redis")
    finally:
        service.close()
    assert slow_stub.max_in_flight <= 5


def test_request_shape_and_bearer_key(home: Path, llm_stub: StubLLM) -> None:
    service = service_for(home, llm_stub)
    try:
        (summary,) = service.summarize_many(["s03"], "redis pool")
    finally:
        service.close()
    assert summary.kind == "model" and "redis pool" in summary.text
    assert summary.model == "stub-model" and summary.created_at
    sent = llm_stub.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["Authorization"] == f"Bearer {SECRET}"
    body = sent["body"]
    assert body["model"] == "stub-model" and body["temperature"] == 0.1
    system, user = body["messages"]
    assert "focus on the search topic" in system["content"]
    assert user["content"].startswith("Search topic: redis pool\nSession source: cli\n")
    assert "[USER]: redis pool exhausted again on worker 3" in user["content"]


def test_a_cached_summary_makes_no_second_call(home: Path, llm_stub: StubLLM) -> None:
    service = service_for(home, llm_stub)
    try:
        first = service.summarize_many(["s01"], "redis pool")[0]
        again = service.summarize_many(["s01"], "  Redis   pool ")[0]  # same normalised query
    finally:
        service.close()
    assert len(llm_stub.requests) == 1
    assert again.cached and again.text == first.text
    # A new message changes the key: the next view asks again.
    with SessionStore(home / "state.db") as store:
        store.append_messages("s01", [NewMessage("user", "and the redis pool once more")])
    service = service_for(home, llm_stub)
    try:
        fresh = service.summarize_many(["s01"], "redis pool")[0]
    finally:
        service.close()
    assert not fresh.cached and len(llm_stub.requests) == 2


@pytest.mark.parametrize(
    ("mode", "reason"),
    [("error500", "HTTP 500"), ("malformed", "not a chat completion"), ("empty", "empty reply")],
)
def test_bad_answers_fall_back_to_a_preview(home: Path, mode: str, reason: str) -> None:
    with StubLLM(mode=mode) as stub:
        service = service_for(home, stub, LLM_RETRIES=1)
        try:
            (summary,) = service.summarize_many(["s05"], "redis pool")
        finally:
            service.close()
        assert len(stub.requests) == (2 if mode == "error500" else 1)  # 5xx is retried once
    assert summary.kind == "preview" and reason in (summary.reason or "")
    assert "<mark>redis pool</mark>" in summary.text or "<mark>redis</mark>" in summary.text
    assert summary.plain_text().startswith(RAW_PREVIEW_LABEL)


def test_a_slow_model_times_out_into_the_preview(home: Path) -> None:
    with StubLLM(delay=3.0) as stub:
        service = service_for(home, stub, LLM_TIMEOUT=0.3, LLM_RETRIES=0)
        try:
            began = time.monotonic()
            (summary,) = service.summarize_many(["s02"], "redis")
            waited = time.monotonic() - began
        finally:
            service.close()
    assert summary.kind == "preview" and "did not answer within 0.3 s" in summary.reason
    assert waited < 3.0  # it gave up at the timeout instead of waiting for the model


def test_no_endpoint_means_an_immediate_preview(home: Path) -> None:
    service = service_for(home, None)
    try:
        summary = service.poll("s00", "redis")
    finally:
        service.close()
    assert summary is not None and summary.kind == "preview"
    assert "no summarization endpoint" in summary.reason


def test_poll_never_waits(home: Path, slow_stub: StubLLM) -> None:
    service = service_for(home, slow_stub)
    try:
        began = time.monotonic()
        assert service.poll("s04", "redis") is None  # pending: a job started
        assert service.poll("s04", "redis") is None  # still pending, no second job
        assert time.monotonic() - began < 0.3
        deadline = time.monotonic() + 10
        while (summary := service.poll("s04", "redis")) is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        service.close()
    assert summary is not None and summary.kind == "model"
    assert len(slow_stub.requests) == 1


def test_tool_parity_shape(home: Path, llm_stub: StubLLM) -> None:
    service = service_for(home, llm_stub)
    try:
        answer = session_search_result(service.reader, service, "redis pool", limit=4)
        recent = session_search_result(service.reader, service, "", limit=2)
    finally:
        service.close()
    assert answer["success"] and answer["count"] == 4 and answer["sessions_searched"] == 12
    first = answer["results"][0]
    assert set(first) == {"session_id", "when", "source", "model", "summary"}
    assert " at " in first["when"]
    assert recent["mode"] == "recent" and recent["count"] == 2
    assert len(llm_stub.requests) == 4  # the recent list asked no model


def _app(home: Path, tmp: Path, stub: StubLLM | None, **extra: object) -> Flask:
    return make_app(
        home,
        tmp / "data",
        LLM_BASE_URL=stub.url if stub else None,
        LLM_MODEL="stub-model",
        LLM_API_KEY=SECRET,
        **extra,
    )


def test_web_cards_get_a_slot_and_the_partial_fills_it(
    home: Path, tmp_path: Path, llm_stub: StubLLM
) -> None:
    client = _app(home, tmp_path, llm_stub).test_client()
    page = client.get("/?q=redis").get_data(as_text=True)
    assert page.count('hx-trigger="revealed"') == 12 and 'id="summary-s00"' in page
    assert "summary-slot" not in client.get("/").get_data(as_text=True)  # browse: no model
    hx = {"HX-Request": "true", "HX-Target": "summary-s00"}
    deadline = time.monotonic() + 10
    while True:
        part = client.get("/summaries/s00?q=redis", headers=hx).get_data(as_text=True)
        if "Summary by" in part or time.monotonic() > deadline:
            break
        assert 'hx-trigger="load delay:800ms"' in part  # pending: polls itself
        time.sleep(0.1)
    assert "Summary by <strong>stub-model</strong>" in part and "<strong>redis</strong>" in part
    button = client.get("/?q=redis&summaries=button").get_data(as_text=True)
    assert "Summarize this session" in button and 'hx-trigger="revealed"' not in button
    off = client.get("/?q=redis&summaries=off").get_data(as_text=True)
    assert 'id="summary-s00"' not in off


def test_without_javascript_the_summary_is_a_page(
    home: Path, tmp_path: Path, llm_stub: StubLLM
) -> None:
    client = _app(home, tmp_path, llm_stub).test_client()
    page = client.get("/summaries/s07?q=redis").get_data(as_text=True)
    assert "<html" in page and "Summary by" in page
    assert client.get("/summaries/nope?q=redis").status_code == 404


def test_the_key_never_shows(home: Path, tmp_path: Path, llm_stub: StubLLM, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    app = _app(home, tmp_path, llm_stub)
    client = app.test_client()
    bodies = [
        client.get(u).get_data(as_text=True)
        for u in (
            "/",
            "/?q=redis",
            "/overview",
            "/summaries/s01?q=redis",
            "/api/search?q=redis",
            "/api/session_search?query=redis",
            "/nope",
            "/healthz",
        )
    ]
    assert llm_stub.requests and all(SECRET not in b for b in bodies)
    assert SECRET not in caplog.text
    assert SECRET not in repr(LLMConfig.from_mapping(app.config))


def test_api_session_search(home: Path, tmp_path: Path, llm_stub: StubLLM) -> None:
    client = _app(home, tmp_path, llm_stub).test_client()
    body = client.get("/api/session_search?query=redis&limit=2").json
    assert body["success"] and body["count"] == 2
    assert client.get("/api/session_search?limit=99").status_code == 400
    recent = client.get("/api/session_search").json
    assert recent["mode"] == "recent"
    assert json.dumps(recent).count("summary") == 0


@pytest.mark.parametrize("bad", ["inf", "nan", "-3", "²", "lots"])
def test_odd_llm_settings_fall_back_to_the_defaults(bad: str) -> None:
    """RECALL_SUMMARY_CONCURRENCY=inf once failed at start (int(inf) overflows)."""
    config = LLMConfig.from_mapping(
        {"SUMMARY_CONCURRENCY": bad, "LLM_TIMEOUT": bad, "LLM_RETRIES": bad}
    )
    defaults = LLMConfig.from_mapping({})
    assert (config.concurrency, config.timeout_s, config.retries) == (
        defaults.concurrency,
        defaults.timeout_s,
        defaults.retries,
    )
