"""Recall for agents: the seeds' MemoryProvider over Recall's store, and a MemoryManager.

from dashboard.agent import MemoryManager, RecallMemoryProvider

memory = MemoryManager()
memory.add_provider(RecallMemoryProvider("~/.hermes"))
memory.initialize_all(session_id, source="cli", model="claude-sonnet-4")
system = stable_prompt + "\\n\\n" + memory.volatile_block(user_msg, session_id=session_id).text
...
memory.sync_all(turn_messages)
memory.queue_prefetch_all(user_msg, session_id=session_id)
...
memory.shutdown_all()
"""

from dashboard.agent.blocks import Part, RecalledBlock, RecalledItem, VolatileBlock
from dashboard.agent.manager import MemoryManager
from dashboard.agent.provider import MemoryProvider, RecallMemoryProvider
from dashboard.agent.tools import RECALL_SEARCH

__all__ = [
    "RECALL_SEARCH",
    "MemoryManager",
    "MemoryProvider",
    "Part",
    "RecallMemoryProvider",
    "RecalledBlock",
    "RecalledItem",
    "VolatileBlock",
]
