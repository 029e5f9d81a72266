"""The other commands: demo, info, search, preview and serve."""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dashboard.cli.homes import chosen_profile, homes_of, profiles_of, reader_for
from dashboard.hermes.home import HermesHome

if TYPE_CHECKING:
    from dashboard.reader.reader import StateReader


def run_demo(args: argparse.Namespace) -> int:
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


def run_search(args: argparse.Namespace) -> int:
    from dashboard.search.sessions import SearchRequest
    from dashboard.text import plain

    if args.summaries:
        return run_search_with_summaries(args)
    params = {
        "q": args.query,
        "days": args.days,
        "sort": args.sort,
        "mode": args.mode,
        "per_page": str(max(1, min(args.limit, 100))),
    }
    lists = {"role": args.role, "source": args.source}
    request = SearchRequest.from_params(params.get, lambda k: lists.get(k, []))
    reader = reader_for(args)
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
        print(f"\n{card.label}")
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


def run_search_with_summaries(args: argparse.Namespace) -> int:
    import os

    from dashboard.store.datadir import recall_data_dir
    from dashboard.store.recalldb import RecallData
    from dashboard.summaries.llm import LLMConfig, Summarizer
    from dashboard.summaries.service import SummaryService, session_search_result

    reader = reader_for(args)
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


def run_preview(args: argparse.Namespace) -> int:
    from dashboard.agent import MemoryManager, RecallMemoryProvider
    from dashboard.errors import ValidationError
    from dashboard.hermes.profiles import ALL

    profiles = profiles_of(homes_of(args))
    profile = chosen_profile(args, profiles, profiles[0].name)
    if profile == ALL:
        raise ValidationError(
            "preview shows one profile's agent: name one profile with "
            f"--profile ({', '.join(p.name for p in profiles)})"
        )
    reader = reader_for(args, profile)
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


def run_serve(args: argparse.Namespace) -> int:
    from dashboard.serve import serve

    # The embedder is read from the environment by the server and its worker alike.
    for name, value in (
        ("RECALL_EMBED_BASE_URL", args.embed_base_url),
        ("RECALL_EMBED_MODEL", args.embed_model),
    ):
        if value:
            os.environ[name] = value

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
        meaning=not args.no_meaning,
    )


def run_info(args: argparse.Namespace) -> int:
    reader = reader_for(args)
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
