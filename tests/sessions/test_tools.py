"""Tool calls and results as a transcript shows them."""

from __future__ import annotations

import json

from dashboard.sessions.tools import format_tool_output, parse_tool_calls


def test_tool_call_json_in_every_state_is_tolerated() -> None:
    assert parse_tool_calls(None) == () and parse_tool_calls("  ") == ()
    (broken,) = parse_tool_calls('[{"id": "c1", "function": {"name": "x"')
    assert broken.malformed and broken.arguments.startswith("[{")
    (scalar,) = parse_tool_calls("42")
    assert scalar.malformed
    single = parse_tool_calls(json.dumps({"id": "c2", "function": {"name": "grep"}}))
    assert [(c.id, c.name, c.arguments) for c in single] == [("c2", "grep", "")]
    mixed = parse_tool_calls(
        json.dumps(
            [
                {"id": "c3", "type": "function", "function": {"name": "a", "arguments": "{oops"}},
                {"id": "c4", "function": {"name": "b", "arguments": {"k": [1, 2]}}},
                "stray",
            ]
        )
    )
    assert [c.name for c in mixed] == ["a", "b", ""]
    assert mixed[0].arguments == "{oops" and not mixed[0].malformed
    assert json.loads(mixed[1].arguments) == {"k": [1, 2]}
    assert mixed[2].malformed


def test_tool_output_is_unwrapped_for_reading() -> None:
    assert format_tool_output('{"output": "a\\nb\\n", "exit_code": 1}').body == "a\nb"
    assert format_tool_output('{"success": true}').facts == (("success", "true"),)
    assert format_tool_output("plain text\n").body == "plain text"
    assert format_tool_output("{not json").body == "{not json"
    nested = format_tool_output('{"rows": [{"a": 1}], "n": 1}')
    assert json.loads(nested.body) == {"rows": [{"a": 1}], "n": 1} and nested.facts == ()
