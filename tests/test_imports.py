"""The core is a plain library: nothing below web/ loads Flask (an agent embeds it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = (
    "errors",
    "params",
    "text",
    "hermes",
    "store",
    "costs",
    "archive",
    "memory",
    "demo",
    "lineage",
    "search",
    "sessions",
    "reader",
    "summaries",
    "agent",
)

SCRIPT = """
import importlib, pkgutil, sys
import dashboard
names = sys.argv[1:]
for name in names:
    module = importlib.import_module("dashboard." + name)
    for info in pkgutil.walk_packages(getattr(module, "__path__", []), module.__name__ + "."):
        importlib.import_module(info.name)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("flask", "htmx_flask", "werkzeug"))
print(",".join(loaded))
"""


def _loaded_by(*packages: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *packages],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [m for m in done.stdout.strip().split(",") if m]


def test_importing_every_core_module_loads_no_flask() -> None:
    assert _loaded_by(*CORE) == []


def test_the_agent_package_alone_loads_no_flask() -> None:
    assert _loaded_by("agent") == []


def test_the_check_sees_flask_where_it_is() -> None:
    assert "flask" in _loaded_by("web")
