"""A Hermes source as the archive reads it: one adapter per layout, the column lists,
and the digests and sums that tell whether a row changed."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dashboard.archive.layout import Layout
from dashboard.costs.rules import read_cost
from dashboard.hermes import conventions
from dashboard.hermes.profiles import ArchiveIds
from dashboard.store.readonly import read_snapshot
from dashboard.store.schema import DERIVED_USAGE_PREFIX

SOURCE_SCHEMA = "hermes_source"  # the source's name while attached to the archive


#: Archive columns copied from a source row when the source has them.
SESSION_COLUMNS = (
    "id",
    "source",
    "user_id",
    "model",
    "model_config",
    "system_prompt",
    "parent_session_id",
    "started_at",
    "ended_at",
    "end_reason",
    "message_count",
    "tool_call_count",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "billing_provider",
    "billing_base_url",
    "billing_mode",
    "estimated_cost_usd",
    "actual_cost_usd",
    "cost_status",
    "cost_source",
    "pricing_version",
    "title",
    "last_activity_at",
    "api_call_count",
    "archived",
    "pinned",
    "hidden",
    "title_source",
    "cwd",
    "git_branch",
    "profile",
)


MESSAGE_COLUMNS = (
    "id",
    "session_id",
    "role",
    "content",
    "tool_call_id",
    "tool_calls",
    "tool_name",
    "timestamp",
    "token_count",
    "finish_reason",
    "reasoning",
    "reasoning_content",
    "reasoning_details",
    "codex_reasoning_items",
    "codex_message_items",
    "active",
    "compacted",
    "display_kind",
    "message_uid",
    "compressed_summary",
)

#: Archive message columns named otherwise in a source (schema 31's leading underscore).
MESSAGE_SOURCE_NAMES = {"compressed_summary": "_compressed_summary"}
#: What an archive message column holds when its source lacks it (beyond the flags').
MESSAGE_COLUMN_DEFAULTS: dict[str, Any] = {
    **conventions.MESSAGE_DEFAULTS,
    "message_uid": None,
    "compressed_summary": 0,
}


USAGE_COLUMNS = (
    "session_id",
    "model",
    "billing_provider",
    "billing_base_url",
    "billing_mode",
    "task",
    "api_call_count",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "estimated_cost_usd",
    "actual_cost_usd",
    "cost_status",
    "cost_source",
    "pricing_version",
    "first_seen",
    "last_seen",
)


USAGE_KEY = USAGE_COLUMNS[:6]


PROVENANCE = ("src_home", "src_id", "archive_first_seen")


#: What a message is, for telling one message from another that took its id in a
#: replaced file (see follow.py): not its content, which may be edited in place.
IDENTITY_COLUMNS = ("session_id", "role", "timestamp")


FLAG_COLUMNS = ("id", *IDENTITY_COLUMNS, "active", "compacted", "display_kind")


@dataclass
class SourceSession:
    """One session as read from the source: its row, its messages, its usage rows."""

    row: dict[str, Any]
    messages: list[dict[str, Any]]
    usage: list[dict[str, Any]]


class Adapter:
    """Reads one layout of ``state.db``; subclasses say how their layout differs.

    The base reads what every layout shares: ``sessions`` and ``messages`` as
    tables, with the columns the file has (a read-only opener sees only those).
    A column the file lacks takes the value the conventions give it.
    """

    name = "base"

    def __init__(
        self,
        conn: sqlite3.Connection,
        layout: Layout,
        home_root: Path,
        *,
        profile: str | None = None,
        id_prefix: str = "",
    ) -> None:
        self.conn = conn
        self.layout = layout
        # The profile every row of this source is archived under (profiles.py names
        # them; the folder's own name when the caller does not).
        self.profile = profile or conventions.profile_of(home_root)
        # How this source's session ids are named in the archive (profiles.ArchiveIds:
        # ``id_prefix`` "" for the first home's root). Every session id this adapter
        # returns is the archive's; every one it is given is too: the source's own ids
        # never leave it.
        self.ids = ArchiveIds.of(self.profile, id_prefix)

    def archive_sql(self, expr: str) -> str:
        """SQL naming the archive's id of the source's session id ``expr``."""
        return self.ids.sql(expr)

    def source_ids(self, ids: Iterable[str]) -> list[str]:
        """The source's own ids of archive session ids (this profile's)."""
        return [self.ids.source_id(str(i)) for i in ids]

    def archive_id(self, source_id: str) -> str:
        return self.ids.archive_id(source_id)

    def session_keys(self) -> list[tuple[float, str]]:
        """Every session's ``(started_at, id)``, newest first (by the archive's id: a
        resumed import compares these keys with its watermark)."""
        rows = self.conn.execute(
            f"SELECT started_at, {self.archive_sql('id')} AS aid FROM sessions"
            " ORDER BY started_at DESC, aid DESC"
        )
        return [(float(r[0]), str(r[1])) for r in rows]

    def read(self, ids: Sequence[str], *, messages: bool = True) -> list[SourceSession]:
        """The sessions ``ids`` with their usage (and messages), from one snapshot.

        Each row also carries ``_digest``, the text :func:`row_digest` hashes.
        """
        marks = ",".join("?" for _ in ids)
        own = tuple(self.source_ids(ids))
        with read_snapshot(self.conn):
            sessions = [
                dict(r)
                for r in self.conn.execute(
                    f"SELECT {self._session_select()}, {self.digest_sql()} AS _digest,"
                    f" s.id AS _src_id FROM sessions s WHERE s.id IN ({marks})",
                    own,
                )
            ]
            found: dict[str, list[dict[str, Any]]] = {sid: [] for sid in ids}
            if messages:
                for m in self.messages_where(f"m.session_id IN ({marks})", own):
                    found[m["session_id"]].append(m)
            # A file without last_activity_at: the session's newest message says it.
            latest: dict[str, float] = {}
            if "last_activity_at" not in self.layout.session_columns:
                latest = {
                    self.archive_id(r[0]): r[1]
                    for r in self.conn.execute(
                        f"SELECT session_id, max(timestamp) FROM messages"
                        f" WHERE session_id IN ({marks}) GROUP BY session_id",
                        own,
                    )
                }
            usage = self.usage(ids, sessions) if sessions else {}
        out = []
        for s in sessions:
            if s.get("last_activity_at") is None:
                s["last_activity_at"] = latest.get(s["id"]) or s["started_at"]
            # The folder says which profile a row is, not a column a copied file carries.
            s["profile"] = self.profile
            out.append(SourceSession(s, found.get(s["id"], []), usage.get(s["id"], [])))
        return out

    # -- what a later sync asks (dashboard/repository/follow.py) ------------------------

    def file_marks(self) -> dict[str, Any]:
        """What tells this copy of the file from another: ``seq``, the messages' id
        high-water (``sqlite_sequence``: AUTOINCREMENT never hands an id out twice in
        one file, so it going down means an older copy), and ``store``, the
        ``store_instance_id`` and ``db_file_generation`` a v31 home keeps in
        ``state_meta``. None (or absent keys) where the file lacks them."""
        seq = None
        if "sqlite_sequence" in self.layout.tables:
            row = self.conn.execute(
                "SELECT seq FROM sqlite_sequence WHERE name='messages'"
            ).fetchone()
            seq = int(row[0]) if row and row[0] is not None else None
        store: dict[str, str] = {}
        if "state_meta" in self.layout.tables:
            store = {
                str(k): str(v)
                for k, v in self.conn.execute(
                    "SELECT key, value FROM state_meta"
                    " WHERE key IN ('store_instance_id', 'db_file_generation')"
                )
            }
        return {"seq": seq, "store": store}

    def messages_where(
        self, where: str, params: tuple[Any, ...], columns: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """Messages (``columns``, default every copied one) matching ``where``, by id."""
        select = self._select("messages", columns or MESSAGE_COLUMNS, MESSAGE_COLUMN_DEFAULTS)
        return [
            dict(r)
            for r in self.conn.execute(
                f"SELECT {select} FROM messages m WHERE {where} ORDER BY m.id", params
            )
        ]

    def messages_select(self, schema: str) -> str:
        """A SELECT of every copied message column (``m``) from ``schema``'s ``messages``:
        the first import's ``INSERT … SELECT`` from the attached source."""
        select = self._select("messages", MESSAGE_COLUMNS, MESSAGE_COLUMN_DEFAULTS)
        return f"SELECT {select} FROM {schema}.messages m"

    def digest_sql(self) -> str:
        """Every column of the source's session row as one text (``s`` the alias).

        Every column, not only those the archive copies: Hermes bumps some (say
        ``rewind_count``) when it changes a session's messages. Formatting a REAL
        as text is the slow part of reading 20k rows this way (3-5x the rest), so
        REAL columns count in micro-units as integers (a cost to $0.000001, a time
        to the microsecond); the system prompt counts by its length (it is large
        and written once).
        """
        parts = []
        for name, declared in sorted(self._session_types().items()):
            col = f's."{name}"'
            if name == "system_prompt":
                parts.append(f"coalesce(length({col}), -1)")
            elif "REAL" in declared or "FLOA" in declared or "DOUB" in declared:
                parts.append(f"coalesce(CAST(round({col} * 1000000) AS INTEGER), 'n')")
            else:  # text and integers concatenate as they are; NULL is char(1)
                parts.append(f"coalesce({col}, char(1))")
        return " || '|' || ".join(parts)

    def _session_types(self) -> dict[str, str]:
        """The sessions table's columns and their declared types (upper case)."""
        if not hasattr(self, "_types"):
            self._types = {
                str(r[1]): str(r[2] or "").upper()
                for r in self.conn.execute("PRAGMA table_info(sessions)")
            }
        return self._types

    def session_digests(self) -> dict[str, str]:
        """Every source session's id and :func:`row_digest`."""
        rows = self.conn.execute(f"SELECT s.id, {self.digest_sql()} FROM sessions s")
        return {self.archive_id(str(r[0])): row_digest(r[1]) for r in rows}

    def message_sums_sql(self, alias: str = "m", id_sql: str = "m.id") -> str:
        """Per-session sums over messages that change when any row is added, lost,
        re-flagged or rewritten (:data:`MESSAGE_SUMS`), as a SELECT list."""
        have = self.layout.message_columns

        def col(c: str) -> str:
            if c in have:
                return f"{alias}.{c}"
            return _literal(conventions.MESSAGE_DEFAULTS.get(c))

        return message_sums_select(col, id_sql)

    def message_sums(self) -> dict[str, tuple[Any, ...]]:
        """:meth:`message_sums_sql` for every source session."""
        add_checksum(self.conn)
        rows = self.conn.execute(
            f"SELECT m.session_id, {self.message_sums_sql()} FROM messages m GROUP BY m.session_id"
        )
        return {self.archive_id(str(r[0])): tuple(r[1:]) for r in rows}

    def usage_sums(self) -> dict[str, frozenset[tuple[Any, ...]]]:
        """Every session's usage rows as a comparable set (this layout: none of its own;
        each derived row follows its session row, which the digests compare)."""
        return {}

    def usage(
        self, ids: Sequence[str], sessions: list[dict[str, Any]]
    ) -> dict[str, list[dict[str, Any]]]:
        """Usage rows per session: this layout has none, so each comes from its session row."""
        out: dict[str, list[dict[str, Any]]] = {}
        for s in sessions:
            row = derived_usage_row(s)
            if row is not None:
                out[s["id"]] = [{"session_id": s["id"], **row, "_derived": True}]
        return out

    # -- column mapping ---------------------------------------------------------------

    def _source_columns(self, table: str) -> frozenset[str]:
        if table == "sessions":
            return self.layout.session_columns
        if table == "messages":
            return self.layout.message_columns
        return frozenset(r[1] for r in self.conn.execute(f"PRAGMA table_info({table})"))

    def _select(self, table: str, columns: Sequence[str], defaults: dict[str, Any]) -> str:
        """``alias.col`` for columns the file has, the convention's default (or NULL) else."""
        have = self._source_columns(table)
        alias = table[0]

        renamed = MESSAGE_SOURCE_NAMES if table == "messages" else {}

        def one(c: str) -> str:
            if renamed.get(c) in have:
                return f'{alias}."{renamed[c]}" AS {c}'
            if c not in have:
                return f"{_literal(defaults.get(c))} AS {c}"
            if c == "session_id":
                return f"{self.archive_sql(f'{alias}.{c}')} AS {c}"
            return f"{alias}.{c}"

        return ", ".join(one(c) for c in columns)

    def _session_select(self) -> str:
        have = self.layout.session_columns
        mapped = {"profile": "profile_name"} if "profile_name" in have else {}
        parts = []
        for c in SESSION_COLUMNS:
            if c in ("id", "parent_session_id") and c in have:
                parts.append(f"{self.archive_sql(f's.{c}')} AS {c}")
            elif c in mapped:
                parts.append(f"s.{mapped[c]} AS {c}")
            elif c == "system_prompt":
                parts.append(f"{self._system_prompt()} AS system_prompt")
            elif c in have:
                parts.append(f"s.{c}")
            else:
                parts.append(f"{_literal(conventions.SESSION_DEFAULTS.get(c))} AS {c}")
        return ", ".join(parts)

    def _system_prompt(self) -> str:
        return "s.system_prompt" if "system_prompt" in self.layout.session_columns else "NULL"


class SeedAdapter(Adapter):
    """Seed and older forms (inline or external FTS, any journal mode): no usage table."""

    name = "seed"


class CurrentAdapter(Adapter):
    """Today's Hermes (FTS through views): usage rows, prompts by hash, profile names."""

    name = "current"

    def _system_prompt(self) -> str:
        cols = self.layout.session_columns
        inline = "s.system_prompt" if "system_prompt" in cols else "NULL"
        if "system_prompt_hash" not in cols or "system_prompts" not in self.layout.tables:
            return inline
        # Hermes stores each prompt once and points to it by content hash.
        return (
            f"coalesce({inline}, (SELECT p.prompt FROM system_prompts p "
            "WHERE p.hash = s.system_prompt_hash))"
        )

    def usage_sums(self) -> dict[str, frozenset[tuple[Any, ...]]]:
        select = self._select("session_model_usage", USAGE_COLUMNS, {})
        return usage_sets(self.conn.execute(f"SELECT {select} FROM session_model_usage s"))

    def usage(
        self, ids: Sequence[str], sessions: list[dict[str, Any]]
    ) -> dict[str, list[dict[str, Any]]]:
        marks = ",".join("?" for _ in ids)
        select = self._select("session_model_usage", USAGE_COLUMNS, {})
        out: dict[str, list[dict[str, Any]]] = {}
        for r in self.conn.execute(
            f"SELECT {select} FROM session_model_usage s WHERE s.session_id IN ({marks}) "
            "ORDER BY s.rowid",
            tuple(self.source_ids(ids)),
        ):
            out.setdefault(r["session_id"], []).append(dict(r))
        return out


class RecallStoreAdapter(CurrentAdapter):
    """Recall's own store (the demo home, an agent embedding Recall): usage rows, inline prompts."""

    name = "recall-store"


def adapter_for(
    conn: sqlite3.Connection,
    layout: Layout,
    home_root: Path,
    *,
    profile: str | None = None,
    id_prefix: str = "",
) -> Adapter:
    """The adapter reading ``layout`` (``profile``, ``id_prefix``: see :class:`Adapter`)."""
    kind: type[Adapter] = SeedAdapter
    if layout.is_recall_store:
        kind = RecallStoreAdapter
    elif layout.has_model_usage:
        kind = CurrentAdapter
    return kind(conn, layout, home_root, profile=profile, id_prefix=id_prefix)


def usage_source_id(usage: dict[str, Any]) -> str:
    """A usage row's id in its source: its key, or the session row it was derived from."""
    if usage.get("_derived"):
        return f"{DERIVED_USAGE_PREFIX}{usage['session_id']}"
    return json.dumps([usage[c] for c in USAGE_KEY], ensure_ascii=False)


def _literal(value: Any) -> str:
    """A SQL literal for a convention's default (ints and None only)."""
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(int(value))
    raise TypeError(f"no literal for {value!r}")


def row_digest(text: str | None) -> str:
    """The compact digest of a session row's :meth:`Adapter.digest_sql` text."""
    return hashlib.blake2b((text or "").encode(), digest_size=12).hexdigest()


CHECKSUM = "recall_crc32"


def add_checksum(conn: sqlite3.Connection) -> None:
    """Give ``conn`` :data:`CHECKSUM`, the CRC-32 of a value's text (0 for NULL), which
    :func:`message_sums_select` sums. A function is per connection: no write, and a
    read-only source connection may have one."""
    conn.create_function(CHECKSUM, 1, _crc32, deterministic=True)


def _crc32(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, bytes):
        return zlib.crc32(value)
    return zlib.crc32(str(value).encode("utf-8", "surrogatepass"))


def message_sums_select(col: Callable[[str], str], id_sql: str) -> str:
    """The per-session sums :meth:`Adapter.message_sums` compares, ``col(name)`` naming
    a column (the archive names its own, a source file its own or a default). The
    connection needs :func:`add_checksum`: lengths alone miss an edit that keeps them."""
    lengths = ("content", "tool_calls", "tool_name", "tool_call_id", "reasoning", "display_kind")
    return ", ".join(
        (
            "count(*)",
            f"sum({id_sql})",
            f"sum({CHECKSUM}({col('content')}))",
            f"sum({CHECKSUM}({col('tool_calls')}))",
            # Milliseconds as integers: a float sum depends on the order it is added in.
            f"sum(CAST(round({col('timestamp')} * 1000) AS INTEGER))",
            *(f"total(length({col(c)}))" for c in lengths),
            f"sum({col('active')})",
            f"sum({col('compacted')})",
            f"total({col('token_count')})",
        )
    )


def usage_sets(rows: Iterable[sqlite3.Row]) -> dict[str, frozenset[tuple[Any, ...]]]:
    """Usage rows (``USAGE_COLUMNS`` first) grouped by session as sets of their values."""
    out: dict[str, set[tuple[Any, ...]]] = {}
    for r in rows:
        out.setdefault(str(r[0]), set()).add(tuple(r[c] for c in USAGE_COLUMNS))
    return {sid: frozenset(v) for sid, v in out.items()}


def derived_usage_row(session: dict[str, Any]) -> dict[str, Any] | None:
    """The one usage row a file without ``session_model_usage`` implies for a session.

    Older Hermes summed a session's calls on its row; the row stands for task ``""``
    (the main loop) of the session's model. None when the session spent no tokens
    and carries no cost (nothing was recorded).
    """
    tokens = [session.get(c) or 0 for c in conventions.USAGE_COLUMNS_ON_SESSIONS[:5]]
    est, act = session.get("estimated_cost_usd"), session.get("actual_cost_usd")
    if not any(tokens) and est is None and act is None:
        return None
    status = session.get("cost_status")
    if read_cost(status, est, act, usage=False).status == "partial":
        # A session row sums all its calls: a bill beside an estimate is partly
        # billed. A usage row says that as "estimated" with a bill (costs.rules).
        status = "estimated"
    return {
        "model": session.get("model") or "",
        "billing_provider": session.get("billing_provider") or "",
        "billing_base_url": session.get("billing_base_url") or "",
        "billing_mode": session.get("billing_mode") or "",
        "task": "",
        "api_call_count": session.get("api_call_count") or 0,
        **dict(zip(conventions.USAGE_COLUMNS_ON_SESSIONS[:5], tokens, strict=True)),
        "estimated_cost_usd": est,
        "actual_cost_usd": act,
        "cost_status": status,
        "cost_source": session.get("cost_source"),
        "pricing_version": session.get("pricing_version"),
        "first_seen": session.get("started_at"),
        "last_seen": session.get("last_activity_at")
        or session.get("ended_at")
        or session.get("started_at"),
    }
