"""The prune radar: which sessions Hermes's next sweep deletes, and whether each is archived."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from dashboard.archive.importer import sync
from dashboard.archive.prune_radar import (
    DEFAULT_RETENTION_DAYS,
    prune_radar,
    retention_policy,
)
from dashboard.hermes.home import HermesHome
from dashboard.lineage.links import continues
from dashboard.reader.opening import reading_for
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as shapes
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
