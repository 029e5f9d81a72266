"""A stronger embedder behind an OpenAI-compatible /v1/embeddings: a real HTTP server on
127.0.0.1 (tests/support/llm_stub.py, bag-of-words vectors of 96 dimensions)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dashboard.hermes.home import HermesHome
from dashboard.meaning.builder import MeaningBuilder
from dashboard.meaning.embedder import EmbedderChoice, EmbedderUnavailable
from dashboard.meaning.reader import MeaningReader
from dashboard.reader.reader import StateReader
from dashboard.search.sessions import SearchRequest
from tests.support import hermes_shapes as shapes
from tests.support.archived import archive_home
from tests.support.llm_stub import EMBED_DIMS, StubLLM

EVERY_SOURCE = ("cli", "telegram", "discord", "cron", "subagent", "api", "web", "slack")
SAID = "zebra quartz migration failed on the staging cluster"


@pytest.fixture
def home(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    shapes.append_turn(home / "state.db", shapes.S_ROOT, SAID, "rolled back", 2e9)
    return home, archive_home(home, tmp_path / "archive.db")


def test_the_endpoint_embeds_in_batches_as_unit_vectors(llm_stub: StubLLM) -> None:
    choice = EmbedderChoice(llm_stub.url, "stub-embed")
    vectors = choice.make().embed(["one two", "three", ""])
    assert vectors.shape == (3, EMBED_DIMS)
    assert np.allclose(np.linalg.norm(vectors[:2], axis=1), 1.0)
    asked = llm_stub.requests[-1]
    assert asked["path"] == "/v1/embeddings"
    assert asked["body"] == {"model": "stub-embed", "input": ["one two", "three", ""]}
    assert choice.name == f"endpoint:stub-embed@{llm_stub.url}"


def test_an_index_built_by_the_endpoint_is_searched_with_it(
    home: tuple[Path, Path], llm_stub: StubLLM
) -> None:
    root, path = home
    choice = EmbedderChoice(llm_stub.url, "stub-embed")
    assert MeaningBuilder(path, embedder=choice.make).build().ready
    reader = StateReader(HermesHome(root), path=path, meaning=MeaningReader(choice))
    found = reader.search(
        SearchRequest(query="quartz zebra staging", sources=EVERY_SOURCE, mode="meaning")
    )
    assert found.routes == ["meaning"]
    assert any("zebra quartz" in h.snippet for r in found.results for h in r.hits)

    # A server embedding with the bundled model cannot read those vectors: words only.
    bundled = StateReader(HermesHome(root), path=path, meaning=MeaningReader(EmbedderChoice()))
    other = bundled.search(SearchRequest(query="quartz zebra", sources=EVERY_SOURCE))
    assert "meaning" not in other.routes
    assert any("holds endpoint:stub-embed" in n for n in other.notes)


def test_an_endpoint_gone_quiet_is_said_and_words_answer(home: tuple[Path, Path]) -> None:
    root, path = home
    with StubLLM() as stub:
        choice = EmbedderChoice(stub.url, "stub-embed")
        assert MeaningBuilder(path, embedder=choice.make).build().ready
    # The endpoint is gone: a search answers by words, saying why ...
    reader = StateReader(HermesHome(root), path=path, meaning=MeaningReader(choice))
    found = reader.search(SearchRequest(query="zebra", sources=EVERY_SOURCE))
    assert found.results and "meaning" not in found.routes
    assert any("Search by meaning is unavailable" in n for n in found.notes)
    # ... and the worker's next batch fails (it is tried again later), writing nothing.
    shapes.append_turn(root / "state.db", shapes.S_ROOT, "another turn", "ok", 2.1e9)
    archive_home(root, path)
    with pytest.raises(EmbedderUnavailable):
        MeaningBuilder(path, embedder=choice.make).step()


def test_the_choice_reads_the_environment() -> None:
    assert EmbedderChoice.from_env({}).name.startswith("wordllama")
    env = {"RECALL_EMBED_BASE_URL": "http://127.0.0.1:9/v1/", "RECALL_EMBED_MODEL": "m"}
    assert EmbedderChoice.from_env(env).name == "endpoint:m@http://127.0.0.1:9/v1"
    assert EmbedderChoice.from_env({"RECALL_EMBED_MODEL": "m"}) == EmbedderChoice()


def test_another_sites_request_never_calls_the_endpoint(
    home: tuple[Path, Path], llm_stub: StubLLM, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A search (page or JSON) that another site made searches by words; the preview,
    whose recall would embed the message, is refused; Recall's own pages call it."""
    from tests.support.app import make_app

    root, _ = home
    monkeypatch.setenv("RECALL_EMBED_BASE_URL", llm_stub.url)
    monkeypatch.setenv("RECALL_EMBED_MODEL", "stub-embed")
    client = make_app(root, tmp_path / "data").test_client()
    elsewhere = {"Sec-Fetch-Site": "cross-site"}
    asked = {"q": "zebra", "mode": "meaning"}
    assert client.get("/api/search", query_string=asked, headers=elsewhere).json["mode"] == "words"
    assert client.get("/api/search", query_string=asked).json["mode"] == "meaning"
    page = client.get("/", query_string=asked, headers=elsewhere).get_data(as_text=True)
    assert 'class="result-meta"' in page and "by meaning" not in page
    assert 'name="mode" value="words" checked' in page  # the mode it ran in
    preview = {"message": "zebra quartz"}
    assert client.get("/preview", query_string=preview, headers=elsewhere).status_code == 403
    assert client.get("/preview", query_string=preview).status_code == 200
