"""archive/call_log: the calls agent.log logged, kept in the archive as the log rotates."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from dashboard.archive.call_log import keep_calls
from dashboard.archive.importer import sync
from dashboard.archive.marks import source_key
from dashboard.hermes.home import HermesHome
from dashboard.hermes.profiles import ArchiveIds
from dashboard.reader.opening import reading_for
from dashboard.store.logged_calls import ArchivedCall, priced_calls
from dashboard.store.schema import CALL_FILES_TABLE, CALLS_TABLE, WRITES_KEY
from dashboard.store.session_store import SessionStore
from tests.support import agent_logs as al
from tests.support import hermes_shapes as hs
from tests.support.commands import recall
from tests.support.source_checks import assert_untouched, digests

T0 = hs._epoch(hs.S_ROOT) + 60.25  # a while into the first session


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    hs.build_no_trigram(home / "state.db")
    return home


def _kept(store: SessionStore) -> list[tuple[object, ...]]:
    """Every kept call: (session, number, at, model, prompt, output, read, write)."""
    return [
        tuple(r)
        for r in store.core.conn.execute(
            "SELECT session_id, number, at, model, prompt_tokens, output_tokens,"
            f" cache_read_tokens, cache_write_tokens FROM {CALLS_TABLE} ORDER BY at, number"
        )
    ]


def _expected(calls: list[al.Call], ids: ArchiveIds | None = None) -> list[tuple[object, ...]]:
    ids = ids or ArchiveIds.of("default")
    rows = [
        (
            ids.archive_id(c.session) if c.session else None,
            c.number,
            c.logged_at,
            c.model,
            c.prompt,
            c.output,
            c.cache_read,
            c.cache_write,
        )
        for c in calls
    ]
    return sorted(rows, key=lambda r: (r[2], r[1]))  # as _kept reads them: by time, number


def _pass(store: SessionStore, home: Path) -> int:
    return keep_calls(store, home, ArchiveIds.of_home(home)).added


def _writes(store: SessionStore) -> str | None:
    row = store.core.conn.execute("SELECT value FROM state_meta WHERE key=?", (WRITES_KEY,))
    found = row.fetchone()
    return found[0] if found else None


def test_a_sync_keeps_every_call_the_log_holds(tmp_path: Path) -> None:
    home = _home(tmp_path)
    calls = [
        *al.turn_calls(hs.S_ROOT, T0),
        *al.turn_calls(hs.S_CRON, T0 + 100, calls=2),
        al.Call(T0 + 200.5, None, 1, al.SMALL_MODEL, prompt=300, output=20),  # untagged
        al.unpriced_call(hs.S_ROOT, T0 + 300.125, number=4),
    ]
    al.write_log(home, al.with_noise(calls))
    with SessionStore(tmp_path / "archive.db") as store:
        report = sync(store, home / "state.db", home)
        assert report.calls_added == len(calls)
        assert report.calls_notes == ()
        assert _kept(store) == _expected(calls)
        src = {r[0] for r in store.core.conn.execute(f"SELECT src_home FROM {CALLS_TABLE}")}
        assert src == {source_key(home)}

        got = priced_calls(store.core.conn, [hs.S_ROOT, hs.S_CRON, "nobody"])
        assert set(got) == {(hs.S_ROOT, al.MODEL), (hs.S_CRON, al.MODEL)}
        first = calls[0]
        assert got[(hs.S_ROOT, al.MODEL)][0] == ArchivedCall(
            first.logged_at, 1, "openrouter", 12_000, 201, 0, 12_000
        )
        assert [c.number for c in got[(hs.S_ROOT, al.MODEL)]] == [1, 2, 3]  # unpriced: left
        assert priced_calls(store.core.conn, []) == {}

        # Again, nothing new: no call twice.
        assert sync(store, home / "state.db", home).calls_added == 0
        assert len(_kept(store)) == len(calls)


def test_incremental_passes_read_only_what_was_added(tmp_path: Path) -> None:
    home = _home(tmp_path)
    first = al.turn_calls(hs.S_ROOT, T0)
    al.write_log(home, al.with_noise(first))
    with SessionStore(tmp_path / "archive.db") as store:
        assert _pass(store, home) == 3
        offset = store.core.conn.execute(f"SELECT offset FROM {CALL_FILES_TABLE}").fetchone()[0]
        assert offset == al.log_path(home).stat().st_size
        before = _writes(store)
        assert _pass(store, home) == 0
        assert _writes(store) == before  # nothing new, nothing written
        second = al.turn_calls(hs.S_ROOT, T0 + 50)
        al.write_log(home, al.with_noise(second))
        assert _pass(store, home) == 3
        assert _kept(store) == _expected(first + second)


def test_rotation_loses_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    home = _home(tmp_path)
    written: list[al.Call] = []

    def log(at: float) -> None:
        calls = al.turn_calls(hs.S_ROOT, at)
        written.extend(calls)
        al.write_log(home, al.with_noise(calls))

    with SessionStore(tmp_path / "archive.db") as store:
        log(T0)
        _pass(store, home)
        log(T0 + 10)  # written to agent.log after the pass, then rotated to agent.log.1
        al.rotate(home)
        log(T0 + 20)  # in the new agent.log
        _pass(store, home)
        assert _kept(store) == _expected(written)
        # Two rotations between passes: a file read half-way is now agent.log.2.
        log(T0 + 30)
        al.rotate(home)
        log(T0 + 40)
        al.rotate(home)
        log(T0 + 50)
        _pass(store, home)
        assert _kept(store) == _expected(written)
        assert store.core.conn.execute(f"SELECT count(*) FROM {CALL_FILES_TABLE}").fetchone()[
            0
        ] == len(list((home / "logs").iterdir()))
        # Rotated past the last copy (deleted): its record goes, its calls stay.
        for _ in range(4):
            al.rotate(home)
        _pass(store, home)
        assert _kept(store) == _expected(written)
        # Only the files there are (each new and empty) are recorded: the deleted are forgotten.
        rows = store.core.conn.execute(f"SELECT device, inode FROM {CALL_FILES_TABLE}")
        recorded = {tuple(r) for r in rows}
        there = {(p.stat().st_dev, p.stat().st_ino) for p in (home / "logs").iterdir()}
        assert recorded == there


def test_a_half_written_line_is_taken_once_whole(tmp_path: Path) -> None:
    home = _home(tmp_path)
    done, later = al.turn_calls(hs.S_ROOT, T0, calls=2)
    al.write_log(home, [done])
    text = al.line(later)
    al.write_partial(home, text[:50])
    with SessionStore(tmp_path / "archive.db") as store:
        assert _pass(store, home) == 1
        al.write_partial(home, text[50:])  # the rest, still without its newline
        assert _pass(store, home) == 0
        al.write_partial(home, "\n")
        assert _pass(store, home) == 1
        assert _kept(store) == _expected([done, later])


def test_a_truncated_or_replaced_file_is_read_again(tmp_path: Path) -> None:
    home = _home(tmp_path)
    first = al.turn_calls(hs.S_ROOT, T0)
    al.write_log(home, al.with_noise(first))
    with SessionStore(tmp_path / "archive.db") as store:
        _pass(store, home)
        # Truncated in place (same inode), a shorter file now.
        al.log_path(home).write_bytes(b"")
        shorter = al.turn_calls(hs.S_CRON, T0 + 100, calls=1)
        al.write_log(home, shorter)
        assert _pass(store, home) == 1
        # Truncated again and written past the old offset: its first bytes tell.
        al.log_path(home).write_bytes(b"")
        longer = al.turn_calls(hs.S_CONT1, T0 + 200, calls=3)
        al.write_log(home, al.with_noise(longer))
        assert _pass(store, home) == 3
        # The same lines written back (a copy put in place): kept once.
        al.log_path(home).unlink()
        al.write_log(home, al.with_noise(longer))
        assert _pass(store, home) == 0
        assert _kept(store) == _expected(first + shorter + longer)


def test_the_home_is_left_as_it_was(tmp_path: Path) -> None:
    home = _home(tmp_path)
    al.write_log(home, al.with_noise(al.turn_calls(hs.S_ROOT, T0)))
    al.rotate(home)
    al.write_log(home, al.with_noise(al.turn_calls(hs.S_ROOT, T0 + 10)))
    al.write_partial(home, "2026-10-01 12:34:56,789 INFO [x] run_agent: API call #1: model")
    logs, db = al.stamps(home), digests(home / "state.db")
    with SessionStore(tmp_path / "archive.db") as store:
        sync(store, home / "state.db", home)
        sync(store, home / "state.db", home)
    assert al.stamps(home) == logs  # every log file's bytes and mtime
    assert_untouched(home / "state.db", db)


def test_a_session_hermes_pruned_keeps_its_calls(tmp_path: Path) -> None:
    home = _home(tmp_path)
    calls = al.turn_calls(hs.S_CRON, T0) + al.turn_calls(hs.S_CONT2, T0 + 100)
    al.write_log(home, calls)
    with SessionStore(tmp_path / "archive.db") as store:
        sync(store, home / "state.db", home)
        pruned = hs.prune(home / "state.db", retention_days=30, now=1.79e9)
        assert hs.S_CRON in pruned
        for _ in range(al.BACKUPS + 1):  # and the log rotated away
            al.rotate(home)
        sync(store, home / "state.db", home)
        gone = store.core.conn.execute(
            "SELECT gone_from_source_at FROM sessions WHERE id=?", (hs.S_CRON,)
        ).fetchone()[0]
        assert gone is not None
        assert _kept(store) == _expected(calls)
        got = priced_calls(store.core.conn, [hs.S_CRON])
        assert len(got[(hs.S_CRON, al.MODEL)]) == 3
        # Deleting it from the archive (the only way anything leaves) takes its calls.
        store.delete_session(hs.S_CRON)
        assert priced_calls(store.core.conn, [hs.S_CRON]) == {}


def test_each_profile_keeps_its_calls_under_its_own_ids(tmp_path: Path) -> None:
    facts = hs.build_profiles_home(tmp_path / "hermes")
    logged = hs.add_agent_logs(facts)
    assert "empty" not in logged.logs  # a profile without logs/: nothing to say
    data = tmp_path / "data"
    reading = reading_for(HermesHome(facts.root), data / "archive.db", inline=True, folder=data)
    assert reading.syncer is not None
    reading.syncer.poll()
    assert reading.syncer.state().calls_note is None
    legacy = facts.root / "profiles" / "legacy"
    with SessionStore(data / "archive.db") as store:
        by_home = dict(
            store.core.conn.execute(f"SELECT src_home, count(*) FROM {CALLS_TABLE} GROUP BY 1")
        )
        assert by_home == {
            source_key(facts.root): len(logged.calls["default"]),
            source_key(legacy): len(logged.calls["legacy"]),
        }
        # The same source id in two profiles: two sessions in the archive, each its calls.
        mine, theirs = hs.S_CRON, f"legacy:{hs.S_CRON}"
        got = priced_calls(store.core.conn, [mine, theirs, hs.S_ROOT])
        for archive_id, profile, session in (
            (mine, "default", hs.S_CRON),
            (theirs, "legacy", hs.S_CRON),
            (hs.S_ROOT, "default", hs.S_ROOT),
        ):
            want = logged.priced(profile, session)
            assert [(c.at, c.prompt) for c in got[(archive_id, al.MODEL)]] == [
                (c.logged_at, c.prompt) for c in want
            ]
        assert max(c.prompt for c in got[(theirs, al.MODEL)]) > 200_000  # a long-context turn
        untagged = store.core.conn.execute(
            f"SELECT count(*) FROM {CALLS_TABLE} WHERE session_id IS NULL"
        ).fetchone()[0]
        assert untagged == 1


def test_recall_archive_sync_says_the_calls_it_kept(tmp_path: Path) -> None:
    home = _home(tmp_path)
    al.write_log(home, al.with_noise(al.turn_calls(hs.S_ROOT, T0)))
    archive = tmp_path / "archive.db"
    out = recall("archive", "sync", "--home", str(home), "--archive", str(archive), "--no-meaning")
    assert out.returncode == 0, out.stderr
    assert "3 logged calls" in out.stdout
    again = recall(
        "archive", "sync", "--home", str(home), "--archive", str(archive), "--no-meaning"
    )
    assert again.returncode == 0 and "0 logged calls" in again.stdout


def test_the_syncer_keeps_calls_logged_without_a_commit(tmp_path: Path) -> None:
    home = _home(tmp_path)
    data = tmp_path / "data"
    reading = reading_for(HermesHome(home), data / "archive.db", inline=True, folder=data)
    syncer = reading.syncer
    assert syncer is not None
    syncer.poll()
    syncs = syncer.syncs
    al.write_log(home, al.turn_calls(hs.S_ROOT, T0))  # state.db untouched
    syncer.poll()
    assert syncer.syncs == syncs  # no sync of state.db: the log alone was read
    with closing(SessionStore(data / "archive.db")) as store:
        assert len(_kept(store)) == 3
    syncer.poll()  # nothing moved: nothing read
    assert syncer.syncs == syncs


def test_a_file_that_cannot_be_read_is_said_and_the_rest_kept(tmp_path: Path) -> None:
    home = _home(tmp_path)
    al.write_log(home, al.turn_calls(hs.S_ROOT, T0))
    # A folder where a rotated file should be: no one can read it, root included.
    (home / "logs" / "agent.log.2").mkdir()
    data = tmp_path / "data"
    reading = reading_for(HermesHome(home), data / "archive.db", inline=True, folder=data)
    syncer = reading.syncer
    assert syncer is not None
    syncer.poll()
    state = syncer.state()
    assert state.reason is None  # the sync itself went well
    assert state.calls_note is not None and "agent.log.2 cannot be read" in state.calls_note
    with closing(SessionStore(data / "archive.db")) as store:
        assert len(_kept(store)) == 3
    (home / "logs" / "agent.log.2").rmdir()
    syncer.poll()  # tried again, though no stamp of a readable file moved
    assert syncer.state().calls_note is None


def test_a_file_that_cannot_be_opened_is_said(tmp_path: Path) -> None:
    """A log that cannot be opened (a symbolic link to itself: refused even to root,
    which reads a file whatever its mode)."""
    home = _home(tmp_path)
    path = al.log_path(home)
    path.parent.mkdir(parents=True)
    path.symlink_to(path.name)
    with SessionStore(tmp_path / "archive.db") as store:
        report = sync(store, home / "state.db", home)
    assert report.calls_added == 0
    assert report.calls_notes and "agent.log cannot be read" in report.calls_notes[0]


def test_a_home_without_logs_has_no_calls_and_no_note(tmp_path: Path) -> None:
    home = _home(tmp_path)
    with SessionStore(tmp_path / "archive.db") as store:
        report = sync(store, home / "state.db", home)
        assert (report.calls_added, report.calls_notes) == (0, ())
        assert _kept(store) == []


def test_a_file_longer_than_a_chunk_is_read_a_chunk_a_transaction(tmp_path: Path) -> None:
    home = _home(tmp_path)
    calls = [c for n in range(20) for c in al.turn_calls(hs.S_ROOT, T0 + n * 10)]
    al.write_log(home, al.with_noise(calls[:30]))
    al.write_partial(home, "x" * 5_000 + "\n")  # a "line" longer than a chunk: passed over
    al.write_log(home, al.with_noise(calls[30:]))
    size = al.log_path(home).stat().st_size
    with SessionStore(tmp_path / "archive.db") as store:
        writes = store.core.writes
        report = keep_calls(store, home, ArchiveIds.of_home(home), chunk_bytes=2_000)
        assert report.added == len(calls)
        assert store.core.writes - writes >= size // 2_000  # one transaction a chunk
        assert _kept(store) == _expected(calls)
        assert _pass(store, home) == 0


def test_a_logs_folder_that_cannot_be_listed_is_said(tmp_path: Path) -> None:
    """``logs`` a symbolic link to itself: listing it fails for root too."""
    home = _home(tmp_path)
    (home / "logs").symlink_to("logs")
    with SessionStore(tmp_path / "archive.db") as store:
        report = sync(store, home / "state.db", home)
    assert report.calls_added == 0
    assert report.calls_notes and "logs cannot be read" in report.calls_notes[0]
