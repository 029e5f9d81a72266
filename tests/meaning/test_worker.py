"""``recall serve`` builds the meaning index in its worker process and keeps it current:
a real server, a real Hermes home, a turn written after the start."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.support import hermes_shapes as shapes
from tests.support.browser_support import running_server

EVERY_SOURCE = "cli,telegram,discord,cron,subagent,api,web,slack"
SAID = "The docker containers cannot reach the postgres database over the compose network."
ASKED = "when my boxes could not talk to each other"


def _ask(url: str, query: str) -> dict:
    asked = {"q": query, "source": EVERY_SOURCE, "mode": "meaning"}
    return httpx.get(f"{url}/api/search", params=asked, timeout=30).json()


def _until(check, seconds: float = 90.0) -> dict:
    end = time.monotonic() + seconds
    while True:
        answer = check()
        if answer is not None or time.monotonic() > end:
            return answer
        time.sleep(0.2)


def test_serve_builds_the_index_and_follows_a_new_turn(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    args = ["--home", str(home), "--data-dir", str(tmp_path / "data")]
    with running_server(args, tmp_path) as server:

        def ready() -> dict | None:
            answer = _ask(server.url, "x")
            return answer if answer["meaning_index"]["ready"] else None

        assert _until(ready) is not None, server.log.read_text()[-2000:]
        shapes.append_turn(home / "state.db", shapes.S_ROOT, SAID, "use one network", 2e9)

        def found() -> dict | None:
            answer = _ask(server.url, ASKED)
            ids = [h["message_id"] for r in answer["results"] for h in r["hits"]]
            texts = [h["snippet"] for r in answer["results"] for h in r["hits"]]
            return answer if ids and any("docker containers" in t for t in texts) else None

        answer = _until(found)
        assert answer is not None, server.log.read_text()[-2000:]
        assert answer["routes"] == ["meaning"] and answer["meaning_index"]["ready"]
    assert "Traceback" not in server.log.read_text()
