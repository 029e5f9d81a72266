"""Commit to visible: a writer process adds a turn every 200 ms while ``recall serve`` runs.

1. Builds a demo home (``recall demo``, bulk path) of ``--messages`` messages. There is
   no converter to today's Hermes views form, so the source is a Recall store and
   ``recall serve --archive`` is forced to a separate file: the source is not the
   archive, and everything the pages read arrives through the syncer.
2. Starts ``recall serve`` as a real process and waits for its first import.
3. A real writer process (this file with ``--writer``) commits one turn every
   ``--interval`` seconds through the write core (``SessionStore.append_messages``, as
   an agent embedding Recall does), each turn carrying a word of its own, and prints
   the wall-clock time of each commit.
4. This process asks ``/api/search`` for each word until the session shows up and
   records commit → visible.
5. With the writer gone, it reads ``recall serve``'s CPU time from
   ``/proc/<pid>/stat`` over ``--idle`` seconds of no change.

Last lines: ``turns=N p50_s=.. p95_s=.. max_s=..`` and ``idle_s=60 cpu_s=.. cpu_pct=..``
(targets: p95 ≤ 300 ms, idle ≤ 1 % of a core). After the first import it prints what
wakes the syncer (``watch=events``: file events, the poll as fallback; ``watch=poll``).

Usage: python bench/sync.py [--messages 200000] [--turns 100] [--idle 60]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import cpu_seconds, pct


def writer(db: str, turns: int, interval: float) -> int:
    """The agent: one session, a turn per ``interval``; prints ``word commit_time``."""
    from dashboard.store.records import NewMessage
    from dashboard.store.session_store import SessionStore

    with SessionStore(db) as store:
        sid = store.create_session("cli", session_id=f"bench-sync-{os.getpid()}", model="m-1")
        for i in range(turns):
            began = time.monotonic()
            word = f"syncbench{os.getpid()}x{i}"
            store.append_messages(
                sid,
                [
                    NewMessage("user", f"turn {i}: {word} arrived"),
                    NewMessage("assistant", f"noted {word}"),
                ],
            )
            print(word, time.time(), flush=True)
            time.sleep(max(0.0, interval - (time.monotonic() - began)))
    return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_first_import(url: str, proc: subprocess.Popen[str], timeout: float) -> float:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if proc.poll() is not None:
            raise SystemExit("recall serve exited")
        try:
            sync = httpx.get(f"{url}/healthz", timeout=5).json().get("sync") or {}
            if sync.get("last_sync_at"):
                return time.monotonic() - began
            if sync.get("reason"):
                raise SystemExit(f"the source cannot be read: {sync.get('error')}")
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit("the first import did not finish in time")


class Watcher:
    """One thread asking ``/api/search`` every ``POLL_S`` for the words still outstanding.

    Commits are ordered and a sync copies one snapshot of the source, so once a word is
    visible every earlier one is too: each round asks for the newest outstanding word
    (all of them are visible when it is), else the oldest. Two requests per round at
    most, so the measuring does not load the server it measures.
    """

    POLL_S = 0.02

    def __init__(self, url: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=30)
        self.pending: list[tuple[str, float]] = []  # (word, commit time), oldest first
        self.delays: list[float] = []
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def add(self, word: str, committed: float) -> None:
        with self.lock:
            self.pending.append((word, committed))

    def visible(self, word: str) -> bool:
        return bool(self.client.get("/api/search", params={"q": word}).json().get("results"))

    def run(self) -> None:
        while True:
            with self.lock:
                pending = list(self.pending)
            if not pending:
                if self.done.is_set():
                    return
                time.sleep(self.POLL_S)
                continue
            if self.visible(pending[-1][0]):
                seen = len(pending)
            elif self.visible(pending[0][0]):
                seen = 1
            else:
                seen = 0
            now = time.time()
            with self.lock:
                self.delays.extend(now - committed for _, committed in self.pending[:seen])
                del self.pending[:seen]
            time.sleep(self.POLL_S)

    def finish(self, timeout: float = 60) -> list[str]:
        """Wait for the outstanding words; return those never seen."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if not self.pending:
                    break
            time.sleep(0.05)
        self.done.set()
        with self.lock:
            lost = [w for w, _ in self.pending]
            self.pending.clear()
        self.thread.join()
        self.client.close()
        return lost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--sessions", type=int, help="default: one per 100 messages")
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--idle", type=float, default=60.0)
    parser.add_argument("--workdir", help="keep the home and archive here (default: a temp dir)")
    parser.add_argument(
        "--writer", nargs=3, metavar=("DB", "TURNS", "INTERVAL"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.writer:
        return writer(args.writer[0], int(args.writer[1]), float(args.writer[2]))

    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-sync-"))
    home, archive = work / "home", work / "archive.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(work / "xdg")}
    if not (home / "state.db").exists():
        sessions = args.sessions or max(1, args.messages // 100)
        t0 = time.monotonic()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "dashboard.cli",
                "demo",
                "--home",
                str(home),
                "--sessions",
                str(sessions),
                "--messages",
                str(args.messages),
                "--bulk",
            ],
            check=True,
            env=env,
        )
        print(f"built the source in {time.monotonic() - t0:.0f}s", flush=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (work / "serve.log").open("w")
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dashboard.cli",
            "serve",
            "--home",
            str(home),
            "--port",
            str(port),
            "--data-dir",
            str(work / "data"),
            "--archive",
            str(archive),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        took = wait_first_import(url, serve, timeout=1800)
        print(f"first import: {took:.1f}s (archive {archive.stat().st_size / 1e6:.0f} MB)")
        sync = httpx.get(f"{url}/healthz", timeout=30).json()["sync"]
        print(f"watch={sync.get('watch', 'poll (no watch field: before file events)')}")
        # The first sync's follow-on work (the cost rollup's build over the whole archive)
        # runs in the background: measure the steady state, and say how long that took.
        print(f"settled {quiet_cpu(serve.pid):.0f}s after the first import", flush=True)

        if args.turns:
            measure_delays(url, home, args)
        settle(url)  # the last sync pass (and its rollup refresh) is over
        before, t0 = cpu_seconds(serve.pid), time.monotonic()
        time.sleep(args.idle)
        used, span = cpu_seconds(serve.pid) - before, time.monotonic() - t0
        print(f"idle_s={span:.0f} cpu_s={used:.2f} cpu_pct={used / span * 100:.2f}", flush=True)
    finally:
        serve.terminate()
        serve.wait(timeout=60)
        log.close()
    return 0


def quiet_cpu(pid: int, window_s: float = 2.0, below: float = 0.02, most_s: float = 600) -> float:
    """Wait until ``pid`` uses under ``below`` of a core for a ``window_s`` window."""
    began = time.monotonic()
    while time.monotonic() - began < most_s:
        before = cpu_seconds(pid)
        time.sleep(window_s)
        if cpu_seconds(pid) - before < below * window_s:
            break
    return time.monotonic() - began


def settle(url: str, quiet_s: float = 3.0) -> None:
    """Wait until no sync runs and none finished for ``quiet_s``."""
    last, since = None, time.monotonic()
    while True:
        sync = httpx.get(f"{url}/healthz", timeout=30).json()["sync"]
        if sync["running"] or sync["last_sync_at"] != last:
            last, since = sync["last_sync_at"], time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.25)


def measure_delays(url: str, home: Path, args: argparse.Namespace) -> None:
    """Run the writer process and print commit → visible figures."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    watcher = Watcher(url)
    agent = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--writer",
            str(home / "state.db"),
            str(args.turns),
            str(args.interval),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert agent.stdout is not None
    for line in agent.stdout:
        word, committed = line.split()
        watcher.add(word, float(committed))
    agent.wait()
    lost = watcher.finish()
    delays = watcher.delays
    print(
        f"turns={len(delays)} lost={len(lost)} p50_s={pct(delays, 0.5):.3f} "
        f"p95_s={pct(delays, 0.95):.3f} max_s={max(delays):.3f}",
        flush=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
