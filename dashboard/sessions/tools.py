"""Tool calls and tool results as a transcript shows them: parsed, pretty-printed, and
cut to one line for the collapsed view."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dashboard.text import clip_line

_OUTPUT_KEYS = ("output", "content", "result", "stdout", "text", "error", "stderr")


@dataclass(frozen=True)
class ToolCall:
    """One OpenAI-format function call; ``malformed`` when the stored JSON was not."""

    id: str | None
    name: str
    arguments: str  # pretty-printed JSON, or the stored text when it is not JSON
    preview: str = ""  # one line, for the collapsed view
    malformed: bool = False


@dataclass(frozen=True)
class ToolOutput:
    """A tool result split into its readable body and a few short facts (exit code...)."""

    body: str
    facts: tuple[tuple[str, str], ...] = ()


def format_tool_output(text: str) -> ToolOutput:
    """Unwrap a JSON tool result (``{"output": ..., "exit_code": 0}``) for reading."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return ToolOutput(text.rstrip("\n"))
    try:
        value = json.loads(stripped)
    except ValueError:
        return ToolOutput(text.rstrip("\n"))
    if isinstance(value, dict):
        key = next((k for k in _OUTPUT_KEYS if isinstance(value.get(k), str)), None)
        rest = {k: v for k, v in value.items() if k != key}
        if key is not None and all(_is_scalar(v) for v in rest.values()):
            facts = tuple((k, v if isinstance(v, str) else json.dumps(v)) for k, v in rest.items())
            return ToolOutput(value[key].rstrip("\n"), facts)
        if all(_is_scalar(v) for v in value.values()) and len(value) <= 6:
            facts = tuple((k, v if isinstance(v, str) else json.dumps(v)) for k, v in value.items())
            return ToolOutput("", facts)
    return ToolOutput(json.dumps(value, indent=2, ensure_ascii=False))


def parse_tool_calls(raw: str | None) -> tuple[ToolCall, ...]:
    """OpenAI-format ``tool_calls`` JSON as :class:`ToolCall` s; malformed text is kept."""
    if not raw or not raw.strip():
        return ()
    try:
        value = json.loads(raw)
    except ValueError:
        return (ToolCall(None, "", raw, clip_line(raw, 80), malformed=True),)
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return (ToolCall(None, "", raw, clip_line(raw, 80), malformed=True),)
    return tuple(_tool_call(item) for item in value)


def _tool_call(item: Any) -> ToolCall:
    if not isinstance(item, dict):
        text = json.dumps(item, ensure_ascii=False)
        return ToolCall(None, "", text, clip_line(text, 80), malformed=True)
    function = item.get("function") if isinstance(item.get("function"), dict) else {}
    name = function.get("name") or item.get("name") or ""
    arguments = function.get("arguments", item.get("arguments", item.get("input")))
    pretty, one_line = _arguments(arguments)
    call_id = item.get("id")
    return ToolCall(str(call_id) if call_id else None, str(name), pretty, one_line)


def _arguments(arguments: Any) -> tuple[str, str]:
    """Pretty-printed and one-line forms of a call's arguments (a JSON string, usually)."""
    if arguments is None:
        return "", ""
    value = arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            return arguments, clip_line(arguments, 100)
    if isinstance(value, dict):
        one_line = ", ".join(
            f"{k}={v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
            for k, v in value.items()
        )
    else:
        one_line = json.dumps(value, ensure_ascii=False)
    return json.dumps(value, indent=2, ensure_ascii=False), clip_line(one_line, 100)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)
