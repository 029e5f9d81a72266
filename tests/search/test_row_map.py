"""search/row_map.py: the ranked read through the message-to-session map gives exactly
the rows the joined read gives, on every fixture shape, and stays so as the archive grows
(new turns), changes in place (a compaction, a deleted session) and is replaced."""

from __future__ import annotations

import re
import shutil
import sqlite3
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import pytest

from dashboard.archive.files import open_archive
from dashboard.hermes.home import HermesHome
from dashboard.lineage import epochs
from dashboard.reader.opening import HomeReading, reading_for
from dashboard.reader.reader import StateReader
from dashboard.search import row_map, scan
from dashboard.search.filters import request_filters
from dashboard.search.query import parse_query
from dashboard.search.routes import Rows, find_rows, mapped, plan_routes
from dashboard.search.row_map import RowMapCache
from dashboard.search.sessions import SearchRequest
from tests.support import hermes_shapes as shapes
from tests.support import hermes_v31 as v31
from tests.support.archived import archive_home

EVERY_SOURCE = ("cli", "telegram", "discord", "cron", "subagent", "api", "web", "slack")


def _words(conn: sqlite3.Connection, limit: int = 40) -> list[str]:
    """Words the archive's messages say, most common first (a spread of frequencies)."""
    counts: dict[str, int] = {}
    for (content,) in conn.execute("SELECT content FROM main.messages"):
        for word in set(re.findall(r"[A-Za-z]{4,}", content or "")):
            counts[word.lower()] = counts.get(word.lower(), 0) + 1
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    return ranked[: limit // 2] + ranked[-(limit // 2) :]


def _symbolic(conn: sqlite3.Connection, limit: int = 3) -> list[str]:
    """Words with a symbol inside (``node.js``, ``pg_stat``) the messages say: the word
    route finds their words and checks the literal text (through the trigram index)."""
    found: set[str] = set()
    for (content,) in conn.execute("SELECT content FROM main.messages ORDER BY id"):
        found.update(re.findall(r"\b[A-Za-z]{2,}[._-][A-Za-z]{2,}\b", content or ""))
    return sorted(found)[:limit]


def _requests(conn: sqlite3.Connection) -> list[SearchRequest]:
    words = _words(conn)
    symbolic = _symbolic(conn)
    sessions = [r[0] for r in conn.execute("SELECT id FROM sessions ORDER BY id LIMIT 3")]
    models = [r[0] for r in conn.execute("SELECT DISTINCT model FROM sessions LIMIT 1") if r[0]]
    queries = [*words, *(f"{w[:3]}*" for w in words[:4]), " ".join(words[:2]), f'"{words[0]}"']
    queries.append(f"{words[0]} OR {words[-1]}")
    queries.append(f"{words[1]} NOT {words[2]}")
    # Symbols count: the literal text, in any case; with another word; a symbol the
    # messages never write between those words (the words match, the text does not).
    for text in symbolic:
        queries += [text, text.upper(), f"{text} {words[0]}"]
        queries.append(re.sub(r"[._-]", "~", text))
    out: list[SearchRequest] = []
    for n, query in enumerate(queries):
        base = SearchRequest(query=query)
        variants = [
            base,
            replace(base, sources=EVERY_SOURCE),
            replace(base, rank_window=1 + n % 4),  # bounded: the window's edge decides
            replace(base, presence="archive" if n % 2 else "hermes"),
        ]
        if sessions:
            variants.append(replace(base, exclude=(sessions[n % len(sessions)],)))
        if models:
            variants.append(replace(base, model=models[0], model_spellings=(models[0],)))
        out.extend(variants)
    return out


def _compare(reader: StateReader, cache: RowMapCache) -> int:
    """Every request's rows on every index route, joined and mapped; return how many
    requests found rows (a check that compares nothing would pass anything)."""
    scoped = not reader.scope.everything
    found = 0
    with reader.snapshot() as snap:
        conn = snap.conn
        for request in _requests(conn):
            parsed = parse_query(request.query)
            routes, _ = plan_routes(parsed, snap.state.trigram_ready)
            filters = request_filters(request)
            for route in routes:
                if not mapped(route, request):
                    continue
                row_map = cache.get(conn, snap.state)
                assert row_map is not None
                joined = find_rows(conn, route, parsed, request, filters, scoped)
                fast = find_rows(conn, route, parsed, request, filters, scoped, row_map=row_map)
                assert _plain(fast) == _plain(joined), (request, route.name)
                found += bool(joined.rows)
    return found


def _plain(rows: Rows) -> tuple[object, ...]:
    # The timestamp is not read for a ranked search (group_rows reads it for the sorts).
    return (
        [(r[0], r[1], r[2], bool(r[4])) for r in rows.rows],
        rows.total,
        rows.bounded,
        rows.cutoff,
    )


def _reader(home: Path, tmp_path: Path) -> StateReader:
    return StateReader(HermesHome(home), path=archive_home(home, tmp_path / "archive.db"))


@pytest.mark.parametrize(
    "build",
    [
        shapes.build_current_views,
        shapes.build_seed_external,
        shapes.build_delete_journal,
        shapes.build_cost_facts,
    ],
)
def test_the_mapped_read_is_the_joined_read_on_each_shape(build, tmp_path: Path) -> None:
    home = tmp_path / "home"
    build(home / "state.db")
    assert _compare(_reader(home, tmp_path), RowMapCache()) > 0


def test_the_mapped_read_is_the_joined_read_on_in_place_compaction(tmp_path: Path) -> None:
    """Hermes v31: compacted three times then undone, merged summaries, superseded
    originals, re-inserted copies, rotation, profiles of its own: archived rows flagged
    from the partial indexes as the join reads them."""
    facts = v31.build_v31_home(tmp_path / "v31")
    reader = _reader(facts.root, tmp_path)
    with reader.snapshot() as snap:
        archived = snap.conn.execute(
            "SELECT count(*) FROM messages WHERE active = 0 OR compacted = 1"
        ).fetchone()[0]
    assert archived > 0
    assert _compare(reader, RowMapCache()) > 0
    for form in shapes.EPOCH_FORMS:
        home = tmp_path / form
        shapes.build_epochs_home(home, form)
        assert _compare(_reader(home, tmp_path / f"{form}-data"), RowMapCache()) > 0


def test_one_profile_maps_its_own_rows_only(tmp_path: Path) -> None:
    facts = shapes.build_profiles_home(tmp_path / "hermes")
    reader = reading_for(
        HermesHome(facts.root), tmp_path / "data" / "archive.db", inline=True, folder=tmp_path
    ).reader
    assert _compare(reader, RowMapCache()) > 0
    for name in ("default", "legacy"):
        scoped = reader.scoped(name)
        assert not scoped.scope.everything
        assert _compare(scoped, RowMapCache(scoped=True)) > 0
        # The other profile's word: its matches have no owner here, so nothing is found.
        other = next(p for p in facts.words if p not in (name, "empty") and facts.words[p])
        result = scoped.search(SearchRequest(query=facts.words[other], sources=EVERY_SOURCE))
        assert result.total_matches == 0 and not result.results


def test_one_kept_map_follows_new_turns_a_compaction_and_a_deleted_session(
    tmp_path: Path,
) -> None:
    """The same cache across changes: rows past its newest id extend it, a compaction
    in place (flags) and a deleted session (ids gone) are read again."""
    facts = v31.build_v31_home(tmp_path / "v31")
    db = facts.db
    archive = archive_home(facts.root, tmp_path / "archive.db")
    reader = StateReader(HermesHome(facts.root), path=archive)
    cache = RowMapCache()
    assert _compare(reader, cache) > 0
    sessions = [r[0] for r in sqlite3.connect(db).execute("SELECT id FROM sessions ORDER BY id")]
    long = facts.long_session
    # Turns interleaved across sessions: one session's rows are no longer consecutive.
    for n in range(6):
        sid = sessions[n % 3]
        shapes.append_turn(
            db, sid, f"quillwort turn {n} redis", f"reply {n} redis", v31.V31_NOW + n
        )
    archive_home(facts.root, archive)
    assert _compare(reader, cache) > 0
    v31.compact_in_place(db, long, "quillwort summary of the turns", v31.V31_NOW + 100)
    archive_home(facts.root, archive)
    assert _compare(reader, cache) > 0
    with open_archive(archive) as store:
        store.delete_session(sessions[1])
    assert _compare(reader, cache) > 0


def test_an_archive_replaced_by_an_older_copy_is_mapped_again(tmp_path: Path) -> None:
    """A restored copy reuses ids the kept map gave to other sessions: its file identity
    (and the id sequence going back) rebuild the map."""
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    archive = archive_home(home, tmp_path / "archive.db")
    backup = tmp_path / "backup.db"
    with closing(sqlite3.connect(archive)) as conn:
        conn.execute("VACUUM INTO ?", (str(backup),))
    reader = StateReader(HermesHome(home), path=archive)
    cache = RowMapCache()
    for n in range(4):
        shapes.append_turn(home / "state.db", shapes.S_ROOT, f"first timeline {n}", "ok", 1e9 + n)
    archive_home(home, archive)
    assert _compare(reader, cache) > 0
    for side in ("-wal", "-shm"):
        Path(f"{archive}{side}").unlink(missing_ok=True)
    shutil.copy(backup, tmp_path / "restored.db")
    (tmp_path / "restored.db").replace(archive)
    with closing(sqlite3.connect(archive)) as conn, conn:  # other sessions take those ids
        conn.execute(
            "INSERT INTO messages(session_id, role, content, timestamp)"
            " SELECT id, 'user', 'second timeline said', 1e9 FROM sessions LIMIT 4"
        )
    reader = StateReader(HermesHome(home), path=archive)
    assert _compare(reader, cache) > 0


def test_one_profiles_kept_map_follows_its_new_turns(tmp_path: Path) -> None:
    """A scoped map extended by its profile's new rows: they are its newest, past the
    bound its walk starts from."""
    facts = shapes.build_profiles_home(tmp_path / "hermes")
    reading = reading_for(
        HermesHome(facts.root), tmp_path / "data" / "archive.db", inline=True, folder=tmp_path
    )
    scoped = reading.reader.scoped("default")
    cache = RowMapCache(scoped=True)
    assert _compare(scoped, cache) > 0
    db = facts.dbs["default"]
    sid = sqlite3.connect(db).execute("SELECT id FROM sessions ORDER BY id LIMIT 1").fetchone()[0]
    for n in range(3):
        said = f"{facts.words['default']} newer turn {n}"
        shapes.append_turn(db, sid, said, f"reply {n}", 2e9 + n)
    assert _compare(scoped, cache) > 0  # the inline sync runs before the snapshot
    with scoped.snapshot() as snap:
        newest = snap.conn.execute("SELECT max(id) FROM messages").fetchone()[0]
        assert cache.get(snap.conn, snap.state).owners.newest == newest


def test_a_warmed_reader_searches_with_the_map_it_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """warm_search (after each sync pass) builds the map once; the search after it
    reuses it, and many rows landing at once are read as a new map, not one by one."""
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    reader = _reader(home, tmp_path)
    builds: list[int] = []
    real = row_map._build
    monkeypatch.setattr(row_map, "_build", lambda *a: builds.append(1) or real(*a))
    reader.warm_search()
    assert builds == [1]
    assert reader.search(SearchRequest(query="pool")).results
    assert builds == [1]
    monkeypatch.setattr(row_map, "REBUILD_PAST", 2)
    for n in range(3):
        shapes.append_turn(home / "state.db", shapes.S_ROOT, f"pool turn {n}", "ok", 1e9 + n)
    archive_home(home, tmp_path / "archive.db")
    reader.warm_search()
    assert builds == [1, 1]
    assert _compare(reader, reader._row_maps) > 0


def test_a_scoped_scan_takes_its_id_bounds_from_the_map_while_they_hold(tmp_path: Path) -> None:
    """A profile's oldest and newest message ids (a 2-character CJK scan's range): the
    map's, checked against the rows, the same as min()/max() through the scope's view,
    also after the session holding the newest row is deleted."""
    facts = shapes.build_profiles_home(tmp_path / "hermes")
    archive = tmp_path / "data" / "archive.db"
    reading = reading_for(HermesHome(facts.root), archive, inline=True, folder=tmp_path)
    scoped = reading.reader.scoped("default")
    cache = RowMapCache(scoped=True)

    def both(sync: bool = False) -> tuple[object, object]:
        with scoped.snapshot(sync=sync) as snap:
            plain = tuple(snap.conn.execute("SELECT min(id), max(id) FROM messages").fetchone())
            found = scan.id_bounds(snap.conn, True, cache.get(snap.conn, snap.state))
            return found, plain

    found, plain = both(sync=True)  # the first import
    assert found == plain and None not in plain
    with scoped.snapshot(sync=False) as snap:
        newest_session = snap.conn.execute(
            "SELECT session_id FROM messages WHERE id = ?", (plain[1],)
        ).fetchone()[0]
    with open_archive(archive) as store:  # as `recall archive delete` does
        store.delete_session(newest_session)
    found, plain = both()
    assert found == plain


def test_kept_name_matches_follow_a_renamed_session(tmp_path: Path) -> None:
    """A session's name matches are kept per version of the archive: a title set after a
    search is found by the next one, and the old title no longer is."""
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    archive = archive_home(home, tmp_path / "archive.db")
    reader = StateReader(HermesHome(home), path=archive)
    with reader.snapshot() as snap:
        sid = snap.conn.execute("SELECT id FROM sessions ORDER BY id LIMIT 1").fetchone()[0]

    def named(word: str) -> list[str]:
        result = reader.search(SearchRequest(query=word, sources=EVERY_SOURCE))
        return [c.session_id for c in result.results if c.title_match]

    with open_archive(archive) as store:
        store.set_title(sid, "quillwort retrospective")
    assert named("quillwort") == [sid]
    assert named("quillwort") == [sid]  # asked again: the kept answer
    with open_archive(archive) as store:
        store.set_title(sid, "bramblefinch retrospective")
    assert named("quillwort") == []
    assert named("bramblefinch") == [sid]


def test_a_kept_profile_reader_sees_its_new_sessions(tmp_path: Path) -> None:
    """The scope's session ids are kept on each thread's connection (store/scope.py):
    a session the profile starts after they were read is found by the next search, and
    another profile's new session is not."""
    facts = shapes.build_profiles_home(tmp_path / "hermes")
    reading = reading_for(
        HermesHome(facts.root), tmp_path / "data" / "archive.db", inline=True, folder=tmp_path
    )
    scoped = reading.reader.scoped("default")
    word = "quillwortnew"
    assert scoped.search(SearchRequest(query=word, sources=EVERY_SOURCE)).total_matches == 0
    other = next(p for p in facts.dbs if p != "default")
    for profile, sid in (("default", "20270101_000000_aaaaaa"), (other, "20270101_000000_bbbbbb")):
        shapes.start_session(facts.dbs[profile], sid, 2e9)
        shapes.append_turn(facts.dbs[profile], sid, f"{word} {profile}", "ok", 2e9 + 1)
    result = scoped.search(SearchRequest(query=word, sources=EVERY_SOURCE))
    assert [hit.snippet for card in result.results for hit in card.hits] == [
        f"<mark>{word}</mark> default"
    ]


def _two_profiles(tmp_path: Path) -> tuple[shapes.ProfilesFacts, str, dict[str, str], HomeReading]:
    """A home of profiles read through its archive (synced inline): its facts, a profile
    other than ``default``, a session of each of the two, and the reading."""
    facts = shapes.build_profiles_home(tmp_path / "hermes")
    other = next(p for p in facts.dbs if p != "default")
    sids = {
        p: sqlite3.connect(facts.dbs[p]).execute("SELECT min(id) FROM sessions").fetchone()[0]
        for p in ("default", other)
    }
    reading = reading_for(
        HermesHome(facts.root), tmp_path / "data" / "archive.db", inline=True, folder=tmp_path
    )
    return facts, other, sids, reading


def test_one_profile_scores_only_its_own_rows_among_interleaved_ones(tmp_path: Path) -> None:
    """Turns of two profiles interleaved in id order: a scoped read scores its profile's
    matches only (a list of them), and gives the joined read's rows, bounded or not."""
    facts, other, sids, reading = _two_profiles(tmp_path)
    for n in range(24):
        profile = "default" if n % 3 == 0 else other  # two of the other's for one of ours
        shapes.append_turn(
            facts.dbs[profile], sids[profile], f"quillwort {n}", f"quillwort reply {n}", 2e9 + n
        )
        assert reading.syncer is not None
        reading.syncer.poll()  # each turn synced as it lands: the profiles' ids interleave
    scoped = reading.reader.scoped("default")
    cache = RowMapCache(scoped=True)
    found = 0
    with scoped.snapshot() as snap:
        conn = snap.conn
        for window in (None, 1, 3, 7, 40):
            request = SearchRequest(query="quillwort", sources=EVERY_SOURCE, rank_window=window)
            parsed = parse_query(request.query)
            route = plan_routes(parsed, snap.state.trigram_ready)[0][0]
            filters = request_filters(request)
            joined = find_rows(conn, route, parsed, request, filters, True)
            fast = find_rows(
                conn, route, parsed, request, filters, True, row_map=cache.get(conn, snap.state)
            )
            assert _plain(fast) == _plain(joined), window
            found += len(joined.rows)
    assert found > 0


def test_warming_derives_the_epochs_a_first_search_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """warm_search derives the epochs of the sessions holding archived rows, a few at a
    time, so a query's first search derives none; later warm-ups only check them."""
    facts = v31.build_v31_home(tmp_path / "v31")
    reader = _reader(facts.root, tmp_path)
    derived: list[list[str]] = []
    real = epochs.epochs_of
    monkeypatch.setattr(epochs, "DERIVE_SESSIONS", 1)
    monkeypatch.setattr(
        epochs, "epochs_of", lambda conn, ids: derived.append(list(ids)) or real(conn, ids)
    )
    reader.warm_search()
    assert derived and all(len(ids) == 1 for ids in derived)  # one session a read
    warmed = {sid for ids in derived for sid in ids}
    with reader.snapshot() as snap:
        archived = {
            r[0]
            for r in snap.conn.execute(
                "SELECT DISTINCT session_id FROM messages WHERE active = 0 OR compacted = 1"
            )
        }
        texts = [
            r[0]
            for r in snap.conn.execute(
                "SELECT content FROM messages WHERE active = 0 OR compacted = 1 ORDER BY id"
            )
        ]
    assert archived <= warmed
    words = sorted({w.lower() for t in texts for w in re.findall(r"[A-Za-z]{5,}", t or "")})
    derived.clear()
    hits = 0
    for query in words[:12]:
        result = reader.search(SearchRequest(query=query, sources=EVERY_SOURCE))
        hits += sum(1 for card in result.results if card.session_id in archived)
    assert hits > 0  # the searches did land in sessions holding archived rows
    assert derived == []
    reader.warm_search()
    assert derived == []  # nothing changed: checked, not derived again


@pytest.mark.parametrize(("words", "route"), [(("鹬蚌", "渔翁"), "pairs"), (("鹬", "渔"), "scan")])
def test_a_profiles_unranked_read_finds_its_own_rows_only(
    tmp_path: Path, words: tuple[str, str], route: str
) -> None:
    """A query no ranked index answers (one or two CJK characters) is a scan or a pair's
    lookup; in one profile either reads the archive's rows by id and keeps that profile's
    only, another profile's row among them included."""
    facts, other, sids, reading = _two_profiles(tmp_path)
    assert reading.syncer is not None
    # Synced one after the other: the other profile's row lies inside this one's ids.
    shapes.append_turn(facts.dbs[other], sids[other], "鹬蚌 了 他的", "好", 2e9)
    reading.syncer.poll()
    shapes.append_turn(facts.dbs["default"], sids["default"], "渔翁 了 我的", "好", 2e9 + 1)
    reading.syncer.poll()
    mine = reading.reader.scoped("default")
    every = reading.reader.scoped("all")
    for query, expected_mine in zip(words, (0, 1), strict=True):
        request = SearchRequest(query=query, sources=EVERY_SOURCE)
        found = mine.search(request)
        assert found.route == route
        assert found.total_matches == expected_mine, query
        assert every.search(request).total_matches == 1, query
