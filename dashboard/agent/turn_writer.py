"""Writes an agent's turns off its thread: a queue and one writer thread (seed 9.10).

``sync_turn`` must not block the agent's loop, and nothing may be lost: operations
(create a session, append a turn, end a session) go into a FIFO queue in the order
the agent made them, and one thread applies them through the write core, each turn
in one transaction. A write that fails (the file locked past the core's retries, a
full disk) is retried with backoff rather than dropped; ``flush`` waits until the
queue is empty, and ``close`` flushes before it stops. An operation the store
refuses for good (a turn for a session that does not exist, an invalid field) is
kept in ``rejected`` with the reason and logged, so one bad turn cannot stall the
ones behind it.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dashboard.errors import ConflictError, NotFoundError, ValidationError
from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore

log = logging.getLogger(__name__)

RETRY_BASE_S = 0.05
RETRY_MAX_S = 2.0


@dataclass
class _Op:
    kind: str  # "create", "turn", "end"
    session_id: str
    messages: list[NewMessage] = field(default_factory=list)
    fields: dict[str, object] = field(default_factory=dict)
    attempts: int = 0


class TurnWriter:
    """One background writer over a :class:`SessionStore`."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._queue: queue.Queue[_Op | None] = queue.Queue()
        self._idle = threading.Condition()
        self._pending = 0  # queued or being written
        self._failures = 0  # failed attempts, all retried
        self.rejected: list[tuple[str, str, str]] = []  # (kind, session id, reason)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="recall-turn-writer", daemon=True)
        self._thread.start()

    # -- what the agent's thread calls (never waits on the disk) ------------------------

    def create_session(self, session_id: str, **fields: object) -> None:
        self._put(_Op("create", session_id, fields=fields))

    def append_turn(self, session_id: str, messages: list[NewMessage]) -> None:
        if messages:
            self._put(_Op("turn", session_id, messages=messages))

    def end_session(self, session_id: str, reason: str) -> None:
        self._put(_Op("end", session_id, fields={"reason": reason}))

    @property
    def pending(self) -> int:
        with self._idle:
            return self._pending

    @property
    def failures(self) -> int:
        return self._failures

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued operation is written; False if ``timeout`` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._pending:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def close(self, timeout: float | None = 30.0) -> bool:
        """Flush, then stop the thread; False (and a logged error) if turns are left unwritten."""
        if self._closed:
            return True
        done = self.flush(timeout)
        self._closed = True
        self._queue.put(None)
        self._thread.join(timeout=5.0)
        if not done:
            log.error("recall: %d memory writes were not flushed before shutdown", self.pending)
        return done

    def _put(self, op: _Op) -> None:
        if self._closed:
            raise RuntimeError("the turn writer is closed")
        with self._idle:
            self._pending += 1
        self._queue.put(op)

    # -- the writer thread ------------------------------------------------------------

    def _run(self) -> None:
        while True:
            op = self._queue.get()
            if op is None:
                return
            self._apply_until_written(op)
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()

    def _apply_until_written(self, op: _Op) -> None:
        """Keep the queue's order: the next operation waits until this one is written."""
        while True:
            try:
                self._apply(op)
                return
            except (NotFoundError, ValidationError, ConflictError) as exc:
                log.error("recall: the store refused a %s for %s: %s", op.kind, op.session_id, exc)
                self.rejected.append((op.kind, op.session_id, str(exc)))
                return
            except Exception as exc:  # noqa: BLE001 - anything else may pass: retried
                op.attempts += 1
                self._failures += 1
                wait = min(RETRY_MAX_S, RETRY_BASE_S * 2 ** min(op.attempts, 6))
                log.warning(
                    "recall: writing a %s for %s failed (%s); retrying in %.2fs",
                    op.kind,
                    op.session_id,
                    exc,
                    wait,
                )
                if self._closed and op.attempts > 20:
                    log.error(
                        "recall: giving up on a %s for %s at shutdown", op.kind, op.session_id
                    )
                    return
                time.sleep(wait * random.uniform(0.8, 1.2))

    def _apply(self, op: _Op) -> None:
        actions: dict[str, Callable[[], object]] = {
            "create": lambda: self._create(op),
            "turn": lambda: self.store.append_messages(op.session_id, op.messages),
            "end": lambda: self.store.end_session(op.session_id, str(op.fields["reason"])),
        }
        actions[op.kind]()

    def _create(self, op: _Op) -> None:
        fields = dict(op.fields)
        source = str(fields.pop("source", None) or "cli")
        try:
            self.store.create_session(source, session_id=op.session_id, **fields)  # type: ignore[arg-type]
        except ConflictError:
            pass  # a resumed session: it exists already
