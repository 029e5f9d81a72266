"""The ``recall`` command.

Each subcommand imports what it needs when it runs: the whole app (Flask, the summary
client, rich) takes ~0.6 s to import on these machines against ~0.06 s for this module,
and ``recall --help`` or ``recall info`` should not wait for ``serve``'s. No import here
dodges a circle (import-linter holds the layers in ``make test``).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dashboard.errors import RecallError
from dashboard.hermes.home import HermesHome

if TYPE_CHECKING:
    from dashboard.archive.importer import Progress
    from dashboard.hermes.profiles import Profile
    from dashboard.reader.reader import StateReader

HOME_HELP = (
    "Hermes home (default: $HERMES_HOME, else ~/.hermes, else the demo home); "
    "repeat for more homes, read together (the first one's archive holds them all)"
)
ARCHIVE_HELP = "the archive file (default: archive.db in the home's data directory)"
PROFILE_HELP = "one profile's name, or all (default: all)"


def _add_source(parser: argparse.ArgumentParser, profile_help: str = PROFILE_HELP) -> None:
    """``--home`` (repeatable), ``--archive`` and ``--profile``: what a command reads."""
    parser.add_argument("--home", action="append", help=HOME_HELP)
    parser.add_argument("--archive", help=ARCHIVE_HELP)
    parser.add_argument("--profile", help=profile_help)


def build_parser() -> argparse.ArgumentParser:
    """Every ``recall`` subcommand and its options."""
    parser = argparse.ArgumentParser(prog="recall", description="Look back into an agent's memory.")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="build a realistic demo Hermes home")
    demo.add_argument("--home", required=True, help="folder to create the demo home in")
    demo.add_argument("--sessions", type=int, default=600)
    demo.add_argument("--messages", type=int, help="total messages (default: 60 per session)")
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--anchor", help="the demo's 'today' as YYYY-MM-DD (default: today)")
    demo.add_argument(
        "--bulk",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="force or forbid the bulk import path",
    )
    demo.add_argument("--if-missing", action="store_true", help="do nothing if it exists")
    demo.set_defaults(run=_demo)

    info = commands.add_parser("info", help="show what a Hermes home's state.db holds")
    _add_source(info)
    info.add_argument("--json", action="store_true")
    info.set_defaults(run=_info)

    search = commands.add_parser("search", help="search past conversations (grouped results)")
    search.add_argument("query", nargs="?", default="", help="FTS5 syntax; empty: recent sessions")
    _add_source(search)
    search.add_argument("--json", action="store_true", help="print the /api/search JSON")
    search.add_argument("--limit", type=int, default=10, help="sessions to show (max 100)")
    search.add_argument("--role", action="append", default=[], help="user, assistant, tool")
    search.add_argument("--source", action="append", default=[], help="cli, telegram, cron, …")
    search.add_argument("--days", help="only the last N days")
    search.add_argument("--sort", default="relevance", help="relevance, newest or oldest")
    search.add_argument(
        "--summaries",
        action="store_true",
        help="recap each session with the model (RECALL_LLM_*), the seed tool's JSON shape",
    )
    search.add_argument(
        "--data-dir",
        help="Recall's own files (default: one folder per home in ~/.local/share/recall/homes)",
    )
    search.set_defaults(run=_search)

    preview = commands.add_parser(
        "preview", help="print what the agent would get for a message (read-only)"
    )
    preview.add_argument("message", help="the message, as the user would send it")
    _add_source(
        preview,
        "the profile whose agent is previewed (default: the first home's "
        "own profile, usually default)",
    )
    preview.add_argument("--session", help="preview a turn inside this session")
    preview.add_argument("--model", help="the model named in the context line")
    preview.add_argument("--json", action="store_true", help="the /api/preview JSON")
    preview.set_defaults(run=_preview)

    serve = commands.add_parser("serve", help="serve the dashboard on 127.0.0.1")
    serve.add_argument("--home", action="append", help=HOME_HELP)
    serve.add_argument(
        "--profile", help="serve this one profile only: no page or API shows another (default: all)"
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8750)
    serve.add_argument(
        "--data-dir",
        help="Recall's own files (default: one folder per home in ~/.local/share/recall/homes)",
    )
    serve.add_argument(
        "--allow-remote", action="store_true", help="allow --host to be a non-loopback address"
    )
    serve.add_argument("--archive", help=ARCHIVE_HELP)
    llm = serve.add_argument_group(
        "summaries", "an OpenAI-compatible endpoint (or RECALL_LLM_BASE_URL/_MODEL/_API_KEY)"
    )
    llm.add_argument("--llm-base-url", help="e.g. http://127.0.0.1:11434/v1")
    llm.add_argument("--llm-model", help="model name sent to the endpoint")
    llm.add_argument("--llm-timeout", type=float, help="seconds per call (default 30)")
    llm.add_argument("--summary-concurrency", type=int, help="calls in flight, 1-5 (default 3)")
    llm.add_argument(
        "--summaries",
        choices=("auto", "button", "off"),
        help="load summaries as cards scroll into view, on a click, or never",
    )
    serve.set_defaults(run=_serve)

    archive = commands.add_parser("archive", help="Recall's own copy of the home's history")
    actions = archive.add_subparsers(dest="action", required=True)
    sync = actions.add_parser("sync", help="copy what the archive lacks, newest sessions first")
    _add_source(sync)
    sync.add_argument(
        "--batch", type=int, default=None, help="sessions per transaction (default 50)"
    )
    sync.set_defaults(run=_archive_sync)
    status = actions.add_parser("status", help="counts, last sync and the source's layout")
    _add_source(status)
    status.add_argument("--json", action="store_true")
    status.set_defaults(run=_archive_status)
    verify = actions.add_parser(
        "verify", help="check every source row is archived and equal, and the archive's indexes"
    )
    _add_source(verify)
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(run=_archive_verify)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except RecallError as exc:
        print(f"recall: {exc}", file=sys.stderr)
        return 2


def _home(home_arg: str | None) -> HermesHome:
    """The first home a command reads: as ``serve`` chooses it (the demo home when none)."""
    from dashboard.serve import chosen_home, ensure_demo_home

    home, demo = chosen_home(home_arg)
    if demo:  # said on stderr, so --json output stays JSON
        ensure_demo_home(home, sys.stderr)
    return home


def _homes(args: argparse.Namespace) -> list[HermesHome]:
    """Every ``--home`` given, the first chosen as ``serve`` does (:func:`_home`)."""
    from dashboard.hermes.home import resolve_home

    given = args.home or []
    return [_home(given[0] if given else None), *(resolve_home(h) for h in given[1:])]


def _profiles(homes: list[HermesHome]) -> list[Profile]:
    from dashboard.hermes.profiles import discover

    return discover(homes)


def _chosen_profile(args: argparse.Namespace, profiles: list[Profile], default: str) -> str:
    """``--profile`` checked against the homes' profiles (ValidationError naming them:
    exit 2), else ``default``."""
    from dashboard.hermes.profiles import parse_profile

    return parse_profile(args.profile, profiles) or default


def _reader(args: argparse.Namespace, profile: str | None = None) -> StateReader:
    """What ``search``, ``info`` and ``preview`` read (:func:`opening.reading_for`, as the
    pages): the archive of every home, brought up to date once first (only the profile
    read, when one is named), a progress bar only when slow; scoped to ``profile``
    (``--profile``, default all)."""
    from dashboard.hermes.profiles import ALL
    from dashboard.reader.opening import reading_for

    homes = _homes(args)
    if profile is None:
        profile = _chosen_profile(args, _profiles(homes), ALL)
    only = None if profile == ALL else profile
    reading = reading_for(homes[0], args.archive, inline=True, homes=homes[1:], only=only)
    if reading.syncer is not None:
        with _LateBar() as bar:
            reading.syncer.on_progress = bar
            reading.syncer.poll()
        reading.syncer.on_progress = None
        state = reading.syncer.state()
        if state.error and state.imported:  # the archive answers; say the source did not
            print(f"recall: {state.error}; answering from the archive", file=sys.stderr)
    return reading.reader.scoped(only)


class _LateBar:
    """A terminal progress bar (rich, on stderr) that appears only after LATE_BAR_S."""

    LATE_BAR_S = 1.0

    def __enter__(self) -> _LateBar:
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


def _demo(args: argparse.Namespace) -> int:
    from dashboard.demo.build import build_demo_home

    home = HermesHome(Path(args.home))
    if args.if_missing and home.exists():
        print(f"demo home already at {home.root}")
        return 0
    report = build_demo_home(
        home.root,
        sessions=args.sessions,
        messages=args.messages,
        seed=args.seed,
        anchor_day=args.anchor,
        bulk=args.bulk,
    )
    print(
        f"built {report.home}: {report.sessions} sessions, {report.messages} messages "
        f"in {report.seconds:.1f}s ({'bulk path' if report.bulk else 'write API'}); "
        f"state.db {report.db_bytes / 1e6:.1f} MB for {report.text_bytes / 1e6:.1f} MB of text"
    )
    return 0


def _search(args: argparse.Namespace) -> int:
    from dashboard.search.sessions import SearchRequest
    from dashboard.text import plain

    if args.summaries:
        return _search_with_summaries(args)
    params = {
        "q": args.query,
        "days": args.days,
        "sort": args.sort,
        "per_page": str(max(1, min(args.limit, 100))),
    }
    lists = {"role": args.role, "source": args.source}
    request = SearchRequest.from_params(params.get, lambda k: lists.get(k, []))
    reader = _reader(args)
    result = reader.search(request)
    several = reader.spans_profiles
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
        return 0
    for note in result.notes:
        print(f"note: {note}")
    kind = "recent sessions" if result.route == "recent" else f"sessions ({result.route})"
    print(f"{result.total_sessions:,} {kind} · {result.took_ms:.0f} ms")
    for card in result.results:
        when = (
            datetime.fromtimestamp(card.started_at).strftime("%Y-%m-%d %H:%M")
            if card.started_at
            else "?"
        )
        print(f"\n{card.title or card.preview or card.session_id}")
        hits = f" · {card.hit_count} hits" if card.hit_count else ""
        # Under several profiles, each card says whose it is (ids of one can repeat in another).
        whose = f"{card.profile} · " if several and card.profile else ""
        print(f"  {whose}{card.session_id} · {card.source} · {card.model or '?'} · {when}{hits}")
        for hit in card.hits:
            epoch = (
                f" · before compaction {hit.compaction[0]} of {hit.compaction[1]}"
                if hit.compaction
                else ""
            )
            print(f"  [{hit.role}] {plain(hit.snippet, ('«', '»'))}{epoch}")
    return 0


def _search_with_summaries(args: argparse.Namespace) -> int:
    import os

    from dashboard.store.datadir import recall_data_dir
    from dashboard.store.recalldb import RecallData
    from dashboard.summaries.llm import LLMConfig, Summarizer
    from dashboard.summaries.service import SummaryService, session_search_result

    reader = _reader(args)
    folder, note = recall_data_dir(
        reader.profiles[0].home if reader.profiles else reader.home, args.data_dir
    )
    if note:
        print(f"recall: {note}", file=sys.stderr)
    folder.mkdir(parents=True, exist_ok=True)
    env = {k.removeprefix("RECALL_"): v for k, v in os.environ.items() if k.startswith("RECALL_")}
    service = SummaryService(
        reader,
        RecallData(folder / "recall.db"),
        Summarizer(LLMConfig.from_mapping(env)),
    )
    try:
        answer = session_search_result(
            service.reader, service, args.query, max(1, min(args.limit, 20))
        )
    finally:
        service.close()
    print(json.dumps(answer, ensure_ascii=False, indent=2))
    return 0


def _preview(args: argparse.Namespace) -> int:
    from dashboard.agent import MemoryManager, RecallMemoryProvider
    from dashboard.errors import ValidationError
    from dashboard.hermes.profiles import ALL

    profiles = _profiles(_homes(args))
    profile = _chosen_profile(args, profiles, profiles[0].name)
    if profile == ALL:
        raise ValidationError(
            "preview shows one profile's agent: name one profile with "
            f"--profile ({', '.join(p.name for p in profiles)})"
        )
    reader = _reader(args, profile)
    provider = RecallMemoryProvider(reader.home, readonly=True, reader=reader)
    if not provider.is_available():
        print(f"recall: {provider.unavailable_reason}", file=sys.stderr)
        return 2
    manager = MemoryManager()
    manager.add_provider(provider)
    model = args.model or provider.latest_model(args.session)  # NotFoundError: exit 2
    block = manager.volatile_block(args.message, session_id=args.session, model=model)
    manager.shutdown_all()
    if args.json:
        print(json.dumps(block.to_json(), ensure_ascii=False, indent=2))
        return 0
    print(block.text)
    print(f"\n[{block.chars:,} characters, about {block.tokens:,} tokens]", file=sys.stderr)
    return 0


def _serve(args: argparse.Namespace) -> int:
    from dashboard.serve import serve

    settings = {
        "LLM_BASE_URL": args.llm_base_url,
        "LLM_MODEL": args.llm_model,
        "LLM_TIMEOUT": args.llm_timeout,
        "SUMMARY_CONCURRENCY": args.summary_concurrency,
        "SUMMARIES": args.summaries,
    }
    homes = args.home or []
    return serve(
        home=homes[0] if homes else None,
        host=args.host,
        port=args.port,
        data_dir=args.data_dir,
        allow_remote=args.allow_remote,
        settings={k: v for k, v in settings.items() if v},
        archive=args.archive,
        extra_homes=homes[1:],
        profile=args.profile,
    )


def _archive_location(args: argparse.Namespace) -> tuple[list[Profile], Path | None, bool]:
    """The profiles ``--profile`` names (all by default) and their archive (``--archive``),
    saying any move of it; and whether the homes have several profiles.

    The archive is None when the home's state.db is Recall's own store: it is its own
    archive (``archive.read_choice``), with nothing to copy or check against; that is said.
    """
    from dashboard.archive.files import read_choice
    from dashboard.hermes.profiles import ALL, EVERY_PROFILE

    homes = _homes(args)
    profiles = _profiles(homes)
    chosen = _chosen_profile(args, profiles, ALL)
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


def _archive_sync(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from dashboard.archive.files import open_archive
    from dashboard.archive.importer import BATCH_SESSIONS, sync

    if args.batch is not None and args.batch < 1:
        print("recall: --batch must be a whole number of at least 1", file=sys.stderr)
        return 2
    profiles, path, several = _archive_location(args)
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
            f"{report.messages_added:,} messages, {report.usage_added:,} usage rows "
            f"({report.sessions_total:,} sessions in the source, layout {report.adapter}"
            f"{', resumed' if report.resumed else ''}) in {report.seconds:.1f}s"
        )
    return 0


def _archive_status(args: argparse.Namespace) -> int:
    from dashboard.archive.files import archive_status, open_archive

    profiles, path, _ = _archive_location(args)
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


def _archive_verify(args: argparse.Namespace) -> int:
    """0: the archive holds every source row and is sound; 1: problems; 2: cannot check."""
    from dashboard.archive.verify import verify_archive

    profiles, path, _ = _archive_location(args)
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


def _info(args: argparse.Namespace) -> int:
    reader = _reader(args)
    overview = reader.overview()  # the archive's (the scope's rows), with its source's state
    if reader.spans_profiles:
        overview["profiles"] = _profile_figures(reader)
    if args.json:
        print(json.dumps(overview, indent=2, ensure_ascii=False))
        return 0
    print(f"{'home':<20}{overview['home']}")
    print(f"{'reads':<20}{overview['path']}")
    print(f"{'sessions':<20}{overview.get('sessions')}")
    print(f"{'messages':<20}{overview.get('messages')}")
    for name, figures in overview.get("profiles", {}).items():
        print(
            f"{'profile ' + name:<20}{figures['sessions']} sessions, "
            f"{figures['messages']} messages ({figures['home']})"
        )
    if "archive" in overview:
        print(f"{'only in archive':<20}{overview['archive']['gone_sessions']} sessions")
    for key in ("first_activity", "last_activity"):
        if overview.get(key):
            when = datetime.fromtimestamp(overview[key], UTC).isoformat(timespec="minutes")
            print(f"{key.replace('_', ' '):<20}{when}")
    for name, size in overview["files"].items():
        print(f"{name:<20}{size / 1e6:.1f} MB")
    source = overview.get("source")
    layout = source.get("layout") if source else overview["layout"]
    if source:
        state = "reachable" if source["reachable"] else f"cannot be read ({source['reason']})"
        print(f"{'source':<20}{source['path']} ({state})")
    for key, value in (layout or {}).items():
        print(f"{key:<20}{value}")
    return 0


def _profile_figures(reader: StateReader) -> dict[str, dict[str, Any]]:
    """Each profile's own counts, read through its scoped reader (the same queries)."""
    figures = {}
    for p in reader.profiles:
        own = reader.scoped(p.name).overview()
        figures[p.name] = {
            "home": str(p.home.root),
            "sessions": own.get("sessions"),
            "messages": own.get("messages"),
            "last_activity": own.get("last_activity"),
        }
    return figures


if __name__ == "__main__":
    raise SystemExit(main())
