"""The archive's first import of a large home in today's Hermes layout, and its resumption.

Builds (or takes) a home in the current views form (bench/hermes_form.py over a
``recall demo`` home), then, each through ``recall archive sync`` as a real process:

1. a clean import, timed to the end, and to the moment every session of the newest
   30 days is in the archive and searchable (polled from another connection);
   the baseline of the same run is a plain file copy of the source;
2. an import killed with SIGKILL at random points ``--kills`` times, resumed after
   each, then checked: no duplicate and no missing message, session or usage row,
   ``integrity_check`` and both FTS ``integrity-check``s;
3. the archive's size against the raw text and against the source file.

Usage: python bench/archive_import.py [--home DIR] [--sessions 10000] [--messages 1000000]
       [--kills 5] [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.hermes_form import to_current_views
from dashboard.archive.marks import source_key
from dashboard.demo.build import build_demo_home

RECENT_DAYS = 30
POLL_S = 0.25


def _sync(home: Path, archive: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dashboard.cli",
            "archive",
            "sync",
            "--home",
            str(home),
            "--archive",
            str(archive),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)


def _recent(source: Path) -> tuple[float, int, str]:
    """The cut-off of the newest 30 days, how many sessions started since, a word of one."""
    with closing(_ro(source)) as c:
        newest = c.execute("SELECT max(started_at) FROM sessions").fetchone()[0]
        cutoff = newest - RECENT_DAYS * 86400
        count = c.execute(
            "SELECT count(*) FROM sessions WHERE started_at >= ?", (cutoff,)
        ).fetchone()[0]
        # A word from the oldest session of the window: found once the whole window is in.
        row = c.execute(
            "SELECT m.content FROM messages m JOIN sessions s ON s.id = m.session_id "
            "WHERE s.started_at >= ? AND m.role = 'user' ORDER BY s.started_at LIMIT 1",
            (cutoff,),
        ).fetchone()
    word = max((w for w in (row[0] or "").split() if w.isalpha()), key=len, default="the")
    return cutoff, count, word


def _recent_in(archive: Path, cutoff: float, word: str) -> int:
    """Sessions of the window in the archive (0 until the file exists and the word is found)."""
    try:
        with closing(_ro(archive)) as c:
            found = c.execute(
                "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", (f'"{word}"',)
            ).fetchone()[0]
            if not found:
                return 0
            return c.execute(
                "SELECT count(*) FROM sessions WHERE started_at >= ?", (cutoff,)
            ).fetchone()[0]
    except sqlite3.Error:
        return 0  # not created yet, or mid-migration


def clean_import(home: Path, archive: Path) -> tuple[float, float | None]:
    """Seconds to the end of a first import, and until the newest 30 days were searchable."""
    cutoff, want, word = _recent(home / "state.db")
    began = time.monotonic()
    proc = _sync(home, archive)
    recent_at = None
    while proc.poll() is None:
        if recent_at is None and _recent_in(archive, cutoff, word) >= want:
            recent_at = time.monotonic() - began
        time.sleep(POLL_S)
    total = time.monotonic() - began
    if proc.returncode != 0:
        raise SystemExit(f"sync failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    if recent_at is None and _recent_in(archive, cutoff, word) >= want:
        recent_at = total
    return total, recent_at


def killed_import(
    home: Path, archive: Path, kills: int, expect_s: float, rng: random.Random
) -> int:
    """Kill the import ``kills`` times at random points, resume each time; runs started."""
    runs = 0
    for _ in range(kills):
        proc = _sync(home, archive)
        runs += 1
        time.sleep(rng.uniform(0.5, max(1.0, expect_s / (kills + 1))))
        if proc.poll() is not None:
            break  # it finished first: nothing left to kill
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    proc = _sync(home, archive)
    runs += 1
    if proc.wait() != 0:
        raise SystemExit(
            f"resumed sync failed: {proc.stderr.read().decode() if proc.stderr else ''}"
        )
    return runs


def check(home: Path, archive: Path) -> list[str]:
    """Problems: duplicates, missing rows, a failed integrity check (empty when none)."""
    key = source_key(home)
    problems = []
    with closing(_ro(home / "state.db")) as src, closing(sqlite3.connect(archive)) as arc:
        for table, src_id in (
            ("messages", "CAST(id AS TEXT)"),
            ("sessions", "id"),
        ):
            want = {r[0] for r in src.execute(f"SELECT {src_id} FROM {table}")}
            got = [
                r[0] for r in arc.execute(f"SELECT src_id FROM {table} WHERE src_home=?", (key,))
            ]
            if len(got) != len(set(got)):
                problems.append(f"{table}: {len(got) - len(set(got))} duplicates")
            if set(got) != want:
                problems.append(
                    f"{table}: {len(want - set(got))} missing, {len(set(got) - want)} extra"
                )
        usage = src.execute("SELECT count(*) FROM session_model_usage").fetchone()[0]
        kept = arc.execute("SELECT count(*) FROM session_model_usage WHERE src_home=?", (key,))
        if kept.fetchone()[0] != usage:
            problems.append("session_model_usage: counts differ")
        if arc.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            problems.append("integrity_check failed")
        for table in ("messages_fts", "messages_fts_trigram"):
            try:
                arc.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
            except sqlite3.DatabaseError as exc:
                problems.append(f"{table}: {exc}")
    return problems


def _bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", help="a home in today's layout (default: build one)")
    parser.add_argument("--demo", help="a demo home to convert (default: build one)")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", help="folder for the built homes (default: a temp folder)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    work = Path(args.keep or tempfile.mkdtemp(prefix="recall-archive-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        home = Path(args.home) if args.home else work / "hermes-home"
        if not args.home:
            demo = Path(args.demo) if args.demo else work / "demo"
            if not args.demo:
                build_demo_home(
                    demo,
                    sessions=args.sessions,
                    messages=args.messages,
                    anchor_day="2026-11-30",
                    bulk=True,
                )
            to_current_views(demo, home)
        source = home / "state.db"
        with closing(_ro(source)) as c:
            messages, text = c.execute(
                "SELECT count(*), sum(length(coalesce(content, '')) "
                "+ length(coalesce(tool_calls, ''))) FROM messages"
            ).fetchone()
        t0 = time.monotonic()
        shutil.copyfile(source, work / "copy.db")
        copy_s = time.monotonic() - t0
        (work / "copy.db").unlink()

        first = work / "clean" / "archive.db"
        total_s, recent_s = clean_import(home, first)
        size = _bytes(first)
        print(
            f"archive_import messages={messages} source_mb={_bytes(source) / 1e6:.0f} "
            f"text_mb={text / 1e6:.0f}\n"
            f"  clean import: {total_s:.1f}s ({messages / total_s:,.0f} messages/s); "
            f"newest {RECENT_DAYS} days searchable after "
            f"{'never' if recent_s is None else f'{recent_s:.1f}s'}; "
            f"file copy baseline {copy_s:.1f}s (ratio {total_s / max(copy_s, 1e-3):.0f}x)\n"
            f"  archive {size / 1e6:.0f} MB = {size / _bytes(source):.2f}x the source file, "
            f"{size / text:.2f}x the raw text"
        )
        problems = check(home, first)
        resumed = work / "killed" / "archive.db"
        runs = killed_import(home, resumed, args.kills, total_s, rng)
        problems += [f"after kills: {p}" for p in check(home, resumed)]
        verdict = problems or "no duplicate, no missing row, integrity ok"
        print(f"  killed import: {runs - 1} kill -9, {runs} runs; {verdict}")
        return 1 if problems else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
