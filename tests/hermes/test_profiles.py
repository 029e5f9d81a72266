"""Profiles (issue 17): discovery, one archive for every profile, scoped readers."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from dashboard.archive.syncer import SyncGroup
from dashboard.errors import NotFoundError, ValidationError
from dashboard.hermes import profiles
from dashboard.hermes.home import HermesHome
from dashboard.hermes.profiles import (
    ALL,
    EVERY_PROFILE,
    ArchiveIds,
    Scope,
    discover,
    parse_profile,
    valid_name,
)
from dashboard.reader.opening import reading_for
from dashboard.search.sessions import SearchRequest
from tests.support import hermes_shapes as hs

ALL_SOURCES = ("cli", "telegram", "discord", "cron", "subagent", "tool", "acp", "whatsapp")


@pytest.fixture
def facts(tmp_path: Path) -> hs.ProfilesFacts:
    return hs.build_profiles_home(tmp_path / "hermes")


def _reading(facts: hs.ProfilesFacts, tmp_path: Path, **kw: object):
    return reading_for(
        HermesHome(facts.root),
        tmp_path / "data" / "archive.db",
        inline=True,
        folder=tmp_path / "data",
        **kw,
    )


def _found(reader, word: str) -> set[str]:
    result = reader.search(SearchRequest(query=word, group="session", sources=ALL_SOURCES))
    return {r.session_id for r in result.results}


def test_discover_names_every_profile_of_every_home(
    tmp_path: Path, facts: hs.ProfilesFacts
) -> None:
    other = tmp_path / "other hermes"
    hs.build_current_views(other / "state.db")
    hs.build_empty_current(other / "profiles" / "bot" / "state.db")
    found = discover([HermesHome(facts.root), HermesHome(other), HermesHome(facts.root)])
    assert [p.name for p in found] == [
        "default",
        "empty",
        "legacy",
        "other-hermes",
        "other-hermes-bot",
    ]
    assert [p.id_prefix for p in found] == [
        "",
        "empty:",
        "legacy:",
        "other-hermes:",
        "other-hermes-bot:",
    ]
    assert all(valid_name(p.name) for p in found)
    # A home given as a profiles/<name> folder keeps the name the importer gives it.
    assert discover([HermesHome(facts.root / "profiles" / "legacy")])[0].name == "legacy"


def test_parse_profile_answers_names_all_and_nothing_else(facts: hs.ProfilesFacts) -> None:
    profiles = discover([HermesHome(facts.root)])
    assert parse_profile("legacy", profiles) == "legacy"
    assert parse_profile(" all ", profiles) == ALL
    assert parse_profile("", profiles) is None
    with pytest.raises(ValidationError, match="no profile called 'nope'"):
        parse_profile("nope", profiles)
    with pytest.raises(ValidationError, match="serves the profile 'legacy' only"):
        parse_profile("default", profiles, only="legacy")
    assert parse_profile(ALL, profiles, only="legacy") == "legacy"


def test_every_profile_lands_in_one_archive_and_shared_ids_stay_distinct(
    tmp_path: Path, facts: hs.ProfilesFacts
) -> None:
    reading = _reading(facts, tmp_path)
    assert isinstance(reading.syncer, SyncGroup)
    reading.syncer.poll()
    conn = sqlite3.connect(reading.choice.path)
    try:
        rows = conn.execute(
            "SELECT id, src_id, profile FROM sessions WHERE src_id = ? ORDER BY id", (hs.S_CRON,)
        ).fetchall()
        source_counts = {
            name: sqlite3.connect(db).execute("SELECT count(*) FROM sessions").fetchone()[0]
            for name, db in facts.dbs.items()
        }
        archived = dict(conn.execute("SELECT profile, count(*) FROM sessions GROUP BY profile"))
        messages = dict(
            conn.execute(
                "SELECT s.profile, count(*) FROM messages m JOIN sessions s ON s.id = m.session_id"
                " GROUP BY s.profile"
            )
        )
        orphans = conn.execute(
            "SELECT count(*) FROM messages m LEFT JOIN sessions s ON s.id = m.session_id"
            " WHERE s.id IS NULL"
        ).fetchone()[0]
        parents = conn.execute(
            "SELECT count(*) FROM sessions c JOIN sessions p ON p.id = c.parent_session_id"
            " WHERE c.profile != p.profile"
        ).fetchone()[0]
    finally:
        conn.close()
    assert rows == [(hs.S_CRON, hs.S_CRON, "default"), (f"legacy:{hs.S_CRON}", hs.S_CRON, "legacy")]
    assert archived == {k: v for k, v in source_counts.items() if v}
    legacy_messages = (
        sqlite3.connect(facts.dbs["legacy"]).execute("SELECT count(*) FROM messages").fetchone()[0]
    )
    assert messages["legacy"] == legacy_messages
    assert orphans == 0 and parents == 0  # every parent link stays inside its profile


def test_archive_ids_are_one_to_one_across_profiles_and_sql_agrees() -> None:
    rules = [ArchiveIds.of("default"), ArchiveIds.of("work", "work:"), ArchiveIds.of("w", "w:")]
    ids = ["20260722_204335_d62c16", "work:abc", "abc", "default:abc", "w:x", ":", "", "a:b:c"]
    named = {(n, sid): rule.archive_id(sid) for n, rule in enumerate(rules) for sid in ids}
    assert len(set(named.values())) == len(named)  # no two sessions share an archive id
    assert named[0, "20260722_204335_d62c16"] == "20260722_204335_d62c16"  # Hermes's ids kept
    assert named[0, "work:abc"] == "default:work:abc" and named[1, "abc"] == "work:abc"
    conn = sqlite3.connect(":memory:")
    for (n, sid), aid in named.items():
        assert rules[n].source_id(aid) == sid
        assert conn.execute(f"SELECT {rules[n].sql('?1')}", (sid,)).fetchone()[0] == aid
    assert conn.execute(f"SELECT {rules[0].sql('NULL')}").fetchone()[0] is None


def test_a_default_session_named_like_another_profiles_keeps_both_whole(
    tmp_path: Path, facts: hs.ProfilesFacts
) -> None:
    """Issue 24: a default-profile session ``legacy:<id>`` must not swallow (or be
    swallowed by) the legacy profile's session ``<id>``."""
    crafted = hs.add_lookalike_session(facts)
    reading = _reading(facts, tmp_path)
    reading.syncer.poll()
    conn = sqlite3.connect(reading.choice.path)
    try:
        rows = conn.execute(
            "SELECT id, src_id, profile FROM sessions WHERE id LIKE '%' || ? ORDER BY id",
            (hs.S_CRON,),
        ).fetchall()
        # A message under a session of another home (profile) than its own: none.
        strays = conn.execute(
            "SELECT count(*) FROM messages m JOIN sessions s ON s.id = m.session_id"
            " WHERE m.src_home != s.src_home"
        ).fetchone()[0]
    finally:
        conn.close()
    assert rows == [
        (hs.S_CRON, hs.S_CRON, "default"),
        (f"default:{crafted}", crafted, "default"),
        (crafted, hs.S_CRON, "legacy"),  # the legacy profile's own, as before
    ]
    assert strays == 0
    reader = reading.reader
    default, legacy = reader.scoped("default"), reader.scoped("legacy")
    assert _found(default, hs.LOOKALIKE_WORD) == {f"default:{crafted}"}
    assert _found(legacy, hs.LOOKALIKE_WORD) == set()
    assert _found(legacy, facts.words["legacy"]) == {crafted}
    with pytest.raises(NotFoundError):
        default.transcript(crafted)  # the legacy profile's session
    theirs = legacy.transcript(crafted)
    said = " ".join(m.text for m in theirs.messages)
    assert theirs.session.profile == "legacy" and facts.words["legacy"] in said
    assert hs.LOOKALIKE_WORD not in said
    mine = default.transcript(f"default:{crafted}")
    assert hs.LOOKALIKE_WORD in " ".join(m.text for m in mine.messages)
    # The next passes (the cheap sync, then a reconciliation) see nothing to change.
    hs.append_turn(facts.dbs["default"], crafted, "and the wolfsbane labels?", "printed", 1.7906e9)
    reading.syncer.poll()
    assert [m.text for m in default.transcript(f"default:{crafted}").messages][-1] == "printed"
    assert len(legacy.transcript(crafted).messages) == len(theirs.messages)


def test_all_finds_each_profiles_word_and_one_profile_only_its_own(
    tmp_path: Path, facts: hs.ProfilesFacts
) -> None:
    reader = _reading(facts, tmp_path).reader
    assert _found(reader, facts.words["default"]) == {hs.S_CRON}
    assert _found(reader, facts.words["legacy"]) == {f"legacy:{hs.S_CRON}"}
    legacy = reader.scoped("legacy")
    assert legacy.home.root == facts.root / "profiles" / "legacy"
    assert _found(legacy, facts.words["legacy"]) == {f"legacy:{hs.S_CRON}"}
    assert _found(legacy, facts.words["default"]) == set()
    assert _found(reader.scoped("default"), facts.words["legacy"]) == set()
    assert _found(reader.scoped("empty"), facts.words["default"]) == set()
    # The same reader object for the same scope: its caches are kept.
    assert reader.scoped("legacy") is legacy and reader.scoped(ALL) is reader


def test_a_served_profile_reads_nothing_of_the_others(
    tmp_path: Path, facts: hs.ProfilesFacts
) -> None:
    _reading(facts, tmp_path).syncer.poll()  # the archive already holds every profile
    reading = _reading(facts, tmp_path, only="legacy")
    reader = reading.reader
    assert reader.scoped(ALL) is reader and reader.scoped("default") is reader
    assert _found(reader, facts.words["default"]) == set()
    assert _found(reader, facts.words["legacy"]) == {f"legacy:{hs.S_CRON}"}
    with pytest.raises(NotFoundError):
        reader.transcript(hs.S_CRON)  # the default profile's session of that id
    assert reader.transcript(f"legacy:{hs.S_CRON}").session.id == f"legacy:{hs.S_CRON}"
    with pytest.raises(ValidationError, match="no profile called 'work'"):
        _reading(facts, tmp_path, only="work")


def test_a_home_without_profiles_reads_as_before(tmp_path: Path) -> None:
    home = tmp_path / "hermes"
    hs.build_current_views(home / "state.db")
    reading = reading_for(HermesHome(home), tmp_path / "archive.db", inline=True)
    assert not isinstance(reading.syncer, SyncGroup)
    assert reading.reader.scoped("default") is reading.reader


def test_a_second_profile_imports_into_the_indexed_archive_without_a_rebuild(
    tmp_path: Path, facts: hs.ProfilesFacts
) -> None:
    _reading(facts, tmp_path, only="default").syncer.poll()
    archive = tmp_path / "data" / "archive.db"
    pending_seen: list[bool] = []

    def look(_progress: object) -> None:
        conn = sqlite3.connect(archive)
        try:
            row = conn.execute(
                "SELECT value FROM state_meta WHERE key='fts_trigram_pending'"
            ).fetchone()
        finally:
            conn.close()
        pending_seen.append(row is not None and row[0] == "1")

    reading = _reading(facts, tmp_path, only="legacy")
    reading.syncer.batch_sessions = 1
    reading.syncer.on_progress = look
    reading.syncer.poll()
    assert len(pending_seen) > 2 and not any(pending_seen)  # searches kept the trigram index
    conn = sqlite3.connect(archive)
    try:
        for table in ("messages_fts", "messages_fts_trigram"):
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
        word = facts.words["legacy"]
        substring = conn.execute(
            "SELECT count(*) FROM messages_fts_trigram WHERE messages_fts_trigram MATCH ?",
            (f'"{word[1:-1]}"',),
        ).fetchone()[0]
        triggers = conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type='trigger' AND name LIKE 'messages_fts%'"
        ).fetchone()[0]
    finally:
        conn.close()
    assert substring >= 2 and triggers == 3
    assert _found(_reading(facts, tmp_path).reader, word) == {f"legacy:{hs.S_CRON}"}


def test_a_scope_spans_profiles_only_reading_every_one_of_two_or_more() -> None:
    assert EVERY_PROFILE.spans(["default", "work"])
    assert not EVERY_PROFILE.spans(["default"]) and not EVERY_PROFILE.spans([])
    assert not Scope.of(["work"]).spans(["default", "work"])


def test_a_served_reader_and_the_scope_agree_on_spanning(
    facts: hs.ProfilesFacts, tmp_path: Path
) -> None:
    reading = _reading(facts, tmp_path)
    reader = reading.reader
    assert reader.spans_profiles and len(reader.profiles) > 1
    assert not reader.scoped(reader.profiles[0].name).spans_profiles


def test_every_module_asks_scope_spans() -> None:
    """ "Spans several profiles" is Scope.spans(): no module counts profiles itself."""
    root = Path(profiles.__file__).resolve().parents[1]
    counted = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if p.name != "profiles.py" or p.parent.name != "hermes"
        if re.search(
            r"len\([\w.()]*(profiles|served)[\w.()]*\) *(> *1|<= *1|>= *2)|names is None",
            p.read_text(encoding="utf-8"),
        )
    ]
    assert counted == []


def test_an_older_archives_colon_id_is_refiled_and_its_old_row_kept(tmp_path: Path) -> None:
    """An archive made before ArchiveIds kept a primary id holding ':' as it was; the next
    sync files it as ``default:<id>`` and keeps the old row, marked gone (docs/profiles.md):
    nothing is lost, and no id of another profile's shape is left to the primary."""
    home = tmp_path / "hermes"
    db = hs.build_current_views(home / "state.db")
    hs.start_session(db, "telegram:42", 1.7905e9)
    hs.append_turn(db, "telegram:42", "hello from the colon", "hi", 1.7905e9)
    archive = tmp_path / "archive.db"
    reading_for(HermesHome(home), archive, inline=True).syncer.poll()
    with closing(sqlite3.connect(archive)) as conn:  # as the rule before this one left it
        for table, column in (("sessions", "id"), ("messages", "session_id")):
            conn.execute(
                f"UPDATE {table} SET {column} = 'telegram:42'"
                f" WHERE {column} = 'default:telegram:42'"
            )
        conn.commit()
    reading = reading_for(HermesHome(home), archive, inline=True)
    reading.syncer.poll()
    with closing(sqlite3.connect(archive)) as conn:
        rows = conn.execute(
            "SELECT id, gone_from_source_at IS NOT NULL,"
            " (SELECT count(*) FROM messages m WHERE m.session_id = s.id"
            "  AND m.gone_from_source_at IS NULL)"
            " FROM sessions s WHERE src_id = 'telegram:42' ORDER BY id"
        ).fetchall()
    assert rows == [("default:telegram:42", 0, 2), ("telegram:42", 1, 0)]
    assert reading.reader.transcript("default:telegram:42").messages[0].text == (
        "hello from the colon"
    )
