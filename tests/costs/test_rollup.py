"""The per-day cost rollup answers exactly what summing the raw rows answers.

Hermes shapes are imported first (tests/support/archived.py) and the archive is what both
read; homes written with Recall's own store are their own archive.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
from datetime import date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from dashboard.costs.rollup import CostRollup
from dashboard.costs.spend import DIMENSIONS, Spend, spend
from dashboard.reader.reader import StateReader
from dashboard.store.readonly import open_readonly
from dashboard.store.recalldb import RecallData
from dashboard.store.records import Usage
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as shapes
from tests.support.archived import archive_home
from tests.support.cost_homes import PROFILES_ASK, archived, assert_same, profiles_reader
from tests.support.demo_homes import demo_home_copy

TZ = "Europe/Stockholm"
ZONE = ZoneInfo(TZ)


def at(day: date, hour: int = 12, minute: int = 0) -> float:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=ZONE).timestamp()


def answers(db: Path, rollup: CostRollup, **options: object) -> tuple[Spend, Spend]:
    """(raw sums, rollup) for the same question over the file as it is now."""
    conn = open_readonly(db)
    try:
        raw = spend(conn, **options)
        rolled = rollup.spend(conn, **options)
    finally:
        conn.close()
    assert rolled is not None
    return raw, rolled


def check(db: Path, rollup: CostRollup, **options: object) -> Spend:
    raw, rolled = answers(db, rollup, timezone=TZ, **options)
    assert_same(raw, rolled)
    return rolled


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("rollup") / "home"
    demo_home_copy(tmp_path_factory, home, sessions=300, messages=6000, anchor_day="2026-11-30")
    return home / "state.db"


RANGES = {"month": date(2025, 12, 1), "week": date(2026, 9, 9), "day": date(2026, 11, 3)}


@pytest.mark.parametrize("period", ["month", "week", "day"])
def test_demo_home_every_period_and_dimension(demo: Path, data: RecallData, period: str) -> None:
    rollup = CostRollup(data.core, str(demo))
    for by in ("provider", "model", "source", "task"):
        found = check(
            demo, rollup, period=period, by=by, start=RANGES[period], end=date(2026, 12, 1)
        )
        assert found.rows, by
    check(
        demo,
        rollup,
        period=period,
        by="provider",
        start=RANGES[period],
        end=date(2026, 12, 1),
        sources=("cli", "telegram"),
    )


def test_demo_home_has_sessions_spanning_days_and_counts_them_once(
    demo: Path, data: RecallData
) -> None:
    rollup = CostRollup(data.core, str(demo))
    check(demo, rollup, period="month", by="source", start=date(2025, 12, 1), end=date(2026, 12, 1))
    with data.core.reading() as conn:
        multi = conn.execute("SELECT count(*) FROM cost_multi").fetchone()[0]
    assert multi > 0  # the correction above was exercised, not vacuous


ALL_SHAPES = {**shapes.SHAPES, **shapes.COST_SHAPES}


@pytest.mark.parametrize("shape", sorted(ALL_SHAPES))
def test_every_hermes_shape(tmp_path: Path, data: RecallData, shape: str) -> None:
    # Every shape's archive has usage rows (derived ones for a source without them), so
    # every shape is answered by the rollup, in every dimension.
    db = archived(ALL_SHAPES[shape], tmp_path)
    rollup = CostRollup(data.core, str(db))
    for by in ("provider", "model", "source", "task"):
        for period, first in (
            ("month", date(2026, 1, 1)),
            ("week", date(2026, 6, 29)),
            ("day", date(2026, 7, 15)),
        ):
            check(db, rollup, by=by, period=period, start=first, end=date(2027, 1, 1))


def test_a_new_reply_moves_a_row_over_its_days(tmp_path: Path, data: RecallData) -> None:
    # Item 8 in the rollup: a message alone (no usage change yet) re-weighs a row's days.
    db = archived(shapes.build_cost_facts, tmp_path)
    rollup = CostRollup(data.core, str(db))
    ask = {"period": "day", "by": "model", "start": date(2026, 11, 1), "end": date(2026, 12, 1)}
    before = check(db, rollup, **ask)
    source = tmp_path / shapes.build_cost_facts.__name__
    with sqlite3.connect(source / "state.db") as conn:  # a long reply on Nov 4, in the row's days
        conn.execute(
            "INSERT INTO messages (session_id, role, content, timestamp, token_count) "
            "VALUES (?, 'assistant', 'late', ?, 2000)",
            (shapes.S_WEEK, shapes._epoch(shapes.S_WEEK) + 2 * 86400),
        )
    conn.close()
    archive_home(source)  # the syncer copies the reply into the archive
    after = check(db, rollup, **ask)
    # The session's two rows, plus any row at the watermark (read again: ties are kept).
    assert "rebuilt" not in rollup.last_refresh and 2 <= rollup.last_refresh["changed"] <= 3
    days = {c.period for c in after.rows if c.key == "anthropic/claude-sonnet-4.5"}
    assert "2026-11-04" in days and "2026-11-04" not in {c.period for c in before.rows}


def test_incremental_updates_match_raw_sums(tmp_path: Path, data: RecallData) -> None:
    db = tmp_path / "state.db"
    nov = date(2026, 11, 10)
    with SessionStore(db) as store:
        a = store.create_session("cli", started_at=at(nov))
        store.record_usage(
            a,
            Usage(
                model="claude",
                billing_provider="anthropic",
                estimated_cost_usd=0.5,
                cost_status="estimated",
                at=at(nov),
            ),
        )
    rollup = CostRollup(data.core, str(db))
    ask = {"period": "month", "by": "provider", "start": date(2026, 10, 1), "end": date(2027, 1, 1)}
    check(db, rollup, **ask)
    assert "rebuilt" in rollup.last_refresh

    with SessionStore(db) as store:
        # A new row, and the same row again a day later (Hermes upserts: last_seen moves).
        store.record_usage(
            a,
            Usage(
                model="gpt",
                billing_provider="openrouter",
                task="vision",
                estimated_cost_usd=0.1,
                actual_cost_usd=0.2,
                cost_status="actual",
                at=at(nov, 13),
            ),
        )
        store.record_usage(
            a,
            Usage(
                model="claude",
                billing_provider="anthropic",
                estimated_cost_usd=0.25,
                cost_status="estimated",
                input_tokens=70,
                at=at(date(2026, 11, 11)),
            ),
        )
    for by in ("provider", "model", "task", "source"):
        found = check(db, rollup, **{**ask, "by": by})
    assert rollup.last_refresh.get("changed") == 0  # later questions reuse the first refresh
    assert found.totals.sessions == 1

    with SessionStore(db) as store:
        # The session resumes in December: its claude row moves to another month.
        store.record_usage(
            a,
            Usage(
                model="claude",
                billing_provider="anthropic",
                estimated_cost_usd=1.0,
                cost_status="estimated",
                at=at(date(2026, 12, 2)),
            ),
        )
        b = store.create_session("telegram", started_at=at(date(2026, 12, 3)))
        store.record_usage(
            b,
            Usage(
                model="local",
                billing_provider="custom",
                cost_status="unknown",
                at=at(date(2026, 12, 3)),
            ),
        )
    found = check(db, rollup, **ask)
    assert 2 <= rollup.last_refresh["changed"] <= 3 and "rebuilt" not in rollup.last_refresh
    by_month = {(c.period, c.key): c for c in found.rows}
    assert ("2026-11", "anthropic") not in by_month  # moved out, nothing left behind
    assert by_month[("2026-12", "custom")].effective_usd is None
    for period in ("week", "day"):
        check(db, rollup, **{**ask, "period": period, "start": date(2026, 11, 1)})


def test_deleted_rows_trigger_a_rebuild(tmp_path: Path, data: RecallData) -> None:
    db = tmp_path / "state.db"
    day = date(2026, 11, 10)
    with SessionStore(db) as store:
        ids = [store.create_session("cli", started_at=at(day)) for _ in range(3)]
        for n, sid in enumerate(ids):
            store.record_usage(
                sid,
                Usage(
                    model="m",
                    billing_provider="p",
                    estimated_cost_usd=1.0 + n,
                    cost_status="estimated",
                    at=at(day),
                ),
            )
    rollup = CostRollup(data.core, str(db))
    ask = {"start": date(2026, 11, 1), "end": date(2026, 12, 1)}
    check(db, rollup, **ask)
    with SessionStore(db) as store:
        store.delete_session(ids[0])
        store.record_usage(
            ids[1],
            Usage(
                model="m",
                billing_provider="p",
                estimated_cost_usd=5.0,
                cost_status="estimated",
                at=at(day, 14),
            ),
        )
    found = check(db, rollup, **ask)
    assert "rebuilt" in rollup.last_refresh
    assert found.totals.estimated_usd == pytest.approx(2.0 + 5.0 + 3.0)


def test_a_replaced_file_with_the_same_row_count_is_rebuilt(tmp_path: Path, data: RecallData):
    db = tmp_path / "state.db"
    day = date(2026, 11, 10)
    for name, cost in (("first.db", 1.0), ("second.db", 7.0)):
        with SessionStore(tmp_path / name) as store:
            sid = store.create_session("cli", started_at=at(day))
            store.record_usage(
                sid,
                Usage(
                    model="m",
                    billing_provider="p",
                    estimated_cost_usd=cost,
                    cost_status="estimated",
                    at=at(day),
                ),
            )
    shutil.copy(tmp_path / "first.db", db)
    rollup = CostRollup(data.core, str(db))
    ask = {"start": date(2026, 11, 1), "end": date(2026, 12, 1)}
    assert check(db, rollup, **ask).totals.estimated_usd == pytest.approx(1.0)
    db.unlink()
    shutil.copy(tmp_path / "second.db", db)  # a restore from another machine
    assert check(db, rollup, **ask).totals.estimated_usd == pytest.approx(7.0)
    assert "rebuilt" in rollup.last_refresh


def test_another_timezone_rebuilds_its_days(demo: Path, data: RecallData) -> None:
    rollup = CostRollup(data.core, str(demo))
    ask = {"period": "day", "by": "provider", "start": date(2026, 11, 1), "end": date(2026, 12, 1)}
    check(demo, rollup, **ask)
    raw, rolled = answers(demo, rollup, timezone="Asia/Kolkata", **ask)  # a half-hour offset
    assert_same(raw, rolled)
    assert "rebuilt" in rollup.last_refresh
    with data.core.reading() as conn:
        zone = conn.execute("SELECT zone FROM cost_rollup_state").fetchone()[0]
    assert zone == "Asia/Kolkata"


def test_two_recall_processes_share_one_rollup(tmp_path: Path, demo: Path) -> None:
    # Two apps over one data dir: each has its own connection to recall.db.
    db = tmp_path / "state.db"
    shutil.copy(demo, db)
    first, second = (RecallData(tmp_path / "recall.db") for _ in range(2))
    try:
        one, two = CostRollup(first.core, str(db)), CostRollup(second.core, str(db))
        ask = {"start": date(2026, 11, 1), "end": date(2026, 12, 1), "by": "model"}
        check(db, one, **ask)
        with SessionStore(db) as store:
            sid = store.create_session("cli", started_at=at(date(2026, 11, 20)))
            store.record_usage(
                sid,
                Usage(
                    model="m",
                    billing_provider="p",
                    estimated_cost_usd=3.0,
                    cost_status="estimated",
                    at=at(date(2026, 11, 20)),
                ),
            )
        check(db, two, **ask)  # applies the new row
        # The new row, plus any row at the watermark (read again: ties are not skipped).
        assert 1 <= two.last_refresh["changed"] <= 2 and "rebuilt" not in two.last_refresh
        check(db, one, **ask)  # sees the state two left: nothing to do, nothing twice
        assert one.last_refresh == {"changed": 0}
    finally:
        first.close()
        second.close()


def test_background_build_answers_none_until_built(demo: Path, data: RecallData) -> None:
    rollup = CostRollup(data.core, str(demo), connect=lambda: open_readonly(demo))
    conn = open_readonly(demo)
    try:
        ask = {"start": date(2026, 1, 1), "end": date(2026, 12, 1), "timezone": TZ}
        assert rollup.spend(conn, **ask) is None  # the caller sums the raw rows
        rollup.wait_until_built(timeout=60)
        assert_same(spend(conn, **ask), rollup.spend(conn, **ask))
    finally:
        conn.close()


def test_usage_rows_whose_session_is_gone(tmp_path: Path, data: RecallData) -> None:
    db = tmp_path / "state.db"
    day = date(2026, 11, 10)
    with SessionStore(db) as store:
        sid = store.create_session("cli", started_at=at(day))
        store.record_usage(
            sid,
            Usage(
                model="m",
                billing_provider="p",
                estimated_cost_usd=1.0,
                cost_status="estimated",
                at=at(day),
            ),
        )
    with sqlite3.connect(db) as conn:  # Hermes does not enforce foreign keys
        conn.execute(
            "INSERT INTO session_model_usage (session_id, model, billing_provider, "
            "estimated_cost_usd, cost_status, first_seen, last_seen) "
            "VALUES ('gone', 'm', 'p', 2.0, 'estimated', ?, ?)",
            (at(day), at(day)),
        )
    conn.close()
    rollup = CostRollup(data.core, str(db))
    found = check(db, rollup, by="source", start=date(2026, 11, 1), end=date(2026, 12, 1))
    assert {c.key: c.sessions for c in found.rows} == {"cli": 1, "unknown": 1}


class GatedConnection(sqlite3.Connection):
    """A real connection whose statements wait for a gate: a build caught mid-way."""

    gate = threading.Event()
    reached = threading.Event()

    def execute(self, *args, **kwargs):  # type: ignore[override]
        self.reached.set()
        self.gate.wait(30)
        return super().execute(*args, **kwargs)


def test_questions_never_wait_for_a_background_build(demo: Path, data: RecallData) -> None:
    def connect() -> sqlite3.Connection:
        return sqlite3.connect(
            f"file:{demo}?mode=ro", uri=True, factory=GatedConnection, check_same_thread=False
        )

    GatedConnection.gate.clear()
    GatedConnection.reached.clear()
    rollup = CostRollup(data.core, str(demo), connect=connect)
    ask = {"start": date(2026, 1, 1), "end": date(2026, 12, 1), "timezone": TZ}
    conn = open_readonly(demo)
    try:
        assert rollup.spend(conn, **ask) is None  # the build starts, then stalls
        assert GatedConnection.reached.wait(10)  # the builder is mid-way
        answers: list[object] = []
        asker = threading.Thread(target=lambda: answers.append(rollup.spend(conn, **ask)))
        asker.start()
        asker.join(timeout=5)
        assert not asker.is_alive() and answers == [None]  # the raw sums answer meanwhile
        GatedConnection.gate.set()
        rollup.wait_until_built(timeout=60)
        assert_same(spend(conn, **ask), rollup.spend(conn, **ask))
    finally:
        GatedConnection.gate.set()
        conn.close()


def _fresh(reader: StateReader, profile: str) -> StateReader:
    """A reader of ``profile`` with caches of its own (the raw answers to compare with)."""
    return StateReader(reader.home, reader.path, profiles=reader.profiles).scoped(profile)


def _sessions(found) -> tuple[int, list[tuple[str, dict]]]:
    return found.total, [(s.session_id, s.spend.to_json()) for s in found.sessions]


def test_profiles_from_the_rollup_equal_each_scoped_readers_own(
    tmp_path: Path, data: RecallData
) -> None:
    reader = profiles_reader(tmp_path)
    rollup = CostRollup(data.core, str(reader.path))
    names = [p.name for p in reader.profiles]
    legacy = reader.scoped("legacy")
    rolled = legacy.spend(rollup, by="model", **PROFILES_ASK)
    assert rollup.last_refresh.get("rebuilt")  # a scoped reader asked the rollup

    def rolled_profiles() -> set[str]:
        with data.core.reading() as conn:
            return {p for (p,) in conn.execute("SELECT DISTINCT profile FROM cost_row")}

    assert rolled_profiles() == {"default", "legacy"}  # built from the whole archive
    assert rolled.to_json() == _fresh(reader, "legacy").spend(by="model", **PROFILES_ASK).to_json()

    def every_answer() -> None:
        # By profile, from the rollup, as the raw rows say (and so each profile's own).
        everyone = check(
            reader.path, rollup, by="profile", start=PROFILES_ASK["start"], end=PROFILES_ASK["end"]
        )
        assert {c.key for c in everyone.rows} == {"default", "legacy"}
        for name in names:
            scoped, raw = reader.scoped(name), _fresh(reader, name)
            for by in DIMENSIONS:
                want = raw.spend(by=by, **PROFILES_ASK)
                assert_same(want, scoped.spend(rollup, by=by, **PROFILES_ASK))
            mine = [c for c in everyone.rows if c.key == name]
            assert [
                c.to_json() for c in scoped.spend(rollup, by="profile", **PROFILES_ASK).rows
            ] == [c.to_json() for c in mine]
            for sort in ("cost", "calls"):
                assert _sessions(scoped.costly_sessions(rollup, sort=sort, **PROFILES_ASK)) == (
                    _sessions(raw.costly_sessions(sort=sort, **PROFILES_ASK))
                ), (name, sort)
            assert rolled_profiles() == {"default", "legacy"}, name

    every_answer()
    # New calls in two profiles: the rollup follows the whole archive (a scoped question
    # never rebuilds it from one profile's rows), and every profile still adds up.
    root = reader.profiles[0].home.root
    later = datetime(2026, 12, 20, 9, tzinfo=ZONE).timestamp()  # after every call so far
    shapes.grow_usage(root / "state.db", shapes.S_CONT1, 900, 0.125, later)
    legacy_db = root / "profiles" / "legacy" / "state.db"  # sessions only: a turn, its sums
    shapes.append_turn(legacy_db, shapes.S_ROOT, "one more thing", "done", later)
    shapes.grow_usage(legacy_db, shapes.S_ROOT, 90, 0.5, later)
    legacy.spend(rollup, by="task", **PROFILES_ASK)  # syncs (inline), then asks the rollup
    assert "rebuilt" not in rollup.last_refresh and rollup.last_refresh["changed"] > 0
    assert rolled_profiles() == {"default", "legacy"}
    every_answer()


def test_a_rollup_its_folder_refuses_answers_from_the_raw_rows(tmp_path: Path) -> None:
    """recall.db's folder turns read-only (root too: immutable) after the rollup was built,
    then the archive moves: the answer is the raw rows' sums, nothing raised."""
    db = archived(shapes.build_cost_facts, tmp_path)
    folder = tmp_path / "recall"
    data = RecallData(folder / "recall.db")
    rollup = CostRollup(data.core, str(db))
    ask = {"period": "day", "by": "model", "start": date(2026, 11, 1), "end": date(2026, 12, 1)}
    check(db, rollup, **ask)  # built and used
    source = tmp_path / shapes.build_cost_facts.__name__
    shapes.append_turn(source / "state.db", shapes.S_WEEK, "more", "reply", at(date(2026, 11, 4)))
    archive_home(source)
    files = [folder, *(p for p in folder.iterdir() if not p.name.endswith("-shm"))]
    try:
        with shapes.read_only(*files):
            conn = open_readonly(db)
            try:
                assert rollup.spend(conn, timezone=TZ, **ask) is None  # the caller sums rows
                assert spend(conn, timezone=TZ, **ask).rows
            finally:
                conn.close()
    finally:
        data.close()


def test_the_rollup_prices_every_row_again_when_prices_yaml_changes(
    tmp_path: Path, data: RecallData
) -> None:
    """Issue 28: the rollup keeps each row's recomputed figure under the price book's
    version; a new prices.yaml (here: the long-context home's model at $1 a million
    tokens) is a new version, and the next answer is the raw rows' again."""
    from tests.support.cost_homes import SONNET_AT_ONE, long_context_home, own_prices

    db = long_context_home(tmp_path / "home")
    rollup = CostRollup(data.core, str(db))
    options = {"period": "day", "by": "model", "start": date(2026, 11, 1), "end": date(2026, 12, 1)}
    before = check(db, rollup, **options)
    with own_prices(tmp_path / "recall-data", SONNET_AT_ONE):
        after = check(db, rollup, **options)
        assert after.totals.recomputed.own_usd == after.totals.recomputed.usd
        assert after.totals.recomputed.usd != before.totals.recomputed.usd
        assert rollup.last_refresh.get("rebuilt"), rollup.last_refresh  # built again
