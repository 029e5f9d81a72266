"""The ``recall_search`` tool an agent's model can call (seed 9.6), in OpenAI format.

It is the seeds' ``session_search`` under a name of its own: Hermes refuses a
memory provider whose tool shadows one of its core tools, and ``session_search`` is
one of them. The handler answers with the same JSON as ``GET /api/session_search``
and ``recall search --summaries --json`` (tool parity): stage-1 search, then a recap
of each matched session from the summarization model, or an extractive preview with
the reason when no model answers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from dashboard.errors import RecallError
from dashboard.reader.reader import StateReader
from dashboard.summaries.service import DEFAULT_TOOL_LIMIT, SummaryService, session_search_result

TOOL_NAME = "recall_search"
# The tools Hermes registers for every platform (its ``_HERMES_CORE_TOOLS`` in
# toolsets.py, late 2026): Hermes refuses a memory provider exposing any of them.
HERMES_CORE_TOOLS = frozenset(
    {
        "web_search",
        "web_extract",
        "terminal",
        "process",
        "read_file",
        "write_file",
        "patch",
        "search_files",
        "vision_analyze",
        "image_generate",
        "mixture_of_agents",
        "skills_list",
        "skill_view",
        "skill_manage",
        "browser_navigate",
        "browser_snapshot",
        "browser_click",
        "browser_type",
        "browser_scroll",
        "browser_back",
        "browser_press",
        "browser_close",
        "browser_get_images",
        "browser_vision",
        "browser_console",
        "text_to_speech",
        "todo",
        "memory",
        "session_search",
        "clarify",
        "execute_code",
        "delegate_task",
        "cronjob",
        "send_message",
        "ha_list_entities",
        "ha_get_state",
        "ha_list_services",
        "ha_call_service",
    }
)
MAX_LIMIT = 5  # each session costs a model call: keep a single tool call affordable
MAX_QUERY_CHARS = 500

RECALL_SEARCH = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Search your past conversations with the user (full-text, across every earlier "
            "session) and get a short recap of each matching session. Use it when the user "
            "refers to something discussed before ('last time', 'what did we decide about "
            "…'). Supports quoted phrases, OR, NOT and prefix* terms. An empty query lists "
            "the most recent sessions. Your current conversation is not searched."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "maxLength": MAX_QUERY_CHARS,
                    "description": 'What to look for, e.g. redis cache TTL or "connection pool"',
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "default": DEFAULT_TOOL_LIMIT,
                    "description": "How many sessions to recap (each costs a model call).",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}


def recall_search_tool(
    reader: StateReader,
    service: SummaryService,
    arguments: Mapping[str, Any] | str,
    exclude: Sequence[str] = (),
) -> str:
    """Run a ``recall_search`` call; always a JSON string (``success: false`` on bad input)."""
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
    except (TypeError, ValueError) as exc:
        return _error(f"arguments must be a JSON object: {exc}")
    if not isinstance(args, dict):
        return _error("arguments must be a JSON object")
    unknown = set(args) - {"query", "limit"}
    if unknown:
        return _error(f"unknown argument(s): {', '.join(sorted(unknown))}")
    query = args.get("query")
    if not isinstance(query, str):
        return _error("query must be a string")
    if len(query) > MAX_QUERY_CHARS:
        return _error(f"query is longer than {MAX_QUERY_CHARS} characters")
    limit = args.get("limit", DEFAULT_TOOL_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        return _error(f"limit must be a whole number from 1 to {MAX_LIMIT}")
    try:
        result = session_search_result(reader, service, query, limit, exclude=exclude)
    except RecallError as exc:  # a query that cannot be searched, an unreadable store
        return _error(str(exc))
    return json.dumps(result, ensure_ascii=False)


def _error(message: str) -> str:
    return json.dumps({"success": False, "error": message}, ensure_ascii=False)
