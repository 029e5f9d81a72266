"""What a command reads: the homes given, their profiles, the archive, an up-to-date reader."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dashboard.hermes.home import HermesHome

if TYPE_CHECKING:
    from dashboard.archive.importer import Progress
    from dashboard.hermes.profiles import Profile
    from dashboard.reader.reader import StateReader


def first_home(home_arg: str | None) -> HermesHome:
    """The first home a command reads: as ``serve`` chooses it (the demo home when none)."""
    from dashboard.demo.home import chosen_home, ensure_demo_home

    home, demo = chosen_home(home_arg)
    if demo:  # said on stderr, so --json output stays JSON
        ensure_demo_home(home, sys.stderr)
    return home


def homes_of(args: argparse.Namespace) -> list[HermesHome]:
    """Every ``--home`` given, the first chosen as ``serve`` does (:func:`first_home`)."""
    from dashboard.hermes.home import resolve_home

    given = args.home or []
    return [first_home(given[0] if given else None), *(resolve_home(h) for h in given[1:])]


def profiles_of(homes: list[HermesHome]) -> list[Profile]:
    from dashboard.hermes.profiles import discover

    return discover(homes)


def chosen_profile(args: argparse.Namespace, profiles: list[Profile], default: str) -> str:
    """``--profile`` checked against the homes' profiles (ValidationError naming them:
    exit 2), else ``default``."""
    from dashboard.hermes.profiles import parse_profile

    return parse_profile(args.profile, profiles) or default


def reader_for(args: argparse.Namespace, profile: str | None = None) -> StateReader:
    """What ``search``, ``info`` and ``preview`` read (:func:`opening.reading_for`, as the
    pages): the archive of every home, brought up to date once first (only the profile
    read, when one is named), a progress bar only when slow; scoped to ``profile``
    (``--profile``, default all)."""
    from dashboard.hermes.profiles import ALL
    from dashboard.reader.opening import reading_for

    homes = homes_of(args)
    if profile is None:
        profile = chosen_profile(args, profiles_of(homes), ALL)
    only = None if profile == ALL else profile
    reading = reading_for(homes[0], args.archive, inline=True, homes=homes[1:], only=only)
    if reading.syncer is not None:
        with LateBar() as bar:
            reading.syncer.on_progress = bar
            reading.syncer.poll()
        reading.syncer.on_progress = None
        state = reading.syncer.state()
        if state.error and state.imported:  # the archive answers; say the source did not
            print(f"recall: {state.error}; answering from the archive", file=sys.stderr)
    return reading.reader.scoped(only)


class LateBar:
    """A terminal progress bar (rich, on stderr) that appears only after LATE_BAR_S."""

    LATE_BAR_S = 1.0

    def __enter__(self) -> LateBar:
        import time

        self._clock = time.monotonic
        self._began = self._clock()
        self._bar: Any = None
        self._task: Any = None
        return self

    def __call__(self, p: Progress) -> None:
        if self._bar is None:
            if self._clock() - self._began < self.LATE_BAR_S or p.sessions_done >= p.sessions_total:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TimeRemainingColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(
                "Updating the archive",
                BarColumn(),
                MofNCompleteColumn(),
                "sessions",
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("archive", total=p.sessions_total)
        self._bar.update(self._task, completed=p.sessions_done, total=p.sessions_total)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def archive_location(args: argparse.Namespace) -> tuple[list[Profile], Path | None, bool]:
    """The profiles ``--profile`` names (all by default) and their archive (``--archive``),
    saying any move of it; and whether the homes have several profiles.

    The archive is None when the home's state.db is Recall's own store: it is its own
    archive (``archive.read_choice``), with nothing to copy or check against; that is said.
    """
    from dashboard.archive.files import read_choice
    from dashboard.hermes.profiles import ALL, EVERY_PROFILE

    homes = homes_of(args)
    profiles = profiles_of(homes)
    chosen = chosen_profile(args, profiles, ALL)
    picked = profiles if chosen == ALL else [p for p in profiles if p.name == chosen]
    choice = read_choice(homes[0], args.archive, own=len(profiles) == 1)
    if choice.note:
        print(f"recall: {choice.note}", file=sys.stderr)
    if choice.archive is None:
        print(
            f"{homes[0].state_db} is Recall's own store: it is its own archive, with "
            "nothing to copy (see `recall info`)"
        )
    return picked, choice.archive, EVERY_PROFILE.spans(profiles)
