"""The ``recall`` command: its parser (the commands: cli/commands.py, cli/archive.py;
what they read: cli/homes.py).

Each subcommand imports what it needs when it runs: the whole app (Flask, the summary
client, rich) takes ~0.6 s to import on these machines against ~0.06 s for this module,
and ``recall --help`` or ``recall info`` should not wait for ``serve``'s. No import here
dodges a circle (import-linter holds the layers in ``make test``).
"""

from __future__ import annotations

import argparse
import sys

from dashboard.cli.archive import run_archive_status, run_archive_sync, run_archive_verify
from dashboard.cli.commands import run_demo, run_info, run_preview, run_search, run_serve
from dashboard.cli.costs import add_costs_parser
from dashboard.errors import RecallError

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
    demo.add_argument(
        "--sessions",
        type=int,
        default=600,
        help="planned sessions (the demo's three scripted conversations come on top)",
    )
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
    demo.set_defaults(run=run_demo)

    info = commands.add_parser("info", help="show what a Hermes home's state.db holds")
    _add_source(info)
    info.add_argument("--json", action="store_true")
    info.set_defaults(run=run_info)

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
        "--mode",
        default="hybrid",
        choices=("hybrid", "words", "meaning"),
        help="words and meaning together (once the meaning index is built), or one of them",
    )
    search.add_argument(
        "--summaries",
        action="store_true",
        help="recap each session with the model (RECALL_LLM_*), the seed tool's JSON shape",
    )
    search.add_argument(
        "--data-dir",
        help="Recall's own files (default: one folder per home in ~/.local/share/recall/homes)",
    )
    search.set_defaults(run=run_search)

    add_costs_parser(commands, _add_source)

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
    preview.set_defaults(run=run_preview)

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
    serve.add_argument(
        "--no-meaning",
        action="store_true",
        help="do not build the meaning index in the background (search by words only)",
    )
    embed = serve.add_argument_group(
        "meaning",
        "a stronger embedder than the bundled one: an OpenAI-compatible /v1/embeddings "
        "(or RECALL_EMBED_BASE_URL/_MODEL/_API_KEY); the index is built again for it",
    )
    embed.add_argument("--embed-base-url", help="e.g. http://127.0.0.1:11434/v1")
    embed.add_argument("--embed-model", help="model name sent to the endpoint")
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
    serve.set_defaults(run=run_serve)

    archive = commands.add_parser("archive", help="Recall's own copy of the home's history")
    actions = archive.add_subparsers(dest="action", required=True)
    sync = actions.add_parser("sync", help="copy what the archive lacks, newest sessions first")
    _add_source(sync)
    sync.add_argument(
        "--batch", type=int, default=None, help="sessions per transaction (default 50)"
    )
    sync.add_argument(
        "--no-meaning",
        action="store_true",
        help="do not bring the meaning index up to date after the sync (a 1M archive's "
        "first build takes minutes)",
    )
    sync.set_defaults(run=run_archive_sync)
    status = actions.add_parser("status", help="counts, last sync and the source's layout")
    _add_source(status)
    status.add_argument("--json", action="store_true")
    status.set_defaults(run=run_archive_status)
    verify = actions.add_parser(
        "verify", help="check every source row is archived and equal, and the archive's indexes"
    )
    _add_source(verify)
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(run=run_archive_verify)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except RecallError as exc:
        print(f"recall: {exc}", file=sys.stderr)
        return 2
