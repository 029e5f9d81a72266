"""Hermes's conventions live once, in conventions.py, and mean what HERMES_FACTS says."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from dashboard.archive.source import derived_usage_row
from dashboard.costs import spend
from dashboard.costs.rules import read_cost
from dashboard.demo import corpus
from dashboard.hermes import content, conventions
from dashboard.hermes.home import HermesHome
from dashboard.lineage import chains
from dashboard.sessions import transcript
from dashboard.store import records
from dashboard.web import lineage_svg

PACKAGE = Path(conventions.__file__).resolve().parents[1]


def test_the_modules_that_recognise_a_marker_import_the_one_copy() -> None:
    assert content.JSON_PREFIX is conventions.JSON_PREFIX
    assert records.COMPACTION_MARKER is conventions.COMPACTION_MARKER
    assert corpus.COMPACTION_MARKER is conventions.COMPACTION_MARKER
    assert corpus.LEGACY_SUMMARY_MARKER is conventions.LEGACY_SUMMARY_MARKER
    assert chains.summary_text is conventions.summary_text
    assert chains.is_summary is conventions.is_summary
    assert transcript.is_summary is conventions.is_summary
    assert transcript.summary_text is conventions.summary_text


def test_the_token_kinds_are_spelled_once() -> None:
    assert chains.TOKEN_KINDS is spend.TOKEN_KINDS is lineage_svg.TOKEN_KINDS
    assert chains.TOKEN_KINDS is conventions.TOKEN_KINDS
    spelled = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p.name != "conventions.py"
        and '"cache_read", "cache_write"' in p.read_text(encoding="utf-8")
    ]
    assert spelled == []


@pytest.mark.parametrize(
    "pattern",
    [
        re.escape(conventions.COMPACTION_MARKER),
        r"(?<!\\)\\x00json:",
        '"_branched_from"',
        '"_delegate_from"',
        '"_reset_from"',
        re.escape(conventions.SUMMARY_END_MARKER),
    ],
)
def test_no_other_module_spells_a_convention(pattern: str) -> None:
    spelled = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p.name != "conventions.py" and re.search(pattern, p.read_text(encoding="utf-8"))
    ]
    assert spelled == []


def test_summary_carriers_of_both_forms_are_recognised() -> None:
    assert conventions.is_summary(f"  {conventions.COMPACTION_MARKER}\nEarlier turns…")
    assert conventions.is_summary(f"{conventions.LEGACY_SUMMARY_MARKER} the gist")
    assert not conventions.is_summary("[CONTEXT] not a summary")
    assert not conventions.is_summary(None)


def test_lineage_markers_read_model_config_json_or_nothing() -> None:
    assert conventions.lineage_markers('{"_branched_from": "s1"}') == {"_branched_from": "s1"}
    assert conventions.lineage_markers({"_reset_from": "s2"}) == {"_reset_from": "s2"}
    assert conventions.lineage_markers("not json") == {}
    assert conventions.lineage_markers("[1, 2]") == {}
    assert conventions.lineage_markers(None) == {}


@pytest.mark.parametrize(
    ("active", "compacted", "kind", "visible", "rewound"),
    [
        (1, 0, None, True, False),
        (0, 1, None, True, False),
        (0, 0, None, False, True),
        (1, 0, "hidden", False, False),
        (1, 0, "", True, False),
    ],
)
def test_visible_row_rule(
    active: int, compacted: int, kind: str | None, visible: bool, rewound: bool
) -> None:
    assert conventions.is_visible(active, compacted, kind) is visible
    assert conventions.is_rewound(active, compacted) is rewound


def test_an_auxiliary_row_with_a_null_status_reads_as_estimated_by_the_cost_rule() -> None:
    assert read_cost(None, 0.03, 0.0).status == "estimated"
    assert read_cost("estimated", 0.80, 0.05).status == "partial"


def test_profile_of_a_home(tmp_path: Path) -> None:
    assert conventions.profile_of(tmp_path / ".hermes") == conventions.DEFAULT_PROFILE
    assert conventions.profile_of(tmp_path / ".hermes" / "profiles" / "work") == "work"


def test_a_session_row_without_usage_table_implies_one_main_loop_row() -> None:
    session = {
        "id": "s",
        "model": "m",
        "billing_provider": "openrouter",
        "input_tokens": 10,
        "output_tokens": 2,
        "estimated_cost_usd": 0.01,
        "actual_cost_usd": None,
        "cost_status": None,
        "started_at": 100.0,
        "last_activity_at": 160.0,
    }
    row = derived_usage_row(session)
    assert row is not None
    assert (row["task"], row["model"], row["billing_provider"]) == ("", "m", "openrouter")
    assert (row["input_tokens"], row["output_tokens"], row["cache_read_tokens"]) == (10, 2, 0)
    assert row["estimated_cost_usd"] == 0.01 and row["cost_status"] is None
    assert (row["first_seen"], row["last_seen"]) == (100.0, 160.0)
    assert derived_usage_row({"id": "idle", "started_at": 1.0}) is None


def test_the_visible_row_rule_reads_the_same_in_python_and_sql() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE m (active INTEGER, compacted INTEGER, display_kind TEXT)")
    combos = [(a, c, k) for a in (0, 1) for c in (0, 1) for k in (None, "", "hidden", "tool")]
    conn.executemany("INSERT INTO m VALUES (?, ?, ?)", combos)
    where = conventions.visible_rows_sql({"active", "compacted", "display_kind"})
    in_sql = set(conn.execute(f"SELECT active, compacted, display_kind FROM m WHERE {where}"))
    assert in_sql == {row for row in combos if conventions.is_visible(*row)}
    assert conventions.visible_rows_sql(set()) == "1"


def test_the_archive_rule_counts_each_message_uid_once_in_python_and_sql() -> None:
    """Schema 31: a copy (``repeats``) never counts; a row flagged like a rewind counts
    when a later row of its session has its uid (superseded), not otherwise."""
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, message_uid TEXT,"
        " repeats INTEGER, active INTEGER, compacted INTEGER, display_kind TEXT)"
    )
    rows = [
        (1, "s", "a", None, 0, 1, None),  # head original, summarized
        (2, "s", "b", None, 0, 0, None),  # tail original: superseded
        (3, "s", "c", None, 0, 0, None),  # rewound: no later copy
        (4, "s", "a", 1, 1, 0, None),  # head copy
        (5, "s", "b", 2, 1, 0, None),  # tail copy
        (6, "t", "c", None, 1, 0, None),  # another session's uid "c" saves nothing
        (7, "s", None, None, 0, 0, None),  # no uid (older row): rewound
        (8, "s", "d", None, 0, 0, "hidden"),  # superseded but hidden
        (9, "s", "d", 8, 1, 0, "hidden"),
    ]
    conn.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    in_sql = {
        r[0] for r in conn.execute(f"SELECT m.id FROM messages m WHERE {conventions.visible_sql()}")
    }

    def superseded(row: tuple) -> bool:
        return row[2] is not None and any(
            o[1] == row[1] and o[2] == row[2] and o[0] > row[0] for o in rows
        )

    in_python = {
        r[0] for r in rows if conventions.is_visible(r[4], r[5], r[6], r[3], superseded(r))
    }
    assert in_sql == in_python == {1, 2, 6}
    assert conventions.is_rewound(0, 0, superseded=True) is False


def test_a_summary_s_own_text_leaves_out_markers_boilerplate_and_the_merged_row() -> None:
    c = conventions
    boilerplate = f"{c.SUMMARY_BOILERPLATE_OPENING} into the summary below."
    standalone = f"{c.COMPACTION_MARKER}\n{boilerplate}\nPort moved."
    assert c.summary_text(standalone) == "Port moved."
    merged = (
        f"{c.MERGED_SUMMARY_OPEN}\nthe retained row\n{c.MERGED_SUMMARY_END}\n"
        f"{c.COMPACTION_MARKER} {c.SUMMARY_BOILERPLATE_OPENING} (one long line):\n## Goal\nBackups."
    )
    assert c.is_summary(merged) and c.is_summary("anything", compressed_summary=1)
    assert c.summary_text(merged) == "## Goal\nBackups."
    seed = f"{c.LEGACY_SUMMARY_MARKER} the gist\n{c.SUMMARY_END_MARKER} ---\nnext"
    assert c.summary_text(seed) == "the gist"
    assert c.summary_text("plain words") == "plain words"


def test_the_memory_file_table_is_the_one_copy_every_module_reads(tmp_path: Path) -> None:
    """Names, limits and prompt headers of USER.md / MEMORY.md are written once."""
    assert conventions.MEMORY_FILE_NAMES == ("USER.md", "MEMORY.md")
    assert [f.default_limit for f in conventions.MEMORY_FILES] == [1375, 2200]
    home = HermesHome(tmp_path)
    assert home.user_md.name == "USER.md" and home.memory_md.name == "MEMORY.md"
    assert home.char_limits() == {"USER.md": 1375, "MEMORY.md": 2200}
    (tmp_path / "config.yaml").write_text("memory:\n  memory_char_limit: 900\n")
    assert home.char_limits() == {"USER.md": 1375, "MEMORY.md": 900}
    spelled = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p.name != "conventions.py"
        and re.search(
            r"[\"'](USER|MEMORY)\.md[\"']|_char_limit[\"']|\"USER PROFILE \(|\"MEMORY \(your",
            p.read_text(encoding="utf-8"),
        )
    ]
    assert spelled == []
