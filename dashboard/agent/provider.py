"""The seeds' ``MemoryProvider`` interface, and Recall's store as the built-in provider.

Six lifecycle methods (third seed article, 9.2): ``name``, ``is_available``,
``initialize``, ``system_prompt_block``, ``prefetch``, ``sync_turn``, plus
``get_tool_schemas``. Recall adds the optional hooks Hermes's own providers have:
``queue_prefetch`` (speculative prefetch for the next turn), ``handle_tool_call``,
``on_session_end`` and ``shutdown``.

:class:`RecallMemoryProvider` is the built-in one: context from USER.md and
MEMORY.md (a frozen snapshot taken at session start, as Hermes does), recalled
history from stage-1 search over the store, each turn written off the agent's
thread by :class:`TurnWriter`, and the ``recall_search`` tool.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from dashboard.agent.blocks import DEFAULT_BUDGET_CHARS, RecalledBlock, recalled_block
from dashboard.agent.tools import RECALL_SEARCH, TOOL_NAME, recall_search_tool
from dashboard.agent.turn_writer import TurnWriter
from dashboard.errors import RecallError, StoreUnavailableError, ValidationError
from dashboard.hermes.content import JSON_PREFIX
from dashboard.hermes.conventions import MEMORY_FILE_NAMES
from dashboard.hermes.home import HermesHome
from dashboard.memory.files import read_memory_file
from dashboard.memory.prompt import agent_block
from dashboard.reader.opening import reading_for
from dashboard.reader.reader import StateReader
from dashboard.search.query import parse_query
from dashboard.search.related import terms_query
from dashboard.search.sessions import SearchRequest
from dashboard.store.datadir import data_dir_for, recall_data_dir
from dashboard.store.recalldb import RecallData
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from dashboard.summaries.llm import LLMConfig, Summarizer
from dashboard.summaries.service import SummaryService

log = logging.getLogger(__name__)

BUILTIN = "builtin"
ROLES = ("system", "user", "assistant", "tool")
# What was said, not tool output: a file listing matching the words is not a memory.
RECALLED_ROLES = ("user", "assistant")
DEFAULT_SESSIONS = 5
# Matches ranked per prefetch: a message's common words (fix, test) match thousands of
# rows; ranking only the newest 2,000 keeps the turn fast and favours recent history.
PREFETCH_RANK_WINDOW = 2_000
# One write's budget before the turn writer backs off and tries again (it never drops).
WRITE_PATIENCE_S = 5.0  # recalled sessions per prefetch, before the character budget


class MemoryProvider(ABC):
    """What an agent's memory backend provides (seed 9.2)."""

    @property
    @abstractmethod
    def name(self) -> str:
        """Short identifier (``builtin``, ``honcho``, …)."""

    @abstractmethod
    def is_available(self) -> bool:
        """Configured and ready? Called at registration; no network calls."""

    @abstractmethod
    def initialize(self, session_id: str, **kwargs: Any) -> None:
        """Called once at session start."""

    def system_prompt_block(self) -> str:
        """Static block for the system prompt."""
        return ""

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        """Context relevant to the coming turn, or "". Called before each model call."""
        return ""

    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        """Start the next turn's prefetch in the background (speculative prefetch)."""
        return None  # optional hook

    def sync_turn(self, turn_messages: Sequence[Mapping[str, Any]]) -> None:
        """Write after each turn completes; must not block the agent."""
        return None  # optional hook

    @abstractmethod
    def get_tool_schemas(self) -> list[dict[str, Any]]:
        """Tools to expose to the model, in OpenAI function format ([] = context only)."""

    def handle_tool_call(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """Run one of this provider's tools; the result is the tool message's content."""
        return json.dumps({"success": False, "error": f"{self.name} has no tool {name!r}"})

    def on_session_end(self, reason: str = "user_exit") -> None:
        """The agent's session ended."""
        return None  # optional hook

    def shutdown(self) -> None:
        """Flush and release everything (the agent is exiting)."""
        return None  # optional hook


class RecallMemoryProvider(MemoryProvider):
    """Recall's repository as the agent's built-in memory.

    ``home`` is a Hermes-style home (``state.db``, ``memories/``). With
    ``readonly=True`` nothing is ever written (the dashboard's preview uses this:
    the same code builds the same blocks without touching the store).
    """

    def __init__(
        self,
        home: str | os.PathLike[str] | HermesHome,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        llm: LLMConfig | None = None,
        reader: StateReader | None = None,
        readonly: bool = False,
        budget_chars: int = DEFAULT_BUDGET_CHARS,
        max_sessions: int = DEFAULT_SESSIONS,
        write_patience_s: float = WRITE_PATIENCE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.home = home if isinstance(home, HermesHome) else HermesHome(Path(home).expanduser())
        # Recall's own files (the summary cache): never inside the home (datadir).
        self._data_dir_given = data_dir is not None
        self.data_dir = Path(data_dir) if data_dir else data_dir_for(self.home)
        self.llm = llm or LLMConfig()
        # What the pages read (opening.reading_for): the home's own store when it is
        # Recall's (or will be: an agent writing here creates it), else its archive.
        self.reader = reader or reading_for(self.home, inline=True, will_create=not readonly).reader
        self.readonly = readonly
        self.budget_chars = budget_chars
        self.max_sessions = max_sessions
        self.write_patience_s = write_patience_s
        self.clock = clock
        self.session_id: str | None = None
        self.model: str | None = None
        self.unavailable_reason: str | None = None
        self.stats = {"searches": 0, "speculative_used": 0}
        self._snapshot: dict[str, str] | None = None
        self._store: SessionStore | None = None
        self._writer: TurnWriter | None = None
        self._summaries: SummaryService | None = None
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recall-prefetch")
        self._pending: tuple[str, Future[RecalledBlock]] | None = None
        self._parent: str | None = None

    @property
    def name(self) -> str:
        return BUILTIN

    def is_available(self) -> bool:
        """The store can be opened (read-only mode) or created (read-write mode)."""
        self.unavailable_reason = None
        db = self.home.state_db
        if db.exists():
            health = self.reader.health()
            if health["status"] != "ok":
                self.unavailable_reason = f"{db}: {health.get('reason')}"
        elif self.readonly:
            self.unavailable_reason = f"{db}: missing"
        else:
            folder = self.home.root if self.home.root.exists() else self.home.root.parent
            if not os.access(folder, os.W_OK):
                self.unavailable_reason = f"{folder}: not writable"
        return self.unavailable_reason is None

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        """Start (or resume) ``session_id``; freezes USER.md and MEMORY.md for the session.

        Keyword fields go to the session row: ``source`` (default ``cli``), ``model``,
        ``parent_session_id``, ``title``, ``started_at``, … (see ``create_session``).
        """
        if not session_id:
            raise ValidationError("a session id is needed")
        self.session_id = session_id
        self.model = kwargs.get("model")
        self._parent = kwargs.get("parent_session_id")
        self._snapshot = self.file_blocks()
        if not self.readonly:
            self._writer_for().create_session(session_id, **kwargs)

    def latest_model(self, session_id: str | None = None) -> str | None:
        """The model the context line names when the caller does not say: that of
        ``session_id`` (NotFoundError if there is none); for a new session the one
        config.yaml sets, as the agent would start it, else the most recent session's."""
        if session_id:
            segment = self.reader.chain(session_id).segment(session_id)
            return segment.model if segment else None
        configured = self.home.configured_model()
        if configured:
            return configured
        recent = self.reader.search(SearchRequest(per_page=1)).results
        return recent[0].model if recent else None

    # -- context -------------------------------------------------------------------

    def file_blocks(self) -> dict[str, str]:
        """USER.md and MEMORY.md as the agent sees them (live from disk)."""
        return {name: agent_block(read_memory_file(self.home, name)) for name in MEMORY_FILE_NAMES}

    def snapshot_blocks(self) -> dict[str, str]:
        """The session's frozen snapshot; the live files before ``initialize``."""
        return dict(self._snapshot) if self._snapshot is not None else self.file_blocks()

    def system_prompt_block(self) -> str:
        return "\n\n".join(b for b in self.snapshot_blocks().values() if b)

    # -- recall ----------------------------------------------------------------------

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        return self.prefetch_block(query, session_id=session_id).text

    def prefetch_block(self, query: str, *, session_id: str = "") -> RecalledBlock:
        """The recalled block: the speculative one if a prefetch was queued, else searched now.

        The queued block was searched for the previous turn's message (the seed's
        speculative prefetch: the topic rarely changes between turns); it is used only
        in the session it was queued for.
        """
        sid = session_id or self.session_id or ""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None and pending[0] == sid:
            with self._lock:
                self.stats["speculative_used"] += 1
            return pending[1].result()
        return self.recall(query, session_id=sid)

    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        sid = session_id or self.session_id or ""
        future = self._pool.submit(self.recall, query, session_id=sid)
        with self._lock:
            self._pending = (sid, future)

    def recall(self, query: str, *, session_id: str = "") -> RecalledBlock:
        """Stage-1 search for ``query``'s telling terms, outside ``session_id``'s chain."""
        with self._lock:
            self.stats["searches"] += 1
        terms = terms_query(query)
        if not terms:
            return RecalledBlock("")
        try:
            request = SearchRequest(
                query=terms,
                roles=RECALLED_ROLES,
                per_page=self.max_sessions,
                exclude=self._chain(session_id),
                rank_window=PREFETCH_RANK_WINDOW,
            )
            results = self.reader.said(request, parse_query(terms).highlight_terms())
        except StoreUnavailableError as exc:
            log.warning("recall: prefetch skipped, the store is unavailable (%s)", exc)
            return RecalledBlock("")
        except RecallError as exc:
            log.warning("recall: prefetch skipped (%s)", exc)
            return RecalledBlock("")
        return recalled_block(results, self.clock(), self.budget_chars)

    def _chain(self, session_id: str) -> tuple[str, ...]:
        """The sessions of ``session_id``'s compaction chain (~1 ms: read every time, as
        the chain grows when the agent compresses)."""
        if not session_id:
            return ()
        members = {session_id}
        starts = [session_id]
        if session_id == self.session_id and self._parent:
            # The new segment's row may still be queued: its parent says where it belongs.
            starts.append(self._parent)
        for start in starts:
            try:
                members.update(self.reader.chain_members(start))
            except StoreUnavailableError:
                pass
        return tuple(sorted(members))

    # -- writing -------------------------------------------------------------------

    def sync_turn(self, turn_messages: Sequence[Mapping[str, Any]]) -> None:
        """Queue one turn (OpenAI-style message dicts) to be written in one transaction."""
        if self.readonly:
            raise RuntimeError("this provider is read-only")
        if self.session_id is None:
            raise RuntimeError("initialize() the provider with a session first")
        messages = [to_new_message(m) for m in turn_messages]
        self._writer_for().append_turn(self.session_id, messages)

    def on_session_end(self, reason: str = "user_exit") -> None:
        if not self.readonly and self.session_id is not None:
            self._writer_for().end_session(self.session_id, reason)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued turn is in the store."""
        return self._writer.flush(timeout) if self._writer else True

    @property
    def writer(self) -> TurnWriter | None:
        return self._writer

    def _writer_for(self) -> TurnWriter:
        with self._lock:
            if self._writer is None:
                self.home.root.mkdir(parents=True, exist_ok=True)
                self._store = SessionStore(self.home.state_db, patience_s=self.write_patience_s)
                self._writer = TurnWriter(self._store)
            return self._writer

    # -- tools ---------------------------------------------------------------------

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return [json.loads(json.dumps(RECALL_SEARCH))]  # a copy the caller may change

    def handle_tool_call(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        if name != TOOL_NAME:
            return super().handle_tool_call(name, arguments)
        exclude = self._chain(self.session_id) if self.session_id else ()
        return recall_search_tool(self.reader, self._summary_service(), arguments, exclude)

    def _summary_service(self) -> SummaryService:
        with self._lock:
            if self._summaries is None:
                if not self._data_dir_given:  # an old <home>/recall/ moves here first
                    self.data_dir, note = recall_data_dir(self.home)
                    if note:
                        log.info("%s", note)
                self.data_dir.mkdir(parents=True, exist_ok=True)
                data = RecallData(self.data_dir / "recall.db")
                self._summaries = SummaryService(self.reader, data, Summarizer(self.llm))
            return self._summaries

    def shutdown(self) -> None:
        """Flush queued turns, then close the store and the summary service."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._writer is not None:
            self._writer.close()
        if self._store is not None:
            self._store.close()
        if self._summaries is not None:
            self._summaries.close()


def to_new_message(message: Mapping[str, Any]) -> NewMessage:
    """An OpenAI-style chat message as a row to store (``content`` parts kept as JSON)."""
    role = message.get("role")
    if role not in ROLES:
        raise ValidationError(f"message role must be one of {', '.join(ROLES)} (got {role!r})")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        # Multimodal parts: stored the way Hermes stores them, behind its JSON marker.
        content = JSON_PREFIX + json.dumps(content, ensure_ascii=False)
    calls = message.get("tool_calls") or None
    return NewMessage(
        role=role,
        content=content,
        tool_calls=calls,
        tool_call_id=message.get("tool_call_id"),
        tool_name=message.get("name") or message.get("tool_name"),
        reasoning=message.get("reasoning") or message.get("reasoning_content"),
        finish_reason=message.get("finish_reason"),
        timestamp=message.get("timestamp"),
    )
