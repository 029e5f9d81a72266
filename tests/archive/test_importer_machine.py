"""The importer against a live source: a Hypothesis state machine over what Hermes does.

Source operations (tests/support/hermes_shapes.py) write the home's file as Hermes does:
append turns, end a session, retitle, pin, grow usage rows, compact in place,
rewind, compress into a child, prune old sessions (and VACUUM), replace the file
with an older copy. A sync runs at random points, and after each one:

* the source's ``state.db`` (and ``-wal``) is byte-identical to before the sync;
* the archive holds every session, message and usage row any sync ever saw;
* what the source lost is marked gone, and pruned sessions stay searchable;
* for rows still in the source, the archive kept through every sync answers as the
  source reads now: as a first import of the source into a fresh archive answers
  (search results with hit counts, transcripts, chains with their cost figures), and,
  for search, as a plain scan of the source's visible rows says (pages never read a
  Hermes file directly: store/state.py).

Every shape of tests/support/hermes_shapes.py runs, except ``cjk_without_tokenizer``: its
FTS triggers name a tokenizer this host lacks, so no one (Hermes included) can
write a message into it.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    rule,
    run_state_machine_as_test,
)

from dashboard.archive.importer import sync
from dashboard.archive.marks import source_key
from dashboard.hermes import conventions
from dashboard.hermes.home import HermesHome
from dashboard.lineage.epochs import epochs_of, keep_in_place_counts
from dashboard.reader.reader import StateReader
from dashboard.search.sessions import SearchRequest
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as hs
from tests.support import hermes_v31 as hv
from tests.support.archived import archived_reader
from tests.support.source_checks import (
    ALL_SHAPES,
    _source_rows,
    assert_mirrors,
    assert_untouched,
    digests,
)


def _build_v31(path: Path) -> Path:
    """Hermes v31's home (message_uid, both summary forms, head copies) at ``path``."""
    return hv.build_v31_home(path.parent).db


#: Every shape but one (below), and Hermes v31's: its compactions re-insert rows that
#: keep their message_uid, so one message must count once through every operation.
SHAPE_BUILDERS = {**ALL_SHAPES, "v31": _build_v31}
MACHINE_SHAPES = sorted(set(SHAPE_BUILDERS) - {"cjk_without_tokenizer"})
START = 1_900_000_000.0  # after every fixture row
HOUR = 3600.0
DAY = 86400.0
#: Words in the fixtures' message text, searched on both sides after each sync (not
#: words of tool calls: the oldest index, seed_external's, holds message text only).
FIXTURE_WORDS = (hs.UNIQUE_WORD, hs.COMPACTED_WORD, hs.CRON_WORD, hs.WAL_WORD, hs.STALE_WORD)

#: The v31 home's words said in rows its compactions re-inserted (head, tail, each epoch).
V31_WORDS = (*hv.EPOCH_MARKERS.values(), hv.HEAD_MARKER, hv.TAIL_MARKER, hv.UNDO_MARKER)

#: ``make test`` runs a fixed set of examples (derandomized: the same each run, so a red
#: run is this code's, never the draw's); ``RECALL_MACHINE_EXAMPLES=N`` explores N random
#: ones per shape and keeps what fails in ``.hypothesis``. Open failures found that way
#: are listed in the last closing note.
EXPLORE = "RECALL_MACHINE_EXAMPLES" in os.environ
MACHINE_SETTINGS = settings(
    derandomize=not EXPLORE,
    max_examples=int(os.environ.get("RECALL_MACHINE_EXAMPLES", "6")),
    stateful_step_count=int(os.environ.get("RECALL_MACHINE_STEPS", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


class ArchiveMachine(RuleBasedStateMachine):
    """A home of one shape, its archive, and what every sync so far has seen."""

    shape: str = MACHINE_SHAPES[0]

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="archive-machine-"))
        self.home = self.tmp / "home"
        self.home.mkdir()
        self.db = SHAPE_BUILDERS[self.shape](self.home / "state.db")
        self.archive = SessionStore(self.tmp / "archive.db")
        self.key = source_key(self.home)
        self.clock = START
        self.made = 0
        self.backups: list[Path] = []
        self.words: dict[str, str] = {}  # appended word -> its session
        # Everything a sync has seen in the source: session ids, message identities
        # with content, usage row ids, and the words synced while their row was there.
        self.seen_sessions: set[str] = set()
        self.seen_messages: set[tuple[Any, ...]] = set()
        self.seen_usage: set[str] = set()
        self.seen_words: dict[str, str] = {}

    def teardown(self) -> None:
        self.archive.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers ----------------------------------------------------------------------

    def tick(self, seconds: float = HOUR) -> float:
        self.clock += seconds
        return self.clock

    def sessions(self, where: str = "1") -> list[str]:
        with closing(sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)) as c:
            return [r[0] for r in c.execute(f"SELECT id FROM sessions WHERE {where} ORDER BY id")]

    def word(self, session_id: str) -> str:
        self.made += 1
        found = f"zq{self.made}w"
        self.words[found] = session_id
        return found

    # -- source operations (what Hermes does) ------------------------------------------

    @rule(data=st.data())
    def append_turn(self, data: st.DataObject) -> None:
        ids = self.sessions()
        if ids:
            sid = data.draw(st.sampled_from(ids))
            hs.append_turn(
                self.db, sid, f"ask {self.word(sid)}", f"reply {self.word(sid)}", self.tick()
            )

    @rule()
    def start_session(self) -> None:
        self.made += 1
        at = self.tick()
        sid = f"20300101_000000_{self.made:06x}"
        hs.start_session(self.db, sid, at, title=f"Made {self.made}")
        hs.append_turn(self.db, sid, f"open {self.word(sid)}", "ok", at + 1)

    @rule(data=st.data())
    def end_session(self, data: st.DataObject) -> None:
        ids = self.sessions("ended_at IS NULL")
        if ids:
            hs.end_session(self.db, data.draw(st.sampled_from(ids)), self.tick())

    @rule(data=st.data())
    def retitle(self, data: st.DataObject) -> None:
        ids = self.sessions()
        if ids:
            self.made += 1
            hs.retitle(self.db, data.draw(st.sampled_from(ids)), f"Retitled {self.made}")

    @rule(data=st.data(), column=st.sampled_from(["pinned", "archived", "hidden"]))
    def flag(self, data: st.DataObject, column: str) -> None:
        ids = self.sessions()
        if ids:
            sid = data.draw(st.sampled_from(ids))
            hs.set_session_flag(self.db, sid, column, data.draw(st.integers(0, 1)))

    @rule(data=st.data())
    def grow_usage(self, data: st.DataObject) -> None:
        ids = self.sessions()
        if ids:
            tokens = data.draw(st.integers(1, 5000))
            hs.grow_usage(
                self.db, data.draw(st.sampled_from(ids)), tokens, tokens / 1e5, self.tick()
            )

    @rule(data=st.data())
    def compact_in_place(self, data: st.DataObject) -> None:
        ids = self.sessions()
        if ids:
            sid = data.draw(st.sampled_from(ids))
            if self.shape != "v31":
                hs.compact_in_place(self.db, sid, f"so far {self.word(sid)}", self.tick())
            elif _live_rows(self.db, sid) > 5:  # Hermes compacts a head, a middle and a tail
                hv.compact_in_place(self.db, sid, f"so far {self.word(sid)}", self.tick())

    @rule(data=st.data())
    def rewind(self, data: st.DataObject) -> None:
        ids = self.sessions()
        if ids:
            hs.rewind(
                self.db, data.draw(st.sampled_from(ids)), data.draw(st.integers(1, 3)), self.tick()
            )

    @rule(data=st.data())
    def compress_into_child(self, data: st.DataObject) -> None:
        ids = self.sessions("ended_at IS NULL")
        if ids:
            parent = data.draw(st.sampled_from(ids))
            self.made += 1
            child = f"20300102_000000_{self.made:06x}"
            hs.compress_into_child(
                self.db, parent, child, f"before {self.word(child)}", self.tick()
            )

    @rule(days=st.sampled_from([30.0, 200.0, 1000.0]))
    def time_passes(self, days: float) -> None:
        self.tick(days * DAY)
        self.back_up()

    @rule(retention=st.sampled_from([1.0, 90.0, 3650.0]))
    def prune(self, retention: float) -> None:
        hs.prune(self.db, retention, self.clock)

    def back_up(self) -> None:
        """A copy of the file as it is now (the machine takes one at the start and one
        each time time passes; an older copy comes back in :meth:`restore_older_copy`)."""
        self.made += 1
        self.backups.append(hs.backup_copy(self.db, self.tmp / f"backup-{self.made}.db"))

    @rule(data=st.data())
    def restore_older_copy(self, data: st.DataObject) -> None:
        hs.restore_copy(data.draw(st.sampled_from(self.backups)), self.db)

    @rule(data=st.data())
    def restore_and_carry_on(self, data: st.DataObject) -> None:
        """An older copy comes back and Hermes writes on: its ids now name other rows."""
        self.restore_older_copy(data)
        self.append_turn(data)

    # -- the sync and what must hold after it ------------------------------------------

    @initialize(first=st.booleans())
    def import_first(self, first: bool) -> None:
        """Most homes are imported before Hermes changes them; some change first."""
        if first:
            self.sync(reconcile=False)
        self.back_up()  # an older copy to go back to exists from the start

    # Three rules run a sync, so one comes every few operations.
    @rule(reconcile=st.booleans())
    def sync_now(self, reconcile: bool) -> None:
        self.sync(reconcile)

    @rule()
    def sync_cheap(self) -> None:
        self.sync(reconcile=False)

    @rule()
    def sync_again(self) -> None:
        self.sync(reconcile=False)

    def sync(self, reconcile: bool) -> None:
        before = digests(self.db)
        sync(self.archive, self.db, self.home, reconcile=reconcile)
        assert_untouched(self.db, before)
        self.remember()
        self.check_kept()
        self.check_compaction_counts()
        assert_mirrors(self.archive, self.db, self.home)
        self.check_counted_once()
        self.check_readers()

    def remember(self) -> None:
        sessions, messages, usage = _source_rows(self.db)
        self.seen_sessions |= set(sessions)
        self.seen_messages |= {(m[0], m[1], m[6], m[2]) for m in messages.values()}
        self.seen_usage |= set(usage)
        texts = " ".join(str(m[2]) for m in messages.values())
        self.seen_words |= {w: s for w, s in self.words.items() if w in texts}

    def check_kept(self) -> None:
        conn = self.archive.core.conn
        in_source = set(_source_rows(self.db)[0])
        kept = {
            r[0]: r[1]
            for r in conn.execute(
                "SELECT id, gone_from_source_at FROM sessions WHERE src_home=?", (self.key,)
            )
        }
        assert self.seen_sessions <= set(kept)
        for sid in self.seen_sessions - in_source:
            assert kept[sid] is not None, f"{sid} left the source but is not marked gone"
        rows = {
            (r[0], r[1], r[2], r[3])
            for r in conn.execute(
                "SELECT session_id, role, timestamp, content FROM messages WHERE src_home=?",
                (self.key,),
            )
        }
        assert self.seen_messages <= rows
        usage = {
            r[0].split("~")[0]
            for r in conn.execute(
                "SELECT src_id FROM session_model_usage WHERE src_home=?", (self.key,)
            )
        }
        assert self.seen_usage <= usage
        reader = StateReader(HermesHome(self.home), path=self.archive.path)
        for word, sid in self.seen_words.items():
            shown = conn.execute(
                "SELECT 1 FROM messages WHERE instr(content, ?) AND (active=1 OR compacted=1)",
                (word,),
            ).fetchone()
            if sid not in in_source and shown:  # pruned, or lost to an older copy: found
                found = reader.search(self.request(word))
                assert sid in {r.session_id for r in found.results}, word

    def check_compaction_counts(self) -> None:
        """Each in-place count kept before this sync is still the rule's (a write to a
        session forgets its count), and so is each kept after it (as the syncer keeps
        them after a pass)."""
        for keep in (False, True):
            if keep:
                keep_in_place_counts(self.archive)
            conn = self.archive.core.conn
            kept = dict(conn.execute("SELECT session_id, compactions FROM session_compactions"))
            derived = epochs_of(conn, list(kept))
            assert kept == {sid: e.compactions for sid, e in derived.items()}

    def check_counted_once(self) -> None:
        """Every message counts once: a session's hits for a word are its distinct
        messages saying it (a uid, else a row) among the rows the archive shows, gone
        ones included; a restored older copy or a compaction adds no second count."""
        conn = self.archive.core.conn
        reader = StateReader(HermesHome(self.home), path=self.archive.path)
        for word in [*FIXTURE_WORDS, *V31_WORDS, *list(self.seen_words)[-8:]]:
            rows = conn.execute(
                "SELECT m.session_id, coalesce(m.message_uid, 'row:' || m.id) FROM messages m"
                f" WHERE instr(m.content, ?) AND {conventions.visible_sql('m')}",
                (word,),
            ).fetchall()
            messages: dict[str, set[str]] = {}
            for sid, identity in rows:
                assert identity not in messages.get(sid, set()), (word, sid, identity)
                messages.setdefault(sid, set()).add(identity)
            if self.shape != "v31":
                continue  # older shapes: tail copies fold by role and content (epochs.py)
            hits = {r.session_id: r.hit_count for r in reader.search(self.request(word)).results}
            assert hits == {s: len(m) for s, m in messages.items()}, word

    def request(self, word: str) -> SearchRequest:
        """A search for ``word`` in every session, one card each (cron and subagent too)."""
        sources = tuple(
            r[0] for r in self.archive.core.conn.execute("SELECT DISTINCT source FROM sessions")
        )
        return SearchRequest(query=word, group="session", per_page=100, sources=sources)

    def check_readers(self) -> None:
        self.made += 1
        fresh = self.tmp / f"fresh-{self.made}.db"
        try:
            self.compare_readers(archived_reader(self.home, fresh))
        finally:
            for path in (fresh, Path(f"{fresh}-wal"), Path(f"{fresh}-shm")):
                path.unlink(missing_ok=True)

    def compare_readers(self, source: StateReader) -> None:
        """``source``: the source as read now (a first import of it into a fresh archive)."""
        kept = StateReader(HermesHome(self.home), path=self.archive.path)
        present = set(_source_rows(self.db)[0])
        conn = self.archive.core.conn
        words = [*FIXTURE_WORDS, *list(self.seen_words)[-3:]]
        for word in words:
            if conn.execute(
                "SELECT 1 FROM messages WHERE instr(content, ?)"
                " AND gone_from_source_at IS NOT NULL",
                (word,),
            ).fetchone():
                continue  # a row only the archive holds now: the source cannot answer for it
            request = self.request(word)
            mine = {
                r.session_id: r.hit_count
                for r in kept.search(request).results
                if r.session_id in present
            }
            theirs = {r.session_id: r.hit_count for r in source.search(request).results}
            assert mine == theirs, word
            assert set(mine) == _sessions_saying(self.db, word), word
        gone = {
            r[0]
            for r in conn.execute("SELECT id FROM sessions WHERE gone_from_source_at IS NOT NULL")
        }
        lost = {
            r[0]
            for r in conn.execute("SELECT id FROM messages WHERE gone_from_source_at IS NOT NULL")
        }
        for sid in sorted(present)[-4:]:
            assert _transcript(kept, sid, lost) == _transcript(source, sid), sid
            mine = kept.chain(sid)
            if not {s.session_id for s in mine.segments} & gone:
                assert _chain(mine, self.db) == _chain(source.chain(sid), self.db), sid


def _live_rows(db: Path, session_id: str) -> int:
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as c:
        return c.execute(
            "SELECT count(*) FROM messages WHERE session_id = ? AND active = 1", (session_id,)
        ).fetchone()[0]


def _sessions_saying(db: Path, word: str) -> set[str]:
    """Sessions of the source with a visible row containing ``word`` (a plain scan, the
    visible-row rule over whatever flag columns the file has; with ``message_uid``, a
    copy is the message an earlier row of its session is, and a row a later one
    re-inserts is history though flagged like a rewind)."""
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as c:
        columns = {r[1] for r in c.execute("PRAGMA table_info(messages)")}
        flags = [f for f in conventions.MESSAGE_DEFAULTS if f in columns]
        uid = "message_uid" if "message_uid" in columns else "NULL"
        merged = '"_compressed_summary"' if "_compressed_summary" in columns else "0"
        rows = c.execute(
            f"SELECT id, session_id, {uid}, {merged}, instr(lower(content), lower(?)) > 0"
            f"{''.join(', ' + f for f in flags)} FROM messages ORDER BY id",
            (word,),
        ).fetchall()
    last = {(r[1], r[2]): r[0] for r in rows if r[2] is not None}
    seen: dict[tuple[str, str], bool] = {}  # (session, uid) -> a row of it merged a summary
    found = set()
    for row_id, session_id, message_uid, is_merged, says, *values in rows:
        key = (session_id, message_uid)
        repeats = None
        if message_uid is not None:
            if key in seen and (not is_merged or seen[key]):
                repeats = row_id
            seen[key] = seen.get(key, False) or bool(is_merged)
        superseded = message_uid is not None and last[key] != row_id
        row = {**conventions.MESSAGE_DEFAULTS, **dict(zip(flags, values, strict=True))}
        visible = conventions.is_visible(
            row["active"], row["compacted"], row["display_kind"], repeats, superseded
        )
        if says and visible:
            found.add(session_id)
    return found


def _transcript(
    reader: StateReader,
    session_id: str,
    leave_out: set[int] = frozenset(),  # type: ignore[assignment]
) -> list[tuple[Any, ...]]:
    """A session's messages as shown, but for ``leave_out`` (rows the source lost), and
    not their ids: a replaced file's rows get new ones."""
    found = reader.transcript(session_id, include_inactive=True)
    return [
        (
            m.role,
            m.text,
            m.timestamp,
            m.inactive,
            m.compacted,
            m.hidden,
            m.tool_name,
            m.token_count,
            m.is_compaction_summary,
        )
        for m in found.messages
        if m.id not in leave_out
    ]


def _chain(chain: Any, db: Path) -> dict[str, Any]:
    """A chain as its JSON carries it. A file without ``last_activity_at`` has no
    last activity to compare (the archive derives one from the messages)."""
    found = dataclasses.asdict(chain)
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as c:
        columns = {r[1] for r in c.execute("PRAGMA table_info(sessions)")}
    if "last_activity_at" not in columns:
        for segment in found["segments"]:
            segment.pop("last_activity")
    return found


def _machine_for(shape: str) -> type[ArchiveMachine]:
    return type(f"ArchiveMachine_{shape}", (ArchiveMachine,), {"shape": shape})


@pytest.mark.parametrize("shape", MACHINE_SHAPES)
def test_the_archive_follows_a_live_source(shape: str) -> None:
    run_state_machine_as_test(_machine_for(shape), settings=MACHINE_SETTINGS)
