"""A scripted agent in its own process writes 50 turns while ``recall serve`` reads them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx

from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from tests.support.agent_script import assistant_text, user_text
from tests.support.browser_support import running_server

ROOT = Path(__file__).resolve().parents[2]
TURNS = 50


def test_fifty_turns_land_in_order_while_the_dashboard_reads(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with SessionStore(home / "state.db") as store:  # some history for the agent to recall
        store.create_session("telegram", session_id="earlier", started_at=time.time() - 86400)
        store.append_messages("earlier", [NewMessage("user", "the pelican rollout plan")])
    args = ["--home", str(home), "--data-dir", str(tmp_path / "data")]
    with running_server(args, tmp_path) as server, httpx.Client(base_url=server.url) as web:
        agent = subprocess.Popen(
            [sys.executable, "-m", "tests.support.agent_script", str(home), "agent-1", str(TURNS)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        statuses = []
        while agent.poll() is None:  # the dashboard reads while the agent writes
            statuses.append(web.get("/api/search", params={"q": "agentword*"}).status_code)
            statuses.append(web.get("/", params={"q": "pelican"}).status_code)
        out, err = agent.communicate(timeout=60)
        assert agent.returncode == 0, err
        counters = json.loads(out.strip().splitlines()[-1])

        transcript = web.get("/api/sessions/agent-1/messages").json()
        got = [(m["role"], m["content"]) for m in transcript["messages"]]
        expected = []
        for n in range(TURNS):
            expected += [("user", user_text(n)), ("assistant", assistant_text(n))]
        assert got == expected  # every message, in order
        ids = [m["id"] for m in transcript["messages"]]
        assert ids == sorted(ids)
        assert transcript["session"]["source"] == "cli"
        for n in (0, 17, TURNS - 1):  # the dashboard's search finds each turn
            found = web.get("/api/search", params={"q": f"agentword{n:03d}"}).json()
            assert [r["session_id"] for r in found["results"]] == ["agent-1"], n
        page = web.get("/sessions/agent-1").text
        assert "agentreply049" in page
    assert statuses and set(statuses) == {200}, sorted(set(statuses))
    # Each turn recalled the earlier plan; after the first, from the queued prefetch.
    assert counters["recalled"] == TURNS and counters["late"] == 0
    assert counters["speculative_used"] == TURNS - 1
    assert counters["searches"] == TURNS  # one search per turn, never two
