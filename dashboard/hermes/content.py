"""Message content as stored by Hermes: plain text, or ``"\\x00json:" + json``.

Structured content (multimodal parts, tool results with metadata) is stored as
text with a NUL-led prefix. Recall decodes it for display and search previews and
never shows the raw prefix to a person.
"""

from __future__ import annotations

import json
from typing import Any

from dashboard.hermes.conventions import JSON_PREFIX

__all__ = ["JSON_PREFIX", "decode_content", "flatten", "is_structured"]


def decode_content(raw: str | bytes | None) -> str:
    """Readable text of a stored message content (structured parts flattened)."""
    if raw is None:
        return ""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    if not raw.startswith(JSON_PREFIX):
        return raw
    try:
        value = json.loads(raw[len(JSON_PREFIX) :])
    except ValueError:
        return raw[len(JSON_PREFIX) :]
    return flatten(value)


def is_structured(raw: str | None) -> bool:
    return bool(raw) and raw.startswith(JSON_PREFIX)  # type: ignore[union-attr]


def flatten(value: Any) -> str:
    """Join the text of OpenAI/Anthropic-style content parts; name the others."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (flatten(v) for v in value) if t)
    if isinstance(value, dict):
        kind = value.get("type")
        for key in ("text", "content", "output", "result"):
            if key in value and value[key] is not None:
                return flatten(value[key])
        if kind in ("image_url", "image", "input_image"):
            return "[image]"
        if kind in ("file", "input_file", "document"):
            name = value.get("filename") or value.get("name") or "file"
            return f"[{kind}: {name}]"
        return json.dumps(value, ensure_ascii=False)
    return str(value)
