"""The memory page's provenance read (``StateReader.memory_provenance``) on a big home.

Reads the home's store as the memory page does: USER.md and MEMORY.md as they are on
disk, then a stress case, USER.md made of the twenty texts the agent wrote most often
(the demo home writes the same few texts again and again: hundreds of writes each,
where a person's file has one to three). Each first from a fresh reader (the calls
read and parsed: what the first page after a sync pays), then ``--rounds`` timings
of a warm one (its calls kept until the archive's next write), p50 and p95.

**Baseline, same run**: ``SELECT count(*) FROM messages`` on the same connection's
file, timed in every round beside them; ``ratio`` = p95 ÷ baseline p95 compares runs
made under different loads.

    PYTHONPATH=. python bench/memory_provenance.py --home <a copy of a demo home>
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.common import pct, timed
from dashboard.hermes.home import HermesHome
from dashboard.memory.entries import join_entries
from dashboard.memory.provenance import memory_calls
from dashboard.reader.reader import StateReader
from dashboard.store.memory_calls import memory_call_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--home", required=True, type=Path, help="a Recall store's home (copy it)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    home = HermesHome(args.home)
    reader = StateReader(home)
    with reader.snapshot() as snap:
        messages = snap.conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        calls = memory_calls(memory_call_rows(snap.conn))
    user = [c.op.content for c in calls if c.op.target == "user" and c.op.content]
    often = sorted(set(user), key=user.count, reverse=True)[:20]
    cases = {
        name: (name, (home.root / "memories" / name).read_text(encoding="utf-8"))
        for name in ("USER.md", "MEMORY.md")
    }
    cases["most-written"] = ("USER.md", join_entries(often))

    def baseline() -> None:
        with reader.snapshot() as snap:
            snap.conn.execute("SELECT count(*) FROM messages").fetchone()

    base = timed(baseline, args.rounds)
    print(
        f"messages={messages:,} memory_calls={len(calls):,} baseline_p95_ms={pct(base, 0.95):.1f}"
    )
    for label, (name, text) in cases.items():
        # First: a fresh reader, its calls not kept yet (a page after a sync); then warm.
        first = timed(lambda n=name, t=text: StateReader(home).memory_provenance(n, t, []), 3)
        found = reader.memory_provenance(name, text, [])
        writes = sum(len(e.writes) for e in found.entries.values())
        ms = timed(lambda n=name, t=text: reader.memory_provenance(n, t, []), args.rounds)
        print(
            f"{label}: entries={len(found.entries)} writes={writes} "
            f"first_p50_ms={pct(first, 0.5):.1f} "
            f"p50_ms={pct(ms, 0.5):.1f} p95_ms={pct(ms, 0.95):.1f} "
            f"ratio={pct(ms, 0.95) / pct(base, 0.95):.2f}"
        )


if __name__ == "__main__":
    main()
