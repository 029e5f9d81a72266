"""The prune radar: which sessions Hermes's next sweep deletes, and whether each is archived."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from dashboard.archive.importer import sync
from dashboard.archive.prune_radar import (
    DEFAULT_RETENTION_DAYS,
    prune_radar,
    retention_policy,
)
from dashboard.demo.build import build_demo_home
from dashboard.hermes.home import HermesHome
from dashboard.lineage.links import continues
from dashboard.reader.opening import reading_for
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as shapes
from tests.support import hermes_v31 as v31
from tests.support.pruned_homes import prune_from_source
from tests.support.source_checks import assert_untouched, digests

NOW = time.time()


def _home(tmp_path: Path, **options: object) -> tuple[HermesHome, dict[str, str]]:
    ids = shapes.build_prune_home(tmp_path / "home", NOW, **options)
    return HermesHome(tmp_path / "home"), ids


def _archive(tmp_path: Path, home: HermesHome) -> Path:
    path = tmp_path / "archive.db"
    with SessionStore(path) as store:
        sync(store, home.state_db, home.root)
    return path


def test_the_radar_lists_exactly_what_the_next_sweep_deletes_each_archived(
    tmp_path: Path,
) -> None:
    home, ids = _home(tmp_path, last_auto_prune=NOW - 3600)
    archive = _archive(tmp_path, home)
    before = digests(home.state_db)
    radar = prune_radar(home, archive, now=NOW, continues=continues)
    assert_untouched(home.state_db, before)
    assert radar.policy.auto_prune and radar.policy.retention_days == 30
    assert [c.session_id for c in radar.candidates] == [ids[n] for n in shapes.PRUNED_BY_30_DAYS]
    assert all(c.status == "archived" and c.safe for c in radar.candidates)
    assert [c.messages for c in radar.candidates] == [4, 2, 3]
    assert radar.unsafe == 0
    assert radar.spared == {"pinned": 1, "open": 1, "lineage": 0}
    assert radar.last_sweep == pytest.approx(NOW - 3600)
    assert radar.next_sweep_after == pytest.approx(NOW - 3600 + 86_400)
    assert radar.source_problem is None and radar.archive_problem is None


def test_a_session_missing_from_the_archive_or_short_of_messages_is_a_warning(
    tmp_path: Path,
) -> None:
    home, ids = _home(tmp_path)
    archive = _archive(tmp_path, home)
    with SessionStore(archive) as store:
        store.core.write(
            lambda c: c.execute(
                "DELETE FROM messages WHERE id = (SELECT max(id) FROM messages WHERE session_id=?)",
                (ids["old"],),
            )
        )
        store.delete_session(ids["older"])
    radar = prune_radar(home, archive, now=NOW, continues=continues)
    by_id = {c.session_id: c for c in radar.candidates}
    assert (by_id[ids["old"]].status, by_id[ids["old"]].archived_messages) == ("partial", 2)
    assert by_id[ids["older"]].status == "missing" and not by_id[ids["older"]].safe
    assert by_id[ids["ancient"]].status == "archived"
    assert radar.unsafe == 2


def test_without_an_archive_every_candidate_is_a_warning(tmp_path: Path) -> None:
    home, ids = _home(tmp_path)
    radar = prune_radar(home, tmp_path / "nowhere" / "archive.db", now=NOW, continues=continues)
    assert len(radar.candidates) == 3
    assert {c.status for c in radar.candidates} == {"no-archive"}
    assert "recall archive sync" in radar.archive_problem
    assert not (tmp_path / "nowhere").exists()  # reading never creates an archive


def test_auto_prune_off_deletes_nothing_and_says_so(tmp_path: Path) -> None:
    home, _ = _home(tmp_path, config="sessions:\n  auto_prune: false\n  retention_days: 30\n")
    radar = prune_radar(home, _archive(tmp_path, home), now=NOW, continues=continues)
    assert not radar.policy.auto_prune
    assert radar.candidates == ()
    assert radar.cutoff is None


def test_no_config_means_hermes_defaults(tmp_path: Path) -> None:
    home, ids = _home(tmp_path, config=None)
    policy = retention_policy(home)
    assert (policy.auto_prune, policy.retention_days, policy.notes) == (True, 90, ())
    radar = prune_radar(home, _archive(tmp_path, home), now=NOW, continues=continues)
    assert [c.session_id for c in radar.candidates] == [ids["ancient"]]
    assert radar.last_sweep is None and radar.next_sweep_after is None


@pytest.mark.parametrize(
    "yaml_text",
    [
        "sessions:\n  retention_days: ninety\n",
        "sessions:\n  retention_days: -5\n",
        "sessions:\n  retention_days: 1e9\n",
        "sessions:\n  retention_days: 1000000000\n",
        "sessions:\n  retention_days: [30, 60]\n",
        "sessions:\n  retention_days: 30.5\n",
        "sessions:\n  retention_days: true\n",
        "sessions: [retention_days, 30]\n",
        "sessions:\n  auto_prune: maybe\n",
        "sessions: {retention_days: [\n",  # not YAML at all
    ],
)
def test_odd_values_get_a_clear_note_and_hermes_default(tmp_path: Path, yaml_text: str) -> None:
    home, ids = _home(tmp_path, config=yaml_text)
    policy = retention_policy(home)
    assert policy.auto_prune is True and policy.retention_days == DEFAULT_RETENTION_DAYS
    assert len(policy.notes) == 1
    assert "Hermes's default" in policy.notes[0]
    radar = prune_radar(home, _archive(tmp_path, home), now=NOW, continues=continues)
    assert [c.session_id for c in radar.candidates] == [ids["ancient"]]


def test_a_digit_string_is_read_as_hermes_reads_it(tmp_path: Path) -> None:
    home, _ = _home(tmp_path, config="sessions:\n  retention_days: '45'\n")
    assert retention_policy(home).retention_days == 45


def test_a_last_sweep_mark_that_is_not_a_time_is_unknown_not_invented(tmp_path: Path) -> None:
    home, _ = _home(tmp_path)
    with closing(sqlite3.connect(home.state_db)) as conn:
        conn.execute("INSERT INTO state_meta (key, value) VALUES ('last_auto_prune', 'soon')")
        conn.commit()
    radar = prune_radar(home, tmp_path / "archive.db", now=NOW, continues=continues)
    assert radar.last_sweep is None and radar.next_sweep_after is None


def test_a_missing_or_corrupt_source_is_said_not_raised(tmp_path: Path) -> None:
    home = HermesHome(tmp_path / "empty")
    radar = prune_radar(home, tmp_path / "archive.db", now=NOW, continues=continues)
    assert radar.candidates == () and "no state.db" in radar.source_problem
    (tmp_path / "empty").mkdir()
    home.state_db.write_bytes(b"this is not sqlite" * 100)
    radar = prune_radar(home, tmp_path / "archive.db", now=NOW, continues=continues)
    assert radar.candidates == () and "cannot be read" in radar.source_problem


def test_a_profiles_candidates_name_their_session_as_the_archive_does(tmp_path: Path) -> None:
    """A non-primary profile's sessions are archived as ``<profile>:<id>``: the radar
    of that profile links them by that id, not by the source's (another profile's)."""
    facts = shapes.build_profiles_home(tmp_path / "hermes")
    archive = tmp_path / "archive.db"
    reading = reading_for(HermesHome(facts.root), archive, inline=True, folder=tmp_path)
    reading.syncer.poll()
    legacy = HermesHome(facts.root / "profiles" / "legacy")
    radar = prune_radar(legacy, archive, continues=continues)
    assert radar.candidates and all(c.safe for c in radar.candidates)
    assert {c.archive_id for c in radar.candidates} == {
        f"legacy:{c.session_id}" for c in radar.candidates
    }
    default = prune_radar(HermesHome(facts.root), archive, continues=continues)
    assert default.candidates
    assert [c.archive_id for c in default.candidates] == [c.session_id for c in default.candidates]


# -- Hermes's rule, read independently from the source's rows ------------------------------


def _source_rows(db: Path) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    """Every session row as a dict, and each session's newest message time: plain SQL."""
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        conn.row_factory = sqlite3.Row
        sessions = {r["id"]: dict(r) for r in conn.execute("SELECT * FROM sessions")}
        newest = dict(
            conn.execute("SELECT session_id, max(timestamp) FROM messages GROUP BY session_id")
        )
    return sessions, newest


def _deleted_by_hermes(db: Path, now: float, days: int) -> frozenset[str]:
    """The sessions Hermes's sweep at ``now`` deletes, from the file's rows by plain Python:
    hermes_v31's plain reading of the rule (last activity, whole lineages, pinned); none
    of the radar's code or Recall's lineage rule."""
    return v31.prune_rule(*_source_rows(db), now, days)


def _last_activities(db: Path) -> set[float]:
    """Each session's last activity: the newest of last_activity_at, newest message, start."""
    sessions, newest = _source_rows(db)
    return {
        max(v for v in (s["started_at"], s.get("last_activity_at"), newest.get(sid)) if v)
        for sid, s in sessions.items()
    }


def _config(root: Path, days: int, auto_prune: bool = True) -> None:
    flag = "true" if auto_prune else "false"
    (root / "config.yaml").write_text(
        f"sessions:\n  auto_prune: {flag}\n  retention_days: {days}\n", encoding="utf-8"
    )


def _radar_ids(root: Path, now: float) -> list[str]:
    radar = prune_radar(HermesHome(root), root / "no-archive.db", now=now, continues=continues)
    assert radar.source_problem is None
    return [c.session_id for c in radar.candidates]


def _sweeps_agree(root: Path, days: int) -> list[frozenset[str]]:
    """At a cut-off just before and just after every session's last activity, the radar
    lists exactly (and each once) what Hermes's rule deletes. Returns each deleted set."""
    db = root / "state.db"
    seen: list[frozenset[str]] = []
    for last in sorted(_last_activities(db)):
        for now in (last + days * 86_400 - 1, last + days * 86_400 + 1):
            listed = _radar_ids(root, now)
            deleted = _deleted_by_hermes(db, now, days)
            assert len(listed) == len(set(listed))
            assert set(listed) == deleted, (root.name, now - last)
            seen.append(deleted)
    return seen


def test_on_a_v31_home_the_radar_lists_what_hermess_rule_deletes(tmp_path: Path) -> None:
    facts = v31.build_v31_home(tmp_path / "home")
    ids = facts.sessions
    before = digests(facts.db)
    radar = prune_radar(
        HermesHome(facts.root), tmp_path / "archive.db", now=facts.now, continues=continues
    )
    listed = {c.session_id for c in radar.candidates}
    assert listed == _deleted_by_hermes(facts.db, facts.now, facts.retention_days)
    assert listed == facts.prune_deleted  # the fixture's own record of Hermes's sweep
    assert listed == {ids[n] for n in ("old", "old_lineage_1", "old_lineage_2", "cron_old")}
    # Each of these started before the cut-off and ended; the old rule listed them all.
    kept = ("rotation_1", "rotation_2", "rotation_3")  # their chain's tip is still open
    kept += ("compacted_last_week", "active_month_later")  # recent last activity
    kept += ("pinned_1", "pinned_2", "pinned_3")  # a pinned segment and what it covers
    assert not listed & {ids[n] for n in kept}
    cutoff = facts.now - 90 * 86_400
    assert all(ids[n] in facts.prune_kept for n in kept)
    assert all(facts.last_activity[ids[n]] < cutoff for n in kept[:3])  # idle, yet kept
    assert radar.spared == {"pinned": 3, "open": 1, "lineage": 3}
    by_id = {c.session_id: c for c in radar.candidates}
    for sid, c in by_id.items():
        assert c.last_activity == pytest.approx(facts.last_activity[sid])
    pair = (by_id[ids["old_lineage_1"]], by_id[ids["old_lineage_2"]])
    newest = facts.last_activity[ids["old_lineage_2"]]
    assert [(c.lineage, c.lineage_last_activity) for c in pair] == [(2, newest), (2, newest)]
    assert pair[0].crossed_at == pytest.approx(newest + 90 * 86_400)
    assert (by_id[ids["old"]].lineage, by_id[ids["cron_old"]].lineage) == (1, 1)
    assert by_id[ids["old"]].idle_days(facts.now) == 199  # its last message, 200 days ago
    # A lineage together, in the order each crossed retention.
    assert [c.session_id for c in radar.candidates] == [
        ids[n] for n in ("old_lineage_1", "old_lineage_2", "old", "cron_old")
    ]
    assert_untouched(facts.db, before)


def test_on_a_v31_home_the_radar_agrees_with_the_rule_at_every_cut_off(tmp_path: Path) -> None:
    facts = v31.build_v31_home(tmp_path / "home")
    _config(facts.root, 90)
    seen = _sweeps_agree(facts.root, 90)
    # At the latest cut-off every session goes but the open ones (the long session, the
    # rotation chain whose tip is open, the one never ended) and the pinned lineage of 3.
    assert frozenset() in seen and max(map(len, seen)) == len(facts.sessions) - 1 - 4 - 1 - 3


@pytest.mark.parametrize("shape", sorted(shapes.SHAPES))
def test_on_every_older_shape_the_radar_agrees_with_the_rule_at_every_cut_off(
    tmp_path: Path, shape: str
) -> None:
    root = tmp_path / shape
    root.mkdir()
    shapes.SHAPES[shape](root / "state.db")
    _config(root, 3)
    seen = _sweeps_agree(root, 3)
    # Some cut-off spares a chain's old segments for a recent one: the rule did bite.
    chain = {shapes.S_ROOT, shapes.S_CONT1}
    assert any(not chain & deleted for deleted in seen if deleted)


def test_on_the_prune_and_epochs_homes_the_radar_agrees_with_the_rule(tmp_path: Path) -> None:
    shapes.build_prune_home(tmp_path / "prune", NOW)
    _config(tmp_path / "prune", 30)
    assert max(map(len, _sweeps_agree(tmp_path / "prune", 30))) == 5  # not pinned, open
    shapes.build_epochs_home(tmp_path / "epochs")
    _config(tmp_path / "epochs", 7)
    assert _sweeps_agree(tmp_path / "epochs", 7)


# -- a home nothing will ever prune --------------------------------------------------------


@pytest.mark.parametrize(
    ("yaml_text", "why"),
    [
        ("sessions:\n  auto_prune: false\n  retention_days: 30\n", "auto-prune is off"),
        ("sessions:\n  auto_prune: false\n  retention_days: ninety\n", "auto-prune is off"),
        ("sessions:\n  retention_days: 0\n", "retention_days is 0"),
    ],
)
def test_a_home_nothing_prunes_says_why_in_one_clause(
    tmp_path: Path, yaml_text: str, why: str
) -> None:
    home, _ = _home(tmp_path, config=yaml_text)
    radar = prune_radar(home, tmp_path / "none.db", now=NOW, continues=continues)
    assert radar.never is not None and why in radar.never
    assert radar.candidates == () and radar.cutoff is None and radar.spared == {}
    assert radar.archive_problem is None  # no "not archived" warning either


def test_the_demo_home_is_never_pruned_whatever_its_config_says(tmp_path: Path) -> None:
    report = build_demo_home(tmp_path / "demo", sessions=12, messages=300, anchor_day="2026-01-05")
    home = HermesHome(report.home)
    assert not retention_policy(home).auto_prune  # the demo writes auto_prune: false
    # A demo home built before it did: the demo mark in its store says it all the same.
    home.config_yaml.write_text("sessions:\n  retention_days: 1\n", encoding="utf-8")
    assert retention_policy(home).prunes
    radar = prune_radar(home, home.state_db, now=NOW, continues=continues)
    assert radar.demo and "demo home" in radar.never
    assert radar.candidates == () and radar.archive_problem is None


def test_after_hermess_sweep_the_archive_keeps_exactly_the_listed_sessions_as_gone(
    tmp_path: Path,
) -> None:
    """Before the sweep the radar lists A; the sweep (the rule read from the rows) deletes
    A from the source; the next sync marks exactly A gone, and the radar lists nothing."""
    facts = v31.build_v31_home(tmp_path / "home")
    home = HermesHome(facts.root)
    archive = _archive(tmp_path, home)
    before = prune_radar(home, archive, now=facts.now, continues=continues)
    assert before.candidates and before.unsafe == 0
    listed = {c.session_id for c in before.candidates}
    for sid in _deleted_by_hermes(facts.db, facts.now, facts.retention_days):
        prune_from_source(home, sid)
    with SessionStore(archive) as store:
        sync(store, home.state_db, home.root)
        gone = {
            r[0]
            for r in store.core.conn.execute(
                "SELECT src_id FROM sessions WHERE gone_from_source_at IS NOT NULL"
            )
        }
    assert gone == listed
    after = prune_radar(home, archive, now=facts.now, continues=continues)
    assert after.candidates == () and after.source_problem is None


def test_rows_with_odd_times_or_a_parent_loop_are_read_not_raised(tmp_path: Path) -> None:
    """A damaged file: text where times belong, a session its own parent, two sessions
    each the other's parent. The radar answers (such rows count as idle since 1970)."""
    home, ids = _home(tmp_path)
    with closing(sqlite3.connect(home.state_db)) as conn:
        conn.execute("UPDATE sessions SET started_at = 'yesterday' WHERE id = ?", (ids["recent"],))
        conn.execute(
            "UPDATE messages SET timestamp = 'soon' WHERE session_id = ?", (ids["recent"],)
        )
        conn.execute(
            "UPDATE sessions SET last_activity_at = 'later', end_reason = 'compression',"
            " parent_session_id = id WHERE id = ?",
            (ids["recent"],),
        )
        for a, b in (("old", "older"), ("older", "old")):
            conn.execute(
                "UPDATE sessions SET end_reason = 'compression', parent_session_id = ?"
                " WHERE id = ?",
                (ids[b], ids[a]),
            )
        conn.commit()
    radar = prune_radar(home, tmp_path / "none.db", now=NOW, continues=continues)
    assert radar.source_problem is None
    by_id = {c.session_id: c for c in radar.candidates}
    assert ids["recent"] in by_id and by_id[ids["recent"]].last_activity == 0.0
    assert by_id[ids["old"]].lineage == by_id[ids["older"]].lineage == 2
