"""Hermes's ``memory`` tool as a transcript records it: the call and its result.

A foreground memory write is an assistant message whose ``tool_calls`` (OpenAI format)
call :data:`MEMORY_TOOL` with ``{action, target, content, old_text}`` (add, replace,
remove; ``target`` ``memory`` or ``user``), or the batch form ``{target, operations:
[{action, content?, old_text?}, …]}``, followed by a ``tool`` row holding the result:
JSON with ``success`` true or false; a write staged for approval says ``"staged":
true, "pending_id": …`` (HERMES_FACTS, "Memory approvals"). Hermes strips ``content``
and ``old_text`` before it writes or matches; replace and remove match an entry by
the substring ``old_text``. The background review's writes leave no transcript.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dashboard.hermes.content import decode_content

MEMORY_TOOL = "memory"
ACTIONS = ("add", "replace", "remove")

# What a call's result says happened (read_result).
WRITTEN = "written"
STAGED = "staged"  # waiting in <home>/pending/memory/ for /memory approve
FAILED = "failed"
UNKNOWN = "unknown"  # no readable result


@dataclass(frozen=True)
class MemoryOp:
    """One operation of a memory call (a batch has several, ``index`` from 0)."""

    action: str
    target: str  # "memory" or "user": MemoryFileKind.key
    content: str  # stripped, as Hermes writes it ("" for remove)
    old_text: str  # stripped, as Hermes matches it ("" for add)
    index: int = 0
    batch: bool = False


def memory_ops(tool_calls: str | None, call_id: str | None) -> tuple[MemoryOp, ...]:
    """The operations of the memory call ``call_id`` in an assistant row's ``tool_calls``
    (the only memory call there when ``call_id`` is None or not found); () when none."""
    try:
        value = json.loads(tool_calls or "")
    except ValueError:
        return ()
    calls = value if isinstance(value, list) else [value]
    mine = [c for c in calls if isinstance(c, dict) and _name(c) == MEMORY_TOOL]
    chosen = [c for c in mine if call_id and c.get("id") == call_id]
    if not chosen and len(mine) == 1:
        chosen = mine
    return _ops(_arguments(chosen[0])) if chosen else ()


def _name(call: dict[str, Any]) -> str:
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    return str(function.get("name") or call.get("name") or "")


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    raw = function.get("arguments", call.get("arguments"))
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, dict) else {}


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _ops(arguments: dict[str, Any]) -> tuple[MemoryOp, ...]:
    target = _text(arguments.get("target")) or "memory"  # Hermes's default target
    operations = arguments.get("operations")
    if isinstance(operations, list) and operations:
        return tuple(
            MemoryOp(
                _text(op.get("action")),
                target,
                _text(op.get("content")),
                _text(op.get("old_text")),
                index=i,
                batch=True,
            )
            for i, op in enumerate(operations)
            if isinstance(op, dict) and _text(op.get("action")) in ACTIONS
        )
    action = _text(arguments.get("action"))
    if action not in ACTIONS:
        return ()
    content, old = _text(arguments.get("content")), _text(arguments.get("old_text"))
    return (MemoryOp(action, target, content, old),)


@dataclass(frozen=True)
class MemoryResult:
    """What a memory call's ``tool`` row says: :data:`WRITTEN`, :data:`STAGED`,
    :data:`FAILED` or :data:`UNKNOWN`, with Hermes's message or error."""

    status: str
    message: str = ""
    pending_id: str | None = None


def read_result(content: str | None) -> MemoryResult:
    """The outcome of a memory call from its tool row's content."""
    text = decode_content(content).strip()
    try:
        value = json.loads(text)
    except ValueError:
        return MemoryResult(UNKNOWN, text[:200])
    if not isinstance(value, dict) or not isinstance(value.get("success"), bool):
        return MemoryResult(UNKNOWN, text[:200])
    message = str(value.get("error") or value.get("message") or "")
    if not value["success"]:
        return MemoryResult(FAILED, message)
    if value.get("staged") is True:
        pending = value.get("pending_id")
        return MemoryResult(STAGED, message, str(pending) if pending else None)
    return MemoryResult(WRITTEN, message)
