"""Recap input: Hermes's transcript format, the seed's match window, the extractive preview."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dashboard.sessions.tools import ToolCall
from dashboard.sessions.transcript import TranscriptMessage
from dashboard.summaries.recap import (
    EARLIER_MARKER,
    LATER_MARKER,
    MAX_RECAP_CHARS,
    PREVIEW_CHARS,
    extractive_preview,
    format_transcript,
    truncate_around_matches,
)

WINDOW = 1_000
QUARTER = WINDOW // 4


def msg(id_: int, role: str, text: str, **extra: object) -> TranscriptMessage:
    return TranscriptMessage(id=id_, role=role, text=text, **extra)  # type: ignore[arg-type]


def call(name: str, *, malformed: bool = False) -> ToolCall:
    return ToolCall(id=f"call_{name}", name=name, arguments="{}", malformed=malformed)


def pad(n: int) -> str:
    """``n`` characters that match no test term."""
    return ("lorem ipsum dolor sit amet " * (n // 27 + 1))[:n]


def body_of(result: str) -> str:
    """The window of text, markers taken off."""
    result = result.removeprefix(EARLIER_MARKER)
    return result.removesuffix(LATER_MARKER)


def plain(preview_html: str) -> str:
    return html.unescape(preview_html.replace("<mark>", "").replace("</mark>", ""))


# -- format_transcript --------------------------------------------------------------


def test_format_transcript_roles_calls_and_tool_results() -> None:
    long_output = "A" * 250 + "B" * 100 + "C" * 250
    messages = [
        msg(1, "system", "You are Hermes."),
        msg(2, "user", "Why does docker fail?"),
        msg(3, "assistant", "Let me look.", tool_calls=(call("terminal"), call("read_file"))),
        msg(4, "tool", long_output, tool_name="terminal", tool_call_id="call_terminal"),
        msg(5, "tool", "short result", tool_name="read_file"),
        msg(6, "assistant", "The daemon was down."),
    ]
    assert format_transcript(messages) == "\n\n".join(
        [
            "[SYSTEM]: You are Hermes.",
            "[USER]: Why does docker fail?",
            "[ASSISTANT]: [Called: terminal, read_file]",
            "[ASSISTANT]: Let me look.",
            "[TOOL:terminal]: " + "A" * 250 + "\n...[truncated]...\n" + "C" * 250,
            "[TOOL:read_file]: short result",
            "[ASSISTANT]: The daemon was down.",
        ]
    )


def test_format_transcript_tool_output_at_the_limit_is_kept_whole() -> None:
    exactly = "x" * 500
    assert format_transcript([msg(1, "tool", exactly, tool_name="t")]) == f"[TOOL:t]: {exactly}"
    longer = "x" * 501
    out = format_transcript([msg(1, "tool", longer, tool_name="t")])
    assert out == "[TOOL:t]: " + "x" * 250 + "\n...[truncated]...\n" + "x" * 250


def test_format_transcript_empty_assistant_text_with_calls_has_only_the_call_line() -> None:
    out = format_transcript([msg(1, "assistant", "", tool_calls=(call("web_search"),))])
    assert out == "[ASSISTANT]: [Called: web_search]"


def test_format_transcript_keeps_compaction_summaries_as_user_context() -> None:
    summary = "[CONTEXT COMPACTION] Earlier we set up redis on port 6379."
    messages = [
        msg(1, "assistant", summary, is_compaction_summary=True),
        msg(2, "user", "continue"),
    ]
    assert format_transcript(messages) == f"[USER]: {summary}\n\n[USER]: continue"


def test_format_transcript_odd_calls_and_roles() -> None:
    # A call with no name is still counted; unreadable tool-call JSON names nothing.
    nameless = msg(1, "assistant", "ok", tool_calls=(call(""),))
    broken = msg(2, "assistant", "", tool_calls=(call("", malformed=True),))
    unnamed_tool = msg(3, "tool", "result")
    assert format_transcript([nameless, broken, unnamed_tool]) == (
        "[ASSISTANT]: [Called: ?]\n\n[ASSISTANT]: ok\n\n[ASSISTANT]: \n\n[TOOL]: result"
    )
    assert format_transcript([]) == ""


# -- truncate_around_matches --------------------------------------------------------


def test_text_that_fits_is_unchanged() -> None:
    text = "short docker text"
    assert truncate_around_matches(text, "docker") is text
    exact = pad(WINDOW)
    assert truncate_around_matches(exact, "nothing", WINDOW) == exact
    assert MAX_RECAP_CHARS == 100_000


def test_phrase_wins_over_scattered_terms() -> None:
    scattered = "docker said hello to the networking team. " * 40  # many terms, no phrase
    text = pad(5_000) + "Docker Networking broke" + pad(5_000) + scattered + pad(5_000)
    body = body_of(truncate_around_matches(text, "docker networking", WINDOW))
    assert "Docker Networking broke" in body
    assert "docker said hello" not in body
    assert body.index("Docker Networking") == QUARTER


def test_co_occurrence_beats_a_crowd_of_one_term() -> None:
    crowd = "timeout again. " * 60  # 60 of one term, no redis within 200 chars
    near = "redis gave up after a timeout"  # both terms, close, but not the phrase
    text = pad(4_000) + "redis is fine" + pad(4_000) + crowd + pad(4_000) + near + pad(4_000)
    body = body_of(truncate_around_matches(text, "redis timeout", WINDOW))
    assert near in body
    assert "timeout again" not in body
    # The anchor is the rarest term (redis) at the co-occurring place.
    assert body.index(near) == QUARTER


def test_any_term_fallback_picks_the_densest_region() -> None:
    # No phrase, and alpha and beta are never within 200 chars of each other.
    cluster = "beta " * 20
    text = pad(4_000) + "alpha" + pad(4_000) + cluster + pad(4_000)
    body = body_of(truncate_around_matches(text, "alpha beta", WINDOW))
    assert cluster in body
    assert "alpha" not in body


def test_no_match_starts_at_zero_with_only_the_later_marker() -> None:
    text = pad(5_000)
    result = truncate_around_matches(text, "zebra", WINDOW)
    assert result == text[:WINDOW] + LATER_MARKER
    assert not result.startswith(EARLIER_MARKER)


def test_match_at_the_very_start_has_no_earlier_marker() -> None:
    text = "zebra crossing" + pad(5_000)
    result = truncate_around_matches(text, "zebra", WINDOW)
    assert result == text[:WINDOW] + LATER_MARKER


def test_match_at_the_very_end_clamps_the_window() -> None:
    text = pad(5_000) + "zebra"
    result = truncate_around_matches(text, "zebra", WINDOW)
    assert result == EARLIER_MARKER + text[-WINDOW:]
    assert not result.endswith(LATER_MARKER)


def test_window_keeps_a_quarter_before_the_match() -> None:
    text = pad(10_000) + "zebra" + pad(10_000)
    result = truncate_around_matches(text, "zebra", WINDOW)
    assert result.startswith(EARLIER_MARKER) and result.endswith(LATER_MARKER)
    body = body_of(result)
    assert len(body) == WINDOW
    assert body.index("zebra") == QUARTER
    assert body == text[10_000 - QUARTER : 10_000 - QUARTER + WINDOW]


def test_first_best_window_wins_on_a_tie() -> None:
    text = pad(3_000) + "zebra one" + pad(3_000) + "zebra two" + pad(3_000)
    body = body_of(truncate_around_matches(text, "zebra", WINDOW))
    assert body.index("zebra one") == QUARTER
    assert "zebra two" not in body


@pytest.mark.parametrize("max_chars", [1, 3, 4, 50, 999, 1_000])
def test_length_is_bounded(max_chars: int) -> None:
    text = ("zebra " + pad(300)) * 20
    result = truncate_around_matches(text, "zebra", max_chars)
    assert len(result) <= max_chars + len(EARLIER_MARKER) + len(LATER_MARKER)
    assert len(body_of(result)) == max_chars


def test_cjk_text_and_query() -> None:
    filler = "今天天气很好，我们去公园散步。"
    text = filler * 400 + "数据库迁移失败了" + filler * 400
    body = body_of(truncate_around_matches(text, "数据库 迁移", WINDOW))
    # Not a phrase with the space; both terms co-occur, anchored on the first.
    assert "数据库迁移失败了" in body
    assert body.index("数据库") == QUARTER
    # A single CJK term, and CJK punctuation between terms.
    assert body_of(truncate_around_matches(text, "迁移失败", WINDOW)).index("迁移") == QUARTER
    assert "数据库迁移" in truncate_around_matches(text, "数据库，迁移", WINDOW)


def test_characters_that_lower_to_two_keep_positions_true() -> None:
    # "İ".lower() is two characters; positions must still point into the original text.
    text = "İ" * 3_000 + "zebra" + "İ" * 3_000
    body = body_of(truncate_around_matches(text, "ZEBRA", WINDOW))
    assert body.index("zebra") == QUARTER


def test_fts_syntax_is_not_searched_as_text() -> None:
    # Read literally, this query's words include "or", which this filler is full of.
    noise = "this or that or the other or something. " * 40
    place = "ERROR: Connection refused while talking to redis on 6379"
    text = pad(3_000) + noise + pad(3_000) + place + pad(3_000)
    body = body_of(truncate_around_matches(text, '"connection refused" OR redis*', WINDOW))
    assert place in body
    assert body.index("Connection refused") == QUARTER


def test_not_terms_are_not_looked_for() -> None:
    text = pad(3_000) + "rollback " * 30 + pad(3_000) + "deploy done" + pad(3_000)
    body = body_of(truncate_around_matches(text, "deploy NOT rollback", WINDOW))
    assert body.index("deploy done") == QUARTER
    assert "rollback" not in body


@pytest.mark.parametrize("query", ["", "   ", "NOT rollback", "AND OR", '""', "***"])
def test_queries_with_nothing_to_look_for_start_at_zero(query: str) -> None:
    text = pad(3_000) + "rollback" + pad(3_000)
    assert truncate_around_matches(text, query, WINDOW) == text[:WINDOW] + LATER_MARKER


def test_max_chars_must_be_positive() -> None:
    with pytest.raises(ValueError):
        truncate_around_matches("text", "t", 0)


# Pieces that make matches, FTS syntax and "İ" (lowers to two characters) common.
_PIECES = st.sampled_from([*'abc ABC\nİ部署"*()', " OR ", " NOT ", "ab", "部署"])


@settings(max_examples=300, deadline=None)
@given(
    text=st.text() | st.lists(_PIECES, max_size=150).map("".join),
    query=st.text(max_size=30) | st.lists(_PIECES, max_size=8).map("".join),
    max_chars=st.integers(min_value=1, max_value=50),
)
def test_result_is_a_window_of_the_input(text: str, query: str, max_chars: int) -> None:
    result = truncate_around_matches(text, query, max_chars)
    if len(text) <= max_chars:
        assert result == text
        return
    body = body_of(result)
    assert body in text
    assert len(body) == max_chars
    assert len(result) <= max_chars + len(EARLIER_MARKER) + len(LATER_MARKER)


# -- extractive_preview -------------------------------------------------------------


def test_preview_escapes_and_marks() -> None:
    text = pad(3_000) + "<script>alert(1)</script> the Zebra escaped & ran" + pad(3_000)
    out = extractive_preview(text, "zebra")
    assert "<script>" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "<mark>Zebra</mark>" in out
    assert "&amp; ran" in out
    # Only <mark> tags are markup.
    assert set(re.findall(r"<[^>]*>", out)) == {"<mark>", "</mark>"}


def test_preview_is_about_width_and_cut_at_word_ends() -> None:
    text = pad(6_000) + " zebra " + pad(6_000)
    out = extractive_preview(text, "zebra")
    assert out.startswith("…") and out.endswith("…")
    shown = plain(out).strip("…")
    assert PREVIEW_CHARS * 0.75 <= len(shown) <= PREVIEW_CHARS
    assert "zebra" in shown
    words = set(pad(27).split()) | {"zebra"}
    assert set(shown.split()) <= words  # no word cut in half at either end


def test_preview_prefers_line_breaks() -> None:
    lines = "".join(f"[USER]: line number {i} of the talk\n\n" for i in range(400))
    text = lines + "[ASSISTANT]: the zebra answer\n\n" + lines
    out = extractive_preview(text, "zebra", 600)
    assert "[ASSISTANT]: the <mark>zebra</mark> answer" in out
    shown = plain(out).strip("…")
    assert shown.startswith("[USER]: line number")
    assert shown.endswith("of the talk")


def test_preview_short_text_is_whole_and_empty_text_is_empty() -> None:
    assert extractive_preview("a <b> zebra", "zebra") == "a &lt;b&gt; <mark>zebra</mark>"
    assert extractive_preview("", "zebra") == ""
    assert extractive_preview("  \n ", "zebra") == ""
    assert extractive_preview("no match here", "zebra") == "no match here"


def test_preview_without_match_starts_at_the_beginning() -> None:
    text = pad(5_000)
    out = extractive_preview(text, "zebra", 200)
    assert not out.startswith("…") and out.endswith("…")
    assert text.startswith(plain(out).removesuffix("…"))


def test_preview_of_unspaced_cjk_text() -> None:
    filler = "今天天气很好我们去公园散步"
    text = filler * 300 + "数据库迁移失败" + filler * 300
    out = extractive_preview(text, "数据库迁移", 300)
    assert "<mark>数据库迁移</mark>" in out
    assert len(plain(out).strip("…")) == 300
