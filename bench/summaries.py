"""Summaries in parallel: 12 sessions against a model that answers after 1 s.

Starts the OpenAI-compatible stub (``tests/llm_stub.py``, 1 s per answer) and two
real ``recall serve`` processes over the same home: one at the default
concurrency (3), one at concurrency 1 (the serial baseline, same run). Each asks
``/api/session_search`` for 12 sessions while another thread keeps searching
through ``/api/search``, to show that stage 1 is served while summaries are in
flight.

Last line: ``sessions=12 concurrency=3 wall_s=.. serial_s=.. speedup=..``

Usage: python bench/summaries.py [--sessions 12] [--delay 1.0] [--concurrency 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from tests.support.browser_support import running_server
from tests.support.llm_stub import StubLLM


def build_home(folder: Path, sessions: int) -> Path:
    with SessionStore(folder / "state.db") as store:
        for i in range(sessions):
            sid = store.create_session("cli", session_id=f"bench{i:02d}", started_at=1.7e9 + i)
            store.append_messages(
                sid,
                [
                    NewMessage("user", f"the redis pool is exhausted on worker-{i} again"),
                    NewMessage("assistant", f"Set max_connections={20 + i} and share one pool."),
                ],
            )
    return folder


def run(home: Path, stub: StubLLM, sessions: int, concurrency: int, work: Path) -> dict:
    """Wall time of one session_search over all sessions, and search latencies meanwhile."""
    env = {
        "RECALL_LLM_BASE_URL": stub.url,
        "RECALL_LLM_MODEL": "bench-model",
        "RECALL_SUMMARY_CONCURRENCY": str(concurrency),
    }
    data = work / f"data-{concurrency}"
    with running_server(["--home", str(home), "--data-dir", str(data)], work, env) as srv:
        searches: list[float] = []
        done = threading.Event()

        def keep_searching() -> None:
            with httpx.Client(base_url=srv.url, timeout=30) as client:
                while not done.is_set():
                    t0 = time.perf_counter()
                    client.get("/api/search", params={"q": "redis pool"}).raise_for_status()
                    searches.append((time.perf_counter() - t0) * 1000)
                    time.sleep(0.05)

        searcher = threading.Thread(target=keep_searching)
        stub.max_in_flight = 0
        with httpx.Client(base_url=srv.url, timeout=120) as client:
            searcher.start()
            t0 = time.perf_counter()
            body = client.get(
                "/api/session_search", params={"query": "redis pool", "limit": sessions}
            ).json()
            wall = time.perf_counter() - t0
            done.set()
            searcher.join()
    models = sum(1 for r in body["results"] if not r["summary"].startswith("[Raw preview"))
    return {
        "wall": wall,
        "count": body["count"],
        "models": models,
        "max_in_flight": stub.max_in_flight,
        "searches": searches,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="recall-summaries-bench-") as tmp:
        work = Path(tmp)
        home = build_home(work / "home", args.sessions)
        with StubLLM(delay=args.delay) as stub:
            serial = run(home, stub, args.sessions, 1, work)
            parallel = run(home, stub, args.sessions, args.concurrency, work)
    for name, r in (("serial", serial), ("parallel", parallel)):
        s = r["searches"]
        print(
            f"{name}: {r['count']} sessions ({r['models']} model summaries) in {r['wall']:.2f} s, "
            f"max in flight {r['max_in_flight']}; {len(s)} searches served meanwhile, "
            f"p50 {statistics.median(s):.1f} ms, max {max(s):.1f} ms"
        )
    print(
        f"sessions={parallel['count']} concurrency={args.concurrency} "
        f"wall_s={parallel['wall']:.2f} serial_s={serial['wall']:.2f} "
        f"speedup={serial['wall'] / parallel['wall']:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
