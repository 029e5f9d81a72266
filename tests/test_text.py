"""Marking and clipping text live once, in text.py, and every page uses that copy."""

from __future__ import annotations

import re
from pathlib import Path

from dashboard import text
from dashboard.agent import blocks
from dashboard.search import said
from dashboard.store import names
from dashboard.summaries import recap, service
from dashboard.web import lineage_svg, markdown

PACKAGE = Path(text.__file__).resolve().parent


def test_the_term_pattern_is_longest_first_case_blind_and_literal() -> None:
    pattern = text.term_pattern(["redis", "Redis cluster", " ", "a.b"])
    assert pattern is not None
    assert pattern.findall("REDIS CLUSTER and redis, a.b not axb") == [
        "REDIS CLUSTER",
        "redis",
        "a.b",
    ]
    assert text.term_pattern([]) is None and text.term_pattern(["", "  "]) is None


def test_text_is_escaped_before_terms_are_marked() -> None:
    marked = text.mark_terms('<b title="x">x & y</b>', ["x"])
    assert marked == ("&lt;b title=&quot;<mark>x</mark>&quot;&gt;<mark>x</mark> &amp; y&lt;/b&gt;")
    assert text.is_marked(marked) and not text.is_marked(text.mark_terms("<mark>", ["z"]))
    # The transcript's highlight marks the same matches, with markupsafe's entities.
    assert str(markdown.highlight_text('"x"', ["X"])) == "&#34;<mark>x</mark>&#34;"


def test_clipping_keeps_the_limit_and_ends_in_an_ellipsis() -> None:
    assert text.clip("short", 10) == "short"
    assert text.clip("one two three", 9) == "one two…"
    assert len(text.clip("x" * 50, 20)) == 20
    assert text.clip_line("a\n\n b   c", 20) == "a b c"
    assert text.clip_line("alpha beta\ngamma", 8) == "alpha b…"


def test_a_marked_snippet_turns_back_into_its_text() -> None:
    snippet = "a &lt;b&gt; <mark>redis</mark> ttl &amp; co"
    assert text.plain(snippet) == "a <b> redis ttl & co"
    assert text.plain(snippet, ("«", "»")) == "a <b> «redis» ttl & co"


def test_the_modules_that_mark_or_clip_use_the_one_copy() -> None:
    assert markdown.term_pattern is text.term_pattern and markdown.mark is text.mark
    assert said.is_marked is text.is_marked and recap.mark_terms is text.mark_terms
    assert blocks.clip is text.clip and blocks.plain is text.plain
    assert lineage_svg.clip_line is text.clip_line and names.clip_line is text.clip_line
    assert service.plain is text.plain


def test_no_other_module_marks_or_clips_by_hand() -> None:
    own = re.compile(
        r'f"<mark>|"</?mark>"|</\?mark>|re\.escape\(t\) for t'
        r"|def (_?clip\w*|plain_snippet|_?term_pattern|_mark)\("
        r'|\[: ?\w+ - 1\]\.rstrip\(\) \+ "…"'
    )
    found = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p.name != "text.py" and own.search(p.read_text(encoding="utf-8"))
    ]
    # The demo cuts generated text at a word (its own rule, for demo data only).
    assert found == ["demo/tool_calls.py"]


def test_the_opening_is_the_plain_text_of_the_first_characters_only() -> None:
    short = "Fix the **pool** size in `pgbouncer.ini` — see [docs](https://x.example)"
    assert (
        text.plain_opening(short)
        == text.markdown_plain(short)
        == ("Fix the pool size in pgbouncer.ini — see docs")
    )
    long = "word " * (text.OPENING_CHARS // 5) + "**tail said after the opening**"
    assert "tail" not in text.plain_opening(long)
    assert text.plain_opening(long) == text.markdown_plain(long[: text.OPENING_CHARS])
