"""The demo home's staged writes: every kind a new user meets, each one Hermes would apply."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.hermes.home import HermesHome
from dashboard.hermes.pending import read_pending
from tests.support.demo_homes import demo_home_copy
from tests.support.pending_records import hermes_apply


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("demo-pending") / "home"
    demo_home_copy(tmp_path_factory, home, sessions=120, messages=4000, anchor_day="2026-11-30")
    return home


def test_the_demo_stages_writes_hermes_would_apply(demo_home: Path) -> None:
    home = HermesHome(demo_home)
    found = read_pending(demo_home)
    assert {w.action for w in found.memory} == {"add", "replace", "remove"}
    assert {w.origin for w in found.memory} == {"foreground", "background_review"}
    assert all(w.understood for w in found.memory), [w.problems for w in found.memory]
    assert any("payload_sha256" in w.record for w in found.memory)  # the newer shape too
    assert len(found.skills) == 1 and found.unreadable == []
    limits = home.char_limits()
    for write in found.memory:
        assert write.file_name is not None
        text = (home.memories / write.file_name).read_text(encoding="utf-8")
        applied = hermes_apply(text, dict(write.payload), limits[write.file_name])
        assert applied is not None and applied != text, write.id
    replace = next(w for w in found.memory if w.action == "replace")
    assert "Python" in replace.old_text and "Go" in replace.content  # a preference overturned
