"""Timing helpers shared by the benchmarks (wall-clock, same-run comparisons only)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

IDLE_CPU_SHARE = 0.05  # a server counts as idle below 5 % of a core over a second
IDLE_WAIT_S = 600


def timed(fn: Callable[[], object], rounds: int) -> list[float]:
    """Milliseconds of ``rounds`` calls of ``fn``."""
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def pct(values: list[float], p: float) -> float:
    """The ``p`` quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def cpu_timed(fn: Callable[[], object], rounds: int) -> list[float]:
    """CPU milliseconds of this process for ``rounds`` calls of ``fn``: on a shared,
    busy machine it moves less than wall time with what other processes do."""
    out = []
    for _ in range(rounds):
        t0 = time.process_time()
        fn()
        out.append((time.process_time() - t0) * 1000)
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process ``pid`` (all its threads) has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_idle(pid: int) -> float:
    """Wait until the server uses under IDLE_CPU_SHARE of a core (its start's background
    work done: the search warm-up, the cost rollup); seconds waited."""
    began = time.monotonic()
    while time.monotonic() - began < IDLE_WAIT_S:
        used = cpu_seconds(pid)
        time.sleep(1.0)
        if cpu_seconds(pid) - used < IDLE_CPU_SHARE:
            break
    return time.monotonic() - began
