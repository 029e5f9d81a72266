"""Waiting for a background thread's work, with a bound."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(check: Callable[[], object], timeout: float = 30.0) -> object:
    """Poll ``check`` until it is truthy (a real thread does the work meanwhile)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"not true after {timeout}s: {check}")
