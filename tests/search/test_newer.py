"""The user's newest messages a query matches, walked newest first through the index."""

from __future__ import annotations

import json

import pytest
from flask import Flask

from dashboard.hermes.home import HermesHome
from dashboard.meaning.builder import MeaningBuilder
from dashboard.reader.reader import StateReader
from dashboard.search.newer import nearest_user_messages, newest_user_matches
from tests.support.app import make_app
from tests.support.archived import archive_home
from tests.support.hermes_shapes import _epoch
from tests.support.memory_homes import S_FIRST
from tests.support.stale_homes import (
    DAYS_SAID,
    GO_SAID,
    S_GO,
    S_RUST_BEFORE,
    S_SUMMARY,
    S_WORK_DAYS,
    build_stale_home,
)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Flask:
    base = tmp_path_factory.mktemp("newer")
    facts = build_stale_home(base / "hermes")
    return make_app(facts.root, base / "data")


def matches(app: Flask, query: str, since: float | None = None, limit: int = 50, profile=None):
    """What the function finds, each row's text, and the roles of the rows found."""
    reader = app.extensions["recall.reader"]
    if profile is not None:
        reader = reader.scoped(profile)
    with reader.snapshot() as snap:
        found = newest_user_matches(snap.conn, snap.state, query, since, limit)
        rows = snap.conn.execute(
            "SELECT m.id, m.role, m.content FROM messages m JOIN json_each(?) j ON m.id = j.value",
            (json.dumps([m[0] for m in found]),),
        ).fetchall()
    return found, {r[0]: r[2] for r in rows}, {r[1] for r in rows}


def test_the_users_rows_newest_first_after_the_moment(app: Flask) -> None:
    found, texts, roles = matches(app, "writing", profile="default")
    assert roles == {"user"}
    sessions = [session for _, session, _ in found]
    assert sessions[0] == S_SUMMARY and S_GO in sessions and S_RUST_BEFORE in sessions
    assert [at for _, _, at in found] == sorted((at for _, _, at in found), reverse=True)
    since = _epoch(S_FIRST)
    later, _, _ = matches(app, "writing", since, profile="default")
    assert S_RUST_BEFORE not in {s for _, s, _ in later} and S_GO in {s for _, s, _ in later}
    one, _, _ = matches(app, "writing", limit=1, profile="default")
    assert one == found[:1]
    assert GO_SAID in texts.values()


def test_a_profiles_reader_never_sees_another_profiles_rows(app: Flask) -> None:
    default, _, _ = matches(app, "shifts", profile="default")
    work, texts, _ = matches(app, "shifts", profile="work")
    assert default == [] and DAYS_SAID in texts.values()
    assert {s for _, s, _ in work} >= {f"work:{S_WORK_DAYS}"}


@pytest.mark.parametrize("query", ["", "   ", "AND OR NOT", "((("])
def test_a_query_with_nothing_to_search_finds_nothing(app: Flask, query: str) -> None:
    assert matches(app, query)[0] == []


@pytest.fixture(scope="module")
def with_meaning(tmp_path_factory: pytest.TempPathFactory) -> StateReader:
    """The default profile's archive with its meaning index built by the real embedder."""
    root = tmp_path_factory.mktemp("newer-meaning")
    facts = build_stale_home(root / "hermes")
    path = archive_home(facts.root, root / "archive.db")
    assert MeaningBuilder(path).build().ready
    return StateReader(HermesHome(facts.root), path=path)


def test_the_closest_in_meaning_are_the_users_rows_after_the_moment(
    with_meaning: StateReader,
) -> None:
    asked = "which programming language do I write my services in nowadays"
    with with_meaning.snapshot() as snap:
        found = nearest_user_messages(snap.conn, with_meaning.meaning, asked, None, 8)
        later = nearest_user_messages(
            snap.conn, with_meaning.meaning, asked, _epoch(S_GO) + 3600, 8
        )
        roles = {
            role
            for (role,) in snap.conn.execute(
                "SELECT m.role FROM messages m JOIN json_each(?) j ON m.id = j.value",
                (json.dumps([m[0] for m in found]),),
            )
        }
    assert found and roles == {"user"}
    assert S_GO in [session for _, session, _ in found]
    assert later and S_GO not in [session for _, session, _ in later]
    assert all(at is not None and at > _epoch(S_GO) + 3600 for _, _, at in later)


def test_staleness_asks_meaning_once_the_index_is_built(with_meaning: StateReader) -> None:
    text = (with_meaning.home.root / "memories" / "USER.md").read_text(encoding="utf-8")
    found = with_meaning.memory_staleness("USER.md", text, [])
    assert found.by_meaning and found.problem is None
    python = next(e for e in found.entries.values() if e.text == "Writes mostly Python")
    assert python.flagged is not None and python.flagged.session_id == S_GO
