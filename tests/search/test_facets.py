"""The search filters' choices: sources and models with their session counts, one model's
spellings under one entry, and a model filter that matches every spelling."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.hermes.home import HermesHome
from dashboard.hermes.model_names import model_family
from dashboard.reader.reader import StateReader
from dashboard.search.sessions import SearchRequest
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore


def spelled_home(tmp_path: Path) -> StateReader:
    """Sessions of one model under two spellings (OpenRouter's and the provider's), and another."""
    home = tmp_path / "spelled"
    with SessionStore(home / "state.db") as store:
        for i, model in enumerate(
            ["anthropic/claude-sonnet-4.5", "claude-sonnet-4-5", "claude-sonnet-4-5", "gpt-5-mini"]
        ):
            sid = store.create_session("cli", session_id=f"m{i}", model=model, started_at=1e9 + i)
            store.append_messages(sid, [NewMessage("user", "spelling check", timestamp=1e9 + i)])
    return StateReader(HermesHome(home))


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("Claude-Sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("openai/gpt-5", "gpt-5"),
        ("llama3.3:70b", "llama3-3:70b"),
    ],
)
def test_model_family_is_one_key_for_every_spelling(name: str, family: str) -> None:
    assert model_family(name) == family


def test_model_facet_groups_spellings_with_counts(tmp_path: Path) -> None:
    reader = spelled_home(tmp_path)
    facets = reader.search_page(None).facets
    (sonnet,) = [f for f in facets["models"] if "sonnet" in f.label]
    assert sonnet.key == "claude-sonnet-4-5" and sonnet.count == 3
    assert sonnet.label == "claude-sonnet-4-5"  # the spelling most sessions use
    assert set(sonnet.spellings) == {"anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"}
    assert facets["source_counts"] == {"cli": 4} and facets["sources"] == ["cli"]
    # The filter matches every spelling, whichever one the URL names.
    for spelled in ("claude-sonnet-4-5", "anthropic/claude-sonnet-4.5"):
        result = reader.search(SearchRequest(query="spelling", group="session", model=spelled))
        found = {r.session_id for r in result.results}
        assert found == {"m0", "m1", "m2"}, spelled
        recent = reader.search(SearchRequest.from_params({"model": spelled}.get, lambda _: []))
        assert {r.session_id for r in recent.results} == {"m0", "m1", "m2"}
