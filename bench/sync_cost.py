"""What one incremental archive sync costs on a real home, and what a reconciliation costs.

    python bench/sync_cost.py --home /tmp/x [--archive /tmp/x-archive.db] [--rounds 20]

The home is any Hermes home (``recall demo --sessions 2000 --messages 200000 --home
/tmp/x`` makes one). The first run imports it (timed); then, ``--rounds`` times, a
writer (the write core, as an agent would) commits one new message to the home and
``importer.sync`` runs once: its wall time is the cost of making that turn visible in
the archive. A ``sync(reconcile=True)`` with nothing changed is timed last. The home
is written to (one message per round): use a copy you can throw away.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import pct
from dashboard.archive.importer import sync
from dashboard.store.session_store import SessionStore
from dashboard.store.writecore import WriteCore


def write_turn(writer: WriteCore, session_id: str, text: str) -> None:
    """One message and its session's counters, in one transaction (as an agent does)."""

    def turn(conn) -> None:  # noqa: ANN001
        now = time.time()
        conn.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'user', ?, ?)",
            (session_id, text, now),
        )
        conn.execute(
            "UPDATE sessions SET message_count = message_count + 1, last_activity_at = ?"
            " WHERE id = ?",
            (now, session_id),
        )

    writer.write(turn)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True, type=Path)
    parser.add_argument("--archive", type=Path)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    db = args.home / "state.db"
    path = args.archive or args.home.with_name(args.home.name + "-archive.db")
    with SessionStore(path) as archive:
        t0 = time.perf_counter()
        first = sync(archive, db, args.home)
        print(
            f"sync on opening: {time.perf_counter() - t0:.1f}s "
            f"({first.messages_added:,} messages added, bulk={first.bulk})"
        )
        writer = WriteCore(db, wal=False)  # the home's own journal mode stays
        sid = writer.conn.execute(
            "SELECT id FROM sessions ORDER BY started_at DESC LIMIT 1"
        ).fetchone()[0]
        costs = []
        for n in range(args.rounds):
            write_turn(writer, sid, f"bench turn {n} syncword{n}")
            t0 = time.perf_counter()
            report = sync(archive, db, args.home)
            costs.append((time.perf_counter() - t0) * 1000)
            assert report.messages_added == 1 and not report.reconciled, report
        writer.close()
        print(
            f"one new message, {args.rounds} rounds: p50 {pct(costs, 0.5):.0f} ms, "
            f"p95 {pct(costs, 0.95):.0f} ms, max {max(costs):.0f} ms"
        )
        t0 = time.perf_counter()
        sync(archive, db, args.home, reconcile=True)
        print(f"reconciliation, nothing changed: {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
