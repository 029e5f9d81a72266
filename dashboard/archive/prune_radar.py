"""The prune radar: which sessions Hermes's next sweep deletes, and whether each is archived.

Today's Hermes deletes history by default (HERMES_FACTS, "Today's Hermes" and "Hermes
v31", "Prune rule"): with ``sessions.auto_prune`` on, every CLI or gateway start (at
most once a day, the last run kept in ``state_meta('last_auto_prune')``) deletes the
**ended** sessions whose **last activity** (the newest of ``last_activity_at``, their
newest message and ``started_at``) is older than ``sessions.retention_days``. A
compression lineage (a session and the ones that continue it) goes whole or not at all:
a chain whose tip is still open or recent keeps its old segments, and a pinned segment
keeps the lineage it belongs to. What continues what is ``lineage/links.py``'s rule,
passed in as ``continues`` (lineage sits above archive).

The radar applies that rule to the source ``state.db`` (read-only) and checks each
session against the archive: present, with every message the source holds (by source
home and message id). Nothing here writes to either file.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dashboard.archive.marks import source_key
from dashboard.errors import StoreUnavailableError, ValidationError
from dashboard.hermes.home import HermesHome
from dashboard.params import whole_number
from dashboard.store.readonly import open_readonly, read_snapshot
from dashboard.store.schema import DEMO_KEY

DEFAULT_AUTO_PRUNE = True  # the default since 2026-09-02
DEFAULT_RETENTION_DAYS = 90
MAX_RETENTION_DAYS = 36_500  # a hundred years: beyond it the value is a typo
DAY_S = 86_400.0
SWEEP_INTERVAL_S = DAY_S  # Hermes sweeps at most once a day
LAST_SWEEP_KEY = "last_auto_prune"  # Hermes's state_meta key (hermes_state_maintenance)
BATCH = 500  # sessions checked against the archive per statement

# A candidate's archive status; only "archived" is safe.
STATUSES = ("archived", "partial", "missing", "no-archive")

#: Whether ``child`` continues ``parent`` (two session rows as mappings):
#: ``lineage.links.continues``, the one continuation rule, handed down by the reader.
ContinuationRule = Callable[[Mapping[str, Any], Mapping[str, Any]], bool]


@dataclass(frozen=True)
class RetentionPolicy:
    """``sessions.auto_prune`` / ``sessions.retention_days`` as Hermes will apply them."""

    auto_prune: bool
    retention_days: int
    notes: tuple[str, ...] = ()  # why a value in config.yaml was not used

    @property
    def prunes(self) -> bool:
        """Whether Hermes deletes anything at all: auto-prune on, retention not 0 (off)."""
        return self.auto_prune and self.retention_days > 0


@dataclass(frozen=True)
class Candidate:
    """One session the next sweep deletes, why, and what the archive holds of it."""

    session_id: str
    title: str | None
    source: str | None
    started_at: float
    ended_at: float | None
    messages: int  # in the source
    archived_messages: int | None  # of those, in the archive (None: no archive to ask)
    status: str  # one of STATUSES
    last_activity: float  # the newest of last_activity_at, its newest message, its start
    lineage: int  # sessions in its compression lineage, which goes whole (1: alone)
    lineage_last_activity: float  # the newest last activity of its lineage
    # When the lineage's newest activity passed retention_days: from then on it is the
    # next sweep's.
    crossed_at: float
    # Its id in the archive (a profile's sessions but the first home's are archived as
    # ``<profile>:<id>``: profiles.py); None when the archive does not hold it.
    archive_id: str | None = None

    @property
    def safe(self) -> bool:
        return self.status == "archived"

    def idle_days(self, now: float) -> int:
        """Whole days since its last activity, at ``now``."""
        return max(0, int((now - self.last_activity) // DAY_S))


@dataclass(frozen=True)
class PruneRadar:
    """What the radar found; problems are said, never raised."""

    policy: RetentionPolicy
    cutoff: float | None  # last activity before this goes (None: nothing goes)
    candidates: tuple[Candidate, ...]  # by when they crossed retention, a lineage together
    # Idle for longer than retention but kept: "pinned" (pinned, or in a pinned segment's
    # lineage), "open" (not ended), "lineage" (a segment of a lineage still open or recent).
    spared: dict[str, int]
    last_sweep: float | None  # when Hermes last swept, if its state_meta says
    source_problem: str | None = None
    archive_problem: str | None = None
    demo: bool = False  # the home is Recall's demo home: no Hermes ever runs on it
    now: float = field(default=0.0, compare=False)

    @property
    def never(self) -> str | None:
        """Why Hermes will never delete anything here (one clause), or None when it will."""
        if self.demo:
            return "this is Recall's demo home, and no Hermes runs on it"
        if not self.policy.auto_prune:
            return "auto-prune is off in config.yaml"
        if not self.policy.prunes:
            return "retention_days is 0 in config.yaml, which keeps every session"
        return None

    @property
    def unsafe(self) -> int:
        """Candidates not confirmed as archived."""
        return sum(1 for c in self.candidates if not c.safe)

    @property
    def next_sweep_after(self) -> float | None:
        """The earliest time the next sweep can run (at a Hermes start); None: the next start."""
        return None if self.last_sweep is None else self.last_sweep + SWEEP_INTERVAL_S

    @property
    def sweep_waits(self) -> bool:
        """Whether the next sweep must wait for a day to pass since the last one."""
        after = self.next_sweep_after
        return after is not None and after > self.now

    def to_json(self) -> dict[str, object]:
        return {
            "auto_prune": self.policy.auto_prune,
            "retention_days": self.policy.retention_days,
            "notes": list(self.policy.notes),
            "never": self.never,
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
    continues: ContinuationRule,
    conn: sqlite3.Connection | None = None,
) -> PruneRadar:
    """The sessions Hermes's next sweep of ``home`` deletes, each checked against ``archive``
    (through ``conn`` when the caller holds it open, else opened here). ``continues``
    decides which sessions form a lineage (``lineage.links.continues``)."""
    policy = retention_policy(home)
    at = time.time() if now is None else now
    cutoff = at - policy.retention_days * DAY_S if policy.prunes else None
    try:
        source = open_readonly(home.state_db)
    except StoreUnavailableError as exc:
        return PruneRadar(
            policy, cutoff, (), {}, None, source_problem=_source_problem(home, exc), now=at
        )
    try:
        with read_snapshot(source):
            meta = _meta(source)
            last = _last_sweep(meta)
            demo = bool(meta.get(DEMO_KEY))
            if cutoff is None or demo:
                rows, spared = [], {}
            else:
                rows, spared = _doomed(source, cutoff, policy.retention_days, continues)
    except sqlite3.DatabaseError as exc:
        problem = f"the source {home.state_db} cannot be read ({str(exc)[:200]})"
        return PruneRadar(policy, cutoff, (), {}, None, source_problem=problem, now=at)
    finally:
        source.close()
    if demo:
        return PruneRadar(policy, None, (), {}, last, demo=True, now=at)
    candidates, archive_problem = _check_archive(home, archive, rows, conn)
    return PruneRadar(
        policy, cutoff, tuple(candidates), spared, last, archive_problem=archive_problem, now=at
    )


# -- the source ---------------------------------------------------------------------------

# The session columns the rule reads; a file lacking one (an older Hermes) reads NULL.
_RULE_COLUMNS = (
    "id",
    "title",
    "source",
    "started_at",
    "ended_at",
    "end_reason",
    "parent_session_id",
    "model_config",
    "last_activity_at",
)


def _doomed(
    conn: sqlite3.Connection, cutoff: float, days: int, continues: ContinuationRule
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Hermes's rule over the source: ended, idle since before ``cutoff``, not pinned, and
    the same for every session of its lineage (a lineage goes whole)."""
    sessions = _sessions(conn)
    last = _last_activity(conn, sessions, cutoff)
    group = _lineages(sessions, continues)
    members: dict[str, list[str]] = {}
    for sid in sessions:
        members.setdefault(group[sid], []).append(sid)

    def may_go(sid: str) -> bool:
        s = sessions[sid]
        return s["ended"] and not s["pinned"] and last[sid] < cutoff

    doomed: list[dict[str, Any]] = []
    spared = {"pinned": 0, "open": 0, "lineage": 0}
    for ids in members.values():
        if all(map(may_go, ids)):
            newest = max(last[sid] for sid in ids)
            for sid in ids:
                row = {k: sessions[sid][k] for k in ("title", "source", "started_at", "ended_at")}
                doomed.append(
                    row
                    | {
                        "session_id": sid,
                        "last_activity": last[sid],
                        "lineage": len(ids),
                        "lineage_last_activity": newest,
                        "crossed_at": newest + days * DAY_S,
                    }
                )
            continue
        pinned_lineage = any(sessions[sid]["pinned"] for sid in ids)
        for sid in ids:
            if last[sid] >= cutoff:
                continue  # not idle long enough: nothing spares it, it is simply recent
            if not sessions[sid]["ended"]:
                spared["open"] += 1
            elif pinned_lineage:
                spared["pinned"] += 1
            else:
                spared["lineage"] += 1
    doomed.sort(key=lambda r: (r["crossed_at"], r["started_at"], r["session_id"]))
    for row in doomed:
        row["message_ids"] = [
            str(r[0])
            for r in conn.execute(
                "SELECT id FROM messages WHERE session_id = ?", (row["session_id"],)
            )
        ]
        row["messages"] = len(row["message_ids"])
    return doomed, spared


def _sessions(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """Every session row the rule reads, by id (``pinned`` as a bool; times as floats)."""
    columns = {r[1] for r in conn.execute("PRAGMA table_info(sessions)")}
    picked = ", ".join(c if c in columns else f"NULL AS {c}" for c in _RULE_COLUMNS)
    pinned = "coalesce(pinned, 0) != 0" if "pinned" in columns else "0"
    cur = conn.execute(f"SELECT {picked}, {pinned} AS pinned FROM sessions")
    names = [d[0] for d in cur.description]
    out: dict[str, dict[str, Any]] = {}
    for values in cur:
        row = dict(zip(names, values, strict=True))
        row["pinned"] = bool(row["pinned"])
        row["ended"] = row["ended_at"] is not None  # Hermes asks ended_at IS NOT NULL
        for key in ("started_at", "ended_at", "last_activity_at"):
            row[key] = _time(row[key]) if row[key] is not None else None
        if row["started_at"] is None:
            row["started_at"] = 0.0  # NOT NULL in every Hermes; a damaged row is idle
        out[str(row["id"])] = row
    return out


def _last_activity(
    conn: sqlite3.Connection, sessions: Mapping[str, Mapping[str, Any]], cutoff: float
) -> dict[str, float]:
    """Each session's last activity: the newest of ``last_activity_at``, its newest
    message and ``started_at``. Messages are read only for sessions idle by their row
    (one seek each on Hermes's ``(session_id, timestamp)`` index): the rest are recent
    whatever their messages say."""
    out: dict[str, float] = {}
    for sid, s in sessions.items():
        seen = max(s["started_at"], s["last_activity_at"] or 0.0)
        if seen < cutoff:
            newest = conn.execute(
                "SELECT max(timestamp) FROM messages WHERE session_id = ?"
                " AND typeof(timestamp) IN ('real', 'integer')",
                (sid,),
            ).fetchone()[0]
            if newest is not None:
                seen = max(seen, float(newest))
        out[sid] = seen
    return out


def _lineages(
    sessions: Mapping[str, Mapping[str, Any]], continues: ContinuationRule
) -> dict[str, str]:
    """Each session -> its lineage's representative: sessions joined by continuation
    links (``continues``) are one lineage; a branch, delegation or reset starts its own."""
    found: dict[str, str] = {sid: sid for sid in sessions}

    def top(sid: str) -> str:
        while found[sid] != sid:
            found[sid] = found[found[sid]]
            sid = found[sid]
        return sid

    for sid, s in sessions.items():
        parent = sessions.get(str(s["parent_session_id"] or ""))
        if parent is not None and parent is not s and continues(s, parent):
            a, b = top(sid), top(str(parent["id"]))
            if a != b:
                found[max(a, b)] = min(a, b)
    return {sid: top(sid) for sid in sessions}


def _time(value: object) -> float | None:
    """A stored time as seconds; None for a value that is not one (a damaged row)."""
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _meta(conn: sqlite3.Connection) -> dict[str, str]:
    """The source's ``state_meta`` (empty when it has none)."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='state_meta'"
    ).fetchone()
    if not has_meta:
        return {}
    return {
        str(k): v
        for k, v in conn.execute(
            "SELECT key, value FROM state_meta WHERE key IN (?, ?)", (LAST_SWEEP_KEY, DEMO_KEY)
        )
    }


def _last_sweep(meta: Mapping[str, object]) -> float | None:
    """When Hermes last swept, from its ``state_meta``; None when it does not say."""
    value = meta.get(LAST_SWEEP_KEY)
    try:
        return float(value) if value else None  # type: ignore[arg-type]
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
        last_activity=float(row["last_activity"]),  # type: ignore[arg-type]
        lineage=int(row["lineage"]),  # type: ignore[call-overload]
        lineage_last_activity=float(row["lineage_last_activity"]),  # type: ignore[arg-type]
        crossed_at=float(row["crossed_at"]),  # type: ignore[arg-type]
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
