"""A memory home whose later conversations overturn some entries and not others.

Built over :func:`memory_homes.build_memory_home` (whose first session, 2026-08-01,
writes "Writes mostly Python" through a memory call), then later sessions, in Hermes's
format (nothing here imports Recall):

* 2026-07-15, before that write: "I'm mostly writing Rust now" (older than the entry:
  never listed against it);
* 2026-09-10: "Heads-up: I'm mostly writing Go now. Python is only for scripts." (the
  seed article's pair: flagged against "Writes mostly Python");
* 2026-09-12: a compaction summary (a user-role row Hermes writes) that says the user
  writes Go now: not the user's words, never listed;
* 2026-09-20: "Should we deploy through staging today, or go ahead straight?": on the
  subject of "Deploys go through staging first" (MEMORY.md), no change: listed, not
  flagged;
* the work profile, 2026-09-15: "I no longer work night shifts, I'm on days now.":
  flagged against its own "Works night shifts", never the default profile's.

"Prefers short answers" and "Lives in Porto (moved from Lisbon)" have no newer mention.
"""

from __future__ import annotations

from pathlib import Path

from tests.support import hermes_shapes as shapes
from tests.support.memory_homes import MemoryHomeFacts, build_memory_home, said, user

S_RUST_BEFORE = "20260715_090000_stale01"
S_GO = "20260910_090000_stale02"
S_SUMMARY = "20260912_090000_stale03"
S_STAGING = "20260920_090000_stale04"
S_WORK_DAYS = "20260915_090000_stale05"

GO_SAID = "Heads-up: I'm mostly writing Go now. Python is only for scripts."
GO_QUOTE = "Heads-up: I'm mostly writing Go now."
STAGING_SAID = "Should we deploy through staging today, or go ahead straight?"
DAYS_SAID = "I no longer work night shifts, I'm on days now."
SUMMARY = (
    "[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted into the summary "
    "below.\nThe user says they are mostly writing Go now and asked about goroutines."
)
FLAGGED = {"Writes mostly Python": GO_SAID}
NOT_MENTIONED = ("Prefers short answers", "Lives in Porto (moved from Lisbon)")


def _session(db: Path, session_id: str, title: str, rows: list[dict]) -> None:
    at = shapes._epoch(session_id)
    shapes.start_session(db, session_id, at, title=title)
    shapes.append_messages(db, session_id, rows, at + 10)


def build_stale_home(root: Path) -> MemoryHomeFacts:
    """The home at ``root`` (see the module)."""
    facts = build_memory_home(root)
    db = root / "state.db"
    _session(db, S_RUST_BEFORE, "Rust before", [user("I'm mostly writing Rust now."), said("Ok.")])
    _session(db, S_GO, "Porting the API to Go", [user(GO_SAID), said("Go first, then.")])
    _session(db, S_SUMMARY, "Goroutines", [user(SUMMARY), said("Continuing.")])
    _session(db, S_STAGING, "Release day", [user(STAGING_SAID), said("Staging first.")])
    work = root / "profiles" / "work" / "state.db"
    _session(work, S_WORK_DAYS, "New schedule", [user(DAYS_SAID), said("Noted.")])
    return facts
