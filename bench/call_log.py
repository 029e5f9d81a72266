"""What keeping agent.log's calls costs: a full set of log files read into the archive.

    python bench/call_log.py [--out bench/out/call_log] [--mb 5] [--rounds 5]

Writes a home whose ``logs/`` holds what Hermes keeps at most (``agent.log`` and three
rotated files of ``--mb`` MB each, Hermes's default 5 MB), its lines as Hermes writes them
(tests/support/agent_logs.py: each call followed by a tool line, a retry warning with a
traceback line every second call). Then, in one run: the baseline (reading every file's
bytes and splitting them in lines: the floor of any reader), the first pass of
``call_log.keep_calls`` into a fresh archive (read, parse, land in one transaction), a
pass with nothing new, a pass after one more turn (3 calls), and the files' stamps
(``log_stamps``). Last, the syncer's idle look (``Syncer.poll`` with nothing changed, on a
small home) without a ``logs/`` folder and with these four files. Prints medians of
``--rounds`` (of 400 looks) and the first pass ÷ the baseline, the look with logs ÷ without;
the archive's bytes per kept call.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dashboard.archive.call_log import keep_calls, log_stamps
from dashboard.archive.syncer import Syncer
from dashboard.hermes.agent_log import log_files
from dashboard.hermes.profiles import ArchiveIds
from dashboard.store.schema import CALLS_TABLE
from dashboard.store.session_store import SessionStore
from tests.support import agent_logs as al
from tests.support import hermes_shapes as hs


def write_home(home: Path, mb: float) -> int:
    """A home with a full set of log files; returns the calls written."""
    shutil.rmtree(home, ignore_errors=True)
    (home / "logs").mkdir(parents=True)
    al.log_path(home).touch()
    at, calls, turn = 1.79e9, 0, 0
    for n in range(al.BACKUPS + 1):
        if n:
            al.rotate(home)
        while al.log_path(home).stat().st_size < mb * 1_000_000:
            session = f"20260920_{turn % 240000:06d}_ab12cd"
            batch = al.turn_calls(session, at, calls=3)
            al.write_log(home, al.with_noise(batch))
            calls, turn, at = calls + len(batch), turn + 1, at + 30
    return calls


def timed(fn) -> float:  # noqa: ANN001
    began = time.perf_counter()
    fn()
    return (time.perf_counter() - began) * 1000


def idle_look_us(root: Path, home: Path, looks: int = 400) -> float:
    """The median wall time of the syncer's look at ``home`` when nothing changed."""
    for f in root.glob("look-archive.db*"):
        f.unlink()
    syncer = Syncer(
        root / "look-archive.db", home / "state.db", home, inline=True, file_events=False
    )
    syncer.poll()
    syncer.poll()
    times = []
    for _ in range(looks):
        began = time.perf_counter()
        syncer.poll()
        times.append((time.perf_counter() - began) * 1e6)
    syncer.stop()
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/out/call_log"))
    parser.add_argument("--mb", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    home = args.out / "home"
    written = write_home(home, args.mb)
    files = log_files(home)
    size = sum(p.stat().st_size for p in files)
    ids = ArchiveIds.of_home(home)

    def read_all() -> None:
        for p in files:
            p.read_bytes().split(b"\n")

    baseline, first, idle, turn, look = [], [], [], [], []
    kept = per_call = 0
    for r in range(args.rounds):
        baseline.append(timed(read_all))
        path = args.out / f"archive-{r}.db"
        for f in args.out.glob(f"archive-{r}.db*"):
            f.unlink()
        with SessionStore(path) as store:
            first.append(timed(lambda s=store: keep_calls(s, home, ids)))
            idle.append(timed(lambda s=store: keep_calls(s, home, ids)))
            al.write_log(home, al.turn_calls("20261001_000000_ffffff", 1.8e9 + r * 60))
            turn.append(timed(lambda s=store: keep_calls(s, home, ids)))
            look.append(timed(lambda: log_stamps(home)))
            kept = store.core.conn.execute(f"SELECT count(*) FROM {CALLS_TABLE}").fetchone()[0]
            pages = store.core.conn.execute(
                "SELECT sum(pgsize) FROM dbstat WHERE name LIKE '%logged_call%'"
            ).fetchone()[0]
            per_call = (pages or 0) / max(kept, 1)
        for f in args.out.glob(f"archive-{r}.db*"):
            f.unlink()

    small = args.out / "small"
    shutil.rmtree(small, ignore_errors=True)
    hs.build_no_trigram(small / "state.db")
    bare, logged = [], []
    for _ in range(args.rounds):
        shutil.rmtree(small / "logs", ignore_errors=True)
        bare.append(idle_look_us(args.out, small))
        shutil.copytree(home / "logs", small / "logs")
        logged.append(idle_look_us(args.out, small))

    def med(xs: list[float]) -> float:
        return statistics.median(xs)

    print(
        f"files={len(files)} mb={size / 1e6:.1f} calls_written={written} calls_kept={kept}"
        f" bytes_per_call={per_call:.0f}"
    )
    print(
        f"baseline_read_ms={med(baseline):.1f} first_pass_ms={med(first):.1f}"
        f" idle_pass_ms={med(idle):.2f} one_turn_pass_ms={med(turn):.2f}"
        f" look_ms={med(look):.3f} ratio_first={med(first) / med(baseline):.1f}"
    )
    print(
        f"idle_look_no_logs_us={med(bare):.0f} idle_look_with_logs_us={med(logged):.0f}"
        f" ratio_look={med(logged) / med(bare):.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
