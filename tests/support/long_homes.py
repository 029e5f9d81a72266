"""A home with one session longer than a transcript page."""

from __future__ import annotations

from pathlib import Path

from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore
from tests.support import hermes_shapes as shapes


def long_home(root: Path, count: int = 1_100) -> tuple[Path, list[int], list[int]]:
    """A session of ``count`` messages continued by one that opens with a summary (a
    home written by Recall's own store: its own archive, read as it is)."""
    home = root / "long-home"
    with SessionStore(home / "state.db") as store:
        first = store.create_session("cli", session_id="long-a", started_at=1e9)
        ids = store.append_messages(
            first,
            [
                NewMessage(
                    "user" if i % 2 == 0 else "assistant",
                    f"line {i} of the long talk",
                    timestamp=1e9 + i,
                )
                for i in range(count)
            ],
        )
        store.end_session(first, "compression")
        second = store.create_session(
            "cli", session_id="long-b", started_at=2e9, parent_session_id=first
        )
        more = store.append_messages(
            second,
            [
                NewMessage("user", f"{shapes.SUMMARY_PREFIX} what came before", timestamp=2e9),
                *(NewMessage("assistant", f"after {i}", timestamp=2e9 + 1 + i) for i in range(30)),
            ],
        )
    return home, ids, more
