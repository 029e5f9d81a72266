"""The demo home: realistic structure, deterministic, same data through either write path."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
import yaml

from dashboard.archive.layout import detect_layout
from dashboard.demo.build import build_demo_home
from dashboard.demo.plan import DemoPlanner, PlannedSession, anchor_for
from dashboard.errors import ConflictError
from dashboard.lineage.epochs import EpochRow, Epochs, derive_epochs
from dashboard.store.readonly import open_readonly

ANCHOR = "2026-11-30"


def _dump(db: Path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {
            "sessions": conn.execute("SELECT * FROM sessions ORDER BY id").fetchall(),
            "messages": conn.execute("SELECT * FROM messages ORDER BY id").fetchall(),
            "usage": conn.execute(
                "SELECT * FROM session_model_usage ORDER BY session_id, model, task"
            ).fetchall(),
        }
    finally:
        conn.close()


@pytest.fixture(scope="module")
def planned() -> list:
    """A 1,500-session plan (structure only, nothing written)."""
    planner = DemoPlanner(seed=11, anchor=anchor_for(ANCHOR), sessions=1500, messages=30_000)
    return list(planner.sessions())


def test_plan_has_the_variety_a_demo_needs(planned: list) -> None:
    records = [p.record for p in planned]
    # the 1,500 planned sessions, and the story's scripted ones on top (tests/demo/test_story.py)
    assert len([p for p in planned if not p.story]) == 1500
    sources = Counter(r.source for r in records)
    for source in ("cli", "telegram", "discord", "cron", "subagent"):
        assert sources[source] > 0, source
    assert len({r.model for r in records}) >= 6
    assert len({r.billing_provider for r in records}) >= 4
    ids = {r.id for r in records}
    assert len(ids) == len(records)
    by_id = {r.id: r for r in records}
    seen: set[str] = set()
    for r in records:  # parents always come before their children
        assert r.parent_session_id is None or r.parent_session_id in seen
        seen.add(r.id)

    def depth(r) -> int:
        n = 1
        while r.parent_session_id and by_id[r.parent_session_id].end_reason == "compression":
            r, n = by_id[r.parent_session_id], n + 1
        return n

    longest = max(depth(r) for r in records)
    assert 8 <= longest <= 12
    reasons = Counter(r.end_reason for r in records)
    assert reasons["compression"] > 0 and reasons["branched"] > 0
    markers = Counter(k for r in records for k in json.loads(r.model_config or "{}"))
    assert markers["_branched_from"] > 0 and markers["_delegate_from"] > 0
    span_days = (max(r.started_at for r in records) - min(r.started_at for r in records)) / 86400
    assert span_days > 300


def test_plan_costs_are_honest(planned: list) -> None:
    usage = [u for p in planned for u in p.record.usage]
    statuses = Counter(u.cost_status for u in usage)
    assert set(statuses) >= {"actual", "estimated", "included", "unknown"}
    for u in usage:
        if u.cost_status == "unknown":
            assert u.estimated_cost_usd is None and u.actual_cost_usd is None
    both = [u for u in usage if u.estimated_cost_usd and u.actual_cost_usd]
    drifts = sorted(u.actual_cost_usd / u.estimated_cost_usd for u in both)
    assert len(both) > 50
    assert 1.1 < drifts[len(drifts) // 2] < 2.5  # the bill is usually above the estimate
    assert drifts[-1] > 2.5  # and sometimes far above
    assert Counter(u.task for u in usage)["compression"] > 0


def test_chain_children_start_with_a_compaction_summary(planned: list) -> None:
    children = [p for p in planned if p.summary is not None]
    assert children
    for p in children:
        first = p.record.messages[0].content
        assert first == p.summary
        assert first.startswith(("[CONTEXT COMPACTION — REFERENCE ONLY]", "[CONTEXT SUMMARY]:"))


def _epochs(plan: PlannedSession) -> Epochs:
    rows = [
        EpochRow(i, m.role, m.content, m.timestamp or 0.0, m.active, m.compacted)
        for i, m in enumerate(plan.record.messages, start=1)
    ]
    return derive_epochs(rows)


def test_recent_long_conversations_compact_in_place_and_older_ones_rotate(
    planned: list,
) -> None:
    switch = anchor_for(ANCHOR) - 183 * 86_400
    in_place = [p for p in planned if p.compactions]
    rotated = [p for p in planned if p.summary is not None]
    assert len(in_place) > 20 and rotated
    # Rotation children from after the switch belong to the conversation under way at it.
    assert all(p.record.started_at < switch + 86_400 for p in rotated)
    for p in in_place:
        epochs = _epochs(p)
        # Hermes's form: each compaction a summary carrier and the last two rows again.
        assert epochs.compactions == len(p.compactions) and len(epochs.copies) == 2 * len(
            p.compactions
        )
        assert [e.compacted_at for e in epochs.epochs[:-1]] == [c[2] for c in p.compactions]
        assert p.record.started_at >= switch - 3600
        compression = [u for u in p.record.usage if u.task == "compression"]
        assert [u.api_calls for u in compression] == [len(p.compactions)]
    assert max(len(p.compactions) for p in in_place) >= 5
    # Some conversations have both: rotation history, then in-place epochs.
    both = [p for p in in_place if p.record.parent_session_id and p.summary is not None]
    assert both


def test_some_sessions_are_chinese(planned: list) -> None:
    def cjk_share(text: str) -> float:
        return sum("\u4e00" <= ch <= "\u9fff" for ch in text) / max(1, len(text))

    users = [m.content for p in planned for m in p.record.messages if m.role == "user"]
    chinese = sum(1 for t in users if t and cjk_share(t) > 0.2)
    assert 0.04 < chinese / len(users) < 0.25


def test_same_seed_same_home_and_both_paths_agree(tmp_path: Path) -> None:
    a = build_demo_home(
        tmp_path / "a", sessions=40, messages=1500, seed=3, anchor_day=ANCHOR, bulk=False
    )
    b = build_demo_home(
        tmp_path / "b", sessions=40, messages=1500, seed=3, anchor_day=ANCHOR, bulk=True
    )
    c = build_demo_home(
        tmp_path / "c", sessions=40, messages=1500, seed=4, anchor_day=ANCHOR, bulk=True
    )
    assert not a.bulk and b.bulk
    dump_a, dump_b = _dump(a.home / "state.db"), _dump(b.home / "state.db")
    for table in ("sessions", "messages", "usage"):
        assert dump_a[table] == dump_b[table], table
    assert _dump(c.home / "state.db")["messages"] != dump_a["messages"]
    assert a.messages == len(dump_a["messages"])
    assert 1200 <= a.messages <= 1800  # near the requested 1,500


def test_demo_home_files(tmp_path: Path) -> None:
    report = build_demo_home(tmp_path / "home", sessions=30, messages=900, anchor_day=ANCHOR)
    home = report.home
    user_md = (home / "memories" / "USER.md").read_text(encoding="utf-8")
    memory_md = (home / "memories" / "MEMORY.md").read_text(encoding="utf-8")
    config = yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8"))
    limits = config["memory"]
    assert config["sessions"]["auto_prune"] is False  # the archive page's radar says so
    assert len(user_md) <= limits["user_char_limit"]
    assert len(memory_md) <= limits["memory_char_limit"]
    assert len(user_md.split("\n§\n")) >= 5 and "\n§\n" in memory_md
    conn = open_readonly(home / "state.db")
    try:
        layout = detect_layout(conn, home / "state.db")
        assert layout.is_recall_store and not layout.fts_stale and not layout.fts_rebuilding
        assert layout.word_index is not None
        assert layout.trigram_index is not None and layout.fts_form == "external"
        calls = conn.execute("SELECT count(*) FROM messages WHERE tool_calls IS NOT NULL")
        assert calls.fetchone()[0] > 0
    finally:
        conn.close()
    with pytest.raises(ConflictError):
        build_demo_home(home, sessions=5)
