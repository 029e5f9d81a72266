"""Timing helpers shared by the benchmarks (wall-clock, same-run comparisons only)."""

from __future__ import annotations

import time
from collections.abc import Callable


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
