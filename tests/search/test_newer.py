"""The user's newest messages a query matches, walked newest first through the index."""

from __future__ import annotations

import json

import pytest
from flask import Flask

from dashboard.search.newer import newest_user_matches
from tests.support.app import make_app
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
