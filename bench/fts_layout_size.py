"""Inline against external-content FTS5 on the same demo data: size and query time.

Recall's own store keeps both FTS5 indexes as external content over
``messages`` (content, tool_name, tool_calls). The seed's v11 form stores an
inline copy of ``content || tool_name || tool_calls`` in each index. This builds
a demo home, copies its messages into a second file with the inline form, and
compares file size and the time of the same MATCH queries on both (same run).

Usage: python bench/fts_layout_size.py [--sessions 1000] [--messages 100000]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dashboard.demo.build import build_demo_home

QUERIES = ("redis", "docker OR nginx", '"connection refused"', "deploy*", "timeout NOT retry")
INLINE = """
CREATE TABLE messages AS SELECT * FROM src.messages;
CREATE VIRTUAL TABLE messages_fts USING fts5(content);
CREATE VIRTUAL TABLE messages_fts_trigram USING fts5(content, tokenize='trigram');
INSERT INTO messages_fts(rowid, content) SELECT id,
    coalesce(content, '') || ' ' || coalesce(tool_name, '') || ' ' || coalesce(tool_calls, '')
    FROM messages;
INSERT INTO messages_fts_trigram(rowid, content) SELECT rowid, content FROM messages_fts;
"""


def _time_queries(db: Path, rounds: int) -> float:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        samples = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for q in QUERIES:
                conn.execute(
                    "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rank "
                    "LIMIT 50",
                    (q,),
                ).fetchall()
            samples.append(time.perf_counter() - t0)
        return statistics.median(samples)
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="recall-fts-bench-") as tmp:
        report = build_demo_home(
            Path(tmp) / "home",
            sessions=args.sessions,
            messages=args.messages,
            anchor_day="2026-11-30",
            bulk=True,
        )
        external = report.home / "state.db"
        inline = Path(tmp) / "inline.db"
        conn = sqlite3.connect(inline, isolation_level=None)
        conn.execute("ATTACH DATABASE ? AS src", (f"file:{external}?mode=ro",))
        conn.executescript(INLINE)
        conn.commit()
        conn.execute("DETACH DATABASE src")
        conn.execute("VACUUM")
        conn.close()
        ext_conn = sqlite3.connect(external, isolation_level=None)
        ext_conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # bench copy only: measure the file
        ext_conn.execute("DROP TABLE IF EXISTS session_model_usage")
        ext_conn.execute("DELETE FROM sessions")
        ext_conn.execute("VACUUM")
        ext_conn.close()
        ext_size, inl_size = external.stat().st_size, inline.stat().st_size
        ext_t, inl_t = _time_queries(external, args.rounds), _time_queries(inline, args.rounds)
        print(
            f"fts_layout messages={report.messages} text_mb={report.text_bytes / 1e6:.0f} "
            f"external_mb={ext_size / 1e6:.0f} inline_mb={inl_size / 1e6:.0f} "
            f"size_ratio_inline_over_external={inl_size / ext_size:.2f} "
            f"query_ms_external={ext_t * 1000:.1f} query_ms_inline={inl_t * 1000:.1f} "
            f"time_ratio_inline_over_external={inl_t / ext_t:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
