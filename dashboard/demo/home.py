"""Which home a command opens: the user's Hermes home, else the demo home, built once."""

from __future__ import annotations

import os
from typing import TextIO

from dashboard.demo.build import build_demo_home
from dashboard.hermes.home import HermesHome, resolve_home
from dashboard.store.datadir import user_data_root

DEMO_SESSIONS = 600


def chosen_home(home_arg: str | None) -> tuple[HermesHome, bool]:
    """The home a command opens, and whether it is the demo home.

    An explicit ``--home`` or ``$HERMES_HOME`` is opened as given (a missing
    state.db then gets a clear message). With neither, ``~/.hermes`` is used when it
    exists, else the demo home in ``~/.local/share/recall/demo-home`` (built by
    :func:`ensure_demo_home`). ``serve``, ``search``, ``info`` and ``preview`` all
    choose this way, so a fresh machine gets the same answer from each.
    """
    explicit = home_arg or os.environ.get("HERMES_HOME")
    home = resolve_home(home_arg)
    if explicit or home.exists():
        return home, False
    return HermesHome(user_data_root() / "demo-home"), True


def ensure_demo_home(home: HermesHome, out: TextIO) -> None:
    """Build the demo home once if it is missing; say on ``out`` which home is used."""
    if home.exists():
        print(f"recall: no Hermes home found; using the demo home in {home.root}", file=out)
        return
    print(
        f"recall: no Hermes home found; building a demo home in {home.root} (once, "
        "about half a minute) …",
        file=out,
        flush=True,
    )
    report = build_demo_home(home.root, sessions=DEMO_SESSIONS)
    print(
        f"  {report.sessions} sessions, {report.messages:,} messages in {report.seconds:.0f}s",
        file=out,
        flush=True,
    )
