"""Costs at 100k sessions: /api/costs for a year by month × provider.

Builds (or reuses) a demo home of 100,000 sessions (bulk path), starts a real
``recall serve``, and times ``GET /api/costs?period=month&by=provider`` over the
last twelve months (plus by model and by task), next to the plain SQL
aggregation measured in the same run: one ``GROUP BY`` month × provider over
``sessions`` summing the two cost columns (what a quick script would do; it
ignores status, drift, tokens and the timezone).

Last line: ``api_p50_ms=.. api_p95_ms=.. plain_sql_p50_ms=.. ratio_p95=..``
Target: api_p95 <= 100 ms.

Usage: python bench/costs.py [--home DIR] [--rounds 20]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import pct, timed  # noqa: E402
from dashboard.demo.build import build_demo_home  # noqa: E402
from tests.browser_support import running_server  # noqa: E402

DEFAULT_HOME = ROOT / "bench" / "out" / "home-100k-sessions"
PLAIN_SQL = """
SELECT strftime('%Y-%m', started_at, 'unixepoch') AS month, billing_provider,
       sum(estimated_cost_usd), sum(actual_cost_usd), count(*)
FROM sessions WHERE started_at >= ? GROUP BY month, billing_provider
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    if not (args.home / "state.db").exists():
        print(f"building a 100k-session demo home in {args.home} …", flush=True)
        report = build_demo_home(
            args.home, sessions=100_000, messages=400_000, anchor_day="2026-11-30"
        )
        print(
            f"  {report.sessions:,} sessions, {report.messages:,} messages, {report.seconds:.0f} s"
        )
    db = args.home / "state.db"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    sessions, usage = (conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                       for t in ("sessions", "session_model_usage"))  # fmt: skip
    print(f"home {args.home}: {sessions:,} sessions, {usage:,} usage rows")
    year_ago = time.time() - 365 * 86400
    plain = timed(lambda: conn.execute(PLAIN_SQL, (year_ago,)).fetchall(), args.rounds)
    conn.close()
    work = ROOT / "bench" / "out"
    params = {"period": "month", "by": "provider", "from": "2025-12-01", "to": "2026-12-01"}
    with running_server(["--home", str(args.home), "--data-dir", str(work / "data")], work) as srv:
        with httpx.Client(base_url=srv.url, timeout=60) as client:
            # Uncached: every request asks a range no earlier request asked (the
            # reader keeps answers while the file is unchanged), so each is summed.
            cold = []
            for day in range(1, 11):
                fresh = {**params, "from": f"2025-12-{day:02d}"}
                t0 = time.perf_counter()
                client.get("/api/costs", params=fresh).raise_for_status()
                cold.append((time.perf_counter() - t0) * 1000)
            client.get("/api/costs", params=params).raise_for_status()  # warm
            api = timed(lambda: client.get("/api/costs", params=params).raise_for_status(),
                        args.rounds)  # fmt: skip
            others = {
                by: statistics.median(
                    timed(
                        lambda by=by: client.get(
                            "/api/costs", params={**params, "by": by}
                        ).raise_for_status(),
                        5,
                    )
                )  # fmt: skip
                for by in ("model", "source", "task")
            }
            page = statistics.median(timed(lambda: client.get("/costs").raise_for_status(), 5))
    print(f"plain SQL month × provider over sessions: p50 {statistics.median(plain):.1f} ms")
    print("by model/source/task p50: " + ", ".join(f"{k} {v:.1f} ms" for k, v in others.items()))
    print(f"/costs page p50 {page:.1f} ms")
    print(f"uncached /api/costs (a range not asked before): p50 {statistics.median(cold):.1f} ms, "
          f"p95 {pct(cold, 0.95):.1f} ms")  # fmt: skip
    api_p95 = pct(api, 0.95)
    print(
        f"api_p50_ms={statistics.median(api):.1f} api_p95_ms={api_p95:.1f} "
        f"uncached_p95_ms={pct(cold, 0.95):.1f} "
        f"plain_sql_p50_ms={statistics.median(plain):.1f} "
        f"ratio_p95={api_p95 / pct(plain, 0.95):.2f} (target api_p95 <= 100)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
