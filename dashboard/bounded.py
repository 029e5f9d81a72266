"""A few answers kept in memory, the newest ``size``, safe across threads: what the
readers and the app keep between requests (spend questions, staleness, judgements)."""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

V = TypeVar("V")


class BoundedCache(Generic[V]):
    """At most ``size`` values by key; a new one past the size drops the oldest."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._found: dict[object, V] = {}
        self._lock = threading.Lock()

    def get(self, key: object) -> V | None:
        with self._lock:
            return self._found.get(key)

    def put(self, key: object, value: V) -> None:
        with self._lock:
            self._found[key] = value
            while len(self._found) > self.size:
                self._found.pop(next(iter(self._found)))
