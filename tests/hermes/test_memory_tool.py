"""Hermes's memory tool calls and results as a transcript stores them."""

from __future__ import annotations

import json

import pytest

from dashboard.hermes.memory_tool import (
    FAILED,
    STAGED,
    UNKNOWN,
    WRITTEN,
    MemoryOp,
    memory_ops,
    read_result,
)
from tests.support.memory_homes import FAILED as FAILED_RESULT
from tests.support.memory_homes import STAGED as STAGED_RESULT
from tests.support.memory_homes import memory_call


def _calls(*calls: tuple[str, str, dict]) -> str:
    return json.dumps(
        [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in calls
        ]
    )


def test_a_single_call_is_read_stripped_as_hermes_writes_it() -> None:
    row = memory_call(
        "c1", "{}", action="replace", target="user", old_text=" Lisbon ", content="Porto\n"
    )[0]
    assert memory_ops(row["tool_calls"], "c1") == (MemoryOp("replace", "user", "Porto", "Lisbon"),)


def test_a_batch_gives_one_op_each_and_the_default_target_is_memory() -> None:
    raw = _calls(
        (
            "c1",
            "memory",
            {
                "operations": [
                    {"action": "add", "content": "A"},
                    {"action": "x"},
                    {"action": "remove", "old_text": "B"},
                ]
            },
        )
    )
    ops = memory_ops(raw, "c1")
    assert [(o.action, o.target, o.index, o.batch) for o in ops] == [
        ("add", "memory", 0, True),
        ("remove", "memory", 2, True),
    ]


def test_the_call_is_chosen_by_its_id_among_parallel_calls() -> None:
    raw = _calls(
        ("a", "terminal", {"command": "ls"}),
        ("b", "memory", {"action": "add", "target": "user", "content": "B"}),
        ("c", "memory", {"action": "add", "target": "user", "content": "C"}),
    )
    assert memory_ops(raw, "c")[0].content == "C"
    assert memory_ops(raw, None) == ()  # two memory calls and no id: none is guessed
    assert (
        memory_ops(_calls(("z", "memory", {"action": "add", "content": "Z"})), None)[0].content
        == "Z"
    )


@pytest.mark.parametrize(
    "raw", [None, "", "not json", "[1, 2]", _calls(("a", "memory", {"action": "read"}))]
)
def test_anything_else_is_no_memory_op(raw: str | None) -> None:
    assert memory_ops(raw, "a") == ()


def test_results_say_written_staged_failed_or_unknown() -> None:
    assert read_result(json.dumps({"success": True, "message": "Entry added."})).status == WRITTEN
    staged = read_result(STAGED_RESULT)
    assert (staged.status, staged.pending_id) == (STAGED, "mem_20260803_uv")
    failed = read_result(FAILED_RESULT)
    assert failed.status == FAILED and failed.message.startswith("Memory at 1,370")
    assert read_result("Memory is not available.").status == UNKNOWN
    assert read_result(None).status == UNKNOWN
    assert read_result("\x00json:" + json.dumps({"success": True})).status == WRITTEN
