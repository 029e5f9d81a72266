"""A Hermes installation on this machine, and asking its own code to decide a staged write.

Hermes has no headless ``hermes memory approve`` (#86333); its chat commands call
``hermes_cli.write_approval_commands.handle_pending_subcommand("memory", ["approve",
id], memory_store=tools.memory_tool.load_on_disk_store())``. Recall runs exactly that,
in Hermes's own Python, with ``HERMES_HOME`` set to the profile, so a decision made
here is Hermes's decision: its locks, limits, threat scan, claims and newer record
shapes, whatever its version knows.

Where Recall looks, first found wins:

1. ``RECALL_HERMES_PYTHON``: a Python that can import Hermes (``off`` turns this off);
2. the installer's layout: ``<home>/hermes-agent/venv/bin/python`` (or ``.venv``), the
   home being the root of the profile's Hermes home;
3. ``hermes`` on ``PATH``: the Python its first line names.

A candidate is used only once a probe has imported Hermes's approval code in it (with
``HERMES_HOME`` pointed at an empty folder: importing Hermes creates its folders).
The answer is text; :func:`read_answer` reads it, and the caller checks the files on
disk besides: neither the text alone nor an exit code is trusted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from dashboard.errors import ValidationError
from dashboard.hermes.conventions import PROFILES_FOLDER
from dashboard.text import clip_line

ENV_PYTHON = "RECALL_HERMES_PYTHON"
OFF = ("off", "none", "0", "no")
PROBE_TIMEOUT_S = 30.0
DECIDE_TIMEOUT_S = 60.0
FAILED_PROBE_TTL_S = 60.0  # a Python that could not import Hermes is asked again after this
MARK = "\x1erecall-answer "
# Interpreter variables of Recall's own environment that would point Hermes's Python
# at Recall's packages.
_STRIPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH")

# Run in Hermes's Python: argv = [source folder or "", "probe" | verb, record id].
_SCRIPT = r"""
import inspect, json, sys
source, verb = sys.argv[1], sys.argv[2]
if source:
    sys.path.insert(0, source)
out = {}
try:
    from hermes_cli import write_approval_commands as commands
    from tools import memory_tool
    if verb == "probe":
        try:
            from importlib.metadata import version
            found = version("hermes-agent")
        except Exception:
            found = None
        out = {"version": found, "module": commands.__file__,
               "store": hasattr(memory_tool, "load_on_disk_store")}
    else:
        handle = commands.handle_pending_subcommand
        kwargs = {}
        if "memory_store" in inspect.signature(handle).parameters:
            kwargs["memory_store"] = memory_tool.load_on_disk_store()
        out = {"text": handle("memory", [verb, sys.argv[3]], **kwargs)}
except BaseException as exc:
    out = {"error": f"{type(exc).__name__}: {exc}"}
sys.stdout.flush()
sys.stdout.write("\n" + MARK + json.dumps(out) + "\n")
sys.stdout.flush()
""".replace("MARK", repr(MARK))


class HermesCallFailed(ValidationError):
    """Hermes's own code could not be asked (it crashed, hung or said nothing readable)."""


@dataclass(frozen=True)
class Installation:
    """A Python that imports Hermes's approval code."""

    python: Path
    source: Path | None  # a source checkout put first on sys.path, when there is one
    version: str | None
    found_by: str  # how Recall found it, for the page

    @property
    def label(self) -> str:
        return f"Hermes {self.version}" if self.version else "Hermes"


@dataclass(frozen=True)
class Lookup:
    """What looking for an installation found: one, or why none is used."""

    installation: Installation | None
    problem: str | None = None  # a candidate that was found but could not be used


@dataclass(frozen=True)
class Answer:
    """Hermes's reply to one approve or reject, read."""

    done: bool  # Hermes says it applied (approve) or dropped (reject) the record
    missing: bool  # Hermes says there is no such record
    reason: str | None  # why not done, in Hermes's words
    notes: tuple[str, ...]  # anything else it said about this record (cleanup, receipts)
    text: str  # the whole reply


def root_of(home_root: Path) -> Path:
    """The Hermes home a profile folder belongs to (``<root>/profiles/<name>``)."""
    return home_root.parent.parent if home_root.parent.name == PROFILES_FOLDER else home_root


def candidates(home_root: Path, environ: dict[str, str] | None = None) -> list[tuple[Path, str]]:
    """Every Python worth probing, first choice first, with how it was found."""
    env = os.environ if environ is None else environ
    chosen = env.get(ENV_PYTHON, "").strip()
    if chosen.lower() in OFF:
        return []
    if chosen:
        return [(Path(chosen).expanduser(), f"{ENV_PYTHON}={chosen}")]
    root = root_of(home_root)
    found = [
        (root / "hermes-agent" / venv / "bin" / "python", f"installed in {root / 'hermes-agent'}")
        for venv in ("venv", ".venv")
    ]
    on_path = shutil.which("hermes", path=env.get("PATH"))
    if on_path:
        python = _shebang_python(Path(on_path))
        if python is not None:
            found.append((python, f"the Python of `hermes` on PATH ({on_path})"))
    return [(p, how) for p, how in found if p.is_file()]


def _shebang_python(script: Path) -> Path | None:
    try:
        with script.resolve().open("rb") as f:
            first = f.readline(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if not words or "python" not in Path(words[0]).name:
        return None  # `#!/usr/bin/env python3` would be any Python, not Hermes's
    return Path(words[0])


def _source_of(python: Path) -> Path | None:
    checkout = python.parent.parent.parent  # <checkout>/venv/bin/python
    return checkout if (checkout / "hermes_cli" / "__init__.py").is_file() else None


# -- probing, cached --------------------------------------------------------------------
# A found installation is kept while its approval module's file is unchanged (one stat
# per look); a failed probe is kept FAILED_PROBE_TTL_S, so a page does not start a
# Python on every view.

_probed: dict[Path, tuple[Installation, Path, int]] = {}
_failed: dict[Path, tuple[float, str]] = {}
_probe_lock = threading.Lock()


def find(home_root: Path, environ: dict[str, str] | None = None) -> Lookup:
    """The installation that decides ``home_root``'s staged writes, if any."""
    problems = []
    for python, how in candidates(home_root, environ):
        found = _probe(python, how)
        if isinstance(found, Installation):
            return Lookup(found)
        problems.append(found)
    return Lookup(None, "; ".join(problems) or None)


def _probe(python: Path, how: str) -> Installation | str:
    with _probe_lock:
        kept = _probed.get(python)
        if kept is not None:
            installation, module, mtime = kept
            try:
                if module.stat().st_mtime_ns == mtime:
                    return installation
            except OSError:
                pass
            del _probed[python]
        failed = _failed.get(python)
        if failed is not None and time.monotonic() - failed[0] < FAILED_PROBE_TTL_S:
            return failed[1]
        source = _source_of(python)
        with tempfile.TemporaryDirectory(prefix="recall-hermes-probe-") as empty:
            try:
                said = _run(python, source, Path(empty), ["probe"], PROBE_TIMEOUT_S)
            except HermesCallFailed as exc:
                said = {"error": str(exc)}
        if "error" in said or not said.get("store"):
            why = said.get("error") or "its memory tool has no load_on_disk_store (too old)"
            problem = f"{how}: {python} cannot run Hermes's approval code ({why})"
            _failed[python] = (time.monotonic(), problem)
            return problem
        installation = Installation(python, source, said.get("version"), how)
        module = Path(str(said.get("module")))
        try:
            _probed[python] = (installation, module, module.stat().st_mtime_ns)
        except OSError:
            pass
        return installation


def forget() -> None:
    """Drop every probe kept (tests; an installation changed under a running Recall)."""
    with _probe_lock:
        _probed.clear()
        _failed.clear()


# -- asking -----------------------------------------------------------------------------


def decide(installation: Installation, home_root: Path, verb: str, record_id: str) -> Answer:
    """Ask Hermes to ``approve`` or ``reject`` one staged memory write of ``home_root``."""
    said = _run(
        installation.python,
        installation.source,
        home_root,
        [verb, record_id],
        DECIDE_TIMEOUT_S,
    )
    if "error" in said:
        raise HermesCallFailed(f"{installation.label} failed: {said['error']}")
    text = said.get("text")
    if not isinstance(text, str):
        raise HermesCallFailed(f"{installation.label} answered nothing for {verb} {record_id}")
    return read_answer(text, verb, record_id)


def _run(
    python: Path, source: Path | None, home_root: Path, args: list[str], timeout: float
) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _STRIPPED_ENV}
    env["HERMES_HOME"] = str(home_root)
    command = [str(python), "-c", _SCRIPT, str(source or ""), *args]
    try:
        done = subprocess.run(
            command,
            env=env,
            cwd=str(home_root),
            capture_output=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise HermesCallFailed(f"{python} did not answer within {timeout:.0f} s") from None
    except OSError as exc:
        raise HermesCallFailed(f"{python} could not be started: {exc.strerror or exc}") from None
    out = done.stdout.decode("utf-8", "replace")
    at = out.rfind(MARK)
    if at < 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["nothing"]
        raise HermesCallFailed(
            f"{python} gave no answer (exit status {done.returncode}; last said: {tail[0]})"
        )
    try:
        said = json.loads(out[at + len(MARK) :].splitlines()[0])
    except (ValueError, IndexError):
        raise HermesCallFailed(f"{python} gave an answer Recall cannot read") from None
    return said if isinstance(said, dict) else {"error": "an answer that is not an object"}


# -- reading the reply ------------------------------------------------------------------
# Hermes's replies (write_approval_commands, 0.19 to the newest seen): "Approved N memory
# write(s)." then "Failed:" and one "  <id>: <why>" line per record not applied (a newer
# Hermes lists an applied record there too when its cleanup is left, "applied; cleanup
# …"); "Rejected pending memory write '<id>'." (", but cleanup is pending …");
# "No pending memory write with id '<id>'." / "No pending memory writes.".

_APPROVED = re.compile(r"^Approved (\d+) memory write\(s\)\.")
_REJECTED = "Rejected pending memory write '{id}'"
_MISSING = ("No pending memory write with id '{id}'", "No pending memory writes.")


def read_answer(text: str, verb: str, record_id: str) -> Answer:
    """Hermes's reply to ``verb`` on ``record_id``: done, missing, or why not."""
    lines = [line.rstrip() for line in text.strip().splitlines()]
    mine = [
        line.strip()[len(record_id) + 2 :]
        for line in lines
        if line.strip().startswith(f"{record_id}: ")
    ]
    if any(line.startswith(m.format(id=record_id)) for line in lines for m in _MISSING):
        return Answer(False, True, None, (), text)
    if verb == "approve":
        count = _APPROVED.match(lines[0]) if lines else None
        if count is None:
            return Answer(False, False, f"Hermes answered: {clip_line(text, 400)}", (), text)
        if int(count.group(1)) >= 1:
            return Answer(True, False, None, tuple(mine), text)
        return Answer(False, False, "; ".join(mine) or clip_line(text, 400), (), text)
    said = _REJECTED.format(id=record_id)
    if lines and lines[0].startswith(said):
        rest = lines[0][len(said) :].lstrip("'., ").strip()
        return Answer(True, False, None, (rest,) if rest else (), text)
    return Answer(False, False, f"Hermes answered: {clip_line(text, 400)}", (), text)
