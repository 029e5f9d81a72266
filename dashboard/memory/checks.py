"""The checks a memory file's text passes before a save: limits, threats, hidden characters."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from dashboard.memory.entries import split_entries

BLOCK = "block"


WARN = "warn"


@dataclass(frozen=True)
class Finding:
    """One problem in a memory text.

    ``entry_index`` is 0-based (messages say "entry N", 1-based); ``None`` for the
    whole file. ``severity`` is ``block`` (Recall refuses to save) or ``warn``.
    ``code`` is one of ``threat``, ``invisible``, ``duplicate``, ``over_limit``,
    ``empty_entry``.
    """

    entry_index: int | None
    severity: str
    code: str
    message: str


_I = re.IGNORECASE


_SECRET_WORD = r"(?i:[A-Z0-9_]*(?:API_?KEY|TOKEN|SECRET|PASSW(?:OR)?D|CREDENTIAL)[A-Z0-9_]*)"


_NET_TOOL = r"(?<![\w-])(?:curl|wget|nc|ncat|netcat)(?![\w-])"


_HOME_DIR = r"(?:~|\$HOME|\$\{HOME\}|/home/[^/\s]+|/root|/Users/[^/\s]+)"


_WRITE_VERB = (
    r"(?i:\b(?:edit|modify|change|overwrite|rewrite|write|append|update|replace|delete"
    r"|remove|rm|truncate|tee|chmod|sed\s+-i)\b)"
)


_AGENT_FILE = r"(?:\.hermes/|\bSOUL\.md\b|\bconfig\.ya?ml\b)"


# (pattern id, what it means, compiled pattern). Each is searched in every entry.
THREAT_PATTERNS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    # prompt injection
    (
        "prompt_injection",
        "tells the agent to ignore its instructions",
        re.compile(
            r"\bignore\s+(?:all\s+|any\s+|the\s+|your\s+)?"
            r"(?:previous|prior|above|earlier|all|preceding)\s+(?:instructions|rules|prompts?)",
            _I,
        ),
    ),
    (
        "disregard_rules",
        "tells the agent to disregard its rules",
        re.compile(
            r"\b(?:disregard|forget)\s+(?:your|all|any|the|previous|prior)\s+"
            r"(?:\w+\s+)?(?:instructions|rules|guidelines)",
            _I,
        ),
    ),
    ("role_hijack", "tries to redefine who the agent is", re.compile(r"\byou\s+are\s+now\b", _I)),
    (
        "system_prompt",
        "tries to change or reveal the system prompt",
        re.compile(
            r"\bsystem\s+prompt\s*(?:override|:)"
            r"|\b(?:ignore|override|overwrite|replace|reveal|print|leak|disregard|forget|new)"
            r"\s+(?:\w+\s+){0,2}system\s+prompt",
            _I,
        ),
    ),
    (
        "deception",
        "tells the agent to hide things from the user",
        re.compile(r"\bdo\s+not\s+tell\s+the\s+user\b|\bdon'?t\s+tell\s+the\s+user\b", _I),
    ),
    (
        "bypass_restrictions",
        "tells the agent to act without restrictions",
        re.compile(
            r"\bact\s+as\s+(?:if|though)\s+you\s+(?:have\s+no|don'?t\s+have)\s+"
            r"(?:restrictions|limits|rules)",
            _I,
        ),
    ),
    (
        "chat_markup",
        "contains chat-template markup that can forge a system or user turn",
        re.compile(
            r"<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id)\|>"
            r"|^[ \t]*#{2,}[ \t]*(?:system|instructions?)[ \t]*:?[ \t]*$"
            r"|\[/?INST\]|<<SYS>>",
            re.IGNORECASE | re.MULTILINE,
        ),
    ),
    # exfiltration
    (
        "exfiltration",
        "sends variables or secrets over the network",
        re.compile(_NET_TOOL + r"[^\n]*(?:\$\{?[A-Za-z_]\w*|" + _SECRET_WORD + r")"),
    ),
    (
        "read_secrets",
        "reads a file that holds secrets",
        re.compile(
            r"(?<![\w-])(?:cat|less|more|head|tail|source|type|strings|base64|xxd)\s+[^\n]*"
            r"(?:\.env\b|credentials|\.netrc|\.pgpass|\.npmrc|\.pypirc|id_rsa|id_ed25519)",
            _I,
        ),
    ),
    (
        "ssh_access",
        "points at SSH keys",
        re.compile(r"authorized_keys|" + _HOME_DIR + r"/\.ssh\b|\bid_(?:rsa|ed25519|ecdsa)\b"),
    ),
    (
        "env_file",
        "points at a .env file in a home folder",
        re.compile(_HOME_DIR + r"/(?:[^\s/]+/)*\.env\b"),
    ),
    # persistence: rewriting the agent's own configuration
    (
        "agent_config",
        "edits the agent's own configuration",
        re.compile(
            _WRITE_VERB + r"[^\n]{0,80}?" + _AGENT_FILE + r"|>>?\s*\S*" + _AGENT_FILE,
        ),
    ),
)


INVISIBLE_CHARS: frozenset[str] = frozenset(
    [chr(c) for c in range(0x200B, 0x200E)]
    + ["\u2060", "\ufeff"]
    + [chr(c) for c in range(0x202A, 0x202F)]
    + [chr(c) for c in range(0x2066, 0x206A)]
)


_INVISIBLE_RE = re.compile("[" + "".join(sorted(INVISIBLE_CHARS)) + "]")


# Characters that look like nothing or like a plain space (and so look the same in a
# diff): the invisible and bidi ones above, other format characters (Cf), spaces
# other than U+0020 (NBSP, thin, ideographic…) and control characters such as tab.
_SHOWN_AS_IS = frozenset(" \n")


def hidden_char(char: str) -> str | None:
    """How a diff names ``char`` when it would be invisible there (``U+00A0 NO-BREAK
    SPACE``, ``TAB``), else None."""
    if char in _SHOWN_AS_IS:
        return None
    if char == "\t":
        return "TAB"
    if char in INVISIBLE_CHARS or unicodedata.category(char) in ("Cf", "Zs", "Zl", "Zp", "Cc"):
        return f"U+{ord(char):04X} {unicodedata.name(char, 'CONTROL CHARACTER')}"
    return None


def check(text: str, limit: int) -> list[Finding]:
    """Everything wrong with ``text`` as a memory file with a ``limit`` of characters.

    Blocks (Recall refuses to save, as Hermes refuses these entries): threat
    patterns (prompt injection, role hijack, chat markup, exfiltration, secret
    files, SSH keys, edits to the agent's config) and invisible or bidi Unicode.
    Warns: exact duplicate entries (after stripping, as Hermes compares them; Hermes
    drops the later copies), empty entries (Hermes drops them) and a file longer
    than ``limit`` characters. Findings come in entry order, blocks before warnings
    within an entry; the over-limit warning is last.
    """
    findings: list[Finding] = []
    seen: dict[str, int] = {}
    entries = split_entries(text)
    for index, entry in enumerate(entries):
        number = index + 1
        for pid, meaning, pattern in THREAT_PATTERNS:
            match = pattern.search(entry)
            if match:
                snippet = " ".join(match.group(0).split())[:60]
                findings.append(
                    Finding(
                        index,
                        BLOCK,
                        "threat",
                        f"entry {number}: {meaning} ({pid}: {snippet!r}); Hermes puts "
                        "entries verbatim into the system prompt and rejects this",
                    )
                )
        reported: set[str] = set()
        for match in _INVISIBLE_RE.finditer(entry):
            char = match.group(0)
            if char in reported:
                continue
            reported.add(char)
            count = entry.count(char)
            more = f" ({count} times)" if count > 1 else ""
            findings.append(
                Finding(
                    index,
                    BLOCK,
                    "invisible",
                    f"entry {number}, character {match.start() + 1}: invisible or bidi "
                    f"character U+{ord(char):04X} {unicodedata.name(char, 'UNNAMED')}{more}",
                )
            )
        stripped = entry.strip()
        if not stripped:
            findings.append(
                Finding(
                    index,
                    WARN,
                    "empty_entry",
                    f"entry {number} is empty; Hermes drops it (look for a stray §)",
                )
            )
        elif stripped in seen:
            findings.append(
                Finding(
                    index,
                    WARN,
                    "duplicate",
                    f"entry {number} duplicates entry {seen[stripped] + 1}; "
                    "Hermes keeps only the first",
                )
            )
        else:
            seen[stripped] = index
    if len(text) > limit:
        findings.append(
            Finding(
                None,
                WARN,
                "over_limit",
                f"{len(text):,} characters is over the limit of {limit:,} "
                f"by {len(text) - limit:,}; Hermes will refuse to add entries until it is shorter",
            )
        )
    return findings


def blocking(findings: Sequence[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == BLOCK]
