"""The demo home's staged memory writes: what Hermes leaves waiting with approvals on.

Written as Hermes's write-approval module writes them (one JSON record a file in
``pending/memory`` or ``pending/skills``, a temp file renamed into place), so a new user
sees the approvals inbox at work: a foreground add, the background review's replace of a
preference later conversations overturned (Python, then Go: demo/story.py's conversations)
in the newer record shape, its removal of a note that no longer holds, and a skill write.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from dashboard.demo.story import STACK_OLD_TEXT, stack_now

DAY = 86_400.0


def _records(anchor: float) -> list[tuple[str, dict[str, Any]]]:
    return [
        (
            "memory",
            _record(
                "mem-5f2c1a",
                "memory",
                "add",
                "foreground",
                anchor - 2 * DAY + 3_600,
                {
                    "action": "add",
                    "target": "user",
                    "content": "Has a standing 1:1 with her manager on Tuesdays at 10:00.",
                    "old_text": None,
                },
            ),
        ),
        (
            "memory",
            _record(
                "mem-8d41e0",
                "memory",
                "replace",
                "background_review",
                anchor - DAY + 7_200,
                {
                    "action": "replace",
                    "target": "user",
                    "content": stack_now(anchor),
                    "old_text": STACK_OLD_TEXT,
                },
                newer=True,
            ),
        ),
        (
            "memory",
            _record(
                "mem-a3b9d7",
                "memory",
                "remove",
                "background_review",
                anchor - DAY + 7_260,
                {
                    "action": "remove",
                    "target": "memory",
                    "content": None,
                    "old_text": "the flaky test is tests/test_routes.py",
                },
                newer=True,
            ),
        ),
        (
            "skills",
            _record(
                "skl-2e77c4",
                "skills",
                "create",
                "background_review",
                anchor - DAY + 7_300,
                {"name": "k3s-rollout", "content": "---\nname: k3s-rollout\n---\n"},
            ),
        ),
    ]


def _record(
    record_id: str,
    subsystem: str,
    action: str,
    origin: str,
    at: float,
    payload: dict[str, Any],
    *,
    newer: bool = False,
) -> dict[str, Any]:
    summary = payload.get("content") or payload.get("old_text") or payload.get("name") or ""
    record: dict[str, Any] = {
        "id": record_id,
        "subsystem": subsystem,
        "action": action,
        "summary": f"{action}: {str(summary)[:120]}",
        "origin": origin,
        "created_at": at,
        "payload": payload,
    }
    if newer:
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        record["payload_sha256"] = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
        record["state"] = "pending"
    return record


def write_pending(root: Path, anchor: float) -> int:
    """Stage the demo's writes under ``root``; how many."""
    records = _records(anchor)
    for subsystem, record in records:
        folder = root / "pending" / subsystem
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{record['id']}.tmp"
        tmp.write_text(json.dumps(record, ensure_ascii=False, indent=2), encoding="utf-8")
        os.replace(tmp, folder / f"{record['id']}.json")
    return len(records)
