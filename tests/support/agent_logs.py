"""A Hermes home's ``logs/agent.log``, written as Hermes writes it, and rotated as it rotates.

Beside hermes_shapes.py (which writes ``state.db``): Hermes logs through the standard
``logging`` module (``hermes_logging``) with the format :data:`FORMAT`, the session tag
`` [<session id>]`` when the thread has one, into ``<home>/logs/agent.log`` by a
``RotatingFileHandler`` (5 MB, three old files). Lines here are formatted by
``logging.Formatter`` itself, so the time reads as Hermes's does (local time,
``2026-10-01 12:34:56,789``). Each main-loop model call is one ``API call #N`` line
(hermes/agent_log.py's docstring); other lines (tools, retries, a traceback's
continuation) are interleaved as they are in a real file. Nothing here imports Recall.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)s%(session_tag)s %(name)s: %(message)s"
BACKUPS = 3  # RotatingFileHandler(backupCount=3)
_FORMATTER = logging.Formatter(FORMAT)


@dataclass(frozen=True)
class Call:
    """One main-loop model call as Hermes logs it (``prompt``/``output`` None: the
    provider gave no usage, logged ``in=? out=? … usage=unavailable``)."""

    at: float
    session: str | None  # the source's session id in the tag; None: an untagged line
    number: int  # "API call #N": Hermes counts the calls of one turn
    model: str
    provider: str = "openrouter"
    prompt: int | None = 1_000  # the whole prompt, cache reads included
    output: int | None = 100
    cache_read: int = 0
    cache_write: int = 0
    latency: float = 1.0

    @property
    def priced(self) -> bool:
        return self.prompt is not None and self.output is not None

    @property
    def logged_at(self) -> float:
        """The time the line says: whole milliseconds, as the handler writes them."""
        return int(self.at) + int((self.at - int(self.at)) * 1000) / 1000

    def message(self) -> str:
        head = f"API call #{self.number}: model={self.model} provider={self.provider}"
        if self.prompt is None or self.output is None:
            return f"{head} in=? out=? total=? latency={self.latency:.1f}s usage=unavailable"
        text = (
            f"{head} in={self.prompt} out={self.output} total={self.prompt + self.output}"
            f" latency={self.latency:.1f}s"
        )
        if self.cache_read:
            share = self.cache_read * 100 // max(self.prompt, 1)
            text += f" cache={self.cache_read}/{self.prompt} ({share}%)"
        if self.cache_write:
            text += f" write={self.cache_write}"
        return f"{text} id=gen-{self.number}-{int(self.at)} upstream=Anthropic"


@dataclass(frozen=True)
class Other:
    """Any other log line (a tool ran, a retry, a warning)."""

    at: float
    text: str
    session: str | None = None
    level: int = logging.INFO
    name: str = "tools.terminal_tool"


def line(entry: Call | Other) -> str:
    """The line Hermes's handler writes for ``entry`` (without its newline)."""
    if isinstance(entry, Call):
        level, name, text = logging.INFO, "run_agent", entry.message()
    else:
        level, name, text = entry.level, entry.name, entry.text
    record = logging.LogRecord(name, level, "run_agent.py", 1, text, None, None)
    record.created = entry.at
    record.msecs = int((entry.at - int(entry.at)) * 1000) + 0.0  # as LogRecord sets it
    record.session_tag = f" [{entry.session}]" if entry.session else ""
    return _FORMATTER.format(record)


def log_path(home: Path) -> Path:
    return Path(home) / "logs" / "agent.log"


def write_log(home: Path, entries: Iterable[Call | Other]) -> Path:
    """Append ``entries`` to ``home``'s ``logs/agent.log`` (made when missing), a whole
    line each, in one write (as the handler's stream flushes a record at a time)."""
    path = log_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(f"{line(e)}\n" for e in entries))
    return path


def write_partial(home: Path, text: str) -> Path:
    """Append ``text`` with no newline: a line caught half-written."""
    path = log_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
    return path


def rotate(home: Path, backups: int = BACKUPS) -> None:
    """What ``RotatingFileHandler.doRollover`` does: ``agent.log.{n-1}`` becomes
    ``.{n}`` (the oldest deleted), ``agent.log`` becomes ``.1`` (renames keep each
    file's inode), and a new, empty ``agent.log`` is opened."""
    base = log_path(home)
    for i in range(backups - 1, 0, -1):
        older, newer = Path(f"{base}.{i}"), Path(f"{base}.{i + 1}")
        if older.exists():
            if newer.exists():
                newer.unlink()
            older.rename(newer)
    first = Path(f"{base}.1")
    if first.exists():
        first.unlink()
    if base.exists():
        base.rename(first)
    base.touch()


def stamps(home: Path) -> dict[str, tuple[bytes, int]]:
    """Each log file's bytes and mtime (what a read-only reader must leave as it was)."""
    folder = Path(home) / "logs"
    return {
        p.name: (p.read_bytes(), os.stat(p).st_mtime_ns)
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


# ---------------------------------------------------------------------------
# Facts: a day of calls
# ---------------------------------------------------------------------------

MODEL = "anthropic/claude-sonnet-4"
SMALL_MODEL = "openai/gpt-4o-mini"


def turn_calls(
    session: str | None, at: float, *, first_prompt: int = 12_000, calls: int = 3
) -> list[Call]:
    """One turn of ``session``: ``calls`` calls (numbered from 1, as each turn is), the
    prompt growing by the tool output each call read, the first cached after the first."""
    out: list[Call] = []
    for n in range(1, calls + 1):
        prompt = first_prompt + (n - 1) * 3_000
        out.append(
            Call(
                at=at + n * 2.5 + n / 1000,
                session=session,
                number=n,
                model=MODEL,
                prompt=prompt,
                output=200 + n,
                cache_read=0 if n == 1 else first_prompt,
                cache_write=first_prompt if n == 1 else 0,
            )
        )
    return out


def with_noise(calls: Sequence[Call]) -> list[Call | Other]:
    """``calls`` with the lines Hermes writes between them: a tool run after each call,
    a retry warning, a traceback's continuation line (no time, no level)."""
    entries: list[Call | Other] = []
    for call in calls:
        entries.append(call)
        entries.append(Other(call.at + 0.2, "running: ls -la", session=call.session))
        if call.number == 2:
            entries.append(
                Other(
                    call.at + 0.3,
                    'Rate limited; retrying in 2s\n  File "run_agent.py", line 812',
                    level=logging.WARNING,
                    name="run_agent",
                )
            )
    return entries


def unpriced_call(session: str | None, at: float, number: int = 1) -> Call:
    """A call whose provider returned no usage."""
    return Call(at=at, session=session, number=number, model=SMALL_MODEL, prompt=None, output=None)
