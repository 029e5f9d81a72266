"""The `recall archive` commands: sync a home into its archive, show its status, verify it."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from dashboard.cli.homes import archive_location
from dashboard.hermes.home import HermesHome


def run_archive_sync(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from dashboard.archive.files import open_archive
    from dashboard.archive.importer import BATCH_SESSIONS, sync

    if args.batch is not None and args.batch < 1:
        print("recall: --batch must be a whole number of at least 1", file=sys.stderr)
        return 2
    profiles, path, several = archive_location(args)
    if path is None:
        return 0
    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        "sessions",
        "{task.fields[messages]:,} messages",
        TimeRemainingColumn(),
    )
    for profile in profiles:
        home = profile.home
        whose = f" {profile.name}" if several else ""
        with open_archive(path, to_sync=True) as store, Progress(*columns) as bar:
            task = bar.add_task(f"Archiving{whose}", total=None, messages=0)
            report = sync(
                store,
                home.state_db,
                home.root,
                batch_sessions=args.batch or BATCH_SESSIONS,
                profile=profile.name,
                id_prefix=profile.id_prefix,
                on_progress=lambda p, task=task, bar=bar, whose=whose: bar.update(
                    task,
                    completed=p.sessions_done,
                    total=p.sessions_total,
                    messages=p.messages_added,
                    description=f"Archiving{whose}"
                    if p.phase == "copying"
                    else "Indexing parts of words",
                ),
            )
            bar.update(task, description=f"Archived{whose}")
        print(
            f"archived {home.root}{f' (profile {profile.name})' if several else ''} into "
            f"{path}: {report.sessions_added:,} new sessions, "
            f"{report.messages_added:,} messages, {report.usage_added:,} usage rows, "
            f"{report.calls_added:,} logged calls "
            f"({report.sessions_total:,} sessions in the source, layout {report.adapter}"
            f"{', resumed' if report.resumed else ''}) in {report.seconds:.1f}s"
        )
        for note in report.calls_notes:
            print(f"recall: {note}", file=sys.stderr)
    if not args.no_meaning:
        _build_meaning(path)
    return 0


def _build_meaning(path: Any) -> None:
    """Bring the archive's meaning index up to date, with a bar (resumable: a build
    stopped here goes on from its last batch next time, or under `recall serve`)."""
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TimeRemainingColumn

    from dashboard.meaning.builder import MeaningBuilder

    builder = MeaningBuilder(path)
    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        TaskProgressColumn(),
        "{task.completed:,.0f} of {task.fields[messages]:,} messages",
        TimeRemainingColumn(),
    )
    try:
        with Progress(*columns) as bar:
            task = bar.add_task("Indexing meaning", total=None, messages=0)
            status = builder.build(
                lambda s: bar.update(task, completed=s.covered, total=s.total, messages=s.total)
            )
    finally:
        builder.close()
    print(f"meaning index of {path}: {status.covered:,} of {status.total:,} messages")


def run_archive_status(args: argparse.Namespace) -> int:
    from dashboard.archive.files import archive_status, open_archive

    profiles, path, _ = archive_location(args)
    if path is None:
        return 0
    if not path.exists():  # status only reads: it does not create an empty archive
        if args.json:
            print(json.dumps({"archive": str(path), "exists": False}))
        else:
            print(f"no archive at {path} yet: `recall archive sync` makes it")
        return 0
    with open_archive(path, to_sync=True) as store:  # only reads: the next sync finishes
        statuses = {p.name: archive_status(store, p.home) for p in profiles}
    if args.json:
        if len(statuses) == 1:
            body = next(iter(statuses.values())).to_json()
        else:
            body = {"archive": str(path), "profiles": {n: s.to_json() for n, s in statuses.items()}}
        print(json.dumps(body, indent=2, ensure_ascii=False))
        return 0
    for name, status in statuses.items():
        if len(statuses) > 1:
            print(f"\nprofile {name}")
        _print_status(status, next(p.home for p in profiles if p.name == name))
    return 0


def _print_status(status: Any, home: HermesHome) -> None:
    """One home's lines of ``recall archive status``."""
    print(f"{'archive':<20}{status.archive} ({status.archive_bytes / 1e6:.1f} MB)")
    print(f"{'sessions':<20}{status.sessions:,} ({status.from_home['sessions']:,} from this home)")
    print(f"{'messages':<20}{status.messages:,} ({status.from_home['messages']:,} from this home)")
    print(f"{'usage rows':<20}{status.usage_rows:,}")
    if status.last_sync:
        when = datetime.fromtimestamp(status.last_sync["at"], UTC).isoformat(timespec="seconds")
        print(f"{'last sync':<20}{when}")
    else:
        print(f"{'last sync':<20}never")
    if status.in_progress:
        print(f"{'in progress':<20}a sync was cut off; the next one resumes it")
    if status.source:
        print(
            f"{'source':<20}{status.source['path']} ({status.source['bytes'] / 1e6:.1f} MB, "
            f"{status.source['sessions']:,} sessions)"
        )
        print(
            f"{'source layout':<20}{status.source['fts_form']} FTS, "
            f"schema {status.source['schema_version']}, journal {status.source['journal_mode']}, "
            f"usage rows: {'yes' if status.source['session_model_usage'] else 'no'}"
        )
    else:
        print(f"{'source':<20}missing ({home.state_db})")


def run_archive_verify(args: argparse.Namespace) -> int:
    """0: the archive holds every source row and is sound; 1: problems; 2: cannot check."""
    from dashboard.archive.verify import verify_archive

    profiles, path, _ = archive_location(args)
    if path is None:
        return 0
    # Each profile's source against its own rows; the archive's own health once (it is
    # one file for every profile).
    reports = {
        p.name: verify_archive(
            p.home, path, profile=p.name, id_prefix=p.id_prefix, check_integrity=i == 0
        )
        for i, p in enumerate(profiles)
    }  # VerifyError (missing, corrupt, locked): exit 2
    ok = all(r.ok for r in reports.values())
    if args.json:
        if len(reports) == 1:
            body = next(iter(reports.values())).to_json()
        else:
            body = {"ok": ok, "profiles": {n: r.to_json() for n, r in reports.items()}}
        print(json.dumps(body, indent=2, ensure_ascii=False))
    else:
        for name, report in reports.items():
            if len(reports) > 1:
                print(f"profile {name}")
            print("\n".join(report.lines()))
    return 0 if ok else 1
