"""Chain pages at scale: a 500-segment chain, a home with 10k chains, in-place epochs.

Builds (bulk path) a home with 10,000 three-segment compaction chains and one
chain of 500 segments, then (through ``SessionStore.compact_in_place``, the write
path the demo uses) one session of 5,000 rows that compacted in place 20 times and,
as its baseline, one session of 5,000 rows that never compacted. It starts a real
``recall serve`` and times, over HTTP:

* ``/chains/<id>`` for the middle of the 500-segment chain and for a 3-segment one;
* ``/chains/<id>`` of the 20-compaction session against the 5,000-row session that
  never compacted (the same rows to read, one epoch to draw): printed as a ratio;
* ``/chains`` (longest, most recent, most expensive of all 10k chains).

It also times, in process, the pass that finds the sessions compacted in place
(``epochs.in_place_counts``): the chains index pays it once after each archive write.

Baseline in the same run: the naive way to find a lineage, one query per hop
(parent, then children of every segment), for the 500-segment chain; and the
naive index, one children query per session.

With ``--archive PATH`` it times a copy of that archive instead (one imported from
a Hermes home, e.g. ``bench/out/arch/hermes-1m.db``): the copy is served as a home's
own Recall store, so no syncer runs and the archive itself is never opened for
writing; the pages are the middle segment of its longest continuation line, a line
of three (or the shortest it has) and ``/chains``. The cost rollup is off there: its
background build over a million messages would share the cores with the timing.

Targets: each page under 200 ms (p50/p95 reported); the 20-compaction session's page
p95 ≤ 200 ms.
Usage: python bench/chains.py [--chains 10000] [--long 500] [--rounds 15] [--archive PATH]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import pct, timed
from dashboard.store.records import ImportSession, NewMessage, Usage
from dashboard.store.session_store import SessionStore
from tests.support.browser_support import running_server


def build_home(folder: Path, chains: int, long: int) -> tuple[str, str]:
    """Write the home; return (a middle segment of the long chain, a short chain's root)."""

    def segments(prefix: str, count: int, start: float):
        at = start
        for i in range(count):
            sid = f"{prefix}-{i:03d}"
            end = at + 600
            yield ImportSession(
                id=sid,
                source="cli",
                started_at=at,
                model="m",
                title=f"{prefix} part {i + 1}",
                parent_session_id=f"{prefix}-{i - 1:03d}" if i else None,
                ended_at=end if i < count - 1 else None,
                end_reason="compression" if i < count - 1 else None,
                messages=[
                    NewMessage("user", f"{prefix} question {i}", timestamp=at + 1),
                    NewMessage("assistant", "an answer", timestamp=at + 5),
                ],
                usage=[
                    Usage(
                        model="m",
                        input_tokens=900,
                        output_tokens=120,
                        estimated_cost_usd=0.01,
                        cost_status="estimated",
                    )
                ],
            )
            at = end + 1

    def everything():
        yield from segments("long", long, 1.6e9)
        for c in range(chains):
            yield from segments(f"c{c:05d}", 3, 1.6e9 + 3600 * c)

    with SessionStore(folder / "state.db") as store:
        store.bulk_import(everything())
    return f"long-{long // 2:03d}", "c00042-000"


IN_PLACE = "inplace-20"  # 5,000 rows, compacted in place 20 times
FLAT = "flat-5000"  # its baseline: 5,000 rows, never compacted
IN_PLACE_ROWS = 5_000
COMPACTIONS = 20
KEEP = 2  # rows each compaction re-inserts after its carrier (as the demo does)


def add_long_sessions(db: Path, start: float = 1.7e9) -> None:
    """The 20-compaction session and its never-compacted baseline, both of 5,000 rows,
    written through the store's write path (``compact_in_place`` as the demo does)."""
    written_per_compaction = 1 + KEEP
    turns = IN_PLACE_ROWS - COMPACTIONS * written_per_compaction
    epochs = COMPACTIONS + 1
    with SessionStore(db) as store:
        for sid, compactions in ((IN_PLACE, COMPACTIONS), (FLAT, 0)):
            store.create_session(
                "cli", session_id=sid, model="m", started_at=start, title=f"{sid} conversation"
            )
            at = start
            rows = turns if compactions else IN_PLACE_ROWS
            per_epoch = [rows // epochs + (1 if n < rows % epochs else 0) for n in range(epochs)]
            for n, count in enumerate(per_epoch if compactions else [rows]):
                batch = []
                for i in range(count):
                    at += 2
                    role = "user" if i % 2 == 0 else "assistant"
                    batch.append(
                        NewMessage(
                            role, f"{sid} epoch {n} message {i}", timestamp=at, token_count=40
                        )
                    )
                store.append_messages(sid, batch)
                if compactions and n < compactions:
                    at += 2
                    store.compact_in_place(sid, f"Summary of epoch {n + 1}.", keep=KEEP, at=at)
            store.record_usage(
                sid,
                Usage(
                    model="m",
                    input_tokens=5000,
                    output_tokens=800,
                    estimated_cost_usd=0.5,
                    cost_status="estimated",
                    at=at,
                ),
            )


def copy_archive(archive: Path, folder: Path) -> Path:
    """A consistent copy of ``archive`` (WAL included) as ``folder``'s own state.db."""
    folder.mkdir(parents=True)
    target = folder / "state.db"
    source = sqlite3.connect(f"file:{archive}?mode=ro", uri=True)
    try:
        out = sqlite3.connect(target)
        try:
            source.backup(out)
        finally:
            out.close()
    finally:
        source.close()
    return target


def pick_chains(db: Path) -> tuple[str, int, str, int]:
    """(the middle segment of the longest continuation line, its length, a segment of a
    line of three or the shortest line, its length), walking parents that ended by
    compression (bench-side SQL: the same pick for any version of the code)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            """
            WITH RECURSIVE line(id, depth, path) AS (
                SELECT id, 0, id FROM sessions WHERE parent_session_id IS NULL
                UNION ALL
                SELECT s.id, line.depth + 1, line.path || ' ' || s.id
                FROM line JOIN sessions p ON p.id = line.id
                JOIN sessions s ON s.parent_session_id = p.id
                WHERE p.end_reason = 'compression' AND coalesce(s.source, '') <> 'subagent'
                  AND line.depth < 1000
            )
            SELECT depth, path FROM line WHERE depth > 0 ORDER BY depth DESC, id
            """
        ).fetchall()
    finally:
        conn.close()
    if not rows:
        raise SystemExit(f"{db} holds no continuation line to time")
    longest = rows[0][1].split()
    short = next((r for r in rows if r[0] == 2), rows[-1])[1].split()
    return longest[len(longest) // 2], len(longest), short[-1], len(short)


def count_in_place(db: Path) -> int | None:
    """The whole-archive pass the chains index caches (read-only, in process); None
    for code without it (a before/after run times older code with this script)."""
    from dashboard.lineage import epochs

    if not hasattr(epochs, "in_place_counts"):
        return None
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return len(epochs.in_place_counts(conn))
    finally:
        conn.close()


def naive_lineage(db: Path, session_id: str) -> int:
    """One query per hop: up to the root, then children of each segment."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        current = session_id
        while True:
            row = conn.execute("SELECT parent_session_id FROM sessions WHERE id=?", (current,))
            parent = row.fetchone()[0]
            if parent is None:
                break
            current = parent
        seen, stack = [current], [current]
        while stack:
            kids = conn.execute("SELECT id FROM sessions WHERE parent_session_id=?", (stack.pop(),))
            for (kid,) in kids:
                seen.append(kid)
                stack.append(kid)
        return len(seen)
    finally:
        conn.close()


def chain_count(db: Path) -> int:
    """Continuation lines of 2+ segments: parents that ended by compression and have a
    (non-subagent) child, counted at the line's first segment."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(
            """
            SELECT count(DISTINCT p.id) FROM sessions p JOIN sessions c
              ON c.parent_session_id = p.id AND coalesce(c.source, '') <> 'subagent'
            WHERE p.end_reason = 'compression' AND NOT EXISTS (
                SELECT 1 FROM sessions g WHERE g.id = p.parent_session_id
                AND g.end_reason = 'compression')
            """
        ).fetchone()[0]
    finally:
        conn.close()


def report(name: str, samples: list[float]) -> tuple[float, float]:
    p50, p95 = statistics.median(samples), pct(samples, 0.95)
    print(f"{name:<34} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms")
    return p50, p95


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chains", type=int, default=10_000)
    parser.add_argument("--long", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--archive", type=Path, help="time a copy of this archive instead")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="recall-chains-bench-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        env: dict[str, str] = {}
        short_len = 3
        if args.archive:
            db = copy_archive(args.archive, work / "home")
            middle, args.long, short, short_len = pick_chains(db)
            args.chains = chain_count(db)
            env["RECALL_COST_ROLLUP"] = "off"
            print(
                f"copied {args.archive} in {time.perf_counter() - t0:.0f} s: {args.chains:,} "
                f"chains, the longest of {args.long} segments"
            )
        else:
            middle, short = build_home(work / "home", args.chains, args.long)
            db = work / "home" / "state.db"
            add_long_sessions(db)
            print(
                f"built {args.chains:,} chains + one of {args.long} + two sessions of "
                f"{IN_PLACE_ROWS:,} rows in {time.perf_counter() - t0:.0f} s"
            )
        in_place = not args.archive
        serve_args = ["--home", str(work / "home"), "--data-dir", str(work / "data")]
        with running_server(serve_args, work, env) as srv:
            with httpx.Client(base_url=srv.url, timeout=60) as client:
                pages = [f"/chains/{middle}", f"/chains/{short}", "/chains"]
                if in_place:
                    pages += [f"/chains/{IN_PLACE}", f"/chains/{FLAT}"]
                for path in pages:
                    client.get(path).raise_for_status()  # warm the page cache and lineage
                long_ms = timed(
                    lambda: client.get(f"/chains/{middle}").raise_for_status(), args.rounds
                )
                short_ms = timed(
                    lambda: client.get(f"/chains/{short}").raise_for_status(), args.rounds
                )
                index_ms = timed(lambda: client.get("/chains").raise_for_status(), args.rounds)
                if in_place:
                    epochs_ms = timed(
                        lambda: client.get(f"/chains/{IN_PLACE}").raise_for_status(), args.rounds
                    )
                    flat_ms = timed(
                        lambda: client.get(f"/chains/{FLAT}").raise_for_status(), args.rounds
                    )
        naive_ms = timed(lambda: naive_lineage(db, middle), max(3, args.rounds // 3))
        counts_ms: list[float] = []
        if in_place and count_in_place(db) is not None:
            counts_ms = timed(lambda: count_in_place(db), 3)
    long50, long95 = report(f"/chains/<{args.long}-segment chain>", long_ms)
    report(f"/chains/<{short_len}-segment chain>", short_ms)
    idx50, idx95 = report(f"/chains (index of {args.chains:,})", index_ms)
    naive50, _ = report("naive per-hop lineage (no page)", naive_ms)
    ok = max(long95, idx95) < 200
    if in_place:
        ep50, ep95 = report(f"/chains/<{COMPACTIONS} in place, {IN_PLACE_ROWS:,} rows>", epochs_ms)
        flat50, flat95 = report(f"/chains/<never compacted, {IN_PLACE_ROWS:,} rows>", flat_ms)
        cnt50 = report("in_place_counts (after a write)", counts_ms)[0] if counts_ms else 0.0
        print(
            f"epochs_p50_ms={ep50:.1f} epochs_p95_ms={ep95:.1f} flat_p50_ms={flat50:.1f} "
            f"flat_p95_ms={flat95:.1f} ratio_p50={ep50 / flat50:.2f} "
            f"ratio_p95={ep95 / flat95:.2f} in_place_counts_p50_ms={cnt50:.1f} "
            f"{'PASS' if ep95 <= 200 else 'SLOW'} (target: 20-compaction page p95 <= 200 ms)"
        )
    print(
        f"chain_p50_ms={long50:.1f} chain_p95_ms={long95:.1f} index_p50_ms={idx50:.1f} "
        f"index_p95_ms={idx95:.1f} naive_lineage_p50_ms={naive50:.1f} "
        f"{'PASS' if ok else 'SLOW'} (target < 200 ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
