"""A home written the way Hermes's newest storage code (schema 31, FTS storage v3) writes it.

:func:`build_v31_home` writes ``<root>/state.db`` in rollback-journal (``delete``) mode,
with ``config.yaml``, ``memories/`` and the side lock files, and returns a
:class:`V31Facts`: the ids and the expected facts a test needs. Every point of
``HERMES_FACTS.md``, section "Hermes v31", is reproduced:

* ``messages.message_uid`` on every row (a copy keeps its original's uid *and*
  timestamp), ``absorbed_message_uids``, ``tool_call_uid(s)``, ``_compressed_summary``,
  ``display_identity`` (BLOB), ``display_order``; the new ``sessions`` columns and tables;
  the ``state_meta`` keys; FTS v3 (external-content tables over the views).
* The long session (``V31Facts.long_session``): compacted in place 3 times, then one
  turn undone. At the first compaction the head (first 3 rows) is re-inserted before
  the summary. Compactions 1 and 3 write a standalone summary row; compaction 2 merges
  it into the first retained row (an assistant tool-call row). Summarized rows are
  ``active=0, compacted=1``; the retained rows' originals ``active=0, compacted=0`` with
  live copies sharing their uid and timestamp. The undone turn is ``active=0,
  compacted=0`` with no copy.
* A legacy rotation chain (``V31Facts.rotation``, 4 segments) whose children open with
  the head copy, then the summary; its tip later compacted in place once and is still open.
* A branch, a delegation, cron runs, a pinned, an archived and a hidden session, usage
  rows with NULL ``cost_status``.
* Sessions Hermes's 90-day prune would delete and ones it would keep (see
  :func:`prune_rule`).

How the head's originals are flagged: the compaction flips every live row to
``active=0, compacted=1`` and then marks the *retained tail's* originals ``compacted=0``;
the head's originals stay ``compacted=1`` while their copies go live (so a reader that
ignores ``message_uid`` sees the head twice, as issue 24 reports).

Values the facts do not pin down are plain guesses: uids are 32 hex characters,
``message_uid_backfill`` is ``'complete'``, ``db_file_generation`` is ``'1'``; a merged
carrier keeps the retained row's uid and timestamp (it is that row's copy).

Nothing here imports Recall. The DDL reuses :mod:`tests.support.hermes_shapes`'s
current form and adds what schema 31 added (column lists are facts read from the
public Hermes Agent project, not copied code).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.support import hermes_shapes as hs

SUMMARY_PREFIX = hs.SUMMARY_PREFIX
PRIOR_OPEN = "[PRIOR CONTEXT — for reference only; not a new message]"
PRIOR_END = "[END OF PRIOR CONTEXT — COMPACTION SUMMARY BELOW]"
#: Hermes's boilerplate before a summary's own text.
SUMMARY_BOILERPLATE = "Earlier turns were compacted into the summary below."

SCHEMA_VERSION = 31
FTS_STORAGE_VERSION = 3
RETENTION_DAYS = 90
DAY = 86_400.0
#: The moment the home is "now" by default (after the v31 release of 2026-09-24).
V31_NOW = datetime(2026, 10, 20, 12, 0, tzinfo=UTC).timestamp()

_SONNET = "anthropic/claude-sonnet-4.5"
_OPENROUTER = ("openrouter", "https://openrouter.ai/api/v1", "api")

# ---------------------------------------------------------------------------
# Marker words (each said in exactly the rows the facts name)
# ---------------------------------------------------------------------------

#: Said once before compaction 1, 2 and 3 of S_LONG, and once in its live epoch (4).
EPOCH_MARKERS = {1: "amberquill", 2: "birchlantern", 3: "copperfinch", 4: "driftmarrow"}
#: Said in two of S_LONG's first three rows (the head re-inserted at compaction 1).
HEAD_MARKER = "emberthistle"
#: Said in a row compaction 1 retained (original + live copy, later summarized): one message.
TAIL_MARKER = "fennelgrove"
#: Said only in the turn ``/undo`` took back.
UNDO_MARKER = "gorsewhistle"
#: Said in the rotation chain's first row (the head every child opens with).
ROTATION_MARKER = "hazelbracken"

# ---------------------------------------------------------------------------
# DDL: hermes_shapes' current form plus what schema 31 added
# ---------------------------------------------------------------------------


def _replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


_V31_SCHEMA = _replace_once(
    _replace_once(
        hs._CURRENT_SCHEMA,
        "archived INTEGER NOT NULL DEFAULT 0, pinned",
        "archived INTEGER NOT NULL DEFAULT 0, auto_archived INTEGER NOT NULL DEFAULT 0, pinned",
    ),
    "display_identity BLOB, display_order INTEGER\n);",
    "display_identity BLOB, display_order INTEGER, message_uid TEXT,\n"
    "    absorbed_message_uids TEXT, tool_call_uids TEXT, tool_call_uid TEXT\n);",
)

_V31_ADDED = """
CREATE TABLE gateway_routing (
    scope TEXT NOT NULL DEFAULT '', session_key TEXT NOT NULL, entry_json TEXT NOT NULL,
    updated_at REAL NOT NULL, PRIMARY KEY (scope, session_key)
);
CREATE TABLE gateway_hygiene_state (
    session_key TEXT PRIMARY KEY, failure_streak INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE conversation_generations (
    source TEXT NOT NULL, session_key TEXT NOT NULL, generation INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (source, session_key)
);
CREATE TABLE gateway_heartbeats (
    backend_id TEXT PRIMARY KEY, pid INTEGER NOT NULL, started_at REAL NOT NULL,
    last_heartbeat REAL NOT NULL, profile TEXT NOT NULL DEFAULT '', host TEXT NOT NULL DEFAULT ''
);
CREATE TABLE session_turn_leases (
    conversation_id TEXT PRIMARY KEY, holder TEXT NOT NULL, acquired_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX idx_sessions_source_id ON sessions(source, id);
CREATE INDEX idx_messages_session_uid ON messages(session_id, message_uid);
CREATE TRIGGER messages_message_uid_insert
AFTER INSERT ON messages WHEN new.message_uid IS NULL
BEGIN
    UPDATE messages SET message_uid = lower(hex(randomblob(16))) WHERE id = new.id;
END;
"""

#: Tables a schema-31 file holds beyond the seed's (checked by the tests).
V31_TABLES = (
    "sessions",
    "messages",
    "session_model_usage",
    "state_meta",
    "schema_version",
    "system_prompts",
    "compression_locks",
    "gateway_routing",
    "gateway_hygiene_state",
    "conversation_generations",
    "gateway_heartbeats",
    "session_turn_leases",
    "messages_fts",
    "messages_fts_trigram",
)
V31_MESSAGE_COLUMNS = (
    "message_uid",
    "absorbed_message_uids",
    "tool_call_uids",
    "tool_call_uid",
    "_compressed_summary",
    "display_identity",
    "display_order",
    "active",
    "compacted",
)
V31_SESSION_COLUMNS = (
    "created_source",
    "transport_profile",
    "auto_archived",
    "hidden",
    "archived",
    "pinned",
    "tool_names",
    "last_activity_at",
    "compression_failure_cooldown_until",
    "compression_fallback_streak",
    "compression_ineffective_count",
    "compression_recovery_deadline",
    "compression_overload_streak",
)
SIDE_FILES = (
    "state.db.fts_rebuild.lock",
    "state.db.quarantine.lock",
    "state.db.auto-maintenance.lock",
    "memories/USER.md.lock",
    "memories/MEMORY.md.lock",
)

# ---------------------------------------------------------------------------
# Facts
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Compaction:
    """One in-place compaction of a session, as written."""

    at: float
    form: str  # 'standalone' | 'merged'
    summary: str  # the summary's own text (after Hermes's boilerplate)
    carrier: int  # id of the row holding the summary (standalone row or merged tail copy)
    summarized: tuple[int, ...]  # rows it flipped to active=0, compacted=1 (head originals too)
    superseded: tuple[int, ...]  # retained rows' originals, now active=0, compacted=0
    head_copies: tuple[int, ...]  # re-inserted head (first compaction only), before the summary
    tail_copies: tuple[int, ...]  # live copies of the retained rows (carrier first if merged)


@dataclass(frozen=True)
class Marker:
    """A word, the session saying it, the epoch it was said in, and its messages."""

    word: str
    session: str
    epoch: int  # 1..n: before compaction n; compactions + 1: the live epoch
    messages: int  # distinct messages (message_uid) containing it
    rows: tuple[int, ...]  # every row (originals and copies) containing it


@dataclass(frozen=True)
class V31Facts:
    """What :func:`build_v31_home` wrote."""

    root: Path
    db: Path
    now: float
    retention_days: int
    sessions: dict[str, str]  # role in the fixture -> session id
    long_session: str
    compactions: dict[str, list[Compaction]]  # in-place compactions per session
    rewound: tuple[int, ...]  # S_LONG rows /undo took back (no copy anywhere)
    markers: dict[str, Marker]
    rotation: tuple[str, ...]  # legacy rotation chain, root first
    live_order: dict[str, list[int]]  # session -> ids Hermes feeds the agent (active=1 BY id)
    total_messages: int
    prune_deleted: frozenset[str]
    prune_kept: frozenset[str]
    state_meta: dict[str, str]
    last_activity: dict[str, float] = field(default_factory=dict)  # per the prune rule
    #: every copy's id -> the id of the row it repeats (the first row with its uid)
    repeats: dict[int, int] = field(default_factory=dict)


# ---------------------------------------------------------------------------
# The writer: Hermes's operations, with an in-memory mirror the facts are read from
# ---------------------------------------------------------------------------


@dataclass
class _Row:
    id: int
    session: str
    role: str
    content: str | None
    at: float
    uid: str
    active: int = 1
    compacted: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class _Writer:
    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.rows: list[_Row] = []
        self.sessions: dict[str, dict[str, Any]] = {}
        self.compactions: dict[str, list[Compaction]] = {}
        self._uids = 0
        self._msg_cols = hs._columns(conn, "messages")
        self._session_cols = hs._columns(conn, "sessions")

    # -- sessions ----------------------------------------------------------
    def session(self, start: float, tag: int, source: str = "cli", **values: Any) -> str:
        sid = datetime.fromtimestamp(start, UTC).strftime("%Y%m%d_%H%M%S") + f"_{tag:06x}"
        provider, base_url, mode = _OPENROUTER
        row = {
            "id": sid,
            "source": source,
            "created_source": source,
            "model": _SONNET,
            "model_config": json.dumps(values.pop("model_config", {})),
            "started_at": start,
            "billing_provider": provider,
            "billing_base_url": base_url,
            "billing_mode": mode,
            "estimated_cost_usd": 0.01,
            "cost_status": "estimated",
            "cost_source": "official_docs_snapshot",
            "last_activity_at": start,
            "profile_name": "default",
            "transport_profile": "default",
            "tool_names": json.dumps([]),
        }
        row.update(values)
        self.conn.execute(*hs._insert("sessions", row, self._session_cols))
        self.sessions[sid] = dict(row)
        return sid

    def update_session(self, sid: str, **values: Any) -> None:
        sets = ", ".join(f"{k} = ?" for k in values)
        self.conn.execute(f"UPDATE sessions SET {sets} WHERE id = ?", (*values.values(), sid))
        self.sessions[sid].update(values)

    def end(self, sid: str, at: float, reason: str = "user_exit") -> None:
        self.update_session(sid, ended_at=at, end_reason=reason)

    # -- messages ----------------------------------------------------------
    def _mint(self) -> str:
        self._uids += 1
        return hashlib.sha256(f"v31-message-{self._uids}".encode()).hexdigest()[:32]

    def _write(self, row: _Row, touch: float | None) -> _Row:
        values = {
            "session_id": row.session,
            "role": row.role,
            "content": row.content,
            "timestamp": row.at,
            "active": row.active,
            "compacted": row.compacted,
            "message_uid": row.uid,
            "display_identity": hashlib.sha256(row.uid.encode()).digest()[:16],
            **row.extra,
        }
        cursor = self.conn.execute(*hs._insert("messages", values, self._msg_cols))
        row.id = int(cursor.lastrowid or 0)
        self.rows.append(row)
        sets = "message_count = coalesce(message_count, 0) + 1"
        params: list[Any] = []
        if touch is not None and self.sessions[row.session].get("last_activity_at") is not None:
            sets += ", last_activity_at = max(coalesce(last_activity_at, 0), ?)"
            params.append(touch)
            self.sessions[row.session]["last_activity_at"] = max(
                self.sessions[row.session]["last_activity_at"] or 0, touch
            )
        self.conn.execute(f"UPDATE sessions SET {sets} WHERE id = ?", (*params, row.session))
        return row

    def say(self, sid: str, role: str, content: str | None, at: float, **extra: Any) -> int:
        return self._write(_Row(0, sid, role, content, at, self._mint(), extra=extra), at).id

    def call(self, sid: str, at: float, call_id: str, tool: str, output: str, **args: Any) -> int:
        """An assistant tool-call row and its tool result row; returns the call row's id."""
        call_uid, result_uid = self._mint(), self._mint()
        calls = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": tool, "arguments": json.dumps(args)},
            }
        ]
        first = self.say(
            sid,
            "assistant",
            None,
            at,
            tool_calls=json.dumps(calls),
            finish_reason="tool_calls",
            tool_call_uids=json.dumps({call_id: call_uid}),
        )
        self.say(
            sid,
            "tool",
            output,
            at + 1,
            tool_call_id=call_id,
            tool_name=tool,
            tool_call_uid=result_uid,
        )
        tools = json.loads(self.sessions[sid]["tool_names"] or "[]")
        if tool not in tools:
            self.update_session(sid, tool_names=json.dumps([*tools, tool]))
        return first

    def copy(
        self, original: _Row, sid: str | None = None, content: str | None = None, **extra: Any
    ) -> _Row:
        """A re-inserted copy: same uid, role, tool fields and timestamp; a new id."""
        row = _Row(
            0,
            sid or original.session,
            original.role,
            original.content if content is None else content,
            original.at,
            original.uid,
            extra={**original.extra, **extra},
        )
        return self._write(row, None)

    def live(self, sid: str) -> list[_Row]:
        return sorted((r for r in self.rows if r.session == sid and r.active), key=lambda r: r.id)

    def _flag(self, rows: Iterable[_Row], active: int, compacted: int) -> None:
        for r in rows:
            r.active, r.compacted = active, compacted
            self.conn.execute(
                "UPDATE messages SET active = ?, compacted = ? WHERE id = ?",
                (active, compacted, r.id),
            )

    # -- Hermes's operations ------------------------------------------------
    def compact(self, sid: str, summary: str, at: float, keep: int, merged: bool) -> Compaction:
        """In-place compaction, as ``archive_and_compact`` leaves the rows."""
        live = self.live(sid)
        first = not self.compactions.get(sid)
        head = live[:3] if first else []
        tail = live[-keep:]
        assert len(live) > len(head) + keep, "nothing between the head and the tail"
        self._flag(live, 0, 1)
        self._flag(tail, 0, 0)
        head_copies = [self.copy(r).id for r in head]
        text = f"{SUMMARY_PREFIX}\n{SUMMARY_BOILERPLATE}\n{summary}"
        tail_copies: list[int] = []
        if merged:
            carrier_of = tail[0]
            content = f"{PRIOR_OPEN}\n{carrier_of.content or ''}\n{PRIOR_END}\n{text}"
            carrier = self.copy(carrier_of, content=content, _compressed_summary=1)
            tail_copies.append(carrier.id)
            rest = tail[1:]
        else:
            carrier = self._write(_Row(0, sid, "user", text, at, self._mint()), at)
            rest = tail
        tail_copies += [self.copy(r).id for r in rest]
        self.update_session(sid, last_activity_at=at)
        done = Compaction(
            at,
            "merged" if merged else "standalone",
            summary,
            carrier.id,
            tuple(r.id for r in live if r not in tail),
            tuple(r.id for r in tail),
            tuple(head_copies),
            tuple(tail_copies),
        )
        self.compactions.setdefault(sid, []).append(done)
        return done

    def undo(self, sid: str, count: int, at: float) -> list[int]:
        """``/undo``: the last ``count`` live rows become active=0, compacted=0, no copy."""
        undone = self.live(sid)[-count:]
        self._flag(undone, 0, 0)
        self.conn.execute(
            "UPDATE sessions SET rewind_count = rewind_count + 1, last_activity_at = ? "
            "WHERE id = ?",
            (at, sid),
        )
        self.sessions[sid]["last_activity_at"] = at
        return [r.id for r in undone]

    def rotate(self, parent: str, at: float, tag: int, summary: str) -> str:
        """Legacy rotation: the parent ends by compression; the child opens with the head
        copy, then the summary, then the retained tail's copies."""
        live = self.live(parent)
        self.end(parent, at, "compression")
        cfg = self.sessions[parent]
        child = self.session(
            at, tag, cfg["source"], parent_session_id=parent, title=None, last_activity_at=at
        )
        for r in live[:3]:
            self.copy(r, sid=child)
        text = f"{SUMMARY_PREFIX}\n{SUMMARY_BOILERPLATE}\n{summary}"
        self._write(_Row(0, child, "user", text, at, self._mint()), at)
        for r in live[-2:]:
            if r not in live[:3]:
                self.copy(r, sid=child)
        return child

    def turn(self, sid: str, at: float, user: str, reply: str) -> list[int]:
        return [self.say(sid, "user", user, at), self.say(sid, "assistant", reply, at + 5)]


# ---------------------------------------------------------------------------
# The prune rule, read plainly
# ---------------------------------------------------------------------------


def _is_continuation(child: dict[str, Any], parent: dict[str, Any] | None) -> bool:
    """A rotation child continuing its parent (not a branch, delegation or reset)."""
    if parent is None or parent.get("end_reason") != "compression":
        return False
    cfg = json.loads(child.get("model_config") or "{}")
    markers = ("_branched_from", "_delegate_from", "_reset_from")
    return child.get("source") != "subagent" and not any(k in cfg for k in markers)


def prune_rule(
    sessions: dict[str, dict[str, Any]],
    newest_message: dict[str, float],
    now: float,
    retention_days: float = RETENTION_DAYS,
) -> frozenset[str]:
    """Hermes's auto-prune: an ended session goes when its last activity (newest of
    ``last_activity_at``, its newest message, ``started_at``) is older than the cut-off;
    a compression ancestor only with its whole lineage; pinned sessions and the
    continuations they cover stay (a lineage goes whole or not at all)."""
    cutoff = now - retention_days * DAY

    def last(sid: str) -> float:
        s = sessions[sid]
        seen = [s["started_at"], s.get("last_activity_at"), newest_message.get(sid)]
        return max(v for v in seen if v is not None)

    def may_go(sid: str) -> bool:
        s = sessions[sid]
        return s.get("ended_at") is not None and not s.get("pinned") and last(sid) < cutoff

    def root(sid: str) -> str:
        while True:
            parent = sessions.get(sessions[sid].get("parent_session_id") or "")
            if not _is_continuation(sessions[sid], parent):
                return sid
            sid = parent["id"]  # type: ignore[index]

    lineages: dict[str, list[str]] = {}
    for sid in sessions:
        lineages.setdefault(root(sid), []).append(sid)
    return frozenset(
        sid for members in lineages.values() if all(map(may_go, members)) for sid in members
    )


# ---------------------------------------------------------------------------
# The builder
# ---------------------------------------------------------------------------


def _long_session(w: _Writer, start: float) -> tuple[str, list[int], dict[str, list[int]]]:
    """S_LONG: 3 in-place compactions (standalone, merged on a tool call, standalone),
    then an undone turn. Returns its id, the undone ids and where each
    marker was first said (ids of the original rows)."""
    sid = w.session(start, 0x10, title="Long in-place conversation", api_call_count=40)
    said: dict[str, list[int]] = {}
    t = start + 10
    # epoch 1: head (3 rows, the head marker in two), a summarized row, a retained tail
    said[HEAD_MARKER] = [w.say(sid, "user", f"set up the {HEAD_MARKER} service", t)]
    w.say(sid, "assistant", "Sure: which host should it run on?", t + 5)
    said[HEAD_MARKER].append(w.say(sid, "user", f"the {HEAD_MARKER} box in rack 4", t + 10))
    w.say(sid, "assistant", "Reading its config first.", t + 15)
    said[EPOCH_MARKERS[1]] = [w.say(sid, "user", f"why does {EPOCH_MARKERS[1]} fail?", t + 20)]
    w.call(sid, t + 25, "call_e1", "terminal", "exit 1: port taken", command="systemctl status")
    w.say(sid, "assistant", "Port 8080 is taken by another unit.", t + 30)
    said[TAIL_MARKER] = [w.say(sid, "user", f"move it to {TAIL_MARKER} port 8181", t + 35)]
    w.say(sid, "assistant", "Moved; it starts now.", t + 40)
    c1 = start + 2 * 3600
    w.compact(sid, "Service set up on rack 4; port moved.", c1, keep=3, merged=False)
    # epoch 2: a turn, then a tool call the next summary merges into
    t = c1 + 60
    said[EPOCH_MARKERS[2]] = w.turn(sid, t, f"now the {EPOCH_MARKERS[2]} backups", "Nightly.")[:1]
    w.call(sid, t + 20, "call_e2", "read_file", "retention: 7", path="/etc/backup.yaml")
    c2 = start + 4 * 3600
    # retained: the last 2 live rows, the tool call (the summary's carrier) and its result
    w.compact(sid, "Backups run nightly; retention read.", c2, keep=2, merged=True)
    # epoch 3: turns, then a standalone summary (live by time != live by id)
    t = c2 + 60
    said[EPOCH_MARKERS[3]] = w.turn(sid, t, f"what about {EPOCH_MARKERS[3]} alerts?", "Set.")[:1]
    w.turn(sid, t + 30, "and the pager rotation?", "Weekly, Mondays.")
    c3 = start + 6 * 3600
    w.compact(sid, "Alerts configured; pager weekly.", c3, keep=2, merged=False)
    # live epoch: a turn, then a turn /undo takes back
    t = c3 + 60
    said[EPOCH_MARKERS[4]] = w.turn(sid, t, f"last: {EPOCH_MARKERS[4]} dashboards", "Done.")[:1]
    w.turn(sid, t + 30, f"also try {UNDO_MARKER} mode", "Switching to it.")
    undone = w.undo(sid, 2, t + 60)
    said[UNDO_MARKER] = undone[:1]
    return sid, undone, said


def build_v31_home(root: Path, now: float = V31_NOW) -> V31Facts:
    """Write ``<root>/state.db`` (and its home's side files) as Hermes v31 leaves it."""
    root = Path(root)
    db = hs._fresh(root / "state.db")
    (root / "memories").mkdir(parents=True, exist_ok=True)
    (root / "memories" / "USER.md").write_text("Prefers short answers.\n", encoding="utf-8")
    (root / "memories" / "MEMORY.md").write_text("Rack 4 hosts the services.\n", "utf-8")
    (root / "config.yaml").write_text(
        "sessions:\n  auto_prune: true\n  retention_days: 90\n", encoding="utf-8"
    )
    for name in SIDE_FILES:
        (root / name).touch()
    ago = lambda days: now - days * DAY  # noqa: E731
    names: dict[str, str] = {}
    with closing(hs._connect(db)) as conn:
        assert conn.execute("PRAGMA journal_mode=delete").fetchone()[0] == "delete"
        conn.executescript(_V31_SCHEMA + _V31_ADDED + hs._CURRENT_FTS + hs._CURRENT_TRIGRAM)
        conn.execute("BEGIN IMMEDIATE")
        w = _Writer(conn)

        # The long in-place session (still open), with usage rows (aux: NULL status).
        long_sid, undone, said = _long_session(w, ago(20))
        names["long"] = long_sid
        for task, status, cost in (("", "estimated", 0.62), ("compression", None, 0.03)):
            conn.execute(
                "INSERT INTO session_model_usage (session_id, model, billing_provider, "
                "billing_base_url, billing_mode, task, api_call_count, input_tokens, "
                "output_tokens, estimated_cost_usd, cost_status, first_seen, last_seen) "
                "VALUES (?, ?, ?, ?, ?, ?, 3, 9000, 700, ?, ?, ?, ?)",
                (long_sid, _SONNET, *_OPENROUTER, task, cost, status, ago(20), ago(19)),
            )

        # A delegation from the long session, and a branch of it.
        sub = w.session(
            ago(20) + 7000,
            0x11,
            "subagent",
            parent_session_id=long_sid,
            model_config={"_delegate_from": long_sid},
            cost_status="unknown",
            estimated_cost_usd=None,
        )
        w.turn(sub, ago(20) + 7010, "list the backup targets", "3 targets found")
        w.end(sub, ago(20) + 7100, "delegation_complete")
        names["subagent"] = sub
        src = w.session(ago(15), 0x12, "telegram", title="Branch source")
        w.turn(src, ago(15) + 10, "compare two plans", "Plan A is cheaper.")
        w.end(src, ago(15) + 600, "branched")
        branch = w.session(
            ago(15) + 600,
            0x13,
            "telegram",
            parent_session_id=src,
            model_config={"_branched_from": src},
        )
        w.turn(branch, ago(15) + 610, "take plan B instead", "Plan B it is.")
        w.end(branch, ago(15) + 900)
        names["branch_source"], names["branch"] = src, branch

        # Cron runs: one recent (kept), one old (pruned).
        for key, days, tag in (("cron_recent", 1, 0x14), ("cron_old", 120, 0x15)):
            cron = w.session(ago(days), tag, "cron", title=None)
            w.turn(cron, ago(days) + 5, "[cron] nightly report", "report sent")
            w.end(cron, ago(days) + 60, "cron_complete")
            names[key] = cron

        # Archived and hidden sessions (recent); the hidden one holds a merged user row.
        arch = w.session(ago(30), 0x16, title="Archived notes", archived=1)
        w.turn(arch, ago(30) + 5, "note the VPN host", "noted")
        w.end(arch, ago(30) + 60)
        hidden = w.session(ago(25), 0x17, title="Hidden scratch", hidden=1)
        absorbed = w._mint()
        w.say(hidden, "user", "first ask\n\nsecond ask", ago(25) + 5)
        conn.execute(
            "UPDATE messages SET absorbed_message_uids = ? WHERE id = ?",
            (json.dumps([absorbed]), w.rows[-1].id),
        )
        w.say(hidden, "assistant", "both answered", ago(25) + 10)
        w.end(hidden, ago(25) + 60)
        names["archived"], names["hidden"] = arch, hidden

        # Legacy rotation chain of 4 (root long ago), tip still open and compacted in
        # place once last week.
        r1 = w.session(ago(150), 0x20, title="Rotation chain", api_call_count=12)
        w.say(r1, "user", f"plan the {ROTATION_MARKER} migration", ago(150) + 5)
        w.say(r1, "assistant", "Three phases.", ago(150) + 10)
        w.turn(r1, ago(150) + 20, "phase one?", "Schema first.")
        chain = [r1]
        for n, days in enumerate((140, 130, 120), start=1):
            child = w.rotate(chain[-1], ago(days), 0x20 + n, f"Migration, part {n}.")
            w.turn(child, ago(days) + 30, f"phase {n + 1}?", "Next step.")
            chain.append(child)
        tip = chain[-1]
        w.turn(tip, ago(8), "status of the cut-over?", "Scheduled.")
        w.compact(tip, "Cut-over scheduled.", ago(7), keep=2, merged=False)
        w.turn(tip, ago(2), "go", "Cut over.")
        names.update({f"rotation_{i}": s for i, s in enumerate(chain, start=1)})

        # Prune cases (retention 90 days).
        old = w.session(ago(200), 0x30, title="Old and done")
        w.turn(old, ago(200) + 5, "old question", "old answer")
        w.end(old, ago(200) + 60)
        names["old"] = old
        o1 = w.session(ago(210), 0x31, title="Old lineage")
        w.turn(o1, ago(210) + 5, "old lineage start", "ok")
        o2 = w.rotate(o1, ago(209), 0x32, "Old lineage, part 1.")
        w.turn(o2, ago(209) + 5, "old lineage end", "ok")
        w.end(o2, ago(209) + 60)
        names["old_lineage_1"], names["old_lineage_2"] = o1, o2
        late = w.session(ago(200), 0x33, title="Started long ago, compacted last week")
        w.turn(late, ago(200) + 5, "long-running topic", "ok")
        w.turn(late, ago(199), "more of it", "ok")
        w.turn(late, ago(198), "and the rest", "ok")
        w.compact(late, "Long-running topic.", ago(7), keep=2, merged=False)
        w.end(late, ago(6))
        names["compacted_last_week"] = late
        month = w.session(ago(110), 0x34, title="Active a month later", last_activity_at=None)
        w.turn(month, ago(110) + 5, "start of it", "ok")
        w.turn(month, ago(80), "a month later", "ok")
        w.end(month, ago(80) + 60)
        names["active_month_later"] = month
        p1 = w.session(ago(180), 0x35, title="Pinned segment", pinned=1)
        w.turn(p1, ago(180) + 5, "keep this one", "pinned")
        p2 = w.rotate(p1, ago(179), 0x36, "Pinned, part 1.")
        w.turn(p2, ago(179) + 5, "continued", "ok")
        p3 = w.rotate(p2, ago(178), 0x37, "Pinned, part 2.")
        w.turn(p3, ago(178) + 5, "continued again", "ok")
        w.end(p3, ago(178) + 60)
        names.update({"pinned_1": p1, "pinned_2": p2, "pinned_3": p3})
        never_ended = w.session(ago(200), 0x38, title="Never ended")
        w.turn(never_ended, ago(200) + 5, "left open", "ok")
        names["never_ended"] = never_ended

        meta = {
            "store_instance_id": hashlib.sha256(b"v31-store").hexdigest()[:32],
            "db_file_generation": "1",
            "message_uid_backfill": "complete",
            "fts_storage_version": str(FTS_STORAGE_VERSION),
            "last_auto_prune": str(ago(120)),
        }
        conn.executemany("INSERT INTO state_meta (key, value) VALUES (?, ?)", meta.items())
        conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        conn.execute(
            "INSERT INTO gateway_heartbeats VALUES ('cli-1', 4242, ?, ?, 'default', 'laptop')",
            (ago(1), ago(1)),
        )
        conn.execute(
            "INSERT INTO conversation_generations VALUES ('telegram', 'agent:main:tg:dm:1', 2)"
        )
        conn.execute("INSERT INTO gateway_hygiene_state VALUES ('agent:main:tg:dm:1', 0)")
        conn.execute("COMMIT")

    newest: dict[str, float] = {}
    for r in w.rows:
        newest[r.session] = max(newest.get(r.session, r.at), r.at)
    deleted = prune_rule(w.sessions, newest, now)
    live_order = {sid: [r.id for r in w.live(sid)] for sid in w.sessions}

    def marker(word: str, sid: str, epoch: int) -> Marker:
        rows = [r for r in w.rows if word in (r.content or "")]
        return Marker(word, sid, epoch, len({r.uid for r in rows}), tuple(r.id for r in rows))

    markers = {word: marker(word, long_sid, n) for n, word in EPOCH_MARKERS.items()}
    markers[HEAD_MARKER] = marker(HEAD_MARKER, long_sid, 1)
    markers[TAIL_MARKER] = marker(TAIL_MARKER, long_sid, 1)
    markers[UNDO_MARKER] = marker(UNDO_MARKER, long_sid, 4)
    markers[ROTATION_MARKER] = marker(ROTATION_MARKER, chain[0], 1)
    assert all(said[word][0] == markers[word].rows[0] for word in said)

    def last_activity(sid: str) -> float:
        s = w.sessions[sid]
        return max(v for v in (s["started_at"], s.get("last_activity_at"), newest.get(sid)) if v)

    first_of: dict[str, int] = {}
    repeats: dict[int, int] = {}
    for r in w.rows:  # in id order
        if r.uid in first_of:
            repeats[r.id] = first_of[r.uid]
        else:
            first_of[r.uid] = r.id

    return V31Facts(
        root=root,
        db=db,
        now=now,
        retention_days=RETENTION_DAYS,
        sessions=names,
        long_session=long_sid,
        compactions=w.compactions,
        rewound=tuple(undone),
        markers=markers,
        rotation=tuple(chain),
        live_order=live_order,
        total_messages=len(w.rows),
        prune_deleted=deleted,
        prune_kept=frozenset(w.sessions) - deleted,
        state_meta=meta,
        last_activity={sid: last_activity(sid) for sid in w.sessions},
        repeats=repeats,
    )


def compact_in_place(db: Path, sid: str, summary: str, at: float, keep: int = 2) -> None:
    """Hermes v31's in-place compaction of one session of a written file: the live rows
    go ``active=0, compacted=1``; at the first compaction the head (3 rows) is
    re-inserted before a standalone summary; the retained tail's originals go ``active=0,
    compacted=0`` and their copies (same uid and timestamp) are inserted live."""
    with closing(hs._connect(db)) as conn:
        conn.row_factory = sqlite3.Row
        cols = hs._columns(conn, "messages")
        conn.execute("BEGIN IMMEDIATE")
        live = [
            dict(r)
            for r in conn.execute(
                "SELECT * FROM messages WHERE session_id = ? AND active = 1 ORDER BY id", (sid,)
            )
        ]
        first = not conn.execute(
            "SELECT 1 FROM messages WHERE session_id = ? AND compacted = 1", (sid,)
        ).fetchone()
        head, tail = (live[:3] if first else []), live[-keep:]
        conn.execute(
            "UPDATE messages SET active = 0, compacted = 1 WHERE session_id = ? AND active = 1",
            (sid,),
        )
        conn.executemany(
            "UPDATE messages SET compacted = 0 WHERE id = ?", [(r["id"],) for r in tail]
        )

        def again(row: dict[str, Any]) -> None:
            copy = {k: v for k, v in row.items() if k != "id"}
            copy.update(active=1, compacted=0)
            conn.execute(*hs._insert("messages", copy, cols))

        for row in head:
            again(row)
        text = f"{SUMMARY_PREFIX}\n{SUMMARY_BOILERPLATE}\n{summary}"
        values = {"session_id": sid, "role": "user", "content": text, "timestamp": at}
        conn.execute(*hs._insert("messages", {**values, "active": 1, "compacted": 0}, cols))
        for row in tail:
            again(row)
        conn.execute("UPDATE sessions SET last_activity_at = ? WHERE id = ?", (at, sid))
        conn.execute("COMMIT")
