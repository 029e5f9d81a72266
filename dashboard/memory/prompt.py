"""The agent's view of its memory files: the block Hermes puts in its system prompt."""

from __future__ import annotations

from dashboard.hermes.conventions import MEMORY_FILE_BY_NAME
from dashboard.memory.checks import BLOCK, check
from dashboard.memory.entries import join_entries, split_entries
from dashboard.memory.files import MemoryFile

_RULE = "═" * 46


def agent_block(file: MemoryFile) -> str:
    """The block the agent will get in its system prompt at its next session.

    Mirrors Hermes's rendering: a rule, a header with usage
    (``USER PROFILE (who the user is) [12% — 165/1,375 chars]``), a rule, then the
    entries (stripped, empty and duplicate entries dropped, as Hermes loads them)
    joined by ``§`` lines. An entry with a blocking finding is shown as
    ``[entry N withheld: reason]`` (N is its number in the file) instead of its
    text. Usage counts the characters of the entries shown. An empty file gives
    ``""``: Hermes adds no block at all.
    """
    raw = split_entries(file.text)
    withheld: dict[int, str] = {}
    for finding in check(file.text, file.limit):
        if finding.severity == BLOCK and finding.entry_index is not None:
            withheld.setdefault(finding.entry_index, finding.code)
    shown: list[str] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        stripped = entry.strip()
        if not stripped or stripped in seen:
            continue
        seen.add(stripped)
        if index in withheld:
            reason = "a possible prompt injection or exfiltration"
            if withheld[index] == "invisible":
                reason = "invisible or bidi Unicode characters"
            shown.append(f"[entry {index + 1} withheld: {reason}]")
        else:
            shown.append(stripped)
    if not shown:
        return ""
    content = join_entries(shown)
    used = len(content)
    pct = min(100, int(used * 100 / file.limit)) if file.limit > 0 else 0
    header = f"{MEMORY_FILE_BY_NAME[file.name].header} [{pct}% — {used:,}/{file.limit:,} chars]"
    return f"{_RULE}\n{header}\n{_RULE}\n{content}"
