"""A real Hermes Agent for tests: its PyPI release, installed by `make test` in .hermes-venv/.

:func:`install_into` lays it out in a home as Hermes's installer does
(``<home>/hermes-agent/venv``, here a link to the shared venv), so Recall finds it the
way it finds one on a user's machine. :func:`run_hermes` runs a snippet of Python in
Hermes's interpreter with ``HERMES_HOME`` set: staging a write through Hermes's own
``stage_write``, or applying payloads through its own memory store.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
HERMES_VENV = REPO / ".hermes-venv"
PINNED = (REPO / "tests" / "hermes-agent.txt").read_text().split("hermes-agent==")[1].split()[0]


def hermes_python() -> Path:
    """The real Hermes's interpreter; the test fails (never skips) without it."""
    python = HERMES_VENV / "bin" / "python"
    if not (HERMES_VENV / ".installed").is_file():
        pytest.fail(f"{HERMES_VENV} is missing: run `make test` (it installs Hermes {PINNED})")
    return python


def install_into(home: Path) -> Path:
    """``<home>/hermes-agent/venv`` as the installer leaves it; its Python."""
    checkout = home / "hermes-agent"
    checkout.mkdir(parents=True, exist_ok=True)
    venv = checkout / "venv"
    if not venv.exists():
        venv.symlink_to(hermes_python().parent.parent, target_is_directory=True)
    return venv / "bin" / "python"


def run_hermes(home: Path, code: str, *args: str) -> Any:
    """Run ``code`` in Hermes's Python with ``HERMES_HOME=home``; it prints one JSON value
    as its last line, returned here."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["HERMES_HOME"] = str(home)
    done = subprocess.run(
        [str(hermes_python()), "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


STAGE = """
import json, sys
from tools import write_approval as wa
record = wa.stage_write("memory", json.loads(sys.argv[1]), summary=sys.argv[2], origin=sys.argv[3])
print(json.dumps(record))
"""


def hermes_stage(
    home: Path, payload: dict[str, Any], *, origin: str = "foreground"
) -> dict[str, Any]:
    """Stage ``payload`` through Hermes's own write-approval module; its record."""
    summary = str(payload.get("content") or payload.get("old_text") or payload.get("action"))
    return run_hermes(home, STAGE, json.dumps(payload), summary, origin)


APPLY_EACH = """
import json, sys
from pathlib import Path
from tools.memory_tool import apply_memory_pending, load_on_disk_store
cases = json.loads(Path(sys.argv[1]).read_text())
out = []
path = Path(sys.argv[2])
for text, payload in cases:
    path.write_text(text, encoding="utf-8")
    result = apply_memory_pending(payload, load_on_disk_store())
    out.append(path.read_text(encoding="utf-8") if result.get("success") else None)
print(json.dumps(out))
"""


def hermes_applies(
    home: Path, cases: list[tuple[str, dict[str, Any]]], name: str = "USER.md"
) -> list[str | None]:
    """For each (file text, payload): the file after Hermes's own memory store applies
    it, or None when the store refuses it. One Hermes process for all."""
    (home / "memories").mkdir(parents=True, exist_ok=True)
    spec = home / "cases.json"
    spec.write_text(json.dumps(cases), encoding="utf-8")
    return run_hermes(home, APPLY_EACH, str(spec), str(home / "memories" / name))
