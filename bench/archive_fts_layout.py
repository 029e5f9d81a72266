"""The archive's FTS layout: index every row in both indexes, or index as Hermes does now.

Hermes (v0.17+) keeps tool rows out of its trigram index and gives its word index only
the first 8 KB of a tool output. This copies the messages of a home into two files,
one per layout, builds both indexes the bulk way (``'rebuild'``), and prints for each:
build seconds, index bytes, and what search loses — the sessions and rows the trigram
route (CJK and parts of words) finds in one layout and not the other, and the same for
words past the 8 KB prefix. ``--big-tools`` turns that share of tool outputs into long
ones (40 KB, made of the home's own tool text), for homes whose tools read whole files.

Usage: python bench/archive_fts_layout.py --home DIR [--big-tools 0.05] [--rounds 5]
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import timed

TOOL_PREFIX = 8192
BIG_TOOL_CHARS = 40_000
CJK_RUN = re.compile(r"[\u4e00-\u9fff]{3,}")
WORD_QUERIES = ("redis", "timeout", "nginx", "postgres", "deploy*")

LAYOUTS = {
    "every-row": (
        "CREATE VIRTUAL TABLE fts USING fts5(content, tool_name, tool_calls, "
        "content='messages', content_rowid='id')",
        "CREATE VIRTUAL TABLE tri USING fts5(content, tool_name, tool_calls, "
        "content='messages', content_rowid='id', tokenize='trigram')",
    ),
    "hermes": (
        f"CREATE VIEW fts_src AS SELECT id, CASE WHEN role = 'tool' THEN "
        f"substr(coalesce(content, ''), 1, {TOOL_PREFIX}) ELSE content END AS content, "
        "tool_name, tool_calls FROM messages",
        "CREATE VIRTUAL TABLE fts USING fts5(content, tool_name, tool_calls, "
        "content='fts_src', content_rowid='id')",
        "CREATE VIEW tri_src AS SELECT id, content, tool_name, tool_calls FROM messages "
        "WHERE role <> 'tool'",
        "CREATE VIRTUAL TABLE tri USING fts5(content, tool_name, tool_calls, "
        "content='tri_src', content_rowid='id', tokenize='trigram')",
    ),
    "trigram-prefix": (
        "CREATE VIRTUAL TABLE fts USING fts5(content, tool_name, tool_calls, "
        "content='messages', content_rowid='id')",
        f"CREATE VIEW tri_src AS SELECT id, CASE WHEN role = 'tool' THEN "
        f"substr(coalesce(content, ''), 1, {TOOL_PREFIX}) ELSE content END AS content, "
        "tool_name, tool_calls FROM messages",
        "CREATE VIRTUAL TABLE tri USING fts5(content, tool_name, tool_calls, "
        "content='tri_src', content_rowid='id', tokenize='trigram')",
    ),
}


def copy_messages(source: Path, dest: Path, big_tools: float) -> tuple[int, int]:
    """Messages (the indexed columns) of ``source`` into ``dest``; rows and text bytes."""
    conn = sqlite3.connect(dest, isolation_level=None)
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("ATTACH DATABASE ? AS src", (f"file:{source}?mode=ro",))
    conn.execute(
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, "
        "content TEXT, tool_name TEXT, tool_calls TEXT)"
    )
    conn.execute(
        "INSERT INTO messages SELECT id, session_id, role, content, tool_name, tool_calls "
        "FROM src.messages"
    )
    if big_tools > 0:
        # Every n-th tool row becomes a long file read made of the tool text around it.
        step = max(1, round(1 / big_tools))
        pool = "\n".join(
            r[0]
            for r in conn.execute("SELECT content FROM messages WHERE role = 'tool' LIMIT 2000")
        )
        rows = conn.execute(
            "SELECT id, content FROM messages WHERE role = 'tool' AND id % ? = 0", (step,)
        ).fetchall()
        for n, (mid, content) in enumerate(rows):
            start = (n * 997) % max(1, len(pool) - BIG_TOOL_CHARS)
            long = (content or "") + "\n" + pool[start : start + BIG_TOOL_CHARS]
            conn.execute("UPDATE messages SET content = ? WHERE id = ?", (long, mid))
    conn.execute("DETACH DATABASE src")
    rows, text = conn.execute("SELECT count(*), sum(length(content)) FROM messages").fetchone()
    conn.close()
    return rows, text


def build(path: Path, layout: str) -> dict[str, float]:
    """Both indexes of ``layout`` on ``path``; seconds per index and bytes of each."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=OFF")
    for sql in LAYOUTS[layout]:
        conn.execute(sql)
    out: dict[str, float] = {}
    for table in ("fts", "tri"):
        t0 = time.perf_counter()
        conn.execute(f"INSERT INTO {table}({table}) VALUES ('rebuild')")
        out[f"{table}_s"] = time.perf_counter() - t0
    for table in ("fts", "tri"):
        out[f"{table}_bytes"] = conn.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name LIKE ?", (f"{table}_%",)
        ).fetchone()[0]
    conn.close()
    return out


def cjk_queries(path: Path, n: int = 8) -> list[str]:
    """The ``n`` commonest 3-character CJK strings of the home: real trigram-route queries."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    counts: Counter[str] = Counter()
    for (content,) in conn.execute(
        "SELECT content FROM messages WHERE content GLOB '*[一-龥]*' LIMIT 50000"
    ):
        counts.update(run[:3] for run in CJK_RUN.findall(content or ""))
    conn.close()
    return [q for q, _ in counts.most_common(n)]


def answers(path: Path, table: str, query: str) -> tuple[set[str], int]:
    """Sessions and rows ``query`` matches in ``table``."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = conn.execute(
        f"SELECT m.session_id FROM {table} JOIN messages m ON m.id = {table}.rowid "
        f"WHERE {table} MATCH ?",
        (query,),
    ).fetchall()
    conn.close()
    return {r[0] for r in rows}, len(rows)


def query_ms(path: Path, table: str, queries: list[str], rounds: int) -> float:
    """Median milliseconds of the queries ranked best-first, 50 rows each."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)

    def run() -> None:
        for q in queries:
            conn.execute(
                f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rank LIMIT 50", (q,)
            ).fetchall()

    try:
        return statistics.median(timed(run, rounds))
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", required=True, help="a Hermes or demo home (its state.db)")
    parser.add_argument(
        "--big-tools",
        type=float,
        default=0.0,
        help="share of tool outputs made 40 KB long (0 = as they are)",
    )
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    source = Path(args.home) / "state.db"
    with tempfile.TemporaryDirectory(prefix="recall-fts-layout-") as tmp:
        files = {name: Path(tmp) / f"{name}.db" for name in LAYOUTS}
        for path in files.values():
            rows, text = copy_messages(source, path, args.big_tools)
        stats = {name: build(path, name) for name, path in files.items()}
        cjk = [f'"{q}"' for q in cjk_queries(files["every-row"])]
        print(f"archive_fts_layout rows={rows} text_mb={text / 1e6:.1f} big_tools={args.big_tools}")
        for name, s in stats.items():
            print(
                f"  {name:14} word_index_mb={s['fts_bytes'] / 1e6:.1f} "
                f"trigram_mb={s['tri_bytes'] / 1e6:.1f} build_s={s['fts_s'] + s['tri_s']:.1f} "
                f"(word {s['fts_s']:.1f}, trigram {s['tri_s']:.1f}) "
                f"trigram_query_ms={query_ms(files[name], 'tri', cjk, args.rounds):.1f} "
                f"word_query_ms={query_ms(files[name], 'fts', list(WORD_QUERIES), args.rounds):.1f}"
            )
        full = files["every-row"]
        for name in ("hermes", "trigram-prefix"):
            for table, queries in (("tri", cjk), ("fts", list(WORD_QUERIES))):
                lost_rows = lost_sessions = all_sessions = 0
                for q in queries:
                    (s_full, r_full), (s_h, r_h) = (
                        answers(full, table, q),
                        answers(files[name], table, q),
                    )
                    lost_rows += r_full - r_h
                    lost_sessions += len(s_full - s_h)
                    all_sessions += len(s_full)
                print(
                    f"  {name}: {'trigram' if table == 'tri' else 'word'} route, {len(queries)} "
                    f"queries: misses {lost_rows} rows and {lost_sessions} of {all_sessions} "
                    f"session hits ({lost_sessions / max(all_sessions, 1):.1%})"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
