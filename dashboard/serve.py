"""``recall serve``: pick the home, build a demo when there is none, run waitress."""

from __future__ import annotations

import errno
import functools
import ipaddress
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from flask import Flask

from dashboard.app import create_app
from dashboard.archive.files import archive_files
from dashboard.archive.importer import Progress
from dashboard.archive.syncer import Syncer
from dashboard.demo.home import chosen_home, ensure_demo_home
from dashboard.errors import ValidationError
from dashboard.hermes.home import HermesHome, resolve_home
from dashboard.hermes.profiles import ALL, discover, parse_profile
from dashboard.meaning.worker import MeaningWorker
from dashboard.store.datadir import folder_fault, recall_data_dir
from dashboard.web.reader import (
    base_reader,
    get_syncer,
    refused_archive,
    start_syncer,
    stop_syncer,
)
from dashboard.web.rollup import prepare_cost_rollup


@dataclass(frozen=True)
class ServePlan:
    home: HermesHome
    data_dir: Path
    demo: bool
    note: str | None = None  # what happened to an old <home>/recall/


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def plan_serving(home_arg: str | None, data_dir_arg: str | None) -> ServePlan:
    """Decide what to open (:func:`chosen_home`), and where Recall's own data goes.

    Recall's own data for the home goes to ``--data-dir`` or the home's folder in the
    user's data directory (:mod:`datadir`), an old ``<home>/recall/`` moved there
    first; the note says what happened to it. A demo home with ``--data-dir`` lives
    in that folder, with its data.
    """
    home, demo = chosen_home(home_arg)
    if not demo:
        data_dir, note = recall_data_dir(home, data_dir_arg)
        return ServePlan(home, data_dir, demo=False, note=note)
    if data_dir_arg:  # the demo home and its data together in the folder given
        return ServePlan(HermesHome(Path(data_dir_arg) / "demo-home"), Path(data_dir_arg), True)
    data_dir, note = recall_data_dir(home)
    return ServePlan(home, data_dir, demo=True, note=note)


@dataclass(frozen=True)
class ServedProfiles:
    """The profiles ``recall serve`` shows: ``only`` (config ``PROFILE``) or every one."""

    names: tuple[str, ...]
    only: str | None = None

    @property
    def line(self) -> str | None:
        """What the terminal says at start (nothing for a home of one profile)."""
        if self.only is not None:
            return f"profile served: {self.only} only (no page or API shows another)"
        if len(self.names) > 1:
            return f"profiles served: {', '.join(self.names)}"
        return None


def served_profiles(
    home_arg: str | None, extra_homes: Sequence[str], profile: str | None
) -> ServedProfiles:
    """The profiles of the homes given (:func:`chosen_home` first) and the one ``--profile``
    names (``all``: every one); ValidationError naming them for a name that is none."""
    home, _ = chosen_home(home_arg)
    profiles = discover([home, *(resolve_home(h) for h in extra_homes)])
    chosen = parse_profile(profile, profiles)
    names = tuple(p.name for p in profiles)
    return ServedProfiles(names, None if chosen in (None, ALL) else chosen)


def port_taken(host: str, port: int, exc: OSError) -> str | None:
    """The one line to print when ``exc`` says the address is in use, else None."""
    if exc.errno != errno.EADDRINUSE:
        return None
    other = port + 1 if port < 65535 else port - 1
    return (
        f"recall: port {port} on {host} is already in use (another Recall, or another "
        f"program); pick a free one with --port, e.g. --port {other}"
    )


def _check_port(host: str, port: int) -> str | None:
    """Bind the address once, before minutes of demo building, to say early it is taken.

    Waitress binds it again for real (with SO_REUSEADDR, as here); a program that
    takes the port in between is caught there with the same message.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return None  # waitress names a host it cannot resolve
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return port_taken(host, port, exc)
    return None


def serve(
    *,
    home: str | None,
    host: str,
    port: int,
    data_dir: str | None,
    allow_remote: bool,
    threads: int = 8,
    settings: dict[str, object] | None = None,
    archive: str | None = None,
    extra_homes: Sequence[str] = (),
    profile: str | None = None,
    meaning: bool = True,
) -> int:
    """Run the dashboard until interrupted, its archive kept in step in the background.

    ``extra_homes`` (more ``--home``) are read with the first one, in its archive;
    ``profile`` (``--profile``) serves that one profile only; ``meaning``: build and
    follow the archive's meaning index in the background (meaning/builder.py).
    """
    import waitress

    if not is_loopback(host):
        if not allow_remote:
            print(
                f"recall: refusing to listen on {host}: the dashboard shows private history.\n"
                "        Add --allow-remote if you really want other machines to reach it.",
                file=sys.stderr,
            )
            return 2
        print(
            f"WARNING: listening on {host}: anyone who can reach this address can read "
            "your agent's history. Requests must still name this host.",
            file=sys.stderr,
        )
    # A profile that is not there is said before anything is bound, moved or built.
    try:
        served = served_profiles(home, extra_homes, profile)
    except ValidationError as exc:
        print(f"recall: {exc}", file=sys.stderr)
        return 2
    taken = _check_port(host, port)
    if taken:
        print(taken, file=sys.stderr)
        return 2
    plan = plan_serving(home, data_dir)
    if plan.note:
        print(f"recall: {plan.note}", flush=True)
    if plan.demo:
        ensure_demo_home(plan.home, sys.stdout)
    try:
        plan.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(
            f"recall: can't make Recall's data folder {plan.data_dir} ({exc.strerror}): "
            "start Recall with --data-dir on a writable folder",
            file=sys.stderr,
        )
        return 2
    app = create_app(
        {
            "HERMES_HOME": str(plan.home.root),
            "DATA_DIR": str(plan.data_dir),
            "DEMO": plan.demo,
            "BIND_HOST": host,
            "BIND_PORT": port,
            "SYNC": "background",
            "EXTRA_HOMES": [str(h) for h in extra_homes],
            "PROFILE": served.only,
            # Only when given: else $RECALL_ARCHIVE, else archive.db in the data directory.
            **({"ARCHIVE": archive} if archive else {}),
            **(settings or {}),
        }
    )
    with app.app_context():
        refused, syncer = refused_archive(), get_syncer()
    if refused is not None:
        print(
            f"recall: {refused} is a database that is not Recall's (a Hermes "
            "state.db?), so it cannot be the archive: Recall never writes to it.\n"
            "        Name another file with --archive, or leave it out for the default.",
            file=sys.stderr,
        )
        return 2
    unusable = _folder_line(plan.data_dir, syncer.archive_path if syncer else None)
    if unusable is not None:
        print(unusable.line, file=sys.stderr, flush=True)
        if unusable.fatal:
            return 2
    try:
        server = waitress.create_server(app, host=host, port=port, threads=threads, ident="Recall")
    except OSError as exc:
        message = port_taken(host, port, exc)
        if message is None:
            raise
        print(message, file=sys.stderr)
        return 2
    # The meaning index is written only into a file Recall owns: its archive, or the demo
    # home it built. Another Recall store given as the home is read, never written: a
    # file someone restores or rewrites in place under a writer would be corrupted.
    with app.app_context():
        store = syncer.archive_path if syncer is not None else base_reader().path
    owned = syncer is not None or plan.demo
    builder = MeaningWorker(store) if meaning and owned else None
    with app.app_context():
        if syncer is None:
            prepare_cost_rollup()  # in the background, so the first /costs is already fast
            # And so is the first search (a home's own store: no sync pass to wait for).
            threading.Thread(target=base_reader().warm_search, daemon=True).start()
            if builder is not None:
                builder.wake()
        else:
            # The meaning index starts after the first pass: an import first, then this.
            syncer.on_synced = functools.partial(_after_sync, app, prepare_cost_rollup, builder)
            syncer.on_progress = _ImportLine(syncer, sys.stdout)
            start_syncer()  # the first import, then a look at the source every 500 ms
    shown = f"[{host}]" if ":" in host else host
    read = (
        f"{plan.home.state_db}"
        if syncer is None
        else (f"{plan.home.state_db} (through its archive {syncer.archive_path})")
    )
    print(f"Recall is serving {read} at http://{shown}:{port}/", flush=True)
    if served.line:
        print(f"recall: {served.line}", flush=True)
    # SIGTERM (a service manager, a test) stops it as Ctrl-C does: the syncer's batch
    # commits and both its connections close before the process ends.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        server.run()
    except KeyboardInterrupt:
        pass  # Ctrl-C: the user stopped it, as waitress.serve does
    finally:
        server.close()
        with app.app_context():
            stop_syncer()
        if builder is not None:
            builder.stop()  # a batch being embedded is dropped; what was written stays
    return 0


@dataclass(frozen=True)
class FolderLine:
    """What ``recall serve`` says at start about a folder of its own it cannot write."""

    line: str
    fatal: bool  # nothing archived there yet: there is nothing to serve


def _folder_line(data_dir: Path, archive: Path | None) -> FolderLine | None:
    """The archive's folder (or the data directory) read-only or full, said in one line.

    With no archive there yet, Recall cannot serve anything: every page reads the
    archive, and Hermes's own file is read only to fill it. So that is an error (the
    caller exits 2). With one, its pages are served as they are, and the banner keeps
    saying that new history is not saved.
    """
    for folder, files in (
        (archive.parent, archive_files(archive)) if archive else (data_dir, ()),
        (data_dir, ()),
    ):
        fault = folder_fault(folder, files)
        if fault is None:
            continue
        if archive is None or folder != archive.parent:
            # Recall's own small file only (summaries, memory revisions, cost sums).
            return FolderLine(f"recall: {fault.sentence}; serving without it", fatal=False)
        if not _holds_data(archive):
            return FolderLine(f"recall: {fault.sentence}.", fatal=True)
        return FolderLine(
            f"recall: {fault.sentence}; serving the archive as it is until then", fatal=False
        )
    return None


def _holds_data(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _after_sync(
    app: Flask, prepare: Callable[[], None], builder: MeaningWorker | None = None
) -> None:
    """After a sync pass: the cost rollup is built for the archive (once; later ones
    refresh on the next request), the meaning index embeds what the pass added, and
    search's caches take it in."""
    if builder is not None:
        builder.wake()
    with app.app_context():
        prepare()
        base_reader().warm_search()


class _ImportLine:
    """The terminal's line about the first import: one line per tenth of the way."""

    def __init__(self, syncer: Syncer, out: TextIO) -> None:
        self.syncer = syncer
        self.out = out
        self.shown = -1

    def __call__(self, p: Progress) -> None:
        if not p.sessions_total or not self.syncer.state().importing:
            return  # later syncs are a few rows: nothing to say
        tenth = p.sessions_done * 10 // p.sessions_total
        if tenth > self.shown:
            self.shown = tenth
            print(
                f"recall: importing the history into the archive: "
                f"{p.sessions_done * 100 // p.sessions_total}% ({p.sessions_done:,} of "
                f"{p.sessions_total:,} sessions)",
                file=self.out,
                flush=True,
            )
