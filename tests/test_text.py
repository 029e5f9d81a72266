"""Marking and clipping text live once, in text.py, and every page uses that copy."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

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


def _snippet_of_the_whole_text(whole: str, terms: list[str], width: int) -> str:
    """make_snippet as it reads with the whole text flattened first (the reference the
    sliced read must equal, byte for byte)."""
    flat = re.sub(r"\s+", " ", whole).strip()
    pattern = text.term_pattern(terms)
    return text._window(flat, pattern.search(flat) if pattern else None, pattern, width)


_FILLER = st.lists(
    st.one_of(
        st.text(alphabet="cd ef\n\t", min_size=0, max_size=60),
        st.sampled_from(["   \n\n   ", " " * 90, "\t", "dc fc " * 30]),
    ),
    min_size=4,
    max_size=40,
).map("".join)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    before=_FILLER,
    needle=st.sampled_from(["Needle", "needle", "x.y", "<b>&", "  needle  ", "d\n\ne"]),
    after=st.lists(
        st.one_of(_FILLER, st.sampled_from(["needle", "x.y", " " * 90])), max_size=6
    ).map("".join),
    terms=st.lists(
        st.sampled_from(["needle", "x.y", "<b>", "ef", "zz", "d e", "needle c"]),
        min_size=1,
        max_size=3,
    ),
    width=st.integers(min_value=26, max_value=40),
)
def test_a_long_texts_snippet_is_read_from_a_slice_and_is_the_same(
    before: str, needle: str, after: str, terms: list[str], width: int
) -> None:
    """The first match anywhere (deep in the text, after long runs of spaces, near
    either end): the snippet of a slice is the snippet of the whole text."""
    whole = before + needle + after
    assert text.make_snippet(whole, terms, width=width) == _snippet_of_the_whole_text(
        whole, terms, width
    )


def test_a_term_holding_a_space_is_found_across_any_whitespace_of_a_long_text() -> None:
    # "d\te" reads "d e" once flattened: the first match, though "d e" comes later as is.
    whole = "d\te" + " xy" * 400 + " d e" + " zw" * 400
    snippet = text.make_snippet(whole, ["d e"], width=40)
    assert snippet == _snippet_of_the_whole_text(whole, ["d e"], 40)
    assert snippet.startswith("<mark>d e</mark> xy")
