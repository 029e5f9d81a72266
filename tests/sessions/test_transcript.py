"""Transcripts and chain neighbours, read from the archive of every real state.db shape."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from dashboard.errors import NotFoundError
from dashboard.hermes.content import JSON_PREFIX
from dashboard.hermes.home import HermesHome
from dashboard.lineage.links import neighbours as chain_neighbours
from dashboard.reader.reader import StateReader
from dashboard.sessions.transcript import load_transcript
from dashboard.store.readonly import open_readonly
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as shapes
from tests.support.archived import archive_home, archived_reader
from tests.support.long_homes import long_home


def imported(db: Path) -> Path:
    """The archive of the Hermes home ``db`` belongs to, imported as the syncer does."""
    return archive_home(db.parent, db.parent / "archive.db")


@contextmanager
def opened(db: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to a Recall store (an archive, or a home's own store)."""
    with closing(open_readonly(db)) as conn:
        yield conn


def expected_rows(shape: str, session_id: str, *, visible: bool) -> list[shapes.Message]:
    """The dataset's rows of one session as ``shape`` stores them, in order."""
    facts = shapes.EXPECTED[shape]
    rows = [*shapes.MESSAGES, *(shapes.STALE_MESSAGES if facts.fts_stale else ())]
    rows = [m for m in rows if m.session == session_id]
    if not facts.modern:
        rows = [m for m in rows if m.kind not in ("rewound", "hidden")]
    if visible:
        rows = [m for m in rows if m.kind not in ("rewound", "hidden")]
    return sorted(rows, key=lambda m: m.timestamp)


@pytest.mark.parametrize("shape", sorted(shapes.SHAPES))
def test_every_shape_reads_every_session(tmp_path: Path, shape: str) -> None:
    db = imported(shapes.SHAPES[shape](tmp_path / "state.db"))
    facts = shapes.EXPECTED[shape]
    with opened(db) as conn:
        shown = {sid: load_transcript(conn, sid) for sid in shapes.SESSION_IDS}
        everything = {
            sid: load_transcript(conn, sid, include_inactive=True) for sid in shapes.SESSION_IDS
        }
    assert sum(len(t.messages) for t in shown.values()) == facts.visible_messages
    assert sum(len(t.messages) for t in everything.values()) == facts.total_messages
    for sid, transcript in shown.items():
        rows = expected_rows(shape, sid, visible=True)
        assert [m.role for m in transcript.messages] == [r.role for r in rows], sid
        assert transcript.session.id == sid
        assert all(JSON_PREFIX not in m.text for m in transcript.messages)
        ids = [m.id for m in transcript.messages]
        assert len(set(ids)) == len(ids)
        times = [m.timestamp for m in transcript.messages]
        assert times == sorted(times)
    for sid, transcript in everything.items():
        assert len(transcript.messages) == len(expected_rows(shape, sid, visible=False))

    root = shown[shapes.S_ROOT]
    assert root.session.title == "Postgres pool tuning"
    assert root.session.source == "cli" and root.session.end_reason == "compression"
    assert root.session.input_tokens == 48210
    assert shapes.UNIQUE_WORD in root.messages[0].text

    # Structured content is decoded to its text parts.
    structured = [m for m in shown[shapes.S_TELEGRAM].messages if m.structured]
    assert len(structured) == 1
    assert structured[0].text == "这是部署失败的截图 screenshot attached\n[image]"

    # Compaction summaries open the continuation segments, whatever the prefix era.
    for sid in (shapes.S_CONT1, shapes.S_CONT2):
        first = shown[sid].messages[0]
        assert first.is_compaction_summary and first.text.startswith(facts.summary_prefix)
        assert not any(m.is_compaction_summary for m in shown[sid].messages[1:])
    assert not any(m.is_compaction_summary for m in root.messages)
    # An untitled segment is named by its first real user message, not its summary.
    assert shown[shapes.S_CONT2].display_title == "Final check: is the pool config committed?"


@pytest.mark.parametrize("shape", ["current_views", "stale_index", "seed_inline"])
def test_inactive_rows_are_hidden_by_default_and_flagged_when_asked(
    tmp_path: Path, shape: str
) -> None:
    db = imported(shapes.SHAPES[shape](tmp_path / "state.db"))
    modern = shapes.EXPECTED[shape].modern
    with opened(db) as conn:
        root = load_transcript(conn, shapes.S_ROOT)
        root_all = load_transcript(conn, shapes.S_ROOT, include_inactive=True)
        telegram = load_transcript(conn, shapes.S_TELEGRAM)
        telegram_all = load_transcript(conn, shapes.S_TELEGRAM, include_inactive=True)

    assert not any(shapes.REWOUND_WORD in m.text for m in root.messages)
    assert not any(shapes.HIDDEN_WORD in m.text for m in telegram.messages)
    # In-place compacted rows stay visible, flagged as history.
    compacted = [m for m in telegram.messages if shapes.COMPACTED_WORD in m.text]
    assert len(compacted) == 1
    assert compacted[0].compacted is modern and compacted[0].inactive is modern
    if not modern:  # the source had no flags: every row was imported live
        assert root.left_out == 0 and root_all.messages == root.messages
        return
    assert root.left_out == 1 and telegram.left_out == 1
    rewound = [m for m in root_all.messages if shapes.REWOUND_WORD in m.text]
    assert len(rewound) == 1
    assert rewound[0].inactive and not rewound[0].compacted and not rewound[0].hidden
    hidden = [m for m in telegram_all.messages if shapes.HIDDEN_WORD in m.text]
    assert len(hidden) == 1 and hidden[0].hidden and hidden[0].is_compaction_summary
    assert all(not (m.inactive and not m.compacted) for m in root.messages)


def test_tool_calls_are_parsed_and_linked_to_their_results(tmp_path: Path) -> None:
    db = imported(shapes.build_current_views(tmp_path / "state.db"))
    with opened(db) as conn:
        root = load_transcript(conn, shapes.S_ROOT)
    caller = root.messages[1]
    assert caller.role == "assistant" and caller.reasoning == (
        "Check active connections before resizing."
    )
    (call,) = caller.tool_calls
    assert (call.id, call.name, call.malformed) == ("call_r1", "terminal", False)
    assert json.loads(call.arguments) == {
        "command": "psql -c 'select count(*) from pg_stat_activity'"
    }
    assert "\n" in call.arguments  # pretty-printed
    assert call.preview.startswith("command=psql")
    result = root.messages[2]
    assert result.tool_call_id == "call_r1" and result.tool_name == "terminal"
    assert root.callers["call_r1"] == caller.id
    assert result.tool_output.body == " count\n-------\n    97"
    assert result.tool_output.facts == (("exit_code", "0"),)
    assert shapes.TOOL_CALL_WORD in root.messages[8].search_text


def test_unknown_session_raises_not_found(tmp_path: Path) -> None:
    db = imported(shapes.build_seed_inline(tmp_path / "state.db"))
    with opened(db) as conn, pytest.raises(NotFoundError):
        load_transcript(conn, "20990101_000000_ffffff")


def test_chain_neighbours_follow_compression_only(tmp_path: Path) -> None:
    db = imported(shapes.build_current_views(tmp_path / "state.db"))
    with opened(db) as conn:
        hood = {sid: chain_neighbours(conn, sid) for sid in shapes.SESSION_IDS}
        missing = chain_neighbours(conn, "nope")

    def ids(n: dict) -> tuple[str | None, list[str]]:
        return (n["previous"] or {}).get("id"), [s["id"] for s in n["next"]]

    assert ids(hood[shapes.S_ROOT]) == (None, [shapes.S_CONT1])
    assert ids(hood[shapes.S_CONT1]) == (shapes.S_ROOT, [shapes.S_CONT2])
    assert ids(hood[shapes.S_CONT2]) == (shapes.S_CONT1, [])  # the subagent is no segment
    assert ids(hood[shapes.S_SUBAGENT]) == (None, [])
    assert ids(hood[shapes.S_BRANCH]) == (None, [])  # a branch does not continue its parent
    assert ids(hood[shapes.S_TELEGRAM]) == (None, [])
    assert hood[shapes.S_CONT1]["previous"] == {
        "id": shapes.S_ROOT,
        "title": "Postgres pool tuning",
        "name": "Postgres pool tuning",
        "started_at": shapes.SESSIONS[0].started_at,
    }
    assert missing == {"previous": None, "next": []}


def test_the_session_page_and_the_chain_agree_on_what_continues(tmp_path: Path) -> None:
    """A child stamped a moment before its parent's end is recorded still continues it
    (links.TIMING_SLACK_S), and a marker key names a branch whatever its value: the
    neighbours ask the chain's rule, so no page says "part 2 of 2" without a link back."""
    with SessionStore(tmp_path / "state.db") as store:
        store.create_session("cli", session_id="a", started_at=100.0)
        store.append_messages("a", [NewMessage("user", "hello", timestamp=101.0)])
        store.end_session("a", "compression", ended_at=200.0)
        store.create_session("cli", session_id="b", started_at=198.0, parent_session_id="a")
        store.create_session(
            "cli",
            session_id="c",
            started_at=300.0,
            parent_session_id="a",
            model_config={"_branched_from": None},
        )
    reader = StateReader(HermesHome(tmp_path))
    chain = reader.chain("b")
    assert {s.session_id: s.kind for s in chain.segments} == {
        "a": "root",
        "b": "continuation",
        "c": "branch",
    }
    assert chain.part_of("b") == (2, 2)
    assert reader.transcript("b").neighbours["previous"]["id"] == "a"
    assert [n["id"] for n in reader.transcript("a").neighbours["next"]] == ["b"]
    assert reader.transcript("c").neighbours["previous"] is None


def bare_db(path: Path) -> Path:
    """The oldest columns only: no title, no costs, no reasoning, no visibility flags."""
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executescript(
            """
            CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, model TEXT,
                model_config TEXT, parent_session_id TEXT, started_at REAL NOT NULL,
                ended_at REAL, end_reason TEXT);
            CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT,
                role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT,
                tool_name TEXT, timestamp REAL NOT NULL);
            """
        )
        conn.executemany(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                ("a", "cli", "m", None, "gone", 100.0, 200.0, "compression"),
                ("b", "cli", "m", None, "a", 200.0, None, None),  # continues a
                ("c", "cli", "m", '{"_delegate_from": "a"}', "a", 200.0, 210.0, "done"),
                ("d", "cli", "m", "not json", "a", 150.0, 160.0, "done"),  # spawned before
                ("e", "cli", "m", None, "a", 250.0, None, None),  # also continues a
            ],
        )
        conn.executemany(
            "INSERT INTO messages (session_id, role, content, tool_calls, timestamp)"
            " VALUES (?, ?, ?, ?, ?)",
            [
                ("a", "user", "hello there", None, 101.0),
                ("a", "assistant", None, "{broken", 102.0),
                ("b", "user", "[CONTEXT SUMMARY]: old form", None, 200.0),
            ],
        )
    return path


def test_old_files_without_newer_columns_are_read(tmp_path: Path) -> None:
    source = bare_db(tmp_path / "state.db")
    before = source.read_bytes()
    with opened(imported(source)) as conn:
        a = load_transcript(conn, "a")
        b = load_transcript(conn, "b", include_inactive=True)
        hood = chain_neighbours(conn, "a")
        child = chain_neighbours(conn, "b")
    assert source.read_bytes() == before
    assert a.session.title is None and not a.session.input_tokens
    assert a.session.tokens == {} and a.left_out == 0
    assert a.display_title == "hello there"
    assert [m.role for m in a.messages] == ["user", "assistant"]
    assert a.messages[1].tool_calls[0].malformed and a.messages[1].reasoning is None
    assert b.messages[0].is_compaction_summary
    assert hood["previous"] is None  # the parent id points at a deleted session
    assert [s["id"] for s in hood["next"]] == ["b", "e"]
    # An untitled neighbour is named as its own page names it (store/names.py).
    assert child["previous"] == {
        "id": "a",
        "title": None,
        "name": "hello there",
        "started_at": 100.0,
    }


def test_reader_attaches_neighbours_and_leaves_the_file_alone(tmp_path: Path) -> None:
    db = shapes.build_seed_external(tmp_path / "home" / "state.db")
    before = db.read_bytes()
    reader = archived_reader(db.parent)
    transcript = reader.transcript(shapes.S_CONT1)
    assert transcript.neighbours["previous"]["id"] == shapes.S_ROOT
    assert [n["id"] for n in transcript.neighbours["next"]] == [shapes.S_CONT2]
    assert len(transcript.messages) == len(
        expected_rows("seed_external", shapes.S_CONT1, visible=True)
    )
    with pytest.raises(NotFoundError):
        reader.transcript("missing")
    assert db.read_bytes() == before


# -- long transcripts come in pages (issue 13, item 22) ----------------------------------


def test_a_long_transcript_is_read_one_page_at_a_time(tmp_path: Path) -> None:
    home, ids, _ = long_home(tmp_path)
    with opened(home / "state.db") as conn:
        pages = [load_transcript(conn, "long-a", page=n, page_size=500) for n in (1, 2, 3)]
        whole = load_transcript(conn, "long-a")
        held = load_transcript(conn, "long-a", page=1, at=ids[1_050], page_size=500)
        past = load_transcript(conn, "long-a", page=9, page_size=500)
        unknown = load_transcript(conn, "long-a", page=2, at=10**9, page_size=500)
    assert [len(p.messages) for p in pages] == [500, 500, 100]
    assert [m.id for p in pages for m in p.messages] == [m.id for m in whole.messages] == ids
    assert pages[2].paging.pages == 3 and pages[2].paging.total == 1_100
    assert held.paging.page == 3 and ids[1_050] in {m.id for m in held.messages}
    assert past.paging.past_end and past.messages == ()
    assert unknown.paging.page == 2  # an id no page shows: the page asked for
    # A page without the first message still titles the session by it.
    assert pages[1].display_title == whole.display_title == "line 0 of the long talk"


def test_a_long_stitched_transcript_is_paged_with_every_message_once(tmp_path: Path) -> None:
    from dashboard.lineage.chains import load_chain
    from dashboard.sessions.stitched import load_stitched, load_stitched_page

    home, ids, more = long_home(tmp_path)
    with opened(home / "state.db") as conn:
        chain = load_chain(conn, "long-b")
        whole = load_stitched(conn, chain)
        pages = [load_stitched_page(conn, chain, page=n, page_size=500) for n in (1, 2, 3)]
        held = load_stitched_page(conn, chain, at=more[5], page_size=500)

    def flat(parts):
        return [
            i
            for p in parts
            for i in ([p.divider.id] if p.divider else []) + [m.id for m in p.transcript.messages]
        ]

    assert flat(whole) == ids + more
    assert [i for page in pages for i in flat(page.parts)] == ids + more
    assert [len(flat(page.parts)) for page in pages] == [500, 500, 131]
    assert all(page.messages == 1_131 and page.segments == 2 for page in pages)
    last = pages[2].parts
    assert [p.part for p in last] == [1, 2] and last[1].divider.id == more[0]
    assert held.paging.page == 3
