"""Many real writer processes and one searching reader against one state.db.

Each writer appends ``--writes`` messages, one turn per transaction (message row,
both FTS triggers, session counters), while a reader process runs FTS queries
the whole time. Afterwards the rows are counted: every write that did not land
is ``lost``.

Two runs on identical fresh files, in the same invocation (the machine is noisy,
so only same-run comparisons mean anything):

* baseline: plain ``sqlite3`` with only ``busy_timeout=5000`` and Python's
  deferred transactions, no application retry;
* core: Recall's write core (``timeout=1.0``, BEGIN IMMEDIATE, jittered retry,
  PASSIVE checkpoint every 50 writes).

The last line is the core run:
``writers=8 writes=4000 lost=0 retries=R p50_ms=.. p99_ms=.. writes_per_s=..``

Usage: python bench/write_contention.py --writers 8 --writes 500
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore

QUERIES = ("redis", "docker OR nginx", '"connection refused"', "deploy*", "writer3")


def _writer_core(path: str, index: int, writes: int, start_at: float, out: mp.Queue) -> None:
    store = SessionStore(path)
    sid = store.create_session("cli", session_id=f"writer{index}")
    latencies, lost = [], 0
    _wait_until(start_at)
    began = time.perf_counter()
    for i in range(writes):
        t0 = time.perf_counter()
        try:
            store.append_messages(sid, [NewMessage("user", _text(index, i))])
        except sqlite3.OperationalError:
            lost += 1
        latencies.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - began
    retries = store.core.retries
    store.close()
    out.put({"latencies": latencies, "lost": lost, "retries": retries, "elapsed": elapsed})


def _writer_baseline(path: str, index: int, writes: int, start_at: float, out: mp.Queue) -> None:
    conn = sqlite3.connect(path, timeout=5.0)  # busy_timeout=5000, nothing else
    sid = f"writer{index}"
    with conn:
        conn.execute(
            "INSERT INTO sessions(id, source, started_at) VALUES (?, 'cli', ?)", (sid, time.time())
        )
    latencies, lost = [], 0
    _wait_until(start_at)
    began = time.perf_counter()
    for i in range(writes):
        t0 = time.perf_counter()
        try:
            with conn:
                conn.execute(
                    "INSERT INTO messages(session_id, role, content, timestamp)"
                    " VALUES (?, 'user', ?, ?)",
                    (sid, _text(index, i), time.time()),
                )
                conn.execute(
                    "UPDATE sessions SET message_count = message_count + 1 WHERE id=?", (sid,)
                )
        except sqlite3.OperationalError:
            lost += 1
        latencies.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - began
    conn.close()
    out.put({"latencies": latencies, "lost": lost, "retries": 0, "elapsed": elapsed})


def _reader(path: str, start_at: float, stop: mp.Event, out: mp.Queue) -> None:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
    _wait_until(start_at)
    done, failures = 0, 0
    while not stop.is_set():
        q = QUERIES[done % len(QUERIES)]
        try:
            conn.execute(
                "SELECT m.session_id, snippet(messages_fts, 0, '[', ']', '…', 8) FROM messages_fts"
                " JOIN messages m ON m.id = messages_fts.rowid WHERE messages_fts MATCH ?"
                " ORDER BY rank LIMIT 20",
                (q,),
            ).fetchall()
        except sqlite3.OperationalError:
            failures += 1
        done += 1
    conn.close()
    out.put({"queries": done, "failures": failures})


def _text(writer: int, i: int) -> str:
    words = ("redis", "docker", "nginx", "deploy", "connection refused", "postgres", "数据库连接池")
    return f"writer{writer} turn {i}: the {words[i % len(words)]} issue again, " * 3


def _wait_until(moment: float) -> None:
    delay = moment - time.time()
    if delay > 0:
        time.sleep(delay)


def run(mode: str, writers: int, writes: int, folder: Path) -> dict[str, float]:
    """One contention run on a fresh file; return the figures."""
    path = str(folder / f"{mode}.db")
    SessionStore(path).close()  # the schema, both FTS indexes and their triggers
    ctx = mp.get_context("spawn")
    out, reads, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    start_at = time.time() + 2.0  # let every process start and open its connection
    target = _writer_core if mode == "core" else _writer_baseline
    procs = [
        ctx.Process(target=target, args=(path, w, writes, start_at, out)) for w in range(writers)
    ]
    reader = ctx.Process(target=_reader, args=(path, start_at, stop, reads))
    for p in [*procs, reader]:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    stop.set()
    read = reads.get()
    reader.join()

    conn = sqlite3.connect(path)
    landed = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    counted = conn.execute("SELECT sum(message_count) FROM sessions").fetchone()[0] or 0
    conn.close()
    latencies = sorted(x for r in results for x in r["latencies"])
    expected = writers * writes
    return {
        "writers": writers,
        "writes": expected,
        "lost": expected - landed,
        "reported_failures": sum(r["lost"] for r in results),
        "counter_mismatch": landed - counted,
        "retries": sum(r["retries"] for r in results),
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
        "writes_per_s": landed / max(r["elapsed"] for r in results),
        "reader_queries": read["queries"],
        "reader_failures": read["failures"],
    }


def line(figures: dict[str, float]) -> str:
    return (
        f"writers={figures['writers']} writes={figures['writes']} lost={figures['lost']} "
        f"retries={figures['retries']} p50_ms={figures['p50_ms']:.1f} "
        f"p99_ms={figures['p99_ms']:.1f} writes_per_s={figures['writes_per_s']:.0f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--writes", type=int, default=500, help="writes per writer")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--json", action="store_true", help="also print the raw figures")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="recall-bench-") as tmp:
        folder = Path(tmp)
        baseline = None
        if not args.no_baseline:
            baseline = run("baseline", args.writers, args.writes, folder)
            print("baseline busy_timeout=5000 only: " + line(baseline))
            if args.json:
                print(json.dumps(baseline))
        core = run("core", args.writers, args.writes, folder)
        if args.json:
            print(json.dumps(core))
        if baseline:
            ratio = core["writes_per_s"] / baseline["writes_per_s"]
            print(
                f"core/baseline throughput={ratio:.2f}x "
                f"reader_queries core={core['reader_queries']} "
                f"baseline={baseline['reader_queries']}"
            )
        print(line(core))
    return 1 if core["lost"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
