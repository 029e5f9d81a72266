"""Costs at 100k sessions: /api/costs for a year by month × provider.

Builds (or reuses) a demo home of 100,000 sessions (bulk path), starts a real
``recall serve``, and times ``GET /api/costs?period=month&by=provider`` over the
last twelve months (plus by model and by task), next to the plain SQL
aggregation measured in the same run: one ``GROUP BY`` month × provider over
``sessions`` summing the two cost columns (what a quick script would do; it
ignores status, drift, tokens and the timezone).

First, in process, the same question summed from the raw rows (``costs.spend``: what
the page answers before the rollup is built), rounds alternating with its baseline: a
plain ``GROUP BY`` month × provider over the same usage rows (what the raw sums did
before rows were spread over the days of their calls; issue 26's goal: within 2× of
that). ``--raw-only`` stops there.

Then it measures, against a real server whose cost rollup (per-day sums in recall.db)
is built: a range no request asked before (nothing kept), a request right after an
agent recorded a call in the same file (the rollup applies the change first), and
the repeated question. Baselines in the same run: the plain SQL above, and the
same question summed from the raw rows (``costs.spend``).

Lines: ``raw_sums_p50_ms=.. plain_usage_p50_ms=.. raw_ratio=..``, then last
``uncached_p95_ms=.. after_write_p95_ms=.. raw_sums_p50_ms=.. plain_sql_p95_ms=..``
Target: uncached and after-write p95 <= 100 ms.

Usage: python bench/costs.py [--home DIR] [--rounds 20] [--sessions 100000] [--raw-only]
(``--sessions`` sizes a home built afresh; messages are four per session.)
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import pct, timed
from dashboard.costs.rollup import CostRollup
from dashboard.costs.spend import spend
from dashboard.demo.build import build_demo_home
from dashboard.hermes.home import HermesHome
from dashboard.store.readonly import open_readonly
from dashboard.store.recalldb import RecallData
from dashboard.store.records import Usage
from dashboard.store.session_store import SessionStore
from tests.support.browser_support import running_server

DEFAULT_HOME = ROOT / "bench" / "out" / "home-100k-sessions"
PLAIN_SQL = """
SELECT strftime('%Y-%m', started_at, 'unixepoch') AS month, billing_provider,
       sum(estimated_cost_usd), sum(actual_cost_usd), count(*)
FROM sessions WHERE started_at >= ? GROUP BY month, billing_provider
"""
# The raw sums' baseline: the same rows, months and providers, in one plain statement.
PLAIN_USAGE_SQL = """
SELECT strftime('%Y-%m', coalesce(last_seen, first_seen), 'unixepoch') AS month,
       billing_provider, sum(estimated_cost_usd), sum(actual_cost_usd),
       sum(input_tokens), sum(api_call_count), count(DISTINCT session_id)
FROM session_model_usage
WHERE coalesce(last_seen, first_seen) >= ? AND coalesce(first_seen, last_seen) < ?
GROUP BY month, billing_provider
"""


def ensure_home(home: Path, sessions: int) -> Path:
    """The demo home of ``sessions`` sessions (four messages each) at ``home``, built
    when missing; its state.db."""
    if not (home / "state.db").exists():
        print(f"building a {sessions:,}-session demo home in {home} …", flush=True)
        report = build_demo_home(
            home, sessions=sessions, messages=4 * sessions, anchor_day="2026-11-30"
        )
        print(
            f"  {report.sessions:,} sessions, {report.messages:,} messages, {report.seconds:.0f} s"
        )
    return home / "state.db"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--sessions",
        type=int,
        default=100_000,
        help="sessions of a home built afresh (four messages each)",
    )
    parser.add_argument(
        "--raw-only", action="store_true", help="the raw sums and their baseline alone"
    )
    args = parser.parse_args(argv)
    db = ensure_home(args.home, args.sessions)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    sessions, usage = (
        conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("sessions", "session_model_usage")
    )
    print(f"home {args.home}: {sessions:,} sessions, {usage:,} usage rows")
    year_ago = time.time() - 365 * 86400
    plain = timed(lambda: conn.execute(PLAIN_SQL, (year_ago,)).fetchall(), args.rounds)
    conn.close()
    work = ROOT / "bench" / "out"
    # Twelve months ending with the current one (UTC): the call the bench writes "now"
    # must fall inside the range whatever the date.
    today = datetime.now(UTC).date()
    end = (today.replace(day=28) + timedelta(days=4)).replace(day=1)
    first = date(end.year - 1, end.month, 1)
    before = (first - timedelta(days=1)).replace(day=1)  # the month before the range
    params = {"period": "month", "by": "provider", "from": first.isoformat(), "to": end.isoformat()}
    question = {"period": "month", "by": "provider", "start": first, "end": end, "timezone": "UTC"}

    # The same question summed from the raw rows, in process, rounds alternating with
    # a plain GROUP BY over the same usage rows (both after one unmeasured run).
    raw_conn = open_readonly(db)
    window = (
        datetime(first.year, first.month, 1, tzinfo=UTC).timestamp(),
        datetime(end.year, end.month, 1, tzinfo=UTC).timestamp(),
    )
    spend(raw_conn, **question)
    raw_conn.execute(PLAIN_USAGE_SQL, window).fetchall()
    raw, plain_usage = [], []
    for _ in range(args.rounds):
        raw += timed(lambda: spend(raw_conn, **question), 1)
        plain_usage += timed(lambda: raw_conn.execute(PLAIN_USAGE_SQL, window).fetchall(), 1)
    raw_p50, base_p50 = statistics.median(raw), statistics.median(plain_usage)
    print(
        f"raw-row sums (costs.spend, in process): p50 {raw_p50:.1f} ms, p95 "
        f"{pct(raw, 0.95):.1f} ms; plain GROUP BY over the same usage rows: p50 "
        f"{base_p50:.1f} ms\n"
        f"raw_sums_p50_ms={raw_p50:.1f} plain_usage_p50_ms={base_p50:.1f} "
        f"raw_ratio={raw_p50 / base_p50:.2f}",
        flush=True,
    )
    if args.raw_only:
        raw_conn.close()
        return 0

    # Build the rollup the server will use (same data dir, same home key, same zone).
    data_dir = work / "data-costs"
    shutil.rmtree(data_dir, ignore_errors=True)  # measure a first build, not a leftover
    recall = RecallData(data_dir / "recall.db")
    rollup = CostRollup(recall.core, str(HermesHome(args.home).state_db))
    t0 = time.perf_counter()
    rollup.spend(raw_conn, **question)
    build_s = time.perf_counter() - t0
    print(f"rollup ready in {build_s:.1f} s ({rollup.last_refresh})")
    recall.close()
    raw_conn.close()

    env = {"RECALL_TIMEZONE": "UTC"}
    with running_server(["--home", str(args.home), "--data-dir", str(data_dir)], work, env) as srv:
        with httpx.Client(base_url=srv.url, timeout=60) as client, SessionStore(db) as writer:
            # Uncached: every request asks a range no earlier request asked (the
            # reader keeps answers while the file is unchanged), so each is summed.
            cold = []
            for day in range(1, 21):
                fresh = {**params, "from": first.replace(day=day).isoformat()}
                t0 = time.perf_counter()
                client.get("/api/costs", params=fresh).raise_for_status()
                cold.append((time.perf_counter() - t0) * 1000)
            # After a write: an agent records a call between requests (a real writer
            # on the same file), so each request first applies the change.
            sid = writer.create_session("cli", started_at=time.time())
            written = []
            for n in range(args.rounds):
                call = Usage(
                    model="bench",
                    billing_provider="bench",
                    at=time.time(),
                    estimated_cost_usd=0.01 * (n + 1),
                    cost_status="estimated",
                )
                writer.record_usage(sid, call)
                t0 = time.perf_counter()
                answer = client.get("/api/costs", params=params)
                written.append((time.perf_counter() - t0) * 1000)
                answer.raise_for_status()
            client.get("/api/costs", params=params).raise_for_status()  # warm
            api = timed(
                lambda: client.get("/api/costs", params=params).raise_for_status(), args.rounds
            )
            # Other dimensions, uncached too: each request asks a range not asked before.
            others = {
                by: statistics.median(
                    timed(
                        lambda by=by, day=day: client.get(
                            "/api/costs",
                            params={
                                **params,
                                "by": by,
                                "from": before.replace(day=day).isoformat(),
                            },
                        ).raise_for_status(),
                        1,
                    )[0]
                    for day in range(1, 6)
                )
                for by in ("model", "source", "task")
            }
            page = statistics.median(timed(lambda: client.get("/costs").raise_for_status(), 5))
    rows = answer.json()["rows"]
    assert any(r["key"] == "bench" for r in rows), "the written usage must show up"
    print(
        f"plain SQL month × provider over sessions: p50 {statistics.median(plain):.1f} ms, "
        f"p95 {pct(plain, 0.95):.1f} ms"
    )
    dims = ", ".join(f"{k} {v:.1f} ms" for k, v in others.items())
    print(f"uncached by model/source/task p50: {dims}")
    print(f"/costs page p50 {page:.1f} ms")
    print(
        f"repeated /api/costs (same answer kept): p50 {statistics.median(api):.1f} ms, "
        f"p95 {pct(api, 0.95):.1f} ms"
    )
    print(
        f"uncached /api/costs (a range not asked before): p50 {statistics.median(cold):.1f} ms, "
        f"p95 {pct(cold, 0.95):.1f} ms"
    )
    print(
        f"/api/costs right after a write: p50 {statistics.median(written):.1f} ms, "
        f"p95 {pct(written, 0.95):.1f} ms"
    )
    worst = max(pct(cold, 0.95), pct(written, 0.95))
    print(
        f"uncached_p95_ms={pct(cold, 0.95):.1f} after_write_p95_ms={pct(written, 0.95):.1f} "
        f"raw_sums_p50_ms={statistics.median(raw):.1f} "
        f"plain_sql_p95_ms={pct(plain, 0.95):.1f} "
        f"ratio_p95={worst / pct(plain, 0.95):.2f} (target uncached and after-write p95 <= 100)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
