"""Homes with a long compaction chain (and a priced one), as the chain tests read them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dashboard.store.records import NewMessage, Usage
from dashboard.store.session_store import SessionStore

T0 = datetime(2026, 7, 1, 9, 0, tzinfo=UTC).timestamp()


SEGMENT_S = 1800.0  # each compression segment lasts half an hour


SEGMENTS = 12


@dataclass(frozen=True)
class ChainHome:
    """A home holding one 12-segment chain with two branches and a delegation."""

    home: Path
    db: Path
    line: list[str]  # chain-01 … chain-12
    branch_mid: str  # _branched_from chain-05 (which ended by compression)
    branch_tip: str  # _branched_from chain-12 (which ended 'branched')
    delegate: str  # subagent of chain-03


def turn(at: float, n: int) -> list[NewMessage]:
    """A user question, a tool call, its result and an answer, from ``at`` on."""
    function = {"name": "terminal", "arguments": '{"command": "make test"}'}
    call = [{"id": f"call_{n}", "type": "function", "function": function}]
    return [
        NewMessage("user", f"step {n}: run the tests", timestamp=at),
        NewMessage("assistant", None, tool_calls=call, timestamp=at + 5),
        NewMessage(
            "tool",
            '{"output": "ok", "exit_code": 0}',
            tool_call_id=f"call_{n}",
            tool_name="terminal",
            timestamp=at + 9,
        ),
        NewMessage("assistant", f"step {n} passes", timestamp=at + 12),
    ]


def build_chain_home(home: Path, *, title: str = "Long refactor") -> ChainHome:
    """Compress a session 11 times (a turn in every segment), then branch and delegate."""
    db = home / "state.db"
    home.mkdir(parents=True, exist_ok=True)
    unknown = Usage(model="m", input_tokens=1000, output_tokens=100, cost_status="unknown")
    with SessionStore(db) as store:
        line = [
            store.create_session(
                "cli", session_id="chain-01", model="m", started_at=T0, title=title
            )
        ]
        store.append_messages(line[0], turn(T0 + 60, 1))
        store.record_usage(line[0], unknown)
        for i in range(1, SEGMENTS):
            at = T0 + i * SEGMENT_S
            child = store.compress(
                line[-1], f"Part {i} covered step {i}.", child_id=f"chain-{i + 1:02d}", at=at
            )
            store.append_messages(child, turn(at + 60, i + 1))
            store.record_usage(child, unknown)
            line.append(child)
        store.end_session(line[-1], "branched", ended_at=T0 + SEGMENTS * SEGMENT_S - 60)
        branch_mid = store.create_session(
            "cli",
            session_id="branch-mid",
            started_at=T0 + 5 * SEGMENT_S + 300,
            parent_session_id="chain-05",
            model_config={"_branched_from": "chain-05"},
            title="Try the other approach",
        )
        store.append_messages(branch_mid, turn(T0 + 5 * SEGMENT_S + 320, 100))
        store.end_session(branch_mid, "user_exit", ended_at=T0 + 5 * SEGMENT_S + 900)
        branch_tip = store.create_session(
            "cli",
            session_id="branch-tip",
            started_at=T0 + SEGMENTS * SEGMENT_S,
            parent_session_id=line[-1],
            model_config={"_branched_from": line[-1]},
        )
        store.append_messages(branch_tip, turn(T0 + SEGMENTS * SEGMENT_S + 30, 200))
        delegate = store.create_session(
            "subagent",
            session_id="delegate-03",
            started_at=T0 + 2 * SEGMENT_S + 200,
            parent_session_id="chain-03",
            model_config={"_delegate_from": "chain-03"},
        )
        store.append_messages(delegate, turn(T0 + 2 * SEGMENT_S + 210, 300))
        store.record_usage(
            delegate, Usage(model="q", estimated_cost_usd=0.05, cost_status="estimated")
        )
        store.end_session(delegate, "delegate_complete", ended_at=T0 + 2 * SEGMENT_S + 400)
    return ChainHome(home, db, line, branch_mid, branch_tip, delegate)


BILLED = (2, 6)  # indexes of the two segments whose main loop the provider billed


def build_priced_chain(home: Path) -> list[str]:
    """Ten segments: estimated main loops beside billed compression calls (the real case),
    two segments billed throughout, and a tip whose local model has no price; beside it a
    two-segment chain billed $0.30 per segment."""
    db = home / "state.db"
    home.mkdir(parents=True, exist_ok=True)
    with SessionStore(db) as store:
        line = [store.create_session("cli", session_id="priced-01", started_at=T0)]
        for i in range(10):
            at = T0 + i * SEGMENT_S
            if i:
                line.append(
                    store.compress(line[-1], f"Part {i}", child_id=f"priced-{i + 1:02d}", at=at)
                )
            store.append_messages(line[-1], turn(at + 60, i))
            if i == 9:
                main = Usage(model="local", billing_provider="custom", cost_status="unknown")
            elif i in BILLED:
                main = Usage(
                    model="m",
                    billing_provider="p",
                    actual_cost_usd=0.12,
                    cost_status="actual",
                    at=at + 70,
                )
            else:
                main = Usage(
                    model="m",
                    billing_provider="p",
                    estimated_cost_usd=0.10,
                    cost_status="estimated",
                    at=at + 70,
                )
            store.record_usage(line[-1], main)
            if i < 9:  # the compression call that ends the segment was billed
                store.record_usage(
                    line[-1],
                    Usage(
                        model="g",
                        billing_provider="p",
                        task="compression",
                        actual_cost_usd=0.005,
                        cost_status="actual",
                        at=at + 80,
                    ),
                )
        other = [store.create_session("cli", session_id="billed-01", started_at=T0 + 86400)]
        store.append_messages(other[0], turn(T0 + 86400 + 60, 1))
        other.append(store.compress(other[0], "Part 1", child_id="billed-02", at=T0 + 86500))
        for sid in other:
            store.record_usage(
                sid,
                Usage(
                    model="m",
                    billing_provider="p",
                    actual_cost_usd=0.30,
                    cost_status="actual",
                    at=T0 + 86600,
                ),
            )
    return line
