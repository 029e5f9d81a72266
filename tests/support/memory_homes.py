"""Hermes homes whose transcripts hold ``memory`` tool calls in Hermes's own format.

An assistant row whose ``tool_calls`` is ``[{"id", "type": "function", "function":
{"name": "memory", "arguments": "<json string>"}}]``, then a ``tool`` row with that
``tool_call_id``, ``tool_name`` ``memory`` and the JSON result Hermes's memory tool
returns (``tools/memory_tool.py``: ``success``, ``staged``/``pending_id`` for a staged
write, ``error`` for a refusal). Built over :func:`hermes_shapes.build_current_views`;
nothing here imports Recall.

The default profile's calls: an add, a batch of three adds, a replace (Lisbon → Porto),
a remove of the cat entry and its add again, a failed add (``Name: Ada``, written by
hand later), an add to MEMORY.md and a staged one. ``Works night shifts`` has no call
(the background review). The ``work`` profile writes two of the same texts in its own
session: never the default profile's provenance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import hermes_shapes as shapes

S_FIRST = "20260801_090000_mem001"
S_SECOND = "20260802_100000_mem002"
S_THIRD = "20260803_110000_mem003"
S_WORK = "20260804_120000_work01"

USER_ENTRIES = (
    "Lives in Porto (moved from Lisbon)",
    "Writes mostly Python",
    "Prefers short answers",
    "Has a cat named Biscuit",
    "Name: Ada",
    "Works night shifts",
)
MEMORY_ENTRIES = ("Deploys go through staging first", "Project uses uv for packaging")
WORK_USER_ENTRIES = ("Works night shifts", "Prefers short answers")

#: The entries a successful (or staged) call wrote, by text: the call's id.
WRITTEN_BY = {
    "Lives in Porto (moved from Lisbon)": "call_porto",
    "Writes mostly Python": "call_batch",
    "Prefers short answers": "call_batch",
    "Has a cat named Biscuit": "call_cat_again",
    "Deploys go through staging first": "call_staging",
    "Project uses uv for packaging": "call_uv_staged",
}
NO_TRANSCRIPT = ("Name: Ada", "Works night shifts")


def _ok(target: str, message: str) -> str:
    return json.dumps(
        {
            "success": True,
            "done": True,
            "target": target,
            "usage": "12% — 160/1,375 chars",
            "entry_count": 3,
            "message": message,
            "note": "Write saved. This update is complete — do not repeat it.",
        },
        ensure_ascii=False,
    )


FAILED = json.dumps(
    {
        "success": False,
        "error": "Memory at 1,370/1,375 chars. Adding this entry (9 chars) would exceed the limit.",
        "current_entries": ["Lives in Lisbon"],
        "usage": "1,370/1,375",
    }
)
STAGED = json.dumps(
    {
        "success": True,
        "staged": True,
        "pending_id": "mem_20260803_uv",
        "message": "Staged for approval (/memory approve).",
    }
)


def memory_call(call_id: str, result: str, **arguments: Any) -> list[dict[str, Any]]:
    """An assistant row calling ``memory`` with ``arguments``, and the tool row of its
    ``result`` (rows for :func:`hermes_shapes.append_messages`)."""
    calls = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": "memory", "arguments": json.dumps(arguments)},
        }
    ]
    return [
        {"role": "assistant", "content": "", "tool_calls": json.dumps(calls)},
        {"role": "tool", "content": result, "tool_call_id": call_id, "tool_name": "memory"},
    ]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


@dataclass(frozen=True)
class MemoryHomeFacts:
    root: Path
    work: Path  # profiles/work
    said: dict[str, str] = field(default_factory=dict)  # call id -> the user's words before it


def _write_memories(home: Path, user_entries: tuple[str, ...], notes: tuple[str, ...]) -> None:
    memories = home / "memories"
    memories.mkdir(parents=True, exist_ok=True)
    (memories / "USER.md").write_text("\n§\n".join(user_entries), encoding="utf-8")
    (memories / "MEMORY.md").write_text("\n§\n".join(notes), encoding="utf-8")


def build_memory_home(root: Path) -> MemoryHomeFacts:
    """The default profile at ``root`` and ``profiles/work`` (see the module)."""
    db = shapes.build_current_views(root / "state.db")
    at = shapes._epoch(S_FIRST)
    shapes.start_session(db, S_FIRST, at, title="Getting to know you")
    lisbon = "Remember that I live in Lisbon, please."
    shapes.append_messages(
        db,
        S_FIRST,
        [
            user(lisbon),
            *memory_call(
                "call_lisbon",
                _ok("user", "Entry added."),
                action="add",
                target="user",
                content="Lives in Lisbon",
            ),
            said("Noted."),
        ],
        at + 10,
    )
    python = "I mostly write Python these days, keep answers short; my cat Biscuit says hi."
    shapes.append_messages(
        db,
        S_FIRST,
        [
            user(python),
            *memory_call(
                "call_batch",
                _ok("user", "Applied 3 operation(s)."),
                target="user",
                operations=[
                    {"action": "add", "content": "Writes mostly Python"},
                    {"action": "add", "content": "  Prefers short answers\n"},
                    {"action": "add", "content": "Has a cat named Biscuit"},
                ],
            ),
            said("Got it."),
        ],
        at + 60,
    )
    porto = "Actually I moved to Porto last month."
    shapes.append_messages(
        db,
        S_FIRST,
        [
            user(porto),
            *memory_call(
                "call_porto",
                _ok("user", "Entry replaced."),
                action="replace",
                target="user",
                old_text="Lisbon",
                content="Lives in Porto (moved from Lisbon)",
            ),
            said("Updated."),
        ],
        at + 120,
    )
    at2 = shapes._epoch(S_SECOND)
    shapes.start_session(db, S_SECOND, at2, title="Housekeeping")
    shapes.append_messages(
        db,
        S_SECOND,
        [
            user("Please forget about my cat."),
            *memory_call(
                "call_forget_cat",
                _ok("user", "Entry removed."),
                action="remove",
                target="user",
                old_text="cat named Biscuit",
            ),
            user("My name is Ada, by the way."),
            *memory_call(
                "call_ada_failed", FAILED, action="add", target="user", content="Name: Ada"
            ),
            said("My memory is full; I could not save your name."),
        ],
        at2 + 10,
    )
    at3 = shapes._epoch(S_THIRD)
    shapes.start_session(db, S_THIRD, at3, title="Deploy notes")
    cat_again = "Biscuit the cat is back in my life, remember him."
    staging = "We always deploy through staging first."
    uv = "The project uses uv for packaging now."
    shapes.append_messages(
        db,
        S_THIRD,
        [
            user(cat_again),
            *memory_call(
                "call_cat_again",
                _ok("user", "Entry added."),
                action="add",
                target="user",
                content="Has a cat named Biscuit",
            ),
            user(staging),
            *memory_call(
                "call_staging",
                _ok("memory", "Entry added."),
                action="add",
                target="memory",
                content="Deploys go through staging first",
            ),
            user(uv),
            *memory_call(
                "call_uv_staged",
                STAGED,
                action="add",
                target="memory",
                content="Project uses uv for packaging",
            ),
            said("Saved, pending your approval."),
        ],
        at3 + 10,
    )
    _write_memories(root, USER_ENTRIES, MEMORY_ENTRIES)

    work = root / "profiles" / "work"
    work_db = shapes.build_current_views(work / "state.db")
    at4 = shapes._epoch(S_WORK)
    shapes.start_session(work_db, S_WORK, at4, title="Work profile")
    shapes.append_messages(
        work_db,
        S_WORK,
        [
            user("I work night shifts and like short answers."),
            *memory_call(
                "call_work_batch",
                _ok("user", "Applied 2 operation(s)."),
                target="user",
                operations=[
                    {"action": "add", "content": "Works night shifts"},
                    {"action": "add", "content": "Prefers short answers"},
                ],
            ),
        ],
        at4 + 10,
    )
    _write_memories(work, WORK_USER_ENTRIES, ())
    return MemoryHomeFacts(
        root,
        work,
        {
            "call_porto": porto,
            "call_batch": python,
            "call_cat_again": cat_again,
            "call_staging": staging,
            "call_uv_staged": uv,
        },
    )
