"""Every page at 1M messages: its first load after start and its warm p50/p95.

Builds (or reuses, ``--home``) the demo home of 10k sessions / 1M messages that
``bench/search.py`` uses and, by default (``--form hermes``), a copy of it in today's
Hermes layout beside it (``bench/hermes_form.py``, once, a few minutes), then starts a
real ``recall serve`` on loopback over that copy: the first start imports it into the
archive of ``--data-dir`` (minutes, progress logged; later runs reuse it) and the pages
read the archive, as they do for a user. ``--form demo`` serves the demo home itself
(a Recall store, read directly: no source, so the archive page lists nothing). The
pages, timed over HTTP, each a full page (no HTMX):

* ``/`` (recent sessions), ``/?q=WORD`` (a mid-frequency word, ``--query``),
  ``/overview``, ``/archive``, ``/chains``, ``/costs``, ``/memory``;
* ``/sessions/<id>``: the session whose row count is nearest 500 from above (page 1 of
  a transcript shows 500 rows), picked from the store the pages read.

**Warm**: one server; once every page has been asked once and the server has gone idle
(its background builds done), ``--rounds`` rounds, each asking every page once in a
rotating order, so the machine's noise falls on all alike. p50 and p95 per page.

**First load after start**: for each page, a fresh ``recall serve`` over the same
store (imported already, files in the OS cache) and that page asked first, as soon
as ``/healthz`` says the server is up: what a user who opens that page first after a
restart waits for (caches of the process empty, background work of the start running).

**Baseline, same run**: ``SELECT count(*) FROM messages`` on that store (read-only, in
this process), timed in every round beside the pages. It is a fixed piece of SQLite
work over the 1M rows the pages read, CPU- and cache-bound as they are, so on a shared
machine it slows with the load as the pages do; ``ratio`` = page p95 ÷ baseline p95
compares runs made under different loads. (``/healthz`` is timed too, for the floor
of one request through Flask and waitress; it is too small to be a useful yardstick.)

Also the server's RSS after the warm rounds (and its peak, VmHWM).

Targets (issue 26): warm p95 ≤ 150 ms, first load ≤ 1 s per page; RSS < 350 MB.
Last lines, one per page: ``page=.. p95_ms=.. first_ms=.. ratio=.. PASS|FAIL``.

Usage: python bench/pages.py [--home DEMO_HOME] [--form hermes|demo] [--data-dir DIR]
       [--rounds 20] [--sessions 10000 --messages 1000000] [--query redis]
(``--sessions``/``--messages`` size a demo home built afresh, under bench/out/.)
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import time
from contextlib import AbstractContextManager, closing
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import pct, timed, wait_idle
from bench.hermes_form import to_current_views
from bench.search import DEFAULT_HOME, OUT, build_once, wait_for_import
from dashboard.archive.files import ARCHIVE_FILE
from tests.support.browser_support import Server, running_server

WARM_P95_TARGET_MS = 150.0
FIRST_TARGET_MS = 1000.0
RSS_TARGET_MB = 350.0
SESSION_ROWS = 500  # a transcript's page size (sessions/transcript.PAGE_SIZE)
BASELINE = "count(*)"


def ensure_home(home: Path, sessions: int, messages: int) -> None:
    """Build a demo home of that size at ``home`` unless it holds a state.db."""
    if not (home / "state.db").exists():
        print(f"building a demo home of {messages:,} messages in {home} …", flush=True)
        began = time.monotonic()
        build_once(home, sessions=sessions, messages=messages, seed=7)
        print(f"built in {time.monotonic() - began:.0f} s", flush=True)


def ensure_hermes_form(demo: Path, home: Path) -> None:
    """Copy ``demo`` into today's Hermes layout at ``home`` unless it is there; the copy
    is made beside it and renamed into place, so one cut off half way is made again."""
    if (home / "state.db").exists():
        return
    print(f"copying {demo} into today's Hermes layout at {home} …", flush=True)
    began = time.monotonic()
    part = home.with_name(f"{home.name}.part")
    to_current_views(demo, part)
    part.rename(home)
    print(f"copied in {time.monotonic() - began:.0f} s", flush=True)


def session_near(store: Path, rows: int) -> tuple[str, int]:
    """The session whose message count is nearest ``rows``, from above if any is."""
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as conn:
        found = conn.execute(
            "SELECT id, message_count FROM sessions "
            "ORDER BY message_count < ?, abs(message_count - ?) LIMIT 1",
            (rows, rows),
        ).fetchone()
    if found is None:
        raise SystemExit(f"{store} holds no session")
    return found[0], found[1]


def pages(session_id: str, query: str) -> dict[str, tuple[str, dict[str, str]]]:
    """Each page's name → its path and query string."""
    return {
        "/": ("/", {}),
        f"/?q={query}": ("/", {"q": query}),
        "/overview": ("/overview", {}),
        "/archive": ("/archive", {}),
        "/chains": ("/chains", {}),
        "/costs": ("/costs", {}),
        "/memory": ("/memory", {}),
        "/sessions/<500 rows>": (f"/sessions/{session_id}", {}),
    }


def rss_mb(pid: int) -> tuple[float, float]:
    """The process's resident set now and at its peak, in MB."""
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


def serve(home: Path, data_dir: Path) -> AbstractContextManager[Server]:
    """A real ``recall serve`` over ``home``."""
    return running_server(
        ["--home", str(home), "--data-dir", str(data_dir)], OUT, wait_for_import=False
    )


def get(client: httpx.Client, target: tuple[str, dict[str, str]]) -> httpx.Response:
    """One page, which must answer 200."""
    path, params = target
    return client.get(path, params=params).raise_for_status()


def warm_rounds(
    srv: Server, targets: dict[str, tuple[str, dict[str, str]]], store: Path, rounds: int
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Each page's warm times over ``rounds`` rotating rounds, with the baseline and
    /healthz timed in each round beside them; the size of each page in bytes."""
    sizes: dict[str, int] = {}
    with (
        httpx.Client(base_url=srv.url, timeout=120) as client,
        closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as conn,
    ):
        for name, target in targets.items():
            sizes[name] = len(get(client, target).content)
        print(f"server idle after {wait_idle(srv.process.pid):.0f} s", flush=True)
        steps = {
            **{
                name: (lambda target=target: get(client, target))
                for name, target in targets.items()
            },
            BASELINE: lambda: conn.execute("SELECT count(*) FROM messages").fetchone(),
            "/healthz": lambda: client.get("/healthz").raise_for_status(),
        }
        names = list(steps)
        samples: dict[str, list[float]] = {name: [] for name in names}
        for r in range(rounds):
            turn = r % len(names)
            for name in names[turn:] + names[:turn]:
                samples[name] += timed(steps[name], 1)
    return samples, sizes


def first_loads(
    home: Path, data_dir: Path, targets: dict[str, tuple[str, dict[str, str]]]
) -> dict[str, float]:
    """Each page's time as the first request of a freshly started server."""
    first: dict[str, float] = {}
    for name, target in targets.items():
        with serve(home, data_dir) as srv, httpx.Client(base_url=srv.url, timeout=120) as client:
            first[name] = timed(lambda target=target: get(client, target), 1)[0]
    return first


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, help="a demo home to reuse (default: built)")
    parser.add_argument(
        "--form",
        choices=("hermes", "demo"),
        default="hermes",
        help="serve a Hermes-layout copy through the archive (default) or the demo home",
    )
    parser.add_argument("--data-dir", type=Path, help="Recall's data folder (its archive)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--query", default="redis", help="the word of the search page")
    args = parser.parse_args(argv)
    sized = (args.sessions, args.messages) != (10_000, 1_000_000)
    demo: Path = args.home or (
        OUT / f"home-{args.sessions}s-{args.messages}m" if sized else DEFAULT_HOME
    )
    OUT.mkdir(parents=True, exist_ok=True)
    ensure_home(demo, args.sessions, args.messages)
    home = demo
    if args.form == "hermes":
        home = OUT / f"hermes-{demo.name}"
        ensure_hermes_form(demo, home)
    data_dir: Path = args.data_dir or (
        OUT / "data" if home == DEFAULT_HOME else OUT / f"data-{home.name}"
    )
    archive = data_dir / ARCHIVE_FILE
    print(f"home {home}; data {data_dir}; load {os.getloadavg()[0]:.1f}", flush=True)

    with serve(home, data_dir) as srv:
        if httpx.get(f"{srv.url}/healthz", timeout=30).json().get("sync"):
            wait_for_import(srv)  # a Hermes home: its first import into the archive
        # A demo home is a Recall store: the pages read it, no archive is made.
        store = archive if archive.exists() else home / "state.db"
        with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as conn:
            count = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        session_id, rows = session_near(store, SESSION_ROWS)
        print(f"{store}: {count:,} messages; session {session_id} ({rows} rows)", flush=True)
        targets = pages(session_id, args.query)
        samples, sizes = warm_rounds(srv, targets, store, args.rounds)
        rss, peak = rss_mb(srv.process.pid)
    load_warm = os.getloadavg()[0]
    first = first_loads(home, data_dir, targets)

    base_p95 = pct(samples[BASELINE], 0.95)
    print(f"\n{'page':<24} {'first_ms':>9} {'p50_ms':>8} {'p95_ms':>8} {'ratio':>6} {'KB':>6}")
    for name, values in samples.items():
        first_ms = f"{first[name]:9.1f}" if name in first else f"{'':>9}"
        kb = f"{sizes[name] / 1024:6.0f}" if name in sizes else ""
        print(
            f"{name:<24} {first_ms} {statistics.median(values):8.1f} {pct(values, 0.95):8.1f} "
            f"{pct(values, 0.95) / base_p95:6.1f} {kb}"
        )
    print(
        f"rounds {args.rounds}; load {load_warm:.1f} after the warm rounds, "
        f"{os.getloadavg()[0]:.1f} at the end; baseline {BASELINE} on the store the pages read"
    )
    rss_verdict = "PASS" if peak < RSS_TARGET_MB else "FAIL"
    print(f"rss_mb={rss:.0f} peak_rss_mb={peak:.0f} {rss_verdict} (target < {RSS_TARGET_MB:.0f})")
    failed = rss_verdict == "FAIL"
    for name in targets:
        p95 = pct(samples[name], 0.95)
        ok = p95 <= WARM_P95_TARGET_MS and first[name] <= FIRST_TARGET_MS
        failed |= not ok
        print(
            f"page={name} p95_ms={p95:.1f} first_ms={first[name]:.1f} "
            f"ratio={p95 / base_p95:.1f} {'PASS' if ok else 'FAIL'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
