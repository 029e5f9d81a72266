"""The archive's syncer: a real thread over real files, woken by the source changing."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from dashboard.archive.files import read_choice
from dashboard.archive.marks import read_watermark, source_key
from dashboard.archive.source_watch import SourceWatch
from dashboard.archive.syncer import BURST_MAX_S, Syncer
from dashboard.errors import StoreUnavailableError, ValidationError
from dashboard.hermes.home import HermesHome
from dashboard.reader.opening import reading_for
from dashboard.search.sessions import SearchRequest
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as shapes
from tests.support.commands import ROOT
from tests.support.hermes_writer import LOCKED_MID_WRITE, turn_word
from tests.support.open_files import held_source_files
from tests.support.waiting import wait_for

FAST = 0.05  # poll period in these tests: the real one is POLL_S
# A poll period no test waits out: what arrives within a test's few seconds came by a
# file event.
NEVER = 30.0
EVENT_DEADLINE_S = 5.0  # a bound for what takes milliseconds, never a speed asserted

# Run with ``python -c QUICK_COMMITS DB SESSION``: Hermes writing fast in rollback mode,
# 150 commits in tens of milliseconds (synchronous off: no fsync between them), each
# creating, writing and deleting the -journal and writing the file: a burst of file
# events the kernel cannot merge (they alternate between two names). The connection
# then stays open until a line on stdin.
QUICK_COMMITS = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA synchronous=OFF")
began = time.monotonic()
for i in range(150):
    conn.execute(
        "INSERT INTO messages(session_id, role, content, timestamp) VALUES (?, 'user', ?, 1)",
        (sys.argv[2], f"burstword{i}"))
print(f"{time.monotonic() - began:.4f}", flush=True)
sys.stdin.readline()
"""


def add_turn(db: Path, session_id: str, text: str, *, new_session: bool = False) -> None:
    """Commit a turn into a Hermes-form source the way Hermes does: plain SQL, one txn."""
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("BEGIN IMMEDIATE")
        now = time.time()
        if new_session:
            conn.execute(
                "INSERT INTO sessions(id, source, started_at, model) VALUES (?, 'cli', ?, 'gpt-5')",
                (session_id, now),
            )
        conn.execute(
            "INSERT INTO messages(session_id, role, content, timestamp) VALUES (?, 'user', ?, ?)",
            (session_id, text, now),
        )
        conn.execute("COMMIT")


@contextmanager
def source_locked(db: Path, syncer: Syncer) -> Iterator[Callable[[], None]]:
    """Another process holds ``db``'s write lock mid-write until the yielded call ends it
    (rolled back); the syncer has said "locked" before the block runs."""
    with subprocess.Popen(
        [sys.executable, "-c", LOCKED_MID_WRITE, str(db)],
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as locker:
        assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
        wait_for(lambda: syncer.state().reason == "locked")

        def release() -> None:
            assert locker.stdin is not None
            locker.stdin.write("\n")
            locker.stdin.close()
            locker.wait()

        yield release


def archived_ids(archive: Path) -> set[str]:
    with closing(sqlite3.connect(archive)) as conn:
        return {r[0] for r in conn.execute("SELECT id FROM sessions")}


@contextmanager
def running(syncer: Syncer) -> Iterator[Syncer]:
    syncer.start()
    try:
        yield syncer
    finally:
        syncer.stop()


def run_writer(db: Path, session: str, word: str, turns: int) -> None:
    """A Hermes-style writer process (tests/support/hermes_writer.py), run to its end."""
    subprocess.run(
        [sys.executable, "-m", "tests.support.hermes_writer", str(db), session, word, str(turns)],
        check=True,
        capture_output=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def source_files_held(db: Path) -> list[str]:
    """The source's files this process has open (``/proc/self/fd``)."""
    held = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:
            continue  # the fd listing itself, closed while listed
        if target.startswith(str(db)):
            held.append(target)
    return held


def assert_nothing_held_between_passes(syncer: Syncer, db: Path) -> None:
    """No file of the source is open while no pass runs: a look at the open files
    between two looks at the syncer that show no pass running or finished in between
    (a look that overlapped a pass does not count)."""
    deadline = time.monotonic() + EVENT_DEADLINE_S
    while time.monotonic() < deadline:
        before = (syncer.syncs, syncer.state().running)
        held = source_files_held(db)
        if before == (syncer.syncs, syncer.state().running) and not before[1]:
            assert held == []
            return
        time.sleep(0.02)
    raise AssertionError("the syncer never stood still")


@pytest.fixture
def home(tmp_path: Path) -> HermesHome:
    shapes.build_current_views(tmp_path / "home" / "state.db")
    return HermesHome(tmp_path / "home")


def test_the_first_import_runs_at_start_then_each_commit_is_copied(
    home: HermesHome, tmp_path: Path
) -> None:
    archive = tmp_path / "archive.db"
    reading = reading_for(home, archive)
    assert reading.syncer is not None and reading.reader.path == archive
    reading.syncer.poll_s = FAST
    with running(reading.syncer) as syncer:
        wait_for(lambda: syncer.state().last_sync_at)
        assert archived_ids(archive) == set(shapes.SESSION_IDS)
        add_turn(home.state_db, "fresh-1", "the quokkaphone arrived", new_session=True)
        found = wait_for(lambda: reading.reader.search(SearchRequest(query="quokkaphone")).results)
        assert [r.session_id for r in found] == ["fresh-1"]  # type: ignore[union-attr]
        state = syncer.state()
        assert state.reason is None and not state.importing and state.imported


def test_an_unchanged_source_is_not_synced_again(home: HermesHome, tmp_path: Path) -> None:
    syncer = Syncer(tmp_path / "archive.db", home.state_db, home.root, poll_s=FAST)
    with running(syncer):
        wait_for(lambda: syncer.state().last_sync_at)
        passes = syncer.syncs
        time.sleep(40 * FAST)  # forty polls
        assert syncer.syncs == passes == 1
        add_turn(home.state_db, shapes.S_ROOT, "one more")
        wait_for(lambda: syncer.syncs == 2)


def test_a_commit_by_another_process_wakes_a_pass_without_waiting_for_the_poll(
    home: HermesHome, tmp_path: Path
) -> None:
    archive = tmp_path / "archive.db"
    reading = reading_for(home, archive)
    assert isinstance(reading.syncer, Syncer)
    reading.syncer.poll_s = NEVER
    with running(reading.syncer) as syncer:
        wait_for(lambda: syncer.syncs == 1)  # the first pass, at start
        assert syncer.state().watch == "events"
        time.sleep(0.3)
        # Its own pass read the source and sent no event: an idle source wakes nothing.
        assert (syncer.events, syncer.syncs) == (0, 1)
        assert_nothing_held_between_passes(syncer, home.state_db)  # the watch is on the folder

        run_writer(home.state_db, "w-event", "eventword", 2)
        search = SearchRequest(query=turn_word("eventword", 1))
        found = wait_for(lambda: reading.reader.search(search).results, EVENT_DEADLINE_S)
        assert [r.session_id for r in found] == ["w-event"]  # type: ignore[union-attr]
        assert syncer.events > 0
        assert_nothing_held_between_passes(syncer, home.state_db)


def test_a_burst_of_file_events_runs_one_pass_not_one_per_event(tmp_path: Path) -> None:
    home = HermesHome(tmp_path / "home")
    shapes.build_delete_journal(home.state_db)
    syncer = Syncer(tmp_path / "archive.db", home.state_db, home.root, poll_s=NEVER)
    with running(syncer):
        wait_for(lambda: syncer.syncs == 1)
        with subprocess.Popen(
            [sys.executable, "-c", QUICK_COMMITS, str(home.state_db), shapes.S_ROOT],
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        ) as hermes:
            assert hermes.stdout is not None
            took = float(hermes.stdout.readline())
            wait_for(lambda: syncer.syncs >= 2, timeout=EVENT_DEADLINE_S)
            time.sleep(0.5)  # every event of the burst has long been delivered
            events, passes, looks = syncer.events, syncer.syncs - 1, syncer.looks
            assert hermes.stdin is not None
            hermes.stdin.write("\n")
            hermes.stdin.close()
        print(f"150 commits in {took * 1000:.1f} ms: {events} events, {looks} looks, {passes} runs")
        assert events >= 300  # two names at least per commit, never merged
        # One look and one pass for the burst; more only when the burst itself lasted
        # longer than BURST_MAX_S (a loaded machine): one per BURST_MAX_S then.
        most = 2 + int(took / BURST_MAX_S)
        assert 1 <= passes <= looks <= most
        assert syncer.state().reason is None


def test_with_file_events_off_the_poll_alone_syncs(home: HermesHome, tmp_path: Path) -> None:
    archive = tmp_path / "archive.db"
    syncer = Syncer(archive, home.state_db, home.root, poll_s=FAST, file_events=False)
    with running(syncer):
        wait_for(lambda: syncer.syncs == 1)
        assert syncer.state().watch == "poll"
        run_writer(home.state_db, "w-polled", "pollword", 1)
        wait_for(lambda: "w-polled" in archived_ids(archive))
        assert syncer.events == 0


def test_a_watch_that_cannot_start_falls_back_to_polling_then_watches_the_new_folder(
    tmp_path: Path,
) -> None:
    home = HermesHome(tmp_path / "home")  # no folder yet: inotify cannot watch it
    archive = tmp_path / "archive.db"
    syncer = Syncer(archive, home.state_db, home.root, poll_s=FAST)
    syncer.watch_retry_s = NEVER  # polling alone, until the test says otherwise
    with running(syncer):
        wait_for(lambda: syncer.state().reason == "missing")
        watch = syncer.state().watch
        assert watch.startswith("poll: cannot watch") and str(home.root) in watch
        shapes.build_current_views(home.state_db)
        wait_for(lambda: archived_ids(archive) == set(shapes.SESSION_IDS))
        run_writer(home.state_db, "w-polled", "pollword", 1)
        wait_for(lambda: "w-polled" in archived_ids(archive))
        assert syncer.events == 0 and syncer.state().reason is None

        syncer._watch_again_at = 0.0  # the retry is due: the folder exists now
        wait_for(lambda: syncer.state().watch == "events")
        syncer.poll_s = NEVER  # from the next wait on, only a file event wakes it
        run_writer(home.state_db, "w-event", "eventword", 1)
        wait_for(lambda: "w-event" in archived_ids(archive), timeout=EVENT_DEADLINE_S)
        assert syncer.events > 0


def test_a_deleted_home_folder_ends_the_watch_and_a_new_one_is_watched(
    home: HermesHome, tmp_path: Path
) -> None:
    archive = tmp_path / "archive.db"
    syncer = Syncer(archive, home.state_db, home.root, poll_s=FAST)
    syncer.watch_retry_s = 0.2
    with running(syncer):
        wait_for(lambda: syncer.syncs == 1)
        assert syncer.state().watch == "events"
        shutil.rmtree(home.root)  # a reset home
        wait_for(lambda: syncer.state().reason == "missing")
        wait_for(lambda: syncer.state().watch.startswith("poll: "))
        shapes.build_current_views(home.state_db)
        wait_for(lambda: syncer.state().watch == "events")
        syncer.poll_s = NEVER
        time.sleep(3 * FAST)  # the thread is in its NEVER wait now
        run_writer(home.state_db, "w-event", "eventword", 1)
        wait_for(lambda: "w-event" in archived_ids(archive), timeout=EVENT_DEADLINE_S)


def test_reconciliation_runs_at_start_then_periodically_once_the_source_moved(
    home: HermesHome, tmp_path: Path
) -> None:
    syncer = Syncer(tmp_path / "archive.db", home.state_db, home.root, poll_s=FAST, reconcile_s=0.3)
    with running(syncer):
        wait_for(lambda: syncer.syncs == 1)
        time.sleep(1.5)  # five periods, no change: nothing to catch, nothing run
        assert (syncer.syncs, syncer.reconciliations) == (1, 1)
        add_turn(home.state_db, shapes.S_ROOT, "one more")
        wait_for(lambda: syncer.syncs >= 2)
        wait_for(lambda: syncer.reconciliations >= 2)  # the period after a change
        # The writer's last close checkpoints and deletes the -wal: a look may see the
        # commit and the checkpoint as two moves, so one more period may follow.
        time.sleep(0.5)
        settled = syncer.reconciliations
        time.sleep(1.5)  # five periods, no change
        assert syncer.reconciliations == settled <= 3


def _still_watch(path: Path) -> SourceWatch:
    """A watch that trusts an unchanged stamp at once (no racy second look): these tests
    write and look within the same few milliseconds."""
    watch = SourceWatch(path)
    watch.GRAIN_NS = 0
    return watch


def test_the_watch_stats_the_files_and_notices_a_new_inode(home: HermesHome) -> None:
    watch = _still_watch(home.state_db)
    assert watch.changed() is True  # first look
    assert watch.changed() is False
    add_turn(home.state_db, shapes.S_ROOT, "a new row")
    assert watch.changed() is True and watch.changed() is False
    assert not watch.suspect and not watch.replaced
    assert held_source_files("self", home.state_db) == []  # nothing held open
    copy = home.root / "copy.db"
    with closing(sqlite3.connect(home.state_db)) as src, closing(sqlite3.connect(copy)) as dst:
        src.backup(dst)  # a restored backup: same bytes' meaning, another file
    os.replace(copy, home.state_db)
    for side in ("-wal", "-shm"):
        Path(f"{home.state_db}{side}").unlink(missing_ok=True)
    assert watch.changed() is True and watch.replaced and watch.suspect
    assert watch.changed() is False and not watch.replaced
    assert watch.suspect  # until a pass compared the whole file
    watch.settled()
    assert not watch.suspect


def test_the_watch_waits_out_the_tick_of_a_write_it_sees(home: HermesHome) -> None:
    """A look at a file written just now stats it again once the clock passed that
    write's tick, so the look after it trusts an unchanged stamp (no second pass)."""
    watch = SourceWatch(home.state_db)
    watch.GRAIN_NS = 200_000_000  # a coarse clock: 0.2 s
    for _ in range(3):
        add_turn(home.state_db, shapes.S_ROOT, "written just now")
        assert watch.changed() is True and watch.moved
        assert watch.changed() is False


def test_the_watch_looks_again_after_a_write_in_the_same_tick(home: HermesHome) -> None:
    """An unchanged stamp still within the clock's grain of a write is not trusted once."""
    watch = SourceWatch(home.state_db)
    watch.SETTLE_TRIES = 0  # a file written all the time: no wait settles it
    watch.GRAIN_NS = 3600 * 10**9  # every write is "just now"
    assert watch.changed() is True
    assert watch.changed() is True and not watch.moved  # the racy second look
    watch.GRAIN_NS = 0
    assert watch.changed() is True and not watch.moved  # the look before was racy
    assert watch.changed() is False


def test_the_watch_suspects_a_shrunk_file_and_refuses_an_empty_one(tmp_path: Path) -> None:
    db = shapes.build_delete_journal(tmp_path / "home" / "state.db")
    watch = _still_watch(db)
    assert watch.changed() and not watch.suspect
    data = db.read_bytes()
    with db.open("r+b") as handle:  # same inode, fewer bytes: a restore or a truncation
        handle.truncate(len(data) - 4096)
    assert watch.changed() is True and watch.suspect and not watch.replaced
    watch.settled()
    with db.open("r+b") as handle:  # ": > state.db"
        handle.truncate(0)
    with pytest.raises(StoreUnavailableError) as caught:
        watch.changed()
    assert caught.value.reason == "empty" and watch.suspect


def test_a_replaced_source_is_imported_and_said(home: HermesHome, tmp_path: Path) -> None:
    archive = tmp_path / "archive.db"
    other = tmp_path / "other" / "state.db"
    shapes.build_current_views(other)
    add_turn(other, "restored-1", "from the restored copy", new_session=True)
    syncer = Syncer(archive, home.state_db, home.root, poll_s=FAST)
    with running(syncer):
        wait_for(lambda: syncer.state().last_sync_at)
        with closing(sqlite3.connect(other)) as src, closing(sqlite3.connect(f"{other}.copy")) as d:
            src.backup(d)
        # A restore puts a whole file back; a WAL left beside it would be replayed onto it.
        for side in ("-wal", "-shm"):
            Path(f"{home.state_db}{side}").unlink(missing_ok=True)
        os.replace(f"{other}.copy", home.state_db)
        wait_for(lambda: "restored-1" in archived_ids(archive))
        # A poll may have copied the new file before its stat saw the new inode; the
        # next one tells it was replaced.
        wait_for(lambda: syncer.state().replaced_at)
        assert syncer.state().reason is None


def test_a_missing_source_is_a_state_and_the_thread_waits_for_it(tmp_path: Path) -> None:
    home = HermesHome(tmp_path / "home")
    syncer = Syncer(tmp_path / "archive.db", home.state_db, home.root, poll_s=FAST)
    with running(syncer):
        wait_for(lambda: syncer.state().reason == "missing")
        assert "is missing" in (syncer.state().error or "")
        with pytest.raises(StoreUnavailableError) as caught:
            syncer.before_read()  # nothing archived yet: the page says why
        assert caught.value.reason == "missing"
        shapes.build_current_views(home.state_db)
        wait_for(lambda: syncer.state().imported and syncer.state().reason is None)
        syncer.before_read()  # now the archive answers


def test_a_corrupt_source_is_a_state_not_a_dead_thread(home: HermesHome, tmp_path: Path) -> None:
    archive = tmp_path / "archive.db"
    syncer = Syncer(archive, home.state_db, home.root, poll_s=FAST)
    with running(syncer):
        wait_for(lambda: syncer.state().last_sync_at)
        for side in ("-wal", "-shm"):
            Path(f"{home.state_db}{side}").unlink(missing_ok=True)
        garbage = home.root / "garbage"
        garbage.write_bytes(b"SQLite format 3\x00" + b"\x13" * 8192)
        os.replace(garbage, home.state_db)
        wait_for(lambda: syncer.state().reason == "corrupt")
        assert syncer._thread is not None and syncer._thread.is_alive()
        syncer.before_read()  # the archive still holds everything: pages keep answering
        assert archived_ids(archive) == set(shapes.SESSION_IDS)


def test_a_locked_source_is_reported_then_synced_when_released(tmp_path: Path) -> None:
    home = HermesHome(tmp_path / "home")
    shapes.build_delete_journal(home.state_db)
    syncer = Syncer(tmp_path / "archive.db", home.state_db, home.root, poll_s=FAST)
    with running(syncer):
        wait_for(lambda: syncer.state().last_sync_at)
        with source_locked(home.state_db, syncer) as release:
            release()
        add_turn(home.state_db, shapes.S_ROOT, "after the lock")
        wait_for(lambda: syncer.state().reason is None)


def test_a_lock_seen_before_the_folder_failed_is_not_said_after_it(tmp_path: Path) -> None:
    """A pass that reached Recall's folder read the source: an earlier pass's "locked" is
    over, and the state names the folder alone (it stayed "locked" until the folder healed)."""
    home, data = HermesHome(tmp_path / "home"), tmp_path / "data"
    shapes.build_delete_journal(home.state_db)
    data.mkdir()
    syncer = Syncer(data / "archive.db", home.state_db, home.root, poll_s=FAST)
    with running(syncer):
        wait_for(lambda: syncer.state().last_sync_at)
        with source_locked(home.state_db, syncer) as release:
            unwritable = [data, *(p for p in data.iterdir() if not p.name.endswith("-shm"))]
            with shapes.read_only(*unwritable):
                release()
                add_turn(home.state_db, shapes.S_ROOT, "while the folder is read-only")
                state = wait_for(lambda: (s := syncer.state()).folder_reason and s)
                assert state.folder_reason == "folder-readonly"
                assert (state.reason, state.error) == (None, None)
        wait_for(lambda: syncer.state().folder_reason is None)
        assert syncer.state().reason is None


def test_stop_cuts_a_first_import_at_a_batch_and_the_next_start_resumes(tmp_path: Path) -> None:
    home = HermesHome(tmp_path / "home")
    with SessionStore(home.state_db) as store:  # a Recall-store source, copied on purpose
        for i in range(60):
            store.create_session("cli", session_id=f"s{i:03d}", started_at=1_700_000_000 + i)
            store.append_messages(f"s{i:03d}", [NewMessage("user", f"turn {i}")])
    archive = tmp_path / "archive.db"
    first = Syncer(archive, home.state_db, home.root, poll_s=FAST, batch_sessions=1)
    seen: list[int] = []
    first.on_progress = lambda p: (seen.append(p.sessions_done), time.sleep(0.02))
    with running(first):
        wait_for(lambda: len(seen) > 5 and first.state().importing)
    assert first._thread is not None and not first._thread.is_alive()
    assert 0 < len(archived_ids(archive)) < 60
    with closing(sqlite3.connect(archive)) as conn:
        assert read_watermark(conn, source_key(home.root)) is not None
    again = Syncer(archive, home.state_db, home.root, poll_s=FAST)
    assert again.poll() and again.state().imported
    again.stop()
    assert len(archived_ids(archive)) == 60


def test_the_read_choice_is_the_home_store_when_it_is_recalls(tmp_path: Path) -> None:
    hermes = HermesHome(tmp_path / "hermes")
    shapes.build_seed_inline(hermes.state_db)
    own = HermesHome(tmp_path / "own")
    with SessionStore(own.state_db):
        pass
    choice = read_choice(hermes)
    assert choice.archive is not None and choice.path == choice.archive != hermes.state_db
    assert read_choice(own).path == own.state_db and read_choice(own).archive is None
    forced = read_choice(own, tmp_path / "copy.db")  # a bench keeps source and copy apart
    assert forced.path == forced.archive == tmp_path / "copy.db"
    missing = HermesHome(tmp_path / "none")
    assert read_choice(missing).archive is not None
    assert read_choice(missing, will_create=True).archive is None  # an agent creating it
    with pytest.raises(ValidationError):
        read_choice(hermes, hermes.state_db)
    assert reading_for(own).syncer is None


def test_a_copy_of_the_source_is_never_written(home: HermesHome, tmp_path: Path) -> None:
    db = home.state_db
    shutil.copy(db, tmp_path / "before.db")
    syncer = Syncer(tmp_path / "archive.db", db, home.root)
    with shapes.read_only(db, Path(f"{db}-wal")):
        assert syncer.poll()
        assert not syncer.poll()  # unchanged
    syncer.stop()


def test_a_new_file_after_the_old_one_went_missing_counts_as_replaced(tmp_path: Path) -> None:
    db = shapes.build_delete_journal(tmp_path / "home" / "state.db")
    watch = _still_watch(db)
    assert watch.changed() and not watch.replaced
    kept = tmp_path / "kept.db"
    os.replace(db, kept)
    with pytest.raises(StoreUnavailableError):
        watch.changed()  # gone for a moment
    shutil.copy(kept, db)  # and back as another file
    assert watch.changed() is True and watch.replaced
