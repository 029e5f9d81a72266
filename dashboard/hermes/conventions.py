"""Hermes's storage conventions, once: what the importer (and the readers) must know.

Each constant or rule here is the only copy in the project (HERMES_FACTS.md,
"Today's Hermes"); the modules that recognise these strings import them from here.

* Structured message content is text led by ``"\\x00json:"`` (decoded in content.py).
* A compaction summary starts with :data:`COMPACTION_MARKER` (older files:
  :data:`LEGACY_SUMMARY_MARKER`) and ends at :data:`SUMMARY_END_MARKER`.
* Lineage markers are keys of a child's ``model_config`` JSON.
* Auxiliary usage rows (compression, title generation, vision) carry a real
  estimate and a NULL ``cost_status``; costs.rules.read_cost reads them.
* A file without ``session_model_usage`` keeps its usage on the ``sessions`` row:
  one derived usage row per session (``archive.source.derived_usage_row``).
* Visible rows: ``(active=1 OR compacted=1 OR superseded) AND display_kind <> 'hidden'``,
  re-inserted copies counted once (:func:`is_visible`); a rewound row is ``active=0,
  compacted=0`` with no later copy.
* Memory files: ``memories/USER.md`` and ``memories/MEMORY.md``, each with its
  config.yaml limit and its header in the agent's prompt (:data:`MEMORY_FILES`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JSON_PREFIX = "\x00json:"
COMPACTION_MARKER = "[CONTEXT COMPACTION — REFERENCE ONLY]"
LEGACY_SUMMARY_MARKER = "[CONTEXT SUMMARY]:"
#: A summary merged into the first retained row (schema 31): that row's ``_compressed_summary``
#: is 1 and its content opens with this, then the row's own text, then
#: :data:`MERGED_SUMMARY_END`, then the summary (led by :data:`COMPACTION_MARKER`).
MERGED_SUMMARY_OPEN = "[PRIOR CONTEXT — for reference only; not a new message]"
MERGED_SUMMARY_END = "[END OF PRIOR CONTEXT — COMPACTION SUMMARY BELOW]"
SUMMARY_PREFIXES = (COMPACTION_MARKER, LEGACY_SUMMARY_MARKER, MERGED_SUMMARY_OPEN)
SUMMARY_END_MARKER = "--- END OF CONTEXT SUMMARY"
#: How Hermes's boilerplate paragraph after the marker opens (its wording has changed
#: from release to release; this opening has not).
SUMMARY_BOILERPLATE_OPENING = "Earlier turns were compacted"
BOILERPLATE_MAX_CHARS = 600  # the standard paragraph after the marker is ~250 characters

#: ``model_config`` keys a child session uses to say how it came from its parent.
BRANCHED_FROM = "_branched_from"
DELEGATE_FROM = "_delegate_from"
RESET_FROM = "_reset_from"


@dataclass(frozen=True)
class MemoryFileKind:
    """One of Hermes's memory files: its name, its short key, its limit, its prompt header."""

    name: str  # the file in ``<home>/memories/``
    key: str  # its short name: the JSON API's path, the agent prompt part's kind
    limit_key: str  # config.yaml ``memory.<limit_key>``: its limit in characters
    default_limit: int  # Hermes's default when config.yaml sets none
    header: str  # what the agent's system prompt calls its block


#: The memory files, in the order pages show them (USER.md first).
MEMORY_FILES = (
    MemoryFileKind("USER.md", "user", "user_char_limit", 1375, "USER PROFILE (who the user is)"),
    MemoryFileKind(
        "MEMORY.md", "memory", "memory_char_limit", 2200, "MEMORY (your personal notes)"
    ),
)
USER_FILE, MEMORY_FILE = MEMORY_FILES
MEMORY_FILE_NAMES = tuple(f.name for f in MEMORY_FILES)
MEMORY_FILE_BY_NAME = {f.name: f for f in MEMORY_FILES}


#: The token kinds Hermes counts per call, session and usage row (``<kind>_tokens``).
TOKEN_KINDS = ("input", "output", "cache_read", "cache_write", "reasoning")

#: The profile a root home is (a fixed name in Hermes); ``profiles/<name>/`` are the others.
DEFAULT_PROFILE = "default"
PROFILES_FOLDER = "profiles"

#: What a message row means when the file has no such column (older forms): every
#: row was live, none compacted, none hidden.
MESSAGE_DEFAULTS: dict[str, Any] = {"active": 1, "compacted": 0, "display_kind": None}
SESSION_DEFAULTS: dict[str, Any] = {"archived": 0, "pinned": 0, "hidden": 0}

#: The ``sessions`` columns a file without usage rows keeps its tokens and cost in.
USAGE_COLUMNS_ON_SESSIONS = (
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
    "billing_provider",
    "billing_base_url",
    "billing_mode",
)


def is_summary(content: str | None, compressed_summary: object = 0) -> bool:
    """Whether a message is a compaction summary carrier: a standalone summary row, or a
    retained row a summary was merged into (``_compressed_summary = 1``, or its prefix)."""
    if compressed_summary == 1:
        return True
    if not content:
        return False
    if content.startswith(SUMMARY_PREFIXES):
        return True
    # lstrip copies the whole text: only for the rare row that starts with whitespace
    # (epochs.py asks this of every row of a session).
    return content[:1].isspace() and content.lstrip().startswith(SUMMARY_PREFIXES)


def summary_text(content: str | None) -> str:
    """A compaction summary's own text: what the summary says, without its marker, the
    prior row a merged summary carries, Hermes's boilerplate paragraph and end marker.

    Text that is no summary comes back as it is.
    """
    text = (content or "").lstrip()
    if text.startswith(MERGED_SUMMARY_OPEN):
        _prior, found, after = text.partition(MERGED_SUMMARY_END)
        text = after.lstrip() if found else text[len(MERGED_SUMMARY_OPEN) :].lstrip()
    for prefix in (COMPACTION_MARKER, LEGACY_SUMMARY_MARKER):
        if text.startswith(prefix):
            text = text[len(prefix) :].lstrip()
            break
    else:
        return content or ""
    text = text.split(SUMMARY_END_MARKER, 1)[0].strip()
    if text.startswith(SUMMARY_BOILERPLATE_OPENING):
        # The boilerplate is one paragraph, ended by a blank line or (newer releases)
        # by the line break before the summary.
        _head, sep, rest = text.partition("\n")
        return rest.strip() if sep else ""
    head, sep, rest = text.partition("\n\n")
    if sep and rest.strip() and len(head) <= BOILERPLATE_MAX_CHARS and "summary" in head.lower():
        return rest.strip()
    return text


def lineage_markers(model_config: Any) -> dict[str, Any]:
    """The ``model_config`` JSON of a session as a dict ({} when absent or not an object)."""
    if not model_config:
        return {}
    try:
        value = json.loads(model_config) if isinstance(model_config, str) else model_config
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def is_visible(
    active: object,
    compacted: object,
    display_kind: object,
    repeats: object = None,
    superseded: bool = False,
) -> bool:
    """The visible-row rule: each message once, as the history a person reads.

    A row is shown when it is live, kept as history by a compaction (``compacted``), or
    *superseded* (schema 31: ``active=0, compacted=0`` like a rewound row, but a later
    row of its session has its ``message_uid``: the compaction re-inserted it). A
    re-inserted copy (``repeats``, archive/copies.py) is the message its original is, so
    it is never counted again; hidden rows never show.
    :func:`visible_rows_sql` is the same rule for a query (a test holds them equal).
    """
    return (
        repeats is None
        and (active == 1 or compacted == 1 or superseded)
        and (display_kind or "") != "hidden"
    )


def superseded_sql(alias: str = "m") -> str:
    """Whether ``alias`` (a row with ``message_uid``) has a later row of its session with
    the same uid: a retained row's original, not a rewound one (one index seek)."""
    return (
        f"({alias}.message_uid IS NOT NULL AND EXISTS (SELECT 1 FROM messages c"
        f" WHERE c.session_id = {alias}.session_id AND c.message_uid = {alias}.message_uid"
        f" AND c.id > {alias}.id))"
    )


def visible_rows_sql(columns: frozenset[str] | set[str], alias: str = "m") -> str:
    """The visible-row rule as a WHERE fragment over the flag columns a file has ("1": none)."""
    parts = []
    if "repeats" in columns:
        parts.append(f"{alias}.repeats IS NULL")
    kept = "message_uid" in columns and "active" in columns
    if "active" in columns and "compacted" in columns:
        more = f" OR {superseded_sql(alias)}" if kept else ""
        parts.append(f"({alias}.active = 1 OR {alias}.compacted = 1{more})")
    elif "active" in columns:
        more = f" OR {superseded_sql(alias)}" if kept else ""
        parts.append(f"({alias}.active = 1{more})")
    if "display_kind" in columns:
        parts.append(f"coalesce({alias}.display_kind, '') <> 'hidden'")
    return " AND ".join(parts) if parts else "1"


#: The flag columns Recall's archive always has (schema migrations 3 and 7).
ARCHIVE_FLAG_COLUMNS = frozenset({*MESSAGE_DEFAULTS, "message_uid", "repeats"})


def visible_sql(alias: str = "m") -> str:
    """The visible-row rule over the archive's messages (what every page reads)."""
    return visible_rows_sql(ARCHIVE_FLAG_COLUMNS, alias)


def is_rewound(active: object, compacted: object, superseded: bool = False) -> bool:
    """A row undone by a rewind: neither live nor kept as compacted history, nor the
    original of a re-inserted copy (``superseded``: the same flags)."""
    return active == 0 and compacted == 0 and not superseded


def profile_of(home_root: str | Path) -> str:
    """The profile a home folder is: ``profiles/<name>`` gives name, anything else default."""
    root = Path(home_root).expanduser().resolve()
    return root.name if root.parent.name == PROFILES_FOLDER else DEFAULT_PROFILE
