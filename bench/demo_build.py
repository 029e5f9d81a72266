"""Time ``recall demo`` at realistic scale (default 10k sessions / 1M messages).

Target: under 5 minutes on a 2-core machine, through the bulk path (triggers off,
plain inserts, FTS5 ``rebuild`` of both indexes, triggers on).

Baseline in the same run: the write-API path (one transaction per turn, both FTS
triggers firing per message) on a small home of the same shape; its messages/s
against the bulk path's is the speed-up the bulk path buys.

Prints the file size against the raw text size, and phase times.

Usage: python bench/demo_build.py [--sessions 10000] [--messages 1000000]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dashboard.demo.build import build_demo_home


def _index_sizes(db: Path) -> dict[str, float]:
    """MB per FTS index (its shadow tables), via dbstat when compiled in."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
        ).fetchall()
    except sqlite3.Error:
        return {}
    finally:
        conn.close()
    sizes: dict[str, float] = {}
    for name, size in rows:
        key = (
            "messages_fts_trigram"
            if name.startswith("messages_fts_trigram")
            else (
                "messages_fts"
                if name.startswith("messages_fts")
                else "messages"
                if name.startswith(("messages", "idx_messages", "sqlite_autoindex_messages"))
                else "other"
            )
        )
        sizes[key] = sizes.get(key, 0.0) + size / 1e6
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--baseline-messages", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", help="build here instead of a temp folder, and keep it")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="recall-demo-bench-") as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        scale = args.baseline_messages / args.messages
        baseline = build_demo_home(
            base / "baseline",
            sessions=max(10, int(args.sessions * scale)),
            messages=args.baseline_messages,
            seed=args.seed,
            anchor_day="2026-11-30",
            bulk=False,
        )
        api_rate = baseline.messages / baseline.seconds
        print(
            f"baseline write API: {baseline.messages} messages in {baseline.seconds:.1f}s "
            f"= {api_rate:.0f} msg/s"
        )
        began = time.perf_counter()
        report = build_demo_home(
            base / "home",
            sessions=args.sessions,
            messages=args.messages,
            seed=args.seed,
            anchor_day="2026-11-30",
            bulk=True,
        )
        wall = time.perf_counter() - began
        bulk_rate = report.messages / report.seconds
        sizes = _index_sizes(report.home / "state.db")
        if sizes:
            print("sizes MB: " + " ".join(f"{k}={v:.0f}" for k, v in sizes.items()))
        print(
            f"demo_build sessions={report.sessions} messages={report.messages} "
            f"seconds={wall:.1f} db_mb={report.db_bytes / 1e6:.0f} "
            f"text_mb={report.text_bytes / 1e6:.0f} "
            f"db_over_text={report.db_bytes / max(1, report.text_bytes):.2f} "
            f"bulk_msg_per_s={bulk_rate:.0f} api_msg_per_s={api_rate:.0f} "
            f"speedup={bulk_rate / api_rate:.1f}x target_s=300 "
            f"{'PASS' if wall < 300 else 'SLOW'}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
