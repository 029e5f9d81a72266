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

``--profiles 3`` (issue 17): the same mix against the 1M home and against one Hermes
home of three profiles of 330k messages each (three demo homes of other seeds, built or
reused under bench/out/, copied in as the root, ``profiles/b`` and ``profiles/c``; its
root is a Recall store with profiles, so it is read through its archive, which the
first ``recall serve`` fills with all three: minutes of CPU, progress logged). Both run
as real ``recall serve``; each round sends every query to the 1M home, to
``?profile=all`` and to ``?profile=b`` (one profile, for information) in a rotating
order, so the machine's noise falls on all three alike. Last line: ``single_p95_ms=..
all_p95_ms=.. one_p95_ms=.. ratio_p95=.. PASS|FAIL`` (target: all ÷ single ≤ 1.3).

Usage: python bench/search.py [--home DIR] [--rounds 3] [--profiles 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack, closing
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import pct
from bench.common import timed as timed_ms
from dashboard.demo.build import build_demo_home
from dashboard.search.query import parse_query
from tests.support.browser_support import Server, running_server

OUT = ROOT / "bench" / "out"
DEFAULT_HOME = OUT / "home-1m"
PROFILE_SESSIONS, PROFILE_MESSAGES = 3_300, 330_000  # a third of the 1M home's
PROFILE_NAMES = ("default", "b", "c", "d", "e")  # the root, then profiles/<name>
FIRST_SEED = 11  # the 1M home's is 7: each profile's text and ids are its own
IMPORT_TIMEOUT_S = 3 * 3600  # the first import of ~1M messages on a busy machine
RATIO_TARGET = 1.3

QUERIES: dict[str, list[str]] = {
    "rare": [
        "zstd",
        "CrashLoopBackOff",
        "pg_stat_activity",
        "ECONNRESET",
        "terraform import",
        "restic",
        "goroutines",
        "rebalanced",
        "cert-manager",
        "allkeys-lru",
    ],
    "medium": [
        "redis",
        "docker",
        "nginx",
        "postgres",
        "kubernetes",
        "timeout",
        "memory",
        "deploy",
        "pool",
        "backup",
    ],
    "phrase": [
        '"connection refused"',
        '"database is locked"',
        '"no space left"',
        '"out of memory"',
        '"connection pool"',
    ],
    "prefix": ["deploy*", "conn*", "kube*", "migrat*", "time*"],
    "and": [
        "redis timeout",
        "docker compose network",
        "postgres lock",
        "nginx 502",
        "pool size worker",
    ],
    "common": ["the", "to", "is", "and", "a", "of", "in"],
    "cjk3": ["数据库连接池", "内存泄漏", "定时任务", "部署失败", "接口超时"],
    "cjk2": ["部署", "回滚", "超时"],
}


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


def timed(fn: Callable[[], object], rounds: int) -> float:
    """Median milliseconds of ``rounds`` calls of ``fn``."""
    return statistics.median(timed_ms(fn, rounds))


def ensure_1m_home(home: Path) -> None:
    """Build the 1M-message demo home at ``home`` unless it is there."""
    if not (home / "state.db").exists():
        print(f"building a 1M-message demo home in {home} (about 2.5 minutes) …", flush=True)
        build_once(home, sessions=10_000, messages=1_000_000, seed=7)


def build_once(home: Path, *, sessions: int, messages: int, seed: int) -> None:
    """Build a demo home at ``home``. A new folder is built beside it and renamed into
    place when done, so a build cut off half way is made again, never taken as done."""
    plan = {"sessions": sessions, "messages": messages, "seed": seed, "anchor_day": "2026-11-30"}
    if home.exists():  # a folder given with --home: built in it, as always
        build_demo_home(home, **plan)
        return
    part = home.with_name(f"{home.name}.part")
    shutil.rmtree(part, ignore_errors=True)
    build_demo_home(part, **plan)
    part.rename(home)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--profiles",
        type=int,
        default=0,
        help="compare ?profile=all over this many 330k-message profiles with the 1M home",
    )
    args = parser.parse_args(argv)
    if args.profiles:
        if not 2 <= args.profiles <= len(PROFILE_NAMES):
            parser.error(f"--profiles takes 2 to {len(PROFILE_NAMES)}")
        return compare_profiles(args.home, args.profiles, args.rounds)
    home: Path = args.home
    ensure_1m_home(home)

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
        print(
            f"{'class':<8} {'query':<26} {'first_ms':>8} {'api_ms':>8} {'naive_ms':>9} "
            f"{'route':<10} sessions"
        )
        for kind, queries in QUERIES.items():
            for q in queries:
                began = time.perf_counter()
                body = client.get("/api/search", params={"q": q}).json()
                first_ms.append((time.perf_counter() - began) * 1000)
                a = timed(
                    lambda q=q: client.get("/api/search", params={"q": q}).raise_for_status(),
                    args.rounds,
                )
                n = timed(lambda q=q: naive(conn, q), args.rounds)
                api_ms.append(a)
                naive_ms.append(n)
                bound = "*" if body.get("bounded") else ""
                print(
                    f"{kind:<8} {q:<26} {first_ms[-1]:8.1f} {a:8.1f} {n:9.1f} "
                    f"{body['route']:<10} {body['total_sessions']}{bound}"
                )
        browse = timed(lambda: client.get("/api/search").raise_for_status(), 5)
        newest = [
            timed(
                lambda q=q: client.get(
                    "/api/search", params={"q": q, "sort": "newest"}
                ).raise_for_status(),
                args.rounds,
            )
            for q in QUERIES["medium"]
        ]
        client.close()
    conn.close()
    print(f"empty-query browse: {browse:.1f} ms (target < 10)")
    print(
        f"newest-first, medium words: p50 {statistics.median(newest):.1f} ms, "
        f"max {max(newest):.1f} ms (target < 10)"
    )
    api_p95, naive_p95 = pct(api_ms, 0.95), pct(naive_ms, 0.95)
    print(
        f"api_p50_ms={statistics.median(api_ms):.1f} api_p95_ms={api_p95:.1f} "
        f"api_max_ms={max(api_ms):.1f} naive_p95_ms={naive_p95:.1f} "
        f"ratio_p95={naive_p95 / api_p95:.1f} first_p50_ms={statistics.median(first_ms):.1f} "
        f"first_p95_ms={pct(first_ms, 0.95):.1f}"
    )
    return 0


def profiles_home(count: int) -> Path:
    """One Hermes home of ``count`` demo homes of 330k messages: the first is its root
    (profile ``default``), the others ``profiles/b``, ``profiles/c``, … Each demo home
    is built once (seed 11, 12, …) and kept; the arranged home holds copies."""
    arranged = OUT / f"profiles-{count}x330k"
    for index, name in enumerate(PROFILE_NAMES[:count]):
        seed = FIRST_SEED + index
        demo = OUT / f"home-330k-s{seed}"
        if not (demo / "state.db").exists():
            print(f"building {demo} ({PROFILE_MESSAGES:,} messages, seed {seed}) …", flush=True)
            build_once(demo, sessions=PROFILE_SESSIONS, messages=PROFILE_MESSAGES, seed=seed)
        target = arranged if index == 0 else arranged / "profiles" / name
        if not (target / "state.db").exists():
            copy_home(demo, target)
    return arranged


def copy_home(demo: Path, target: Path) -> None:
    """Copy a demo home's state.db (through SQLite's backup, so its WAL comes along),
    memories and config into ``target``; the state.db lands last, by rename, so a
    copy cut off half way is made again next time rather than reused."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copytree(demo / "memories", target / "memories", dirs_exist_ok=True)
    shutil.copy2(demo / "config.yaml", target / "config.yaml")
    part = target / "state.db.part"
    part.unlink(missing_ok=True)
    with (
        closing(sqlite3.connect(f"file:{demo / 'state.db'}?mode=ro", uri=True)) as src,
        closing(sqlite3.connect(part)) as dst,
    ):
        src.backup(dst)
    part.rename(target / "state.db")


def wait_for_import(srv: Server) -> None:
    """Wait for the archive's first sync of every profile, saying how far it is."""
    began = last_said = time.monotonic()
    while True:
        sync = httpx.get(f"{srv.url}/healthz", timeout=30).json().get("sync") or {}
        if sync.get("reason"):
            raise RuntimeError(f"the import failed: {sync.get('error')}")
        if sync.get("last_sync_at"):
            print(f"archive ready after {time.monotonic() - began:.0f} s", flush=True)
            return
        if time.monotonic() - began > IMPORT_TIMEOUT_S:
            raise TimeoutError(f"the first import did not finish: {srv.log}")
        if time.monotonic() - last_said >= 30:
            last_said = time.monotonic()
            print(
                f"  importing: {sync.get('sessions_done', 0):,}/{sync.get('sessions_total', 0):,}"
                f" sessions ({time.monotonic() - began:.0f} s)",
                flush=True,
            )
        time.sleep(2)


def compare_profiles(single_home: Path, count: int, rounds: int) -> int:
    """``?profile=all`` over ``count`` profiles of 330k messages against the 1M home."""
    ensure_1m_home(single_home)
    arranged = profiles_home(count)
    one = PROFILE_NAMES[1]
    print(
        f"single home {single_home}; profiles home {arranged} ({count} profiles); "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    with ExitStack() as stack:
        single = stack.enter_context(
            running_server(["--home", str(single_home), "--data-dir", str(OUT / "data")], OUT)
        )
        many = stack.enter_context(
            running_server(
                ["--home", str(arranged), "--data-dir", str(OUT / f"data-profiles-{count}")],
                OUT,
                wait_for_import=False,
            )
        )
        wait_for_import(many)
        targets = {
            "single": (stack.enter_context(httpx.Client(base_url=single.url, timeout=120)), {}),
            "all": (
                stack.enter_context(httpx.Client(base_url=many.url, timeout=120)),
                {"profile": "all"},
            ),
            one: (
                stack.enter_context(httpx.Client(base_url=many.url, timeout=120)),
                {"profile": one},
            ),
        }
        queries = [(kind, q) for kind, qs in QUERIES.items() for q in qs]
        found: dict[str, dict[str, str]] = {name: {} for name in targets}
        first: dict[str, list[float]] = {name: [] for name in targets}
        for name, (client, extra) in targets.items():  # each query's first request
            client.get("/api/search", params={"q": "warmup", **extra}).raise_for_status()
            for _, q in queries:
                t0 = time.perf_counter()
                body = client.get("/api/search", params={"q": q, **extra}).json()
                first[name].append((time.perf_counter() - t0) * 1000)
                found[name][q] = f"{body['total_sessions']}{'*' if body.get('bounded') else ''}"
        samples: dict[str, dict[str, list[float]]] = {
            name: {q: [] for _, q in queries} for name in targets
        }
        names = list(targets)
        for r in range(rounds):
            for i, (_, q) in enumerate(queries):
                # Rotating who goes first, so no target always follows the same one.
                turn = (r + i) % len(names)
                for name in names[turn:] + names[:turn]:
                    client, extra = targets[name]
                    t0 = time.perf_counter()
                    client.get("/api/search", params={"q": q, **extra}).raise_for_status()
                    samples[name][q].append((time.perf_counter() - t0) * 1000)
    medians = {
        name: {q: statistics.median(v) for q, v in per.items()} for name, per in samples.items()
    }
    print(
        f"{'class':<8} {'query':<26} {'single_ms':>9} {'all_ms':>8} {one + '_ms':>8}  "
        f"sessions single/all/{one}"
    )
    for kind, q in queries:
        print(
            f"{kind:<8} {q:<26} {medians['single'][q]:9.1f} {medians['all'][q]:8.1f} "
            f"{medians[one][q]:8.1f}  {found['single'][q]}/{found['all'][q]}/{found[one][q]}"
        )
    p95 = {name: pct(list(m.values()), 0.95) for name, m in medians.items()}
    p50 = {name: statistics.median(m.values()) for name, m in medians.items()}
    ratio = p95["all"] / p95["single"]
    print(
        f"p50 ms: single {p50['single']:.1f}, all {p50['all']:.1f}, {one} {p50[one]:.1f}; "
        f"first requests p95: "
        + ", ".join(f"{n} {pct(v, 0.95):.1f}" for n, v in first.items())
        + f"; load {os.getloadavg()[0]:.1f}"
    )
    verdict = "PASS" if ratio <= RATIO_TARGET else "FAIL"
    print(
        f"single_p95_ms={p95['single']:.1f} all_p95_ms={p95['all']:.1f} "
        f"one_p95_ms={p95[one]:.1f} ratio_p95={ratio:.2f} {verdict} (target <= {RATIO_TARGET})"
    )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
