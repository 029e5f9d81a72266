"""web/markdown.py's kept renders: the same HTML as a fresh render, within a size bound."""

from __future__ import annotations

from dashboard.web import markdown


def test_a_kept_render_is_the_fresh_render_and_long_texts_are_not_kept() -> None:
    short = "Run `pg_dump` **first**, then see [the docs](https://example.com/x)."
    fresh = markdown._MD.render(short)
    assert str(markdown.render_markdown(short)) == fresh
    hits = markdown._kept_render.cache_info().hits
    assert str(markdown.render_markdown(short)) == fresh
    assert markdown._kept_render.cache_info().hits == hits + 1
    long = "word " * (markdown.RENDER_KEPT_CHARS // 5 + 1)
    size = markdown._kept_render.cache_info().currsize
    assert str(markdown.render_markdown(long)) == markdown._MD.render(long)
    assert markdown._kept_render.cache_info().currsize == size
    # Raw HTML stays text, kept or not.
    assert "&lt;script&gt;" in str(markdown.render_markdown("<script>x</script>"))
