"""The per-call lines of Hermes's ``logs/agent.log``: one model call's tokens each.

A usage row sums a session's calls of one model, so a price that depends on one
call's size (a long-context tier: above 200k prompt tokens a call costs more per
token) cannot be read from it. Hermes logs every main-loop call at INFO through
``hermes_logging`` (format ``%(asctime)s %(levelname)s%(session_tag)s %(name)s:
%(message)s``, the session tag `` [<session id>]`` when the thread has one)::

    2026-10-01 12:34:56,789 INFO [20261001_123400_ab12cd] run_agent: API call #3:
    model=anthropic/claude-sonnet-4 provider=openrouter in=212000 out=800 total=212800
    latency=3.2s cache=9000/212000 (4%) write=500 id=gen-1 upstream=Anthropic

(one line in the file). ``in`` is the whole prompt, cache reads included; a call
without usage logs ``in=? out=?`` (older) or ``in=unknown``. The files rotate
(``agent.log.1`` … at 5 MB by default), so what they hold is the recent past: Recall
keeps what it has read (archive/call_log.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

LOG_FOLDER = "logs"
LOG_NAME = "agent.log"

_LINE = re.compile(
    r"^(?P<at>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:,(?P<ms>\d{1,6}))? \S+"
    r"(?: \[(?P<session>[^\]\s]+)\])? \S+: API call #(?P<n>\d+): "
    r"model=(?P<model>\S+) provider=(?P<provider>\S+) "
    r"in=(?P<prompt>\S+) out=(?P<output>\S+) total=\S+ latency=[\d.]+s(?P<rest>.*)$"
)
_CACHE = re.compile(r" cache=(\d+)/\d+ \(\d+%\)")
_WRITE = re.compile(r" write=(\d+)")


@dataclass(frozen=True)
class LoggedCall:
    """One model call as agent.log tells it (tokens None where it logged none)."""

    at: float  # epoch seconds, read in the machine's local time (as Hermes wrote it)
    session_id: str | None  # the line's session tag, when the thread had one
    number: int  # the session's call number ("API call #N")
    model: str
    provider: str
    prompt: int | None  # the whole prompt, cache reads included
    output: int | None
    cache_read: int
    cache_write: int

    @property
    def priced(self) -> bool:
        """True when the line gives the tokens a price needs."""
        return self.prompt is not None and self.output is not None


def parse_line(line: str) -> LoggedCall | None:
    """The call one line of agent.log logs, or None for any other line (or a
    damaged one: a file cut mid-line, a line another process interleaved)."""
    m = _LINE.match(line.rstrip("\r\n"))
    if m is None:
        return None
    stamp = m["at"]
    try:
        # The fields by position (the pattern checked their digits): strptime was half
        # of the parse, ~10 µs a line (bench/call_log.py).
        at = datetime(
            int(stamp[0:4]),
            int(stamp[5:7]),
            int(stamp[8:10]),
            int(stamp[11:13]),
            int(stamp[14:16]),
            int(stamp[17:19]),
        ).timestamp()
    except ValueError:
        return None
    if m["ms"]:
        at += int(m["ms"]) / 10 ** len(m["ms"])
    rest = m["rest"]
    cache = _CACHE.search(rest)
    write = _WRITE.search(rest)
    return LoggedCall(
        at=at,
        session_id=m["session"],
        number=int(m["n"]),
        model=m["model"],
        provider=m["provider"],
        prompt=_count(m["prompt"]),
        output=_count(m["output"]),
        cache_read=int(cache[1]) if cache else 0,
        cache_write=int(write[1]) if write else 0,
    )


def parse_lines(lines: Iterable[str]) -> Iterator[LoggedCall]:
    """Every call the lines log, in order."""
    for line in lines:
        call = parse_line(line)
        if call is not None:
            yield call


def log_files(home: Path) -> list[Path]:
    """A home's agent.log and its rotated copies, oldest first (``agent.log.3`` …
    ``agent.log.1``, then ``agent.log``): the order their lines were written.

    No ``logs/`` folder: none. One that cannot be listed raises OSError; an entry of
    the right name is listed whatever it is (opening one that is not a readable file
    raises then, and is said, rather than passed over as if absent).
    """
    folder = home / LOG_FOLDER
    try:
        names = [entry.name for entry in os.scandir(folder)]
    except FileNotFoundError:
        return []
    rotated: list[tuple[int, Path]] = []
    for name in names:
        suffix = name[len(LOG_NAME) + 1 :] if name.startswith(f"{LOG_NAME}.") else ""
        if suffix.isdigit():
            rotated.append((int(suffix), folder / name))
    files = [p for _, p in sorted(rotated, reverse=True)]
    return [*files, folder / LOG_NAME] if LOG_NAME in names else files


def _count(text: str) -> int | None:
    return int(text) if text.isdigit() else None
