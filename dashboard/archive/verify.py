"""``recall archive verify``: the archive against its source, and the archive's own health.

Every source session, message and usage row must be in the archive (found by its
source home and id) with equal content: the source side is read through the
importer's own adapter (what a sync would write), both sides are reduced to a
digest of the archived columns and compared. Rows only the archive holds (Hermes
pruned them) are counted, never a problem. Then ``PRAGMA integrity_check`` and both
FTS5 ``integrity-check`` commands on the archive. The source is opened read-only;
the FTS checks need a write transaction on the archive (they change nothing).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dashboard.archive.layout import detect_layout
from dashboard.archive.marks import source_key
from dashboard.archive.source import (
    MESSAGE_COLUMNS,
    SESSION_COLUMNS,
    USAGE_COLUMNS,
    SourceSession,
    adapter_for,
    usage_source_id,
)
from dashboard.errors import RecallError, StoreUnavailableError
from dashboard.hermes.home import HermesHome
from dashboard.store import schema
from dashboard.store.readonly import open_readonly, read_snapshot
from dashboard.store.writecore import WriteCore, is_lock_error

BATCH_SESSIONS = 200  # source sessions compared per round trip
SHOWN = 10  # ids listed per kind of problem (all are counted)
#: Message columns compared: the archive may give a row a fresh id when another home
#: took the source's, so the id itself is provenance (src_id), not content.
COMPARED_MESSAGE_COLUMNS = tuple(c for c in MESSAGE_COLUMNS if c != "id")
LOCK_TRIES = 3  # the FTS checks wait this many write-lock attempts, then say "locked"

ADVICE = {
    "missing": "no such file",
    "corrupt": "it is not a SQLite database, or it is damaged",
    "locked": "another program holds a lock on it; try again in a moment",
    "io": "the disk reported an I/O error",
    "readonly": "it cannot be opened by this user",
    "rollback": "an interrupted write left a hot journal; start Hermes once to roll it back",
}


class VerifyError(RecallError):
    """The archive or its source cannot be checked at all (missing, corrupt, locked)."""


@dataclass
class TableCheck:
    """One table's comparison: rows checked, the ids missing or differing (first few)."""

    checked: int = 0
    missing: list[str] = field(default_factory=list)
    differing: list[str] = field(default_factory=list)
    missing_count: int = 0
    differing_count: int = 0

    def note(self, kind: str, row_id: str) -> None:
        if kind == "missing":
            self.missing_count += 1
            if len(self.missing) < SHOWN:
                self.missing.append(row_id)
        else:
            self.differing_count += 1
            if len(self.differing) < SHOWN:
                self.differing.append(row_id)

    @property
    def ok(self) -> bool:
        return not (self.missing_count or self.differing_count)


@dataclass
class VerifyReport:
    """What verify found; ``ok`` when every row matches and every check passes."""

    source: str
    archive: str
    adapter: str
    tables: dict[str, TableCheck]
    integrity: dict[str, str]  # check -> "ok" or what it reported
    only_in_archive: dict[str, int]  # rows of this home the source no longer has

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tables.values()) and all(
            v == "ok" for v in self.integrity.values()
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "source": self.source,
            "archive": self.archive,
            "adapter": self.adapter,
            "tables": {k: v.__dict__ for k, v in self.tables.items()},
            "integrity": self.integrity,
            "only_in_archive": self.only_in_archive,
        }

    def lines(self) -> list[str]:
        """The short report ``recall archive verify`` prints."""
        out = [f"archive {self.archive}", f"source  {self.source} (layout {self.adapter})"]
        for name, t in self.tables.items():
            line = f"{name:<10}{t.checked:,} checked"
            if not t.ok:
                line += f", {t.missing_count:,} missing, {t.differing_count:,} differing"
            out.append(line + ("" if t.ok else "  PROBLEM"))
            if t.missing:
                out.append(f"          missing: {', '.join(t.missing)}")
            if t.differing:
                out.append(f"          differing: {', '.join(t.differing)}")
        kept = ", ".join(f"{n:,} {k}" for k, n in self.only_in_archive.items() if n)
        if kept:
            out.append(f"kept      only in the archive (gone from the source): {kept}")
        for check, result in self.integrity.items():
            out.append(f"{check:<22}{result}" + ("" if result == "ok" else "  PROBLEM"))
        out.append(
            "verified: the archive holds every source row"
            if self.ok
            else "problems found: `recall archive sync` copies what is missing"
        )
        return out


def verify_archive(
    home: HermesHome,
    archive: Path,
    *,
    profile: str | None = None,
    id_prefix: str = "",
    check_integrity: bool = True,
) -> VerifyReport:
    """Compare ``archive`` with ``home``'s state.db and check the archive's indexes.

    ``profile`` and ``id_prefix`` are the home's profile (:class:`profiles.Profile`): the
    source is read as a sync archives it, a non-primary profile's ids prefixed.
    ``check_integrity=False`` leaves out the archive's own checks (one file for every
    profile: checked once, not once per profile).
    """
    if not archive.is_file():
        raise VerifyError(f"no archive at {archive}: `recall archive sync` makes it")
    source = _open(home.state_db, "source")
    try:
        conn = _open(archive, "archive")
    except BaseException:
        source.close()
        raise
    key = source_key(home.root)
    try:
        try:
            layout = detect_layout(source, home.state_db)
            adapter = adapter_for(source, layout, home.root, profile=profile, id_prefix=id_prefix)
            with read_snapshot(source), read_snapshot(conn):
                ids = [sid for _, sid in adapter.session_keys()]
                tables = {"sessions": TableCheck(), "messages": TableCheck(), "usage": TableCheck()}
                counts = {"sessions": 0, "messages": 0, "usage": 0}
                for start in range(0, len(ids), BATCH_SESSIONS):
                    batch = adapter.read(ids[start : start + BATCH_SESSIONS])
                    for name, n in _compare(conn, key, batch, tables).items():
                        counts[name] += n
                only = _only_in_archive(conn, key, counts)
        except sqlite3.DatabaseError as exc:
            raise _unavailable(exc, "source or archive") from exc
    finally:
        source.close()
        conn.close()
    integrity = _integrity(archive) if check_integrity else {}
    return VerifyReport(str(home.state_db), str(archive), adapter.name, tables, integrity, only)


# -- comparing rows -----------------------------------------------------------------------


def _compare(
    conn: sqlite3.Connection,
    key: str,
    batch: Sequence[SourceSession],
    tables: dict[str, TableCheck],
) -> dict[str, int]:
    """Compare one batch; return how many archive rows of each table matched a source row."""
    ids = json.dumps([s.row["id"] for s in batch])
    sessions = {
        r[0]: _digest(r[1:])
        for r in conn.execute(
            f"SELECT s.id, {', '.join('s.' + c for c in SESSION_COLUMNS)} FROM sessions s "
            "JOIN json_each(?) j ON s.id = j.value WHERE s.src_home = ?",
            (ids, key),
        )
    }
    wanted = json.dumps([str(m["id"]) for s in batch for m in s.messages])
    # CROSS JOIN keeps json_each outside: one index seek per id (prune_radar says why).
    messages = {
        r[0]: _digest(r[1:])
        for r in conn.execute(
            f"SELECT m.src_id, {', '.join('m.' + c for c in COMPARED_MESSAGE_COLUMNS)} "
            "FROM json_each(?) j CROSS JOIN messages m ON m.src_home = ? AND m.src_id = j.value",
            (wanted, key),
        )
    }
    usage = {
        r[0]: _digest(r[1:])
        for r in conn.execute(
            f"SELECT u.src_id, {', '.join('u.' + c for c in USAGE_COLUMNS)} "
            "FROM session_model_usage u JOIN json_each(?) j ON u.session_id = j.value "
            "WHERE u.src_home = ?",
            (ids, key),
        )
    }
    for s in batch:
        _check(
            tables["sessions"], s.row["id"], _digest(s.row[c] for c in SESSION_COLUMNS), sessions
        )
        for m in s.messages:
            _check(
                tables["messages"],
                str(m["id"]),
                _digest(m[c] for c in COMPARED_MESSAGE_COLUMNS),
                messages,
            )
        for u in s.usage:
            _check(tables["usage"], usage_source_id(u), _digest(u[c] for c in USAGE_COLUMNS), usage)
    return {"sessions": len(sessions), "messages": len(messages), "usage": len(usage)}


def _check(table: TableCheck, row_id: str, digest: str, archived: dict[str, str]) -> None:
    table.checked += 1
    found = archived.get(row_id)
    if found is None:
        table.note("missing", row_id)
    elif found != digest:
        table.note("differing", row_id)


def _digest(values: Iterable[Any]) -> str:
    """One row's content as a digest; 3 and 3.0 are the same number (REAL affinity)."""
    normal = [
        float(v) if isinstance(v, int | float) and not isinstance(v, bool) else v for v in values
    ]
    return hashlib.sha256(repr(normal).encode("utf-8", "surrogatepass")).hexdigest()


def _only_in_archive(conn: sqlite3.Connection, key: str, matched: dict[str, int]) -> dict[str, int]:
    """Rows of this home the archive holds beyond those the source still has."""
    totals = {
        name: conn.execute(f"SELECT count(*) FROM {table} WHERE src_home = ?", (key,)).fetchone()[0]
        for name, table in (
            ("sessions", "sessions"),
            ("messages", "messages"),
            ("usage", "session_model_usage"),
        )
    }
    return {name: max(0, totals[name] - matched.get(name, 0)) for name in totals}


# -- the archive's own health -------------------------------------------------------------


def _integrity(archive: Path) -> dict[str, str]:
    """``PRAGMA integrity_check`` and both FTS5 ``integrity-check`` commands."""
    try:
        core = WriteCore(archive, wal=False, max_tries=LOCK_TRIES)
    except sqlite3.DatabaseError as exc:
        raise _unavailable(exc, "archive", archive) from exc
    results: dict[str, str] = {}

    def check(conn: sqlite3.Connection) -> None:
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        results["integrity_check"] = "ok" if rows == ["ok"] else "; ".join(rows[:5])
        pending = conn.execute(
            "SELECT 1 FROM state_meta WHERE key=? AND value='1'", (schema.TRIGRAM_PENDING_KEY,)
        ).fetchone()
        for table in schema.FTS_TABLES:
            if pending and table.endswith("_trigram"):
                results[table] = (
                    "not built yet: the first import has not finished "
                    "(`recall archive sync` finishes it)"
                )
                continue
            try:
                # rank=1: also against the content the index was built from (messages).
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
                results[table] = "ok"
            except sqlite3.DatabaseError as exc:
                if is_lock_error(exc):
                    raise
                results[table] = f"damaged ({exc})"

    try:
        core.write(check)
    except sqlite3.DatabaseError as exc:
        raise _unavailable(exc, "archive", archive) from exc
    finally:
        core.close()
    return results


# -- errors -------------------------------------------------------------------------------


def _open(path: Path, which: str) -> sqlite3.Connection:
    try:
        return open_readonly(path)
    except StoreUnavailableError as exc:
        raise VerifyError(_words(which, path, exc.reason)) from exc


def _unavailable(exc: sqlite3.DatabaseError, which: str, path: Path | None = None) -> VerifyError:
    reason = "locked" if is_lock_error(exc) else "corrupt"
    return VerifyError(_words(which, path, reason, str(exc)))


def _words(which: str, path: Path | None, reason: str, detail: str = "") -> str:
    where = f" {path}" if path else ""
    extra = f" ({detail[:200]})" if detail else ""
    return f"cannot verify: the {which}{where} is {reason}: {ADVICE.get(reason, reason)}{extra}"
