"""MemoryManager: one external provider at most, bounded prefetch, speculative reuse."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from dashboard.agent import MemoryManager, MemoryProvider, RecallMemoryProvider
from dashboard.hermes.home import HermesHome
from dashboard.reader.reader import StateReader
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore


@pytest.fixture(autouse=True)
def _own_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recall's data directory (XDG) inside the test's folder, not the user's."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))


NOW = 1_790_000_000.0


class External(MemoryProvider):
    """A second backend (as Honcho or Mem0 would be) with a tool of its own."""

    def __init__(
        self, name: str = "honcho", tool: str = "honcho_recall", available: bool = True
    ) -> None:
        self._name, self._tool, self._available = name, tool, available
        self.synced: list[list[Mapping[str, Any]]] = []
        self.release = threading.Event()
        self.slow = False
        self.finished = threading.Event()
        self.asked = 0

    @property
    def name(self) -> str:
        return self._name

    def is_available(self) -> bool:
        return self._available

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        self.session_id = session_id

    def system_prompt_block(self) -> str:
        return f"[{self._name}] peer card: prefers tea"

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        self.asked += 1
        if self.slow:  # a network backend having a bad day
            self.release.wait(timeout=30)
        self.finished.set()
        return f"[{self._name}] facts about {query}"

    def sync_turn(self, turn_messages: Sequence[Mapping[str, Any]]) -> None:
        self.synced.append(list(turn_messages))

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": self._tool, "parameters": {}}}]

    def handle_tool_call(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        return json.dumps({"success": True, "from": self._name})


@pytest.fixture
def home(tmp_path: Path) -> Path:
    root = tmp_path / "home"
    (root / "memories").mkdir(parents=True)
    (root / "memories" / "USER.md").write_text("Name: Ada", encoding="utf-8")
    with SessionStore(root / "state.db") as store:
        store.create_session("cli", session_id="past", started_at=NOW - 3 * 86400)
        store.append_messages(
            "past", [NewMessage("user", "the albatross cache is slow", timestamp=NOW - 3 * 86400)]
        )
    return root


@pytest.fixture
def manager(home: Path) -> Iterator[tuple[MemoryManager, RecallMemoryProvider]]:
    m = MemoryManager()
    builtin = RecallMemoryProvider(home, clock=lambda: NOW)
    assert m.add_provider(builtin)
    yield m, builtin
    m.shutdown_all()


def test_builtin_plus_one_external_and_no_more(
    manager: tuple[MemoryManager, RecallMemoryProvider], caplog: pytest.LogCaptureFixture
) -> None:
    m, builtin = manager
    first = External("honcho", "honcho_recall")
    assert m.add_provider(first)
    with caplog.at_level(logging.WARNING):
        assert not m.add_provider(External("mem0", "mem0_search"))
    assert "only one external provider" in caplog.text and "'honcho'" in caplog.text
    assert [p.name for p in m.providers] == ["builtin", "honcho"]
    assert [t["function"]["name"] for t in m.get_tool_schemas()] == [
        "recall_search",
        "honcho_recall",
    ]


def test_refusals_name_their_reason(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    m = MemoryManager()
    with caplog.at_level(logging.WARNING):
        assert not m.add_provider(External(available=False))
        assert m.add_provider(External("clash", tool="recall_search"))
        assert not m.add_provider(RecallMemoryProvider(home))  # its tool name is taken
        assert not m.add_provider(RecallMemoryProvider(home / "missing", readonly=True))
    assert "not available" in caplog.text and "tool recall_search is taken" in caplog.text
    m.shutdown_all()
    fresh = MemoryManager()
    assert fresh.add_provider(RecallMemoryProvider(home))
    assert not fresh.add_provider(RecallMemoryProvider(home))  # one built-in
    fresh.shutdown_all()


def test_the_builtin_comes_first_whatever_the_order(home: Path) -> None:
    m = MemoryManager()
    m.add_provider(External())
    m.add_provider(RecallMemoryProvider(home))
    assert [p.name for p in m.providers] == ["builtin", "honcho"]
    assert m.build_system_prompt().startswith("═")  # USER.md's block first
    assert m.build_system_prompt().endswith("[honcho] peer card: prefers tea")
    m.shutdown_all()


def test_a_queued_prefetch_is_used_without_a_second_search(
    manager: tuple[MemoryManager, RecallMemoryProvider],
) -> None:
    m, builtin = manager
    m.initialize_all("now", source="cli")
    m.sync_all(user_msg="is the albatross cache still slow?", assistant_response="checking")
    m.queue_prefetch_all("albatross cache", session_id="now")  # end of the turn
    searches = builtin.stats["searches"]
    block = m.prefetch_all("and what about it now?", session_id="now")  # the next turn
    assert "the albatross cache is slow" in block and "[Long-term — 3 days ago]" in block
    assert builtin.stats["searches"] == searches  # no second search
    assert builtin.stats["speculative_used"] == 1
    # Without a queued prefetch, the next turn searches for itself.
    m.prefetch_all("albatross", session_id="now")
    assert builtin.stats["searches"] == searches + 1


def test_a_slow_provider_does_not_hold_the_turn(
    manager: tuple[MemoryManager, RecallMemoryProvider],
) -> None:
    m, _ = manager
    slow = External()
    slow.slow = True
    m.add_provider(slow)
    try:
        block = m.prefetch_all("albatross")  # waits its 2 s at most, then goes on
        assert not slow.finished.is_set()  # still stuck when the turn went on
        assert "the albatross cache is slow" in block and "[honcho]" not in block
        assert m.stats["late"] == 1
        # The next turn does not ask it again while it is stuck, nor wait for it.
        assert "albatross" in m.prefetch_all("albatross")
        assert slow.asked == 1 and m.stats["late"] == 2
    finally:
        slow.release.set()
    assert slow.finished.wait(10)
    assert "[honcho] facts about albatross" in m.prefetch_all("albatross")


def test_a_slow_queued_builtin_prefetch_does_not_hold_the_turn(
    manager: tuple[MemoryManager, RecallMemoryProvider],
) -> None:
    m, builtin = manager
    gate = threading.Event()
    original = builtin.recall

    def stalled(query: str, *, session_id: str = "") -> Any:
        gate.wait(timeout=30)  # a search stuck behind a cold disk
        return original(query, session_id=session_id)

    builtin.recall = stalled  # type: ignore[method-assign]
    m.queue_prefetch_all("albatross")
    try:
        assert m.prefetch_all("albatross") == ""  # two seconds, then the turn goes on
        assert m.stats["late"] == 1
    finally:
        gate.set()


def test_sync_all_reaches_every_provider(
    manager: tuple[MemoryManager, RecallMemoryProvider],
) -> None:
    m, builtin = manager
    external = External()
    m.add_provider(external)
    m.initialize_all("now", source="cli", model="m1")
    m.sync_all([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}])
    m.sync_all(user_msg="bye", assistant_response="see you")
    assert builtin.flush(timeout=10)
    got = StateReader(HermesHome(builtin.home.root)).transcript("now").messages
    assert [(x.role, x.text) for x in got] == [
        ("user", "hello"),
        ("assistant", "hi"),
        ("user", "bye"),
        ("assistant", "see you"),
    ]
    assert len(external.synced) == 2 and external.synced[1][0]["content"] == "bye"


def test_an_external_providers_failure_is_logged_not_raised(
    manager: tuple[MemoryManager, RecallMemoryProvider], caplog: pytest.LogCaptureFixture
) -> None:
    m, _ = manager

    class Broken(External):
        def sync_turn(self, turn_messages: Sequence[Mapping[str, Any]]) -> None:
            raise ConnectionError("backend down")

        def prefetch(self, query: str, *, session_id: str = "") -> str:
            raise ConnectionError("backend down")

    m.add_provider(Broken())
    m.initialize_all("now")
    with caplog.at_level(logging.WARNING):
        m.sync_all(user_msg="x", assistant_response="y")
        assert "albatross" in m.prefetch_all("albatross")
    assert "backend down" in caplog.text and m.stats["failed"] == 1


def test_tool_calls_are_routed_to_their_provider(
    manager: tuple[MemoryManager, RecallMemoryProvider],
) -> None:
    m, _ = manager
    m.add_provider(External())
    assert json.loads(m.handle_tool_call("honcho_recall", {}))["from"] == "honcho"
    assert json.loads(m.handle_tool_call("recall_search", {"query": "albatross"}))["success"]
    unknown = json.loads(m.handle_tool_call("memory_write", {}))
    assert unknown["success"] is False and "memory_write" in unknown["error"]


def test_the_volatile_block_in_order(
    manager: tuple[MemoryManager, RecallMemoryProvider],
) -> None:
    m, _ = manager
    m.add_provider(External())
    m.initialize_all("now", model="claude-x")
    block = m.volatile_block("albatross", session_id="now", now=NOW)
    assert [p.kind for p in block.parts] == [
        "user",
        "memory",
        "external",
        "recalled",
        "recalled",
        "context",
    ]
    assert block.parts[1].text == ""  # no MEMORY.md: no block, and no blank line for it
    assert "Name: Ada" in block.parts[0].text
    assert block.parts[3].items and block.parts[3].items[0].session_id == "past"
    assert block.parts[4].text == "[honcho] facts about albatross"
    assert block.parts[-1].text.endswith("Session: now\nModel: claude-x")
    assert block.text == "\n\n".join(p.text for p in block.parts if p.text)
    assert block.chars == len(block.text) and 0 < block.tokens < block.chars


@pytest.mark.parametrize("core", ["session_search", "memory", "clarify"])
def test_a_tool_shadowing_a_hermes_core_tool_is_refused(
    home: Path, core: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Hermes refuses such a provider at registration; the manager does what Hermes does."""
    m = MemoryManager()
    with caplog.at_level(logging.WARNING):
        assert not m.add_provider(External("shadow", tool=core))
        assert m.add_provider(RecallMemoryProvider(home))  # recall_search shadows nothing
    assert f"tool {core} would shadow Hermes's core tool" in caplog.text
    assert [t["function"]["name"] for t in m.get_tool_schemas()] == ["recall_search"]
    m.shutdown_all()
