"""Whether something the user said later may overturn a memory entry: the rules.

The third seed article ends on the open problem: "I prefer Python" (September) and
"I'm mostly writing Go now" (March) both stay in memory, and the agent may act on the
stale one. Recall cannot know which is true; it can show the newer words beside the
entry. reader/staleness finds the user's newer messages on the entry's subject (the
archive's search); this module reads each one against the entry:

* a **change**: the message says something is different now ("now", "these days",
  "no longer", "switched", "moved to", "anymore", "现在", "改用", …);
* an **alternative**: it names another thing of a kind the entry names (the entry says
  *Python*, the message *Go*: both languages; editors, shells, systems, databases,
  clouds, package managers, frameworks, orchestrators and CI services alike);
* a **retraction**: it names one of the entry's own things beside a word that
  retracts it ("left FastAPI", "no longer use vim", "stopped using Docker").

A message with a sentence that states a change and names an alternative or a retraction
*may supersede* the entry and is flagged; one that only speaks to the same subject is
listed as said since, unflagged. Code (fenced blocks, `inline`) is left out: a command
or a log pasted in is not the user saying what they use. Never an edit: the person
decides (one click opens the entry's editor).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from dashboard.memory.entries import WORD
from dashboard.text import clip

# Kinds of things an entry names, each with the spellings of its members (lower case;
# an alias maps to the name shown). A member is matched as a whole word.
KINDS: dict[str, dict[str, str]] = {
    "language": {
        **{n: n for n in "python go rust java kotlin typescript javascript ruby php".split()},
        **{n: n for n in "elixir swift scala haskell zig clojure ocaml perl lua dart".split()},
        "golang": "go",
        "c#": "c#",
        "c++": "c++",
        "js": "javascript",
        "ts": "typescript",
    },
    "editor": {
        **{n: n for n in "neovim vim emacs vscode cursor zed helix sublime intellij".split()},
        "pycharm": "pycharm",
        "nvim": "neovim",
        "vs code": "vscode",
    },
    "shell": {n: n for n in "bash zsh fish nushell powershell".split()},
    "system": {
        **{n: n for n in "macos linux windows ubuntu debian arch fedora nixos".split()},
        "mac": "macos",
    },
    "database": {
        **{n: n for n in "postgres mysql sqlite mongodb mariadb cassandra dynamodb".split()},
        "postgresql": "postgres",
        "mongo": "mongodb",
    },
    "cloud": {n: n for n in "aws gcp azure hetzner digitalocean linode vultr fly.io".split()},
    "package manager": {n: n for n in "pip uv poetry conda pipenv npm yarn pnpm bun".split()},
    "framework": {
        **{n: n for n in "fastapi django flask express rails spring gin echo fiber".split()},
        "laravel": "laravel",
        "next.js": "next.js",
    },
    "orchestrator": {
        **{n: n for n in "kubernetes k3s k8s nomad swarm ecs".split()},
        "docker compose": "docker compose",
    },
    "ci": {
        "github actions": "github actions",
        "gitlab ci": "gitlab ci",
        **{n: n for n in "jenkins circleci buildkite drone".split()},
    },
}

# Names that are everyday words too ("go ahead", "a fish"): in a message they count
# written as names (capitalised, or followed by a version: "go 1.23"); an entry is a
# curated note and counts as it is written.
COMMON_WORDS = frozenset(
    "go rust swift echo express fiber spring arch drone bun cursor fish helix zed flask "
    "rails gin swarm dart sublime windows ruby perl mac".split()
)

# Words that say something is different now (English and Chinese; matched as words).
CHANGE_WORDS = (
    *"now nowadays lately anymore switched switching migrated migrating changed".split(),
    *"instead stopped left dropped replaced ported rewrote rewriting".split(),
    *("these days", "any more", "no longer", "moved to", "moved from", "moved away"),
    *("moved off", "from now on", "used to", "gave up"),
    *"现在 如今 最近 不再 改用 换成 换到 已经不 转向 迁移到".split(),
)
_CHANGE = re.compile(
    r"\b(?:"
    + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in CHANGE_WORDS if w.isascii())
    + r")\b|"
    + "|".join(w for w in CHANGE_WORDS if not w.isascii()),
    re.IGNORECASE,
)
# Words that retract a thing when they stand right before it ("left FastAPI").
_RETRACT = (
    r"(?:no longer (?:use|write|like|run|prefer)s?|not using|stopped using|stopped|"
    r"left|dropped|gave up(?: on)?|moved (?:away )?(?:from|off)|switched (?:away )?from|"
    r"migrated (?:away )?from|replaced|instead of|not)"
)
# A name stands alone among Latin letters, digits and its own punctuation ("k8s-node-7"
# is a host, not k8s); next to Chinese it stands alone ("改用Go").
_ASCII_WORD = "[A-Za-z0-9_.+#-]"
_SENTENCE_ENDS = ".!?:;。！？…\"'“(["
_VERSION = re.compile(r"\s*v?\d")
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)
_HABIT = (
    r"\b(?:no longer|not any ?more|stopped|quit|gave up)\s+(?:use|using|write|writing|work|"
    r"working|live|living|prefer|preferring|like|run|running|do|doing)\b(?:\s+[\w'-]+){0,3}?\s+"
)
_SENTENCE = re.compile(r"(?:[^.!?。！？\n]|\.(?=\d))+[.!?。！？]?")
QUOTE_CHARS = 220


@dataclass(frozen=True)
class Reading:
    """What one later message says against an entry."""

    change: str | None  # the word that says something changed ("now")
    alternatives: tuple[tuple[str, str, str], ...]  # (kind, entry's thing, message's thing)
    retracted: tuple[str, ...]  # the entry's things the message retracts
    quote: str  # the sentence that says it best (the message's opening otherwise)

    @property
    def may_supersede(self) -> bool:
        return self.change is not None and bool(self.alternatives or self.retracted)

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why, in a few words each, for the page."""
        out = [f"names {new} where the entry names {old}" for _, old, new in self.alternatives]
        if self.retracted:
            out.append(f"moves away from {', '.join(self.retracted)}")
        if self.change and out:
            out.append(f"says “{self.change}”")
        return tuple(out)


def things(text: str, *, strict: bool = False) -> dict[str, set[str]]:
    """The things of each kind ``text`` names (as shown: ``golang`` is ``go``);
    ``strict``: the :data:`COMMON_WORDS` only written as names (a message)."""
    pattern, table = _all_names()
    found: dict[str, set[str]] = {}
    for hit in pattern.finditer(text):
        written = hit.group(0)
        spelling = " ".join(written.casefold().split())
        if strict and spelling in COMMON_WORDS and not _as_name(written, text, *hit.span()):
            continue
        for kind, name in table[spelling]:
            found.setdefault(kind, set()).add(name)
    return found


@functools.cache
def _all_names() -> tuple[re.Pattern[str], dict[str, list[tuple[str, str]]]]:
    """One pattern for every spelling of :data:`KINDS` (the longest first: ``golang``
    before ``go``), and each spelling's (kind, name)s."""
    table: dict[str, list[tuple[str, str]]] = {}
    for kind, members in KINDS.items():
        for spelling, name in members.items():
            table.setdefault(spelling, []).append((kind, name))
    alternatives = "|".join(_escaped(s) for s in sorted(table, key=len, reverse=True))
    return (
        re.compile(rf"(?<!{_ASCII_WORD})(?:{alternatives})(?![A-Za-z0-9_+#-])", re.IGNORECASE),
        table,
    )


def _as_name(written: str, text: str, start: int, end: int) -> bool:
    """``writing Go``, ``GO``, ``go 1.23``: an everyday word written as a name; not a
    capital a sentence starts with ("Go ahead and restart it now")."""
    if _VERSION.match(text, end) or (len(written) > 1 and written.isupper()):
        return True
    before = text[:start].rstrip()
    return written[:1].isupper() and bool(before) and before[-1] not in _SENTENCE_ENDS


def read_message(entry: str, message: str, words: Iterable[str] = ()) -> Reading:
    """How ``message`` (the user's, later) stands against ``entry`` (see the module):
    the first sentence that may supersede it, else the whole message's reading.
    ``words``: the entry's own words (entries.key_words), retracted as its things are
    when a habit verb stands between ("I no longer work night shifts")."""
    prose = _CODE.sub(" ", message)
    mine = things(entry)
    sentences = [s.strip() for s in _SENTENCE.findall(prose) if s.strip()]
    for sentence in sentences:
        reading = _read(mine, sentence, sentence, words)
        if reading.may_supersede:
            return reading
    whole = _read(mine, prose, "", words)
    names = [new for _, _, new in whole.alternatives] + list(whole.retracted)
    return Reading(None, whole.alternatives, whole.retracted, _quote(sentences, names))


def _read(mine: dict[str, set[str]], text: str, quote: str, words: Iterable[str]) -> Reading:
    theirs = things(text, strict=True)
    dropped = _retracted(theirs, text)  # "no longer use vim" names no alternative
    alternatives = tuple(
        (kind, old, new)
        for kind in sorted(mine.keys() & theirs.keys())
        for new in sorted(theirs[kind] - mine[kind] - dropped)
        for old in sorted(mine[kind])[:1]
    )
    change = _CHANGE.search(text)
    return Reading(
        change.group(0).casefold() if change else None,
        alternatives,
        tuple(sorted(_retracted(mine, text) | _habits_dropped(words, text))),
        clip(quote, QUOTE_CHARS),
    )


def could_supersede(message: str) -> bool:
    """A cheap first look: the message's prose says something changed and names some
    thing of a kind (what a message must hold to be flagged for naming an alternative)."""
    prose = _CODE.sub(" ", message)
    return _CHANGE.search(prose) is not None and bool(things(prose, strict=True))


def shared_words(words: Iterable[str], message: str) -> tuple[str, ...]:
    """Which of ``words`` (an entry's, lower case) ``message`` holds as words, outside code."""
    held = set(WORD.findall(_CODE.sub(" ", message).casefold()))
    return tuple(w for w in words if w in held)


def _habits_dropped(words: Iterable[str], text: str) -> set[str]:
    """The entry's words a habit the message drops names: "no longer work night shifts",
    "stopped writing Python" (a verb of habit after the retraction, then the word)."""
    lowered = text.casefold()
    return {w for w in words if len(w) >= 4 and re.search(_HABIT + re.escape(w), lowered)}


def _retracted(named: dict[str, set[str]], message: str) -> set[str]:
    return {
        name
        for kind, names in named.items()
        for name in names
        if any(_retracts(spelling, message) for spelling in _spellings(kind, name))
    }


def _spellings(kind: str, name: str) -> Iterable[str]:
    return (s for s, n in KINDS[kind].items() if n == name)


def _retracts(spelling: str, message: str) -> bool:
    return _retraction(spelling).search(message) is not None


@functools.lru_cache(maxsize=1024)
def _retraction(spelling: str) -> re.Pattern[str]:
    after = rf"\s+(?:the\s+|using\s+|writing\s+)?{_escaped(spelling)}(?![\w+#])"
    return re.compile(rf"\b{_RETRACT}{after}", re.IGNORECASE)


@functools.lru_cache(maxsize=1024)
def _word(spelling: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!{_ASCII_WORD}){_escaped(spelling)}(?![A-Za-z0-9_+#-])")


def _escaped(spelling: str) -> str:
    return re.escape(spelling).replace(r"\ ", r"\s+")


def _quote(sentences: list[str], names: list[str]) -> str:
    """The sentence naming the most of ``names`` (a change breaks ties), else the first."""
    if not sentences:
        return ""

    def weight(sentence: str) -> tuple[int, int]:
        lowered = sentence.casefold()
        named = sum(1 for n in names if _word(n).search(lowered))
        return (named, 1 if _CHANGE.search(sentence) else 0)

    return clip(max(sentences, key=weight) if names else sentences[0], QUOTE_CHARS)
