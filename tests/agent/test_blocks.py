"""The recalled-memory block and the volatile layer's pieces."""

from __future__ import annotations

import pytest

from dashboard.agent.blocks import (
    HEADER,
    Part,
    VolatileBlock,
    age_words,
    approx_tokens,
    recalled_block,
    recency_label,
)
from dashboard.search.sessions import Hit, SessionResult

NOW = 1_790_000_000.0


def result(
    sid: str, when: float | None, *hits: tuple[str, str], title: str | None = None, mid: int = 1
) -> SessionResult:
    return SessionResult(
        session_id=sid,
        root_session_id=sid,
        title=title,
        preview="",
        source="cli",
        model=None,
        started_at=when,
        last_activity=when,
        message_count=len(hits),
        hit_count=len(hits),
        hits=[Hit(mid + i, sid, role, when, snippet) for i, (role, snippet) in enumerate(hits)],
    )


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (5, "just now"),
        (60, "1 min ago"),
        (300, "5 mins ago"),
        (3600, "1 hour ago"),
        (7200, "2 hours ago"),
        (86400, "yesterday"),
        (3 * 86400, "3 days ago"),
        (14 * 86400, "2 weeks ago"),
        (90 * 86400, "3 months ago"),
        (800 * 86400, "2 years ago"),
        (-50, "just now"),
    ],
)
def test_age_words(seconds: float, words: str) -> None:
    assert age_words(seconds) == words


def test_recency_labels_split_at_two_days() -> None:
    assert recency_label(NOW - 300, NOW) == "Recent — 5 mins ago"
    assert recency_label(NOW - 47 * 3600, NOW) == "Recent — yesterday"
    assert recency_label(NOW - 49 * 3600, NOW) == "Long-term — 2 days ago"
    assert recency_label(None, NOW) == "Long-term — date unknown"


def test_snippets_become_the_plain_text_they_came_from() -> None:
    hit = ("user", "a &lt;b&gt; <mark>redis</mark>\n  ttl &amp; co")
    block = recalled_block([result("s1", NOW - 60, hit)], NOW)
    assert "user: a <b> redis ttl & co" in block.text


def test_the_block_matches_the_seeds_shape() -> None:
    block = recalled_block(
        [
            result(
                "s1",
                NOW - 300,
                ("user", "working on <mark>redact_secrets</mark>"),
                title="Plugin work",
            ),
            result("s2", NOW - 15 * 86400, ("assistant", "type hints, line length 100")),
        ],
        NOW,
    )
    assert block.text == (
        f"{HEADER}\n\n"
        '[Recent — 5 mins ago]\nSession "Plugin work" (cli):\nuser: working on redact_secrets\n\n'
        '[Long-term — 2 weeks ago]\nSession "Untitled session" (cli):\n'
        "assistant: type hints, line length 100"
    )
    assert [(i.session_id, i.message_id, i.label, i.title) for i in block.items] == [
        ("s1", 1, "Recent — 5 mins ago", "Plugin work"),
        ("s2", 1, "Long-term — 2 weeks ago", None),
    ]


def test_hits_are_deduplicated_and_in_conversation_order() -> None:
    hits = [("assistant", "second"), ("user", "first"), ("tool", "same"), ("tool", "same")]
    r = result("s", NOW, *hits, mid=10)
    r.hits.reverse()  # best first is not conversation order
    body = recalled_block([r], NOW).items[0].text
    assert body.splitlines()[1:] == ["assistant: second", "user: first", "tool: same"]


def test_the_budget_drops_whole_items_and_clips_only_the_first() -> None:
    many = [result(f"s{n}", NOW - n, ("user", "x" * 250)) for n in range(6)]
    block = recalled_block(many, NOW, budget_chars=700)
    assert len(block.text) <= 700 and len(block.items) == 2 and block.dropped == 4
    clipped = recalled_block(many, NOW, budget_chars=150)
    assert len(clipped.text) <= 150 and len(clipped.items) == 1 and clipped.text.endswith("…")
    assert recalled_block([], NOW).text == ""


def test_volatile_block_joins_the_parts_that_have_text() -> None:
    block = VolatileBlock(
        (
            Part("user", "USER.md", "u"),
            Part("memory", "MEMORY.md", ""),
            Part("context", "Time", "c"),
        )
    )
    assert block.text == "u\n\nc" and block.chars == 4


def test_token_estimate() -> None:
    assert approx_tokens("") == 0
    assert approx_tokens("abcd" * 10) == 10
    assert approx_tokens("缓存策略") == 4
    assert approx_tokens("redis 缓存") == 2 + 2
