"""Where the user said a memory entry (said.where_said), over a real archive."""

from __future__ import annotations

import pytest
from flask import Flask

from dashboard.search.said import key_words, where_said
from tests.support.app import make_app
from tests.support.memory_homes import S_FIRST, build_memory_home


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Flask:
    base = tmp_path_factory.mktemp("said")
    return make_app(build_memory_home(base / "hermes").root, base / "data")


def test_key_words_leave_out_short_and_common_words_once_each() -> None:
    assert key_words("User prefers Python; the user's python 3.12 is at /usr/bin") == (
        "python",
        "usr",
        "bin",
    )
    assert key_words("I am ok") == ()
    assert key_words("snake_case ___ 2026 v12") == ("snake", "case", "v12")


def test_the_earlier_user_message_sharing_most_words_nearest_on_a_tie(app: Flask) -> None:
    reader = app.extensions["recall.reader"]
    with reader.snapshot() as snap:
        ids = dict(
            snap.conn.execute(
                "SELECT content, id FROM messages WHERE session_id = ? AND role = 'user'",
                (S_FIRST,),
            ).fetchall()
        )
        lisbon, porto = (ids[k] for k in sorted(ids, key=ids.get) if k.startswith(("Rem", "Act")))
        end = max(ids.values()) + 10

        def said(text: str, before: int = end):
            return where_said(snap.conn, snap.state, S_FIRST, before, text)

        found = said("Lives in Porto (moved from Lisbon)")
        assert found is not None and found.message_id == porto
        assert found.words == ("porto", "moved")  # two words beat the Lisbon message's one
        assert said("Lives in Lisbon").message_id == lisbon
        assert said("Lives in Porto", before=porto) is None  # only messages before the call
        assert said("Kubernetes clusters") is None
        assert said("the user") is None  # no word worth searching
        assert said("___ ---") is None
