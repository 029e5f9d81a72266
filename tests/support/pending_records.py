"""Hermes's staged memory writes, written as its write-approval module writes them.

One JSON record a file in ``<home>/pending/{memory,skills}/<id>.json``, atomically
(temp file + rename), in every shape met so far (HERMES_FACTS, "Memory approvals"):
the baseline fields; the newer ``payload_sha256`` and ``state``; a ``_write_guard``; a
``.claimed`` claim file; third-party providers' extra fields; skills.

:func:`hermes_apply` applies a payload by the documented rules, written apart from
Recall's ``memory/pending_apply`` (a class holding entries, as Hermes's store does), so a
test can compare the bytes Recall writes with the bytes these rules give.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

DELIMITER = "\n§\n"
T0 = 1_790_000_000.0
USER = ["Lives in Lisbon", "Prefers Python for scripts", "Works at a bank"]  # a USER.md
USER_LIMIT = 1375  # Hermes's default USER.md limit (no config.yaml)


def stage(
    home: Path,
    record_id: str,
    action: str,
    target: str = "user",
    *,
    content: str | None = None,
    old_text: str | None = None,
    operations: list[dict[str, Any]] | None = None,
    origin: str = "foreground",
    created_at: float = T0,
    newer: bool = False,
    state: str | None = None,
    guard: bool = False,
    claimed: bool = False,
    extra: dict[str, Any] | None = None,
    subsystem: str = "memory",
) -> Path:
    """Write one record; returns its path."""
    payload: dict[str, Any] = {"action": action, "target": target}
    if operations is not None:
        payload["operations"] = operations
    else:
        payload["content"] = content
        payload["old_text"] = old_text
    if guard:
        payload["_write_guard"] = {"sha256": "0" * 64, "mtime": created_at}
    label = "user profile" if target == "user" else "memory"
    record: dict[str, Any] = {
        "id": record_id,
        "subsystem": subsystem,
        "action": action,
        "summary": f"{action} in {label}: {(content or old_text or '')[:120]}",
        "origin": origin,
        "created_at": created_at,
        "payload": payload,
    }
    if newer:
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        record["payload_sha256"] = hashlib.sha256(canonical.encode()).hexdigest()
        record["state"] = "pending"
    if state is not None:
        record["state"] = state
        if state == "applying":
            record["applying_started_at"] = created_at + 5
    record.update(extra or {})
    folder = home / "pending" / subsystem
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{record_id}.json"
    tmp = folder / f".{record_id}.tmp"
    tmp.write_text(json.dumps(record, ensure_ascii=False, indent=2), encoding="utf-8")
    os.replace(tmp, path)
    if claimed:
        (folder / f"{record_id}.claimed").write_text("pid 4242\n")
    return path


def write_memory(home: Path, name: str, entries: list[str]) -> Path:
    """``home/memories/<name>`` as Hermes writes it: entries joined, no newline after."""
    path = home / "memories" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(DELIMITER.join(entries), encoding="utf-8")
    return path


class HermesStore:
    """The documented rules of Hermes's memory store, for one file (see module)."""

    def __init__(self, text: str, limit: int) -> None:
        raw = [part.strip() for part in text.split(DELIMITER)] if text.strip() else []
        self.entries: list[str] = []
        for part in raw:
            if part and part not in self.entries:
                self.entries.append(part)
        self.limit = limit
        self.original = text

    def text(self) -> str:
        return DELIMITER.join(self.entries) if self.entries else ""

    def round_trips(self) -> bool:
        parts = [p.strip() for p in self.original.split(DELIMITER) if p.strip()]
        return self.original.strip() == DELIMITER.join(parts) and all(
            len(p) <= self.limit for p in parts
        )

    def apply(self, op: dict[str, Any], *, check_total: bool = True) -> bool:
        action = op.get("action")
        content = (op.get("content") or "").strip()
        old = (op.get("old_text") or "").strip()
        if action == "add":
            if not content:
                return False
            if content in self.entries:
                return True
            candidate = [*self.entries, content]
        elif action in ("replace", "remove"):
            if not old or (action == "replace" and not content):
                return False
            hits = [i for i, e in enumerate(self.entries) if old in e]
            if not hits or len({self.entries[i] for i in hits}) > 1:
                return False
            candidate = list(self.entries)
            if action == "replace":
                candidate[hits[0]] = content
            else:
                del candidate[hits[0]]
        else:
            return False
        if check_total and len(DELIMITER.join(candidate)) > self.limit:
            return False
        self.entries = candidate
        return True


def hermes_apply(text: str, payload: dict[str, Any], limit: int) -> str | None:
    """The file's text after Hermes applies ``payload``; None when it refuses."""
    store = HermesStore(text, limit)
    if payload.get("action") != "add" and not store.round_trips():
        return None
    if payload.get("action") == "batch":
        for op in payload.get("operations") or []:
            if not store.apply(op, check_total=False):
                return None
        return store.text() if len(store.text()) <= limit else None
    if payload.get("action") == "add" and (payload.get("content") or "").strip() in store.entries:
        return text  # "Entry already exists": Hermes writes nothing
    return store.text() if store.apply(payload) else None


def record_digest(home: Path, record_id: str) -> str:
    """The sha256 of a staged memory record's bytes: the digest a decision names."""
    path = home / "pending" / "memory" / f"{record_id}.json"
    return hashlib.sha256(path.read_bytes()).hexdigest()
