"""Search latency at 1M messages: Recall's /api/search against a naive FTS5 query.

Builds (or reuses) a demo home of 10k sessions / 1M messages, starts a real
``recall serve`` on loopback, and sends a fixed mix of ~50 queries (rare, medium,
phrase, prefix, AND, very common words, CJK with 2 and 3+ characters) through
``GET /api/search``. In the same process it runs the seed's naive stage 1 for the
same queries: one ``MATCH … ORDER BY rank LIMIT 50`` joined to sessions, grouped
in Python. Both are timed per query (median of ``--rounds``); the machine is
noisy, so only the same-run ratio is meaningful.

Also times the empty-query browse and the newest-first sort (target < 10 ms), and
each query's first request (``first_ms``: nothing of it read before, so the epochs of
the in-place conversations it hits are derived then, not taken from the reader's cache).

Last line: ``api_p50_ms=.. api_p95_ms=.. api_max_ms=.. naive_p95_ms=.. ratio_p95=..
first_p50_ms=.. first_p95_ms=..``
Targets: ratio_p95 >= 5, api_p95 <= 150 ms, api_p50 <= 50 ms.

Usage: python bench/search.py [--home DIR] [--rounds 3]
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

from dashboard.demo.build import build_demo_home  # noqa: E402
from dashboard.repository.query import parse_query  # noqa: E402
from tests.browser_support import running_server  # noqa: E402

DEFAULT_HOME = ROOT / "bench" / "out" / "home-1m"

QUERIES: dict[str, list[str]] = {
    "rare": ["zstd", "CrashLoopBackOff", "pg_stat_activity", "ECONNRESET", "terraform import",
             "restic", "goroutines", "rebalanced", "cert-manager", "allkeys-lru"],
    "medium": ["redis", "docker", "nginx", "postgres", "kubernetes", "timeout", "memory",
               "deploy", "pool", "backup"],
    "phrase": ['"connection refused"', '"database is locked"', '"no space left"',
               '"out of memory"', '"connection pool"'],
    "prefix": ["deploy*", "conn*", "kube*", "migrat*", "time*"],
    "and": ["redis timeout", "docker compose network", "postgres lock", "nginx 502",
            "pool size worker"],
    "common": ["the", "to", "is", "and", "a", "of", "in"],
    "cjk3": ["数据库连接池", "内存泄漏", "定时任务", "部署失败", "接口超时"],
    "cjk2": ["部署", "回滚", "超时"],
}  # fmt: skip


def naive(conn: sqlite3.Connection, query: str) -> list[dict]:
    """The seed's stage 1: one ranked MATCH, grouped into sessions in Python."""
    parsed = parse_query(query)
    cjk = any(t.cjk for t in parsed.positive)
    table = "messages_fts_trigram" if cjk else "messages_fts"
    match = parsed.fts_match("trigram" if cjk else "unicode61") or parsed.fts_match("unicode61")
    rows = conn.execute(
        f"SELECT m.session_id, m.role, m.content, m.timestamp, s.source, s.model "
        f"FROM {table} JOIN messages m ON m.id = {table}.rowid "
        f"JOIN sessions s ON s.id = m.session_id WHERE {table} MATCH ? "
        f"ORDER BY rank LIMIT 50",
        (match,),
    ).fetchall()
    groups: dict[str, dict] = {}
    for sid, role, content, ts, source, model in rows:
        g = groups.setdefault(sid, {"session_id": sid, "source": source, "model": model})
        g.setdefault("hits", [])
        g["hits"].append({"role": role, "content": (content or "")[:200], "timestamp": ts})
    return list(groups.values())


def timed(fn, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1000


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    home: Path = args.home
    if not (home / "state.db").exists():
        print(f"building a 1M-message demo home in {home} (about 2.5 minutes) …", flush=True)
        build_demo_home(home, sessions=10_000, messages=1_000_000, anchor_day="2026-11-30")

    conn = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True)
    count = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    print(f"home {home}: {count:,} messages")
    workdir = ROOT / "bench" / "out"
    workdir.mkdir(parents=True, exist_ok=True)
    api_ms: list[float] = []
    naive_ms: list[float] = []
    first_ms: list[float] = []
    with running_server(["--home", str(home), "--data-dir", str(workdir / "data")], workdir) as srv:
        client = httpx.Client(base_url=srv.url, timeout=60)
        client.get("/api/search", params={"q": "warmup"})
        print(f"{'class':<8} {'query':<26} {'first_ms':>8} {'api_ms':>8} {'naive_ms':>9} "
              f"{'route':<10} sessions")  # fmt: skip
        for kind, queries in QUERIES.items():
            for q in queries:
                began = time.perf_counter()
                body = client.get("/api/search", params={"q": q}).json()
                first_ms.append((time.perf_counter() - began) * 1000)
                a = timed(lambda q=q: client.get("/api/search", params={"q": q}).raise_for_status(),
                          args.rounds)  # fmt: skip
                n = timed(lambda q=q: naive(conn, q), args.rounds)
                api_ms.append(a)
                naive_ms.append(n)
                bound = "*" if body.get("bounded") else ""
                print(f"{kind:<8} {q:<26} {first_ms[-1]:8.1f} {a:8.1f} {n:9.1f} "
                      f"{body['route']:<10} {body['total_sessions']}{bound}")  # fmt: skip
        browse = timed(lambda: client.get("/api/search").raise_for_status(), 5)
        newest = [
            timed(
                lambda q=q: client.get(
                    "/api/search", params={"q": q, "sort": "newest"}
                ).raise_for_status(),
                args.rounds,
            )  # fmt: skip
            for q in QUERIES["medium"]
        ]
        client.close()
    conn.close()
    print(f"empty-query browse: {browse:.1f} ms (target < 10)")
    print(f"newest-first, medium words: p50 {statistics.median(newest):.1f} ms, "
          f"max {max(newest):.1f} ms (target < 10)")  # fmt: skip
    api_p95, naive_p95 = pct(api_ms, 0.95), pct(naive_ms, 0.95)
    print(
        f"api_p50_ms={statistics.median(api_ms):.1f} api_p95_ms={api_p95:.1f} "
        f"api_max_ms={max(api_ms):.1f} naive_p95_ms={naive_p95:.1f} "
        f"ratio_p95={naive_p95 / api_p95:.1f} first_p50_ms={statistics.median(first_ms):.1f} "
        f"first_p95_ms={pct(first_ms, 0.95):.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
