"""The embedding example of docs/agents.md (linked from the README) runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from dashboard.hermes.home import HermesHome
from dashboard.reader.reader import StateReader

ROOT = Path(__file__).resolve().parent.parent


def test_the_embedding_example_runs(tmp_path: Path) -> None:
    guide = (ROOT / "docs" / "agents.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- embed-example[^>]*-->\n```python\n(.*?)```", guide, re.S)
    assert found, "docs/agents.md lost its embedding example"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/agents.md)" in readme, "the README no longer links the agents' guide"
    script = tmp_path / "agent.py"
    script.write_text(found.group(1), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    reader = StateReader(HermesHome(tmp_path / "agent-home"))
    messages = reader.transcript("20261130_101500_a1b2c3").messages
    assert [m.role for m in messages] == ["user", "assistant"] * 2
    assert messages[0].text == "Set the redis cache TTL to 300 seconds"
