"""Write a demo Hermes home: ``state.db``, ``memories/USER.md``/``MEMORY.md``, ``config.yaml``.

Small homes go through the write API one turn at a time, exactly as an agent
would write them; large ones (``bulk=True``, the default above
:data:`BULK_THRESHOLD` messages) through the bulk path.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from dashboard.demo.pending import write_pending
from dashboard.demo.plan import IN_PLACE_KEEP, DemoPlanner, PlannedSession, anchor_for
from dashboard.demo.story import STACK_ENTRY
from dashboard.errors import ConflictError
from dashboard.hermes.conventions import MEMORY_FILE, USER_FILE
from dashboard.store.schema import DEMO_KEY
from dashboard.store.session_store import SessionStore

BULK_THRESHOLD = 50_000
DEMO_MARKER = DEMO_KEY

USER_ENTRIES = (
    "Name: Mara Lindqvist. Backend engineer at a small logistics startup; "
    "on-call every third week.",
    "Timezone Europe/Stockholm (UTC+1, UTC+2 in summer). Prefers answers before 09:00 "
    "and after 17:00 to be short.",
    "Prefers concise answers with the command first, explanation after. Dislikes emoji.",
    STACK_ENTRY,  # written by the story's first conversation (demo/story.py)
    "Editor: neovim. Shell: fish. Uses `uv` instead of pip.",
    "正在学习中文；技术术语保持英文即可。",
    "Never run `terraform apply` or `kubectl delete` without asking first.",
)

MEMORY_ENTRIES = (
    "Prod cluster: k3s on 3 Hetzner nodes (cx41). Ingress is Traefik, certs via cert-manager "
    "with the letsencrypt-prod issuer.",
    "Redis in prod runs with maxmemory 2gb and allkeys-lru; the worker pool size is 20 "
    "(raised from 8 on 2026-03-14 after ECONNREFUSED storms).",
    "The nightly backup cron (03:15) writes to s3://mara-backups/pg/; restore tested "
    "2026-09-02, took 14 minutes.",
    "CI is GitHub Actions; the flaky test is tests/test_routes.py::test_eta_rounding "
    "(timezone dependent).",
    "Staging database URL lives in .env.staging, never in the repo. Do not print it.",
    "User's Telegram bot: @mara_ops_bot, gateway runs under systemd as hermes-gateway.service.",
    "Known issue: docker compose on the laptop needs `network_mode: host` for the local "
    "Ollama at 127.0.0.1:11434.",
    "Monthly LLM budget agreed with the user: $120. Alert at 80%.",
    "部署流程：先在 staging 跑 smoke test，再用 `kubectl rollout` 发布到 prod。",
)


@dataclass(frozen=True)
class DemoReport:
    home: Path
    sessions: int
    messages: int
    seconds: float
    bulk: bool
    db_bytes: int
    text_bytes: int


def build_demo_home(
    home: str | os.PathLike[str],
    *,
    sessions: int = 600,
    messages: int | None = None,
    seed: int = 7,
    anchor_day: str | None = None,
    bulk: bool | None = None,
) -> DemoReport:
    """Create a demo home in ``home`` (which must not hold a state.db yet)."""
    root = Path(home)
    db_path = root / "state.db"
    if db_path.exists():
        raise ConflictError(f"{db_path} already exists; refusing to overwrite it")
    total = messages if messages is not None else sessions * 60
    use_bulk = bulk if bulk is not None else total >= BULK_THRESHOLD
    anchor = anchor_for(anchor_day)
    planner = DemoPlanner(seed, anchor, sessions, total)
    began = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    tally = _Tally()
    with SessionStore(db_path) as store:
        if use_bulk:
            store.bulk_import(tally.add(p).record for p in planner.sessions())
        else:
            for plan in planner.sessions():
                _write_through_api(store, tally.add(plan))
        store.set_meta(DEMO_MARKER, str(seed))
    _write_memories(root)
    write_pending(root, anchor)  # what Hermes holds back for approval (issue 29)
    _write_config(root)
    return DemoReport(
        home=root,
        sessions=tally.sessions,
        messages=tally.messages,
        seconds=time.perf_counter() - began,
        bulk=use_bulk,
        db_bytes=db_path.stat().st_size,
        text_bytes=tally.text_bytes,
    )


class _Tally:
    """Counts sessions, messages and text bytes of the plans that pass through it."""

    def __init__(self) -> None:
        self.sessions = 0
        self.messages = 0
        self.text_bytes = 0

    def add(self, plan: PlannedSession) -> PlannedSession:
        msgs = plan.record.messages
        self.sessions += 1
        self.messages += len(msgs)
        self.text_bytes += sum(
            len((m.content or "").encode())
            + len((m.reasoning or "").encode())
            + len(m.tool_calls.encode() if isinstance(m.tool_calls, str) else b"")
            for m in msgs
        )
        return plan


def _write_through_api(store: SessionStore, plan: PlannedSession) -> None:
    """Replay one session the way an agent writes it: create, turns, usage, end."""
    rec = plan.record
    if plan.summary is not None and rec.parent_session_id:
        store.compress(rec.parent_session_id, plan.summary, child_id=rec.id, at=rec.started_at)
        if rec.title:
            store.set_title(rec.id, rec.title)
    else:
        store.create_session(
            rec.source,
            session_id=rec.id,
            model=rec.model,
            started_at=rec.started_at,
            parent_session_id=rec.parent_session_id,
            title=rec.title,
            user_id=rec.user_id,
            model_config=rec.model_config,
            system_prompt=rec.system_prompt,
            billing_provider=rec.billing_provider,
        )
    compactions = {index: (summary, at) for index, summary, at in plan.compactions}
    for index, turn in enumerate(plan.turns):
        if index in compactions:
            summary, at = compactions[index]
            store.compact_in_place(rec.id, summary, keep=IN_PLACE_KEEP, at=at)
        store.append_messages(rec.id, turn)
    for usage in rec.usage:
        store.record_usage(rec.id, usage)
    if rec.ended_at is not None and rec.end_reason != "compression":
        store.end_session(rec.id, rec.end_reason or "user_exit", ended_at=rec.ended_at)


def _write_memories(root: Path) -> None:
    folder = root / "memories"
    folder.mkdir(parents=True, exist_ok=True)
    for kind, entries in ((USER_FILE, USER_ENTRIES), (MEMORY_FILE, MEMORY_ENTRIES)):
        (folder / kind.name).write_text("\n§\n".join(entries), encoding="utf-8")


def _write_config(root: Path) -> None:
    config = {
        "model": {"default": "anthropic/claude-sonnet-4.5", "provider": "openrouter"},
        "memory": {
            "memory_enabled": True,
            "user_profile_enabled": True,
            USER_FILE.limit_key: USER_FILE.default_limit,
            MEMORY_FILE.limit_key: MEMORY_FILE.default_limit,
        },
        "compression": {"enabled": True, "threshold": 0.85},
        # No Hermes ever runs on the demo home: its prune radar says so calmly
        # instead of listing months of history as about to go.
        "sessions": {"auto_prune": False, "retention_days": 90},
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
