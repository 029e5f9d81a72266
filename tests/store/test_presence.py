"""One rule for "this session is gone from Hermes", and the filter built on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.errors import ValidationError
from dashboard.hermes.home import HermesHome
from dashboard.reader.reader import StateReader
from dashboard.search.sessions import SearchRequest
from dashboard.sessions.transcript import TranscriptRequest
from dashboard.store.presence import PRESENCES, parse_presence
from tests.support import hermes_shapes as shapes
from tests.support.archived import archived_reader


def _reader(tmp_path: Path) -> tuple[StateReader, dict[str, str]]:
    ids = shapes.build_gone_home(tmp_path / "home")
    home = HermesHome(tmp_path / "home")
    return StateReader(home, path=home.state_db), ids


def _search(reader: StateReader, **params: str) -> set[str]:
    request = SearchRequest.from_params(params.get, lambda _: [])
    return {card.session_id for card in reader.search(request).results}


def test_a_session_whose_row_is_marked_gone_is_gone_and_the_others_are_not(
    tmp_path: Path,
) -> None:
    reader, ids = _reader(tmp_path)
    gone = reader.session_page(ids["gone"], TranscriptRequest()).transcript.session
    kept = reader.session_page(ids["kept"], TranscriptRequest()).transcript.session
    assert gone.gone_at == shapes.GONE_AT
    assert kept.gone_at is None


def test_search_cards_carry_the_mark_and_the_filter_picks_by_it(tmp_path: Path) -> None:
    reader, ids = _reader(tmp_path)
    request = SearchRequest.from_params({"q": "redis", "group": "session"}.get, lambda _: [])
    cards = {c.session_id: c for c in reader.search(request).results}
    assert cards[ids["gone"]].gone_at == shapes.GONE_AT
    assert cards[ids["kept"]].gone_at is None
    everyone = {ids["kept"], ids["gone"], ids["child"]}
    assert _search(reader, q="redis", group="session") == everyone
    assert _search(reader, q="redis", group="session", presence="all") == everyone
    assert _search(reader, q="redis", group="session", presence="hermes") == everyone - {
        ids["gone"]
    }
    assert _search(reader, q="redis", group="session", presence="archive") == {ids["gone"]}
    # The recent-sessions list (an empty query) is filtered the same way.
    assert _search(reader, presence="archive") == {ids["gone"]}
    assert ids["gone"] not in _search(reader, presence="hermes", group="session")


def test_chain_segments_carry_the_mark(tmp_path: Path) -> None:
    reader, ids = _reader(tmp_path)
    chain = reader.chain(ids["child"])
    assert chain.segment(ids["gone"]).gone_at == shapes.GONE_AT
    assert chain.segment(ids["child"]).gone_at is None


@pytest.mark.parametrize("shape", ["seed_inline", "current_views"])
def test_a_home_whose_sessions_are_all_still_in_hermes_has_nothing_gone(
    tmp_path: Path, shape: str
) -> None:
    shapes.SHAPES[shape](tmp_path / "home" / "state.db")
    reader = archived_reader(tmp_path / "home")
    everything = _search(reader, q="pool", group="session")
    assert everything
    assert _search(reader, q="pool", group="session", presence="hermes") == everything
    assert _search(reader, q="pool", group="session", presence="archive") == set()
    request = SearchRequest.from_params({"q": "pool"}.get, lambda _: [])
    assert all(card.gone_at is None for card in reader.search(request).results)


@pytest.mark.parametrize("text", ["gone", "ALL ", "1", "archive,hermes"])
def test_a_bad_presence_is_a_clear_validation_error(text: str) -> None:
    with pytest.raises(ValidationError, match="presence must be one of all, hermes, archive"):
        parse_presence(text)
    with pytest.raises(ValidationError, match="presence must be one of"):
        SearchRequest.from_params({"presence": text}.get, lambda _: [])


def test_blank_presence_means_all() -> None:
    assert PRESENCES[0] == "all"
    assert parse_presence(None) == parse_presence("") == parse_presence(" ") == "all"
    assert parse_presence(" archive ") == "archive"
