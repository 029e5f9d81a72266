"""``MemoryManager``: the one place an agent talks to its memory (seed 9.3).

The built-in provider plus at most one external one: two external providers would
each expose memory tools, and the model could not tell which to use. A second
external provider is refused with a warning, and so is a provider whose tool has the
name of one of Hermes's core tools (Hermes refuses those at registration).

Prefetch never holds a turn up for long: ``queue_prefetch_all`` starts the next
turn's prefetch when a turn ends (speculative prefetch); ``prefetch_all`` waits at
most ``prefetch_wait_s`` (2 s) in all, and a provider still working then is left
out of this turn's block.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from dashboard.agent.blocks import Part, RecalledBlock, VolatileBlock, context_line
from dashboard.agent.provider import BUILTIN, MemoryProvider, RecallMemoryProvider
from dashboard.agent.tools import HERMES_CORE_TOOLS
from dashboard.hermes.conventions import MEMORY_FILE_BY_NAME

log = logging.getLogger(__name__)

PREFETCH_WAIT_S = 2.0


class MemoryManager:
    """Orchestrates memory providers for one agent."""

    def __init__(self, *, prefetch_wait_s: float = PREFETCH_WAIT_S) -> None:
        self.prefetch_wait_s = prefetch_wait_s
        self.providers: list[MemoryProvider] = []
        self.stats = {"late": 0, "failed": 0}
        self._lock = threading.Lock()
        self._running: dict[int, Future[RecalledBlock]] = {}  # provider -> its last prefetch
        # Enough workers that a provider stuck past its deadline never delays another.
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="recall-memory")

    # -- registration ----------------------------------------------------------------

    def add_provider(self, provider: MemoryProvider, *, check_available: bool = True) -> bool:
        """Register ``provider``; False (with a warning) when it is refused.

        ``check_available=False`` registers a provider whose store may come and go (the
        dashboard's preview, which explains a missing file on each request).
        """
        if check_available and not provider.is_available():
            reason = getattr(provider, "unavailable_reason", None) or "not available"
            log.warning(
                "memory provider %r is not available (%s); not added", provider.name, reason
            )
            return False
        builtin = provider.name == BUILTIN
        if any(p.name == provider.name for p in self.providers):
            log.warning("memory provider %r is already registered; not added", provider.name)
            return False
        if not builtin and any(p.name != BUILTIN for p in self.providers):
            current = next(p.name for p in self.providers if p.name != BUILTIN)
            log.warning(
                "memory provider %r refused: only one external provider is allowed (%r is "
                "registered); two would each expose memory tools",
                provider.name,
                current,
            )
            return False
        offered = {self._tool_name(t) for t in provider.get_tool_schemas()}
        shadowing = offered & HERMES_CORE_TOOLS
        if shadowing:
            log.warning(
                "memory provider %r refused: tool %s would shadow Hermes's core tool "
                "(Hermes refuses it)",
                provider.name,
                ", ".join(sorted(shadowing)),
            )
            return False
        taken = {self._tool_name(t) for p in self.providers for t in p.get_tool_schemas()}
        clash = taken & offered
        if clash:
            log.warning(
                "memory provider %r refused: tool %s is taken",
                provider.name,
                ", ".join(sorted(clash)),
            )
            return False
        # The built-in provider comes first in every block.
        self.providers.insert(0, provider) if builtin else self.providers.append(provider)
        return True

    @property
    def builtin(self) -> RecallMemoryProvider | None:
        found = next((p for p in self.providers if p.name == BUILTIN), None)
        return found if isinstance(found, RecallMemoryProvider) else None

    def initialize_all(self, session_id: str, **kwargs: Any) -> None:
        for provider in self.providers:
            provider.initialize(session_id, **kwargs)

    # -- the system prompt -------------------------------------------------------------

    def build_system_prompt(self) -> str:
        """Every provider's static block, the built-in one first."""
        return "\n\n".join(b for b in (self._safe_block(p) for p in self.providers) if b)

    def prefetch_all(self, query: str, *, session_id: str = "") -> str:
        """Recalled context for this turn (waits at most ``prefetch_wait_s`` in all)."""
        return "\n\n".join(
            block.text for _, block in self._prefetch(query, session_id) if block.text
        )

    def queue_prefetch_all(self, query: str, *, session_id: str = "") -> None:
        """Start the next turn's prefetch in the background, in every provider."""
        for provider in self.providers:
            try:
                provider.queue_prefetch(query, session_id=session_id)
            except Exception:  # an external provider's failure must not end the turn
                log.exception("memory provider %r: queue_prefetch failed", provider.name)

    def volatile_block(
        self,
        message: str,
        *,
        session_id: str | None = None,
        model: str | None = None,
        now: float | None = None,
    ) -> VolatileBlock:
        """The whole per-turn end of the system prompt for ``message``.

        USER.md and MEMORY.md (the session's frozen snapshot), any external
        provider's static block, the recalled memories labelled by recency, and the
        time / session / model line. The dashboard's preview page calls this too.
        """
        at = time.time() if now is None else now
        parts: list[Part] = []
        builtin = self.builtin
        if builtin is not None:
            for name, text in builtin.snapshot_blocks().items():
                kind = MEMORY_FILE_BY_NAME[name]
                parts.append(Part(kind.key, kind.name, text))
        for provider in self.providers:
            if provider is not builtin:
                parts.append(Part("external", provider.name, self._safe_block(provider)))
        for provider, block in self._prefetch(message, session_id or ""):
            title = "Recalled memories" if provider is builtin else f"{provider.name} memories"
            parts.append(Part("recalled", title, block.text, block.items))
        active_model = model or (builtin.model if builtin else None)
        parts.append(
            Part("context", "Time and session", context_line(at, session_id, active_model))
        )
        notes = []
        if self.stats["late"]:
            notes.append(
                f"{self.stats['late']} prefetch(es) so far took longer than "
                f"{self.prefetch_wait_s:g} s and were left out"
            )
        return VolatileBlock(tuple(parts), tuple(notes))

    def _prefetch(self, query: str, session_id: str) -> list[tuple[MemoryProvider, RecalledBlock]]:
        jobs = {}
        for provider in self.providers:
            with self._lock:
                stuck = self._running.get(id(provider))
                if stuck is not None and not stuck.done():
                    # Still busy with an earlier turn: asking again would only pile up
                    # threads behind a backend that is not answering.
                    self.stats["late"] += 1
                    log.warning(
                        "memory provider %r: still on an earlier prefetch; skipped", provider.name
                    )
                    continue
                job = self._pool.submit(self._one_prefetch, provider, query, session_id)
                self._running[id(provider)] = job
            jobs[job] = provider
        done, late = wait(jobs, timeout=self.prefetch_wait_s)
        if late:
            with self._lock:
                self.stats["late"] += len(late)
            for job in late:
                log.warning(
                    "memory provider %r: prefetch took over %.1f s; left out of this turn",
                    jobs[job].name,
                    self.prefetch_wait_s,
                )
        out = []
        for job, provider in jobs.items():  # registration order, not finishing order
            if job in done and job.exception() is None:
                out.append((provider, job.result()))
            elif job in done:
                with self._lock:
                    self.stats["failed"] += 1
                log.error("memory provider %r: prefetch failed: %s", provider.name, job.exception())
        return out

    @staticmethod
    def _one_prefetch(provider: MemoryProvider, query: str, session_id: str) -> RecalledBlock:
        if isinstance(provider, RecallMemoryProvider):
            return provider.prefetch_block(query, session_id=session_id)
        return RecalledBlock(provider.prefetch(query, session_id=session_id) or "")

    @staticmethod
    def _safe_block(provider: MemoryProvider) -> str:
        try:
            return provider.system_prompt_block() or ""
        except Exception:
            log.exception("memory provider %r: system_prompt_block failed", provider.name)
            return ""

    # -- after the turn ------------------------------------------------------------------

    def sync_all(
        self,
        turn_messages: Sequence[Mapping[str, Any]] | None = None,
        *,
        user_msg: str | None = None,
        assistant_response: str | None = None,
    ) -> None:
        """Hand the finished turn to every provider (the seed's ``sync_all``).

        Pass the turn's messages (OpenAI format), or ``user_msg`` and
        ``assistant_response`` for a plain exchange. The built-in provider's errors
        (a malformed message) are raised; an external provider's are logged.
        """
        messages = list(turn_messages or [])
        if not messages:
            if user_msg is not None:
                messages.append({"role": "user", "content": user_msg})
            if assistant_response is not None:
                messages.append({"role": "assistant", "content": assistant_response})
        for provider in self.providers:
            if provider.name == BUILTIN:
                provider.sync_turn(messages)
                continue
            try:
                provider.sync_turn(messages)
            except Exception:
                log.exception("memory provider %r: sync_turn failed", provider.name)

    # -- tools -----------------------------------------------------------------------------

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return [t for p in self.providers for t in p.get_tool_schemas()]

    def handle_tool_call(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """Route a tool call to the provider that exposes it."""
        for provider in self.providers:
            if name in {self._tool_name(t) for t in provider.get_tool_schemas()}:
                return provider.handle_tool_call(name, arguments)
        return json.dumps({"success": False, "error": f"no memory tool called {name!r}"})

    @staticmethod
    def _tool_name(schema: Mapping[str, Any]) -> str:
        return str(schema.get("function", {}).get("name", ""))

    # -- the end -----------------------------------------------------------------------------

    def on_session_end(self, reason: str = "user_exit") -> None:
        for provider in self.providers:
            provider.on_session_end(reason)

    def shutdown_all(self) -> None:
        """Shut every provider down (the built-in one flushes its queued turns)."""
        for provider in self.providers:
            try:
                provider.shutdown()
            except Exception:
                log.exception("memory provider %r: shutdown failed", provider.name)
        self._pool.shutdown(wait=False, cancel_futures=True)
