"""The agent's prefetch recalls by meaning too (hybrid, issue 27): a turn worded away
from what was said still brings that conversation back."""

from __future__ import annotations

from pathlib import Path

from dashboard.agent.provider import RecallMemoryProvider
from dashboard.hermes.home import HermesHome
from dashboard.meaning.builder import MeaningBuilder
from dashboard.reader.reader import StateReader
from tests.support import hermes_shapes as shapes
from tests.support.archived import archive_home

SAID = "The docker containers cannot reach the postgres database over the compose network."
ASKED = "my boxes could not talk to each other again, remember how we fixed that?"


def test_the_prefetch_recalls_a_paraphrase(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    shapes.append_turn(home / "state.db", shapes.S_ROOT, SAID, "one compose network", 2e9)
    path = archive_home(home, tmp_path / "archive.db")
    reader = StateReader(HermesHome(home), path=path)
    provider = RecallMemoryProvider(home, reader=reader, data_dir=tmp_path / "data")
    before = provider.prefetch(ASKED)
    assert "docker containers" not in before  # words alone: the index is not built
    assert MeaningBuilder(path).build().ready
    assert "docker containers" in provider.prefetch(ASKED)
