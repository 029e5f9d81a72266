"""The app's reader of the home it shows: the home's archive, or its own Recall store.

:func:`opening.reading_for` decides (one rule for pages, API and CLI). With an
archive to fill, the app holds its :class:`Syncer`: ``SYNC="background"`` (what
``recall serve`` uses) leaves its thread for :func:`start_syncer`; ``SYNC="inline"``
(tests, the default under ``TESTING``) runs the first sync while the app is built
and then syncs on the request thread whenever the source changed.
"""

from __future__ import annotations

from pathlib import Path

from flask import Flask, current_app, g

from dashboard.archive.syncer import Syncer, SyncGroup, SyncState
from dashboard.errors import ValidationError
from dashboard.hermes.home import HermesHome, resolve_home
from dashboard.params import whole_number
from dashboard.reader.opening import reading_for
from dashboard.reader.reader import StateReader

SYNC_MODES = ("background", "inline")


def init_app(app: Flask) -> None:
    home = resolve_home(app.config.get("HERMES_HOME"))
    mode = app.config.get("SYNC") or ("inline" if app.config.get("TESTING") else "background")
    if mode not in SYNC_MODES:
        raise ValueError(f"SYNC must be one of {', '.join(SYNC_MODES)}, not {mode!r}")
    # The archive is one of Recall's own files: in the app's data directory unless named.
    # More homes (several --home) and the one profile served (--profile), if any.
    homes = [resolve_home(h) for h in app.config.get("EXTRA_HOMES") or ()]
    reading = reading_for(
        home,
        app.config.get("ARCHIVE") or None,
        inline=mode == "inline",
        folder=app.config.get("DATA_DIR") or None,
        homes=homes,
        only=app.config.get("PROFILE") or None,
    )
    app.extensions["recall.reader"] = reading.reader
    app.extensions["recall.refused_archive"] = reading.refused_archive
    app.extensions["recall.syncer"] = reading.syncer
    if reading.syncer is not None and app.config.get("SYNC_BATCH"):
        # Sessions per transaction (tests and benchmarks cut an import finer).
        batch = whole_number(str(app.config["SYNC_BATCH"]), "SYNC_BATCH", 1, 100_000)
        reading.syncer.batch_sessions = batch or reading.syncer.batch_sessions
    if reading.syncer is not None and mode == "inline":
        reading.syncer.poll()  # the first import, before the first page
    reader = reading.reader

    @app.context_processor
    def inject_home() -> dict[str, object]:
        # is_demo never waits on the file's lock: pages without database work stay fast.
        return {
            "hermes_home": home,
            "demo_data": bool(app.config.get("DEMO")) or reader.is_demo(),
            "sync_state": sync_state(),
        }


def get_reader() -> StateReader:
    """The reader of the profile this request reads (web/profiles.py): the views' one."""
    return base_reader().scoped(g.get("profile"))


def profile_home() -> HermesHome | None:
    """The home of the one profile this request reads: its memory files and config.yaml
    limits. None when it reads every profile of several: a memory file, a save, the
    agent's prompt then needs a profile (whose file would it be?)."""
    reader = get_reader()
    if reader.spans_profiles:
        return None
    return reader.home


def one_profile_home() -> HermesHome:
    """:func:`profile_home`, a ValidationError (a 400) when the request reads all profiles."""
    home = profile_home()
    if home is None:
        raise ValidationError(
            "Choose one profile first (?profile=<name>): under all profiles, a memory file "
            "or the agent's prompt could be any profile's. Nothing was written."
        )
    return home


def base_reader() -> StateReader:
    """The app's reader of every profile it serves: app-wide work only (the cost
    rollup's build, the summary service), never a page's answer."""
    return current_app.extensions["recall.reader"]


def refused_archive() -> Path | None:
    """The archive named for this app when it is someone else's database, else None."""
    return current_app.extensions.get("recall.refused_archive")


def get_syncer() -> Syncer | None:
    """The syncer filling the archive the pages read (None: the home's own store)."""
    return current_app.extensions.get("recall.syncer")


def sync_state() -> SyncState | None:
    syncer = get_syncer()
    return syncer.state() if syncer is not None else None


def profile_sync_states() -> dict[str, SyncState]:
    """Each profile's own sync state, by name, when several are synced; else empty."""
    syncer = get_syncer()
    return syncer.states() if isinstance(syncer, SyncGroup) else {}


def start_syncer() -> None:
    """Start the background syncer (``recall serve``); a no-op inline or without archive."""
    syncer = get_syncer()
    if syncer is not None and not syncer.inline:
        syncer.start()


def stop_syncer() -> None:
    """Stop it with the server: a running batch commits, connections close."""
    syncer = get_syncer()
    if syncer is not None:
        syncer.stop()
