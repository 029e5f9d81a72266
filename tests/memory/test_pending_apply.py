"""Approving and rejecting staged memory writes as Hermes applies them."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dashboard.errors import ConflictError, NotFoundError
from dashboard.hermes.home import HermesHome
from dashboard.hermes.pending import read_pending
from dashboard.memory.pending_apply import (
    ApplyRefused,
    _aside,
    _intent,
    approve,
    pending_of,
    recover,
    reject,
    replay,
)
from dashboard.store.recalldb import RecallData
from tests.support.pending_records import (
    DELIMITER,
    USER,
    USER_LIMIT,
    hermes_apply,
    record_digest,
    stage,
    write_memory,
)

LIMIT = USER_LIMIT


def home_with(tmp_path: Path, entries: list[str] = USER) -> HermesHome:
    root = tmp_path / "home"
    write_memory(root, "USER.md", entries)
    return HermesHome(root)


def digest_of(home: HermesHome, record_id: str) -> str:
    return record_digest(home.root, record_id)


@pytest.mark.parametrize(
    ("action", "fields"),
    [
        ("add", {"content": "Has two cats"}),
        ("add", {"content": "  Lives in Lisbon  "}),  # already there: nothing written
        ("replace", {"old_text": "Python", "content": "Mostly writes Go now"}),
        ("remove", {"old_text": "bank"}),
    ],
)
def test_an_approval_leaves_the_file_exactly_as_hermes_would(
    tmp_path: Path, action: str, fields: dict
) -> None:
    home = home_with(tmp_path)
    path = stage(home.root, "w1", action, **fields)
    before = home.user_md.read_text()
    payload = json.loads(path.read_text())["payload"]
    data = RecallData(tmp_path / "recall.db")
    decision = approve(home, "w1", digest_of(home, "w1"), data)
    expected = hermes_apply(before, payload, LIMIT)
    assert expected is not None and home.user_md.read_text() == expected
    assert decision.changed == (expected != before)
    assert not path.exists() and read_pending(home.root).memory == []
    assert [p.name for p in path.parent.iterdir()] == []  # no intent, nothing aside
    data.close()


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"action": "replace", "old_text": "nowhere", "content": "x"}, "no entry matches"),
        ({"action": "remove", "old_text": "i"}, "several entries match"),
        ({"action": "add", "content": "x" * 1400}, "characters"),
        ({"action": "add", "content": "Prefers\u200btea"}, "invisible|hidden|zero"),
        ({"action": "replace", "old_text": "Lisbon", "content": "   "}, "content is empty"),
    ],
)
def test_what_hermes_refuses_leaves_file_and_record_as_they_were(
    tmp_path: Path, fields: dict, reason: str
) -> None:
    home = home_with(tmp_path)
    action = fields.pop("action")
    path = stage(home.root, "w1", action, **fields)
    file_before, record_before = home.user_md.read_bytes(), path.read_bytes()
    with pytest.raises(ApplyRefused, match=reason):
        approve(home, "w1", digest_of(home, "w1"))
    assert home.user_md.read_bytes() == file_before and path.read_bytes() == record_before


def test_a_file_edited_by_hand_is_not_rewritten_but_an_add_goes_on(tmp_path: Path) -> None:
    home = home_with(tmp_path)
    # An empty entry between two separators: Hermes never writes one (it would drop it).
    home.user_md.write_text(DELIMITER.join(USER) + "\n§\n\n§\nsomething pasted")
    stage(home.root, "rm", "remove", old_text="bank")
    with pytest.raises(ApplyRefused, match="does not read back"):
        approve(home, "rm", digest_of(home, "rm"))
    stage(home.root, "add", "add", content="Has two cats")
    approve(home, "add", digest_of(home, "add"))
    assert home.user_md.read_text() == DELIMITER.join([*USER, "something pasted", "Has two cats"])


def test_records_recall_does_not_understand_are_refused(tmp_path: Path) -> None:
    home = home_with(tmp_path)
    for record_id, extra in (
        ("a", {"state": "applying"}),
        ("b", {"guard": True}),
        ("c", {"claimed": True}),
        ("d", {"extra": {"provider": "honcho"}}),
    ):
        path = stage(home.root, record_id, "add", content=f"entry {record_id}", **extra)
        with pytest.raises(ApplyRefused, match="Recall does not apply this record"):
            approve(home, record_id, digest_of(home, record_id))
        assert path.exists()
    assert home.user_md.read_text() == DELIMITER.join(USER)


def test_a_record_changed_since_the_page_or_decided_already_is_refused(tmp_path: Path) -> None:
    home = home_with(tmp_path)
    path = stage(home.root, "w1", "add", content="Has two cats")
    shown = digest_of(home, "w1")
    stage(home.root, "w1", "add", content="Has three cats")  # restaged meanwhile
    with pytest.raises(ConflictError):
        approve(home, "w1", shown)
    reject(home, "w1", digest_of(home, "w1"))
    assert not path.exists() and home.user_md.read_text() == DELIMITER.join(USER)
    with pytest.raises(NotFoundError):
        approve(home, "w1", shown)


def test_a_batch_is_all_or_nothing(tmp_path: Path) -> None:
    home = home_with(tmp_path)
    ops = [{"action": "remove", "old_text": "bank"}, {"action": "add", "content": "Retired"}]
    stage(home.root, "ok", "batch", operations=ops)
    stage(home.root, "bad", "batch", operations=[*ops, {"action": "remove", "old_text": "zz"}])
    before = home.user_md.read_text()
    with pytest.raises(ApplyRefused, match="operation 3"):
        approve(home, "bad", digest_of(home, "bad"))
    assert home.user_md.read_text() == before
    approve(home, "ok", digest_of(home, "ok"))
    payload = {"action": "batch", "target": "user", "operations": ops}
    assert home.user_md.read_text() == hermes_apply(before, payload, LIMIT)


entry = st.text(st.sampled_from("abcde fg\n"), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    entries=st.lists(entry, max_size=6),
    action=st.sampled_from(["add", "replace", "remove"]),
    content=entry,
    old=st.text(st.sampled_from("abcde "), min_size=1, max_size=3),
    limit=st.integers(10, 80),
)
def test_the_rules_agree_with_an_independent_reading_of_them(
    entries: list[str], action: str, content: str, old: str, limit: int
) -> None:
    text = DELIMITER.join(entries)
    payload = {"action": action, "target": "user", "content": content, "old_text": old}
    expected = hermes_apply(text, payload, limit)
    try:
        got = replay(text, payload, limit)
    except ApplyRefused:
        got = None
    assert got == expected


# -- a process killed during an approval --------------------------------------------------

CHILD = """
import sys
from pathlib import Path
from dashboard.hermes.home import HermesHome
from dashboard.memory.pending_apply import approve
home, record_id, digest = sys.argv[1:4]
print("ready", flush=True)
sys.stdin.readline()
approve(HermesHome(Path(home)), record_id, digest)
print("done", flush=True)
"""


def test_a_kill_at_any_point_leaves_the_old_file_and_the_record_or_the_new_and_none(
    tmp_path: Path,
) -> None:
    """A real process approving, killed with SIGKILL after a random short wait; then the
    next listing (recover) settles it. Whatever the moment: never both, never neither."""
    rng = random.Random(28)
    outcomes = set()
    for trial in range(12):
        home = home_with(tmp_path / f"t{trial}")
        path = stage(home.root, "w1", "replace", old_text="Python", content="Writes Go now")
        before = home.user_md.read_text()
        after = hermes_apply(before, json.loads(path.read_text())["payload"], LIMIT)
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(home.root), "w1", digest_of(home, "w1")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"
        child.stdin.write("go\n")
        child.stdin.flush()
        time.sleep(rng.uniform(0, 0.004))
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdin.close()
        child.stdout.close()
        pending = pending_of(home)  # repairs what the kill left
        text = home.user_md.read_text()
        if pending.find("w1") is not None:
            assert text == before, trial
        else:
            assert text == after, trial
        outcomes.add(pending.find("w1") is None)
        leftovers = [p.name for p in path.parent.iterdir() if p.name != "w1.json"]
        assert leftovers == [], (trial, leftovers)
    assert outcomes  # at least one trial ran to a decision either way


@pytest.mark.parametrize("stage_reached", ["intent", "aside", "written"])
def test_recovery_from_each_point_an_approval_can_stop_at(
    tmp_path: Path, stage_reached: str
) -> None:
    """The on-disk state each step of an approval leaves, then the repair."""
    import hashlib

    home = home_with(tmp_path)
    path = stage(home.root, "w1", "remove", old_text="bank")
    before = home.user_md.read_bytes()
    after = hermes_apply(before.decode(), {"action": "remove", "old_text": "bank"}, LIMIT)
    assert after is not None
    intent = {
        "file": str(home.user_md),
        "before": hashlib.sha256(before).hexdigest(),
        "after": hashlib.sha256(after.encode()).hexdigest(),
    }
    _intent(path).write_text(json.dumps(intent))
    if stage_reached in ("aside", "written"):
        os.replace(path, _aside(path))
    if stage_reached == "written":
        home.user_md.write_text(after)
    assert recover(home) == ["w1"]
    if stage_reached == "written":
        assert not path.exists() and home.user_md.read_text() == after
    else:
        assert path.exists() and home.user_md.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == (
        [] if stage_reached == "written" else ["w1.json"]
    )
