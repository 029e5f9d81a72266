"""The prune radar: which sessions Hermes's next sweep deletes, and whether each is archived.

Today's Hermes deletes history by default (HERMES_FACTS, "Today's Hermes"): with
``sessions.auto_prune`` on, every CLI or gateway start (at most once a day, the
last run kept in ``state_meta('last_auto_prune')``) deletes the **ended** sessions
that **started** more than ``sessions.retention_days`` ago, except **pinned** ones.
The radar applies that rule to the source ``state.db`` (read-only) and checks each
session against the archive: present, with every message the source holds (by
source home and message id). Nothing here writes to either file.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dashboard.archive.marks import source_key
from dashboard.errors import StoreUnavailableError, ValidationError
from dashboard.hermes.home import HermesHome
from dashboard.params import whole_number
from dashboard.store.readonly import open_readonly, read_snapshot

DEFAULT_AUTO_PRUNE = True  # the default since 2026-09-02
DEFAULT_RETENTION_DAYS = 90
MAX_RETENTION_DAYS = 36_500  # a hundred years: beyond it the value is a typo
SWEEP_INTERVAL_S = 86_400.0  # Hermes sweeps at most once a day
LAST_SWEEP_KEY = "last_auto_prune"  # Hermes's state_meta key (hermes_state_maintenance)
BATCH = 500  # sessions checked against the archive per statement

# A candidate's archive status; only "archived" is safe.
STATUSES = ("archived", "partial", "missing", "no-archive")


@dataclass(frozen=True)
class RetentionPolicy:
    """``sessions.auto_prune`` / ``sessions.retention_days`` as Hermes will apply them."""

    auto_prune: bool
    retention_days: int
    notes: tuple[str, ...] = ()  # why a value in config.yaml was not used


@dataclass(frozen=True)
class Candidate:
    """One session the next sweep deletes, and what the archive holds of it."""

    session_id: str
    title: str | None
    source: str | None
    started_at: float
    ended_at: float | None
    messages: int  # in the source
    archived_messages: int | None  # of those, in the archive (None: no archive to ask)
    status: str  # one of STATUSES
    # Its id in the archive (a profile's sessions but the first home's are archived as
    # ``<profile>:<id>``: profiles.py); None when the archive does not hold it.
    archive_id: str | None = None

    @property
    def safe(self) -> bool:
        return self.status == "archived"


@dataclass(frozen=True)
class PruneRadar:
    """What the radar found; problems are said, never raised."""

    policy: RetentionPolicy
    cutoff: float | None  # sessions started before this go (None: nothing goes)
    candidates: tuple[Candidate, ...]  # oldest first
    spared: dict[str, int]  # old enough but kept: "pinned", "open" (not ended)
    last_sweep: float | None  # when Hermes last swept, if its state_meta says
    source_problem: str | None = None
    archive_problem: str | None = None

    @property
    def unsafe(self) -> int:
        """Candidates not confirmed as archived."""
        return sum(1 for c in self.candidates if not c.safe)

    @property
    def next_sweep_after(self) -> float | None:
        """The earliest time the next sweep can run (at a Hermes start); None: the next start."""
        return None if self.last_sweep is None else self.last_sweep + SWEEP_INTERVAL_S

    def to_json(self) -> dict[str, object]:
        return {
            "auto_prune": self.policy.auto_prune,
            "retention_days": self.policy.retention_days,
            "notes": list(self.policy.notes),
            "cutoff": self.cutoff,
            "last_sweep": self.last_sweep,
            "next_sweep_after": self.next_sweep_after,
            "spared": self.spared,
            "unsafe": self.unsafe,
            "source_problem": self.source_problem,
            "archive_problem": self.archive_problem,
            "candidates": [c.__dict__ | {"safe": c.safe} for c in self.candidates],
        }


def retention_policy(home: HermesHome) -> RetentionPolicy:
    """The home's prune settings from config.yaml; Hermes's defaults, with a note, for odd ones."""
    config, unreadable = home._config()
    if unreadable:
        return RetentionPolicy(
            DEFAULT_AUTO_PRUNE,
            DEFAULT_RETENTION_DAYS,
            (
                f"{unreadable}: assuming Hermes's defaults (auto_prune on, "
                f"{DEFAULT_RETENTION_DAYS} days)",
            ),
        )
    sessions = config.get("sessions")
    if sessions is None:
        return RetentionPolicy(DEFAULT_AUTO_PRUNE, DEFAULT_RETENTION_DAYS)
    if not isinstance(sessions, dict):
        return RetentionPolicy(
            DEFAULT_AUTO_PRUNE,
            DEFAULT_RETENTION_DAYS,
            (
                f"config.yaml sessions is {_shown(sessions)}, not a section of settings: assuming "
                f"Hermes's defaults (auto_prune on, {DEFAULT_RETENTION_DAYS} days)",
            ),
        )
    notes: list[str] = []
    auto = sessions.get("auto_prune", DEFAULT_AUTO_PRUNE)
    if not isinstance(auto, bool):
        notes.append(
            f"config.yaml sessions.auto_prune is {_shown(auto)}, not true or false: assuming "
            f"Hermes's default (on)"
        )
        auto = DEFAULT_AUTO_PRUNE
    days = _retention_days(sessions.get("retention_days", DEFAULT_RETENTION_DAYS))
    if days is None:
        notes.append(
            f"config.yaml sessions.retention_days is {_shown(sessions.get('retention_days'))}, "
            f"not a whole number of days from 0 to {MAX_RETENTION_DAYS:,}: assuming Hermes's "
            f"default ({DEFAULT_RETENTION_DAYS} days)"
        )
        days = DEFAULT_RETENTION_DAYS
    return RetentionPolicy(auto, days, tuple(notes))


def prune_radar(
    home: HermesHome,
    archive: Path,
    now: float | None = None,
    *,
    conn: sqlite3.Connection | None = None,
) -> PruneRadar:
    """The sessions Hermes's next sweep of ``home`` deletes, each checked against ``archive``
    (through ``conn`` when the caller holds it open, else opened here)."""
    policy = retention_policy(home)
    at = time.time() if now is None else now
    cutoff = at - policy.retention_days * 86_400 if policy.auto_prune else None
    try:
        source = open_readonly(home.state_db)
    except StoreUnavailableError as exc:
        return PruneRadar(policy, cutoff, (), {}, None, source_problem=_source_problem(home, exc))
    try:
        with read_snapshot(source):
            last = _last_sweep(source)
            rows, spared = _doomed(source, cutoff) if cutoff is not None else ([], {})
    except sqlite3.DatabaseError as exc:
        problem = f"the source {home.state_db} cannot be read ({str(exc)[:200]})"
        return PruneRadar(policy, cutoff, (), {}, None, source_problem=problem)
    finally:
        source.close()
    candidates, archive_problem = _check_archive(home, archive, rows, conn)
    return PruneRadar(
        policy, cutoff, tuple(candidates), spared, last, archive_problem=archive_problem
    )


# -- the source ---------------------------------------------------------------------------


def _doomed(
    conn: sqlite3.Connection, cutoff: float
) -> tuple[list[dict[str, object]], dict[str, int]]:
    """Hermes's rule over the source: ended, started before ``cutoff``, not pinned."""
    columns = {r[1] for r in conn.execute("PRAGMA table_info(sessions)")}
    pinned = "coalesce(s.pinned, 0) != 0" if "pinned" in columns else "0"
    title = "s.title" if "title" in columns else "NULL"
    rows = [
        dict(r)
        for r in conn.execute(
            f"SELECT s.id AS session_id, {title} AS title, s.source, s.started_at, s.ended_at "
            f"FROM sessions s WHERE s.started_at < ? AND s.ended_at IS NOT NULL AND NOT {pinned} "
            "ORDER BY s.started_at, s.id",
            (cutoff,),
        )
    ]
    spared_pinned, spared_open = conn.execute(
        f"SELECT coalesce(sum(s.ended_at IS NOT NULL AND {pinned}), 0), "
        "coalesce(sum(s.ended_at IS NULL), 0) FROM sessions s WHERE s.started_at < ?",
        (cutoff,),
    ).fetchone()
    for row in rows:
        row["message_ids"] = [
            str(r[0])
            for r in conn.execute(
                "SELECT id FROM messages WHERE session_id = ?", (row["session_id"],)
            )
        ]
        row["messages"] = len(row["message_ids"])
    return rows, {"pinned": int(spared_pinned), "open": int(spared_open)}


def _last_sweep(conn: sqlite3.Connection) -> float | None:
    """When Hermes last swept, from its ``state_meta``; None when it does not say."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='state_meta'"
    ).fetchone()
    if not has_meta:
        return None
    row = conn.execute("SELECT value FROM state_meta WHERE key=?", (LAST_SWEEP_KEY,)).fetchone()
    try:
        return float(row[0]) if row and row[0] else None
    except (TypeError, ValueError):
        return None  # a mark that is not a time says nothing; none is invented


def _source_problem(home: HermesHome, exc: StoreUnavailableError) -> str:
    if exc.reason == "missing":
        return f"no state.db at {home.state_db}: Hermes has nothing to prune yet"
    return f"the source {home.state_db} cannot be read ({exc.reason}: {exc.detail[:200]})"


# -- the archive --------------------------------------------------------------------------


def _check_archive(
    home: HermesHome,
    archive: Path,
    rows: Sequence[dict[str, object]],
    held: sqlite3.Connection | None = None,
) -> tuple[list[Candidate], str | None]:
    """Each candidate with what the archive holds of it (by source home and id), read
    through ``held`` when given (the caller's read transaction), else a connection of
    its own."""
    if not rows:
        return [], None
    if not archive.is_file():
        problem = (
            f"no archive at {archive} yet: run `recall archive sync` before Hermes's "
            "next start, or these sessions are lost"
        )
        return [_candidate(r, None, "no-archive") for r in rows], problem
    if archive.resolve() == home.state_db.resolve():
        problem = (
            "this home's store is its own archive: what Hermes deletes from it is kept nowhere else"
        )
        return [_candidate(r, None, "no-archive") for r in rows], problem
    if held is not None:
        conn = held
    else:
        try:
            conn = open_readonly(archive)
        except StoreUnavailableError as exc:
            problem = f"the archive {archive} cannot be read ({exc.reason})"
            return [_candidate(r, None, "no-archive") for r in rows], problem
    key = source_key(home.root)
    out: list[Candidate] = []
    try:
        with read_snapshot(conn):
            for start in range(0, len(rows), BATCH):
                out.extend(_check_batch(conn, key, rows[start : start + BATCH]))
    except sqlite3.DatabaseError as exc:
        problem = f"the archive {archive} cannot be read ({str(exc)[:200]})"
        return [_candidate(r, None, "no-archive") for r in rows], problem
    finally:
        if held is None:
            conn.close()
    return out, None


def _check_batch(
    conn: sqlite3.Connection, key: str, rows: Sequence[dict[str, object]]
) -> list[Candidate]:
    ids = [str(r["session_id"]) for r in rows]
    present = dict(
        conn.execute(
            "SELECT s.src_id, s.id FROM sessions s JOIN json_each(?) j ON s.src_id = j.value "
            "WHERE s.src_home = ?",
            (json.dumps(ids), key),
        ).fetchall()
    )
    wanted = [m for r in rows for m in r["message_ids"]]  # type: ignore[attr-defined]
    # CROSS JOIN keeps json_each outside: one index seek per id. Left to itself the
    # planner walks every message of the home and rescans the JSON for each (minutes
    # at 60k messages).
    kept = {
        r[0]
        for r in conn.execute(
            "SELECT m.src_id FROM json_each(?) j CROSS JOIN messages m "
            "ON m.src_home = ? AND m.src_id = j.value",
            (json.dumps(wanted), key),
        )
    }
    out = []
    for r in rows:
        if r["session_id"] not in present:
            out.append(_candidate(r, 0, "missing"))
            continue
        have = sum(1 for m in r["message_ids"] if m in kept)  # type: ignore[attr-defined]
        status = "archived" if have == r["messages"] else "partial"
        out.append(_candidate(r, have, status, present[r["session_id"]]))  # type: ignore[index]
    return out


def _candidate(
    row: dict[str, object], archived: int | None, status: str, archive_id: str | None = None
) -> Candidate:
    return Candidate(
        session_id=str(row["session_id"]),
        title=row["title"],
        source=row["source"],  # type: ignore[arg-type]
        started_at=float(row["started_at"]),
        ended_at=row["ended_at"],  # type: ignore[arg-type]
        messages=int(row["messages"]),
        archived_messages=archived,
        status=status,  # type: ignore[arg-type]
        archive_id=archive_id,
    )


# -- config values ------------------------------------------------------------------------


def _retention_days(value: object) -> int | None:
    """A YAML value as days: an int from 0 to the maximum, or those digits in a string."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value <= MAX_RETENTION_DAYS else None
    if isinstance(value, str):
        try:
            return whole_number(value, "retention_days", 0, MAX_RETENTION_DAYS)
        except ValidationError:
            return None
    return None


def _shown(value: object) -> str:
    return repr(value)[:40]
