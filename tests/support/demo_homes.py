"""Demo homes built once per test run and copied to each test that asks for one.

Several modules (and, under pytest-xdist, several worker processes) want the same demo
home: ``build_demo_home`` with the same arguments gives the same files (a fixed seed
and anchor day). The first to ask builds it into a folder every worker of this run
shares, under a file lock; everyone, the builder too, gets a copy of its own, so a test
may change its home freely.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dashboard.demo.build import build_demo_home


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder every process of this run sees: under xdist the workers' basetemps sit
    side by side in one folder of the run; alone, the basetemp is the run's own."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def demo_home_copy(
    tmp_path_factory: pytest.TempPathFactory,
    dest: Path,
    *,
    sessions: int,
    messages: int | None = None,
    seed: int = 7,
    anchor_day: str,
    bulk: bool = True,
) -> Path:
    """A copy at ``dest`` of ``build_demo_home(sessions=…, …)``, built once per run.

    ``anchor_day`` is required: a home anchored on today would differ between runs.
    Built through the bulk path by default: the same sessions, messages and usage as
    the write API (tests/demo/test_build.py checks that both agree), several times
    faster (120 sessions / 4,000 messages: 4 s through the API, under 1 s in bulk)."""
    cache = run_folder(tmp_path_factory) / "demo-homes"
    cache.mkdir(exist_ok=True)
    key = f"s{sessions}-m{messages}-seed{seed}-{anchor_day}-bulk{bulk}"
    built = cache / key
    with _locked(cache / f"{key}.lock"):
        if not built.exists():
            partial = cache / f"{key}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            build_demo_home(
                partial,
                sessions=sessions,
                messages=messages,
                seed=seed,
                anchor_day=anchor_day,
                bulk=bulk,
            )
            partial.rename(built)  # whole or absent, even if a build was interrupted
    shutil.copytree(built, dest)
    return dest
