"""The memory page's newer conversations at scale: the staleness answer against the
memory page itself, in the same run.

Serves a demo home with one real ``recall serve`` (the archive imported by its syncer
first, the meaning index left to build or not as the server does) and times, per round:

* ``/memory/USER.md``: the page (the baseline: its provenance, revisions, file);
* ``/api/memory/{user,memory}/staleness`` asked for the first time after the archive
  changed (``cold``: a session is added to the home and the syncer takes it in before
  each round, so the answer is computed again: four searches an entry);
* the same asked again (``warm``: kept until the archive's next write).

Last line: ``page_p50_ms=.. cold_p50_ms=.. cold_p95_ms=.. warm_p95_ms=.. ratio_cold_p50=..``
(ratio = cold p50 / page p50). No target in issue 29: the list loads after the page
(HTMX), so the page's own time is what a person waits for; this says what the list costs.

``--meaning``: the home served as the demo it built, the meaning index built and awaited
first (the fourth question asked too).

Usage: python bench/staleness.py [--home DIR] [--sessions 1000 --messages 100000] [--rounds 5]
       [--meaning]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import pct  # noqa: E402
from bench.meaning import ready_server  # noqa: E402
from dashboard.demo.build import build_demo_home  # noqa: E402
from tests.support import hermes_shapes as shapes  # noqa: E402
from tests.support.browser_support import running_server  # noqa: E402


@contextmanager
def _served(home: Path, meaning: bool) -> Iterator[httpx.Client]:
    """A client to one ``recall serve`` of ``home``: read as given (``--home``: a Recall
    store given so is only read, no meaning index), or with ``meaning`` served as the
    demo it built, its meaning index awaited (bench/meaning.py's ``ready_server``)."""
    if meaning:
        with ready_server(home) as client:
            yield client
        return
    work = ROOT / "bench" / "out" / f"staleness-{home.name}"
    work.mkdir(parents=True, exist_ok=True)
    serve = ["--home", str(home), "--data-dir", str(work / "data")]
    with (
        running_server(serve, work, {"HOME": str(work / "user")}) as server,
        httpx.Client(base_url=server.url, timeout=120) as client,
    ):
        yield client


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=ROOT / "bench" / "out" / "home-100k-story")
    parser.add_argument("--sessions", type=int, default=1_000)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--meaning", action="store_true", help="serve it as the demo, its meaning index built"
    )
    args = parser.parse_args(argv)
    home: Path = args.home
    if not (home / "state.db").exists():
        print(f"building a demo home in {home} …", flush=True)
        report = build_demo_home(
            home, sessions=args.sessions, messages=args.messages, anchor_day="2026-11-30"
        )
        print(
            f"  {report.sessions:,} sessions, {report.messages:,} messages, {report.seconds:.0f} s"
        )
    page, cold, warm = [], [], []
    with _served(home, args.meaning) as client:

        def ms(path: str) -> float:
            t0 = time.perf_counter()
            response = client.get(path)
            assert response.status_code == 200, (path, response.status_code)
            return (time.perf_counter() - t0) * 1000

        ms("/memory/USER.md")  # templates compiled, caches of the page filled
        for n in range(args.rounds):
            # a new session in the home: the archive's next write, so the answer is redone
            sid = f"20261130_235900_b{time.time_ns() % 10**9:09d}"
            shapes.start_session(home / "state.db", sid, time.time(), title=f"bench {sid}")
            shapes.append_messages(
                home / "state.db", sid, [{"role": "user", "content": f"bench {n}"}], time.time()
            )
            time.sleep(3)  # the syncer takes it in
            page.append(ms("/memory/USER.md"))
            for which in ("user", "memory"):
                cold.append(ms(f"/api/memory/{which}/staleness"))
                warm.append(ms(f"/api/memory/{which}/staleness"))
        found = client.get("/api/memory/user/staleness").json()
    flagged = [e["text"][:40] for e in found["entries"] if e["flagged"]]
    print(f"flagged in USER.md: {flagged}; meaning index used: {found['by_meaning']}")
    p50 = statistics.median
    print(
        f"page_p50_ms={p50(page):.1f} cold_p50_ms={p50(cold):.1f} "
        f"cold_p95_ms={pct(cold, 0.95):.1f} warm_p50_ms={p50(warm):.1f} "
        f"warm_p95_ms={pct(warm, 0.95):.1f} "
        f"ratio_cold_p50={p50(cold) / p50(page):.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
