"""A scripted agent for tests: N turns through the MemoryManager in its own process.

    python -m tests.support.agent_script HOME SESSION_ID TURNS

Each turn: build the volatile block (a read while earlier turns are being written),
hand the turn to ``sync_all``, queue the next prefetch. Prints one JSON line of
counters at the end, after ``shutdown_all`` has flushed every turn.
"""

from __future__ import annotations

import json
import sys

from dashboard.agent import MemoryManager, RecallMemoryProvider


def user_text(n: int) -> str:
    return f"turn {n}: what do we know about agentword{n:03d} and the pelican rollout?"


def assistant_text(n: int) -> str:
    return f"answer {n}: agentreply{n:03d} is noted."


def main(home: str, session_id: str, turns: int) -> None:
    memory = MemoryManager()
    provider = RecallMemoryProvider(home)
    if not memory.add_provider(provider):
        raise SystemExit(f"provider unavailable: {provider.unavailable_reason}")
    memory.initialize_all(session_id, source="cli", model="scripted-agent")
    recalled = 0
    for n in range(turns):
        block = memory.volatile_block(user_text(n), session_id=session_id)
        recalled += "# Relevant Memories" in block.text
        memory.sync_all(
            [
                {"role": "user", "content": user_text(n)},
                {"role": "assistant", "content": assistant_text(n)},
            ]
        )
        memory.queue_prefetch_all(user_text(n), session_id=session_id)
    memory.shutdown_all()
    print(
        json.dumps(
            {
                "turns": turns,
                "recalled": recalled,
                "late": memory.stats["late"],
                "searches": provider.stats["searches"],
                "speculative_used": provider.stats["speculative_used"],
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
