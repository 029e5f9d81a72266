"""Message text to safe HTML: Markdown without raw HTML, and query terms marked.

Message content is untrusted (a model or a web page can put anything in it).
:func:`render_markdown` lets Markdown through but never HTML: raw HTML is shown
as text, links are limited to http(s) and mailto and carry
``rel="noopener noreferrer nofollow"``, and images become plain links (the CSP
would block remote images anyway). :func:`highlight` then marks terms in the
text nodes of that safe HTML only, so a term can never land inside a tag.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup, escape

from dashboard.text import mark, term_pattern

SAFE_SCHEMES = ("http://", "https://", "mailto:")
LINK_REL = "noopener noreferrer nofollow"
# Safe HTML from this module has no raw "<" or ">" outside tags: text and attribute
# values are escaped, so a tag is exactly "<" up to the next ">".
_TAG = re.compile(r"(<[^>]*>)")


def _safe_link(url: str) -> bool:
    return url.strip().lower().startswith(SAFE_SCHEMES)


def _link_open(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    tokens[idx].attrSet("rel", LINK_REL)
    return renderer.renderToken(tokens, idx, options, env)


def _image(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = renderer.renderInlineAsText(token.children or [], options, env) or src
    label = escape(f"image: {alt}")
    return f'<a href="{escape(src)}" rel="{LINK_REL}">[{label}]</a>'


def _build() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    # Links and images whose URL fails this check stay as literal Markdown text.
    md.validateLink = _safe_link  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("image", _image)
    return md


_MD = _build()


#: Renders kept: a transcript page shows up to 500 messages, and a page read again (back,
#: a reload, the next page and back) renders them again. Only texts up to
#: RENDER_KEPT_CHARS are kept, so the cache stays a few MB whatever the messages hold.
RENDERS_KEPT = 1024
RENDER_KEPT_CHARS = 4096


def render_markdown(text: str | None) -> Markup:
    """Markdown as safe HTML (raw HTML shown as text, only http(s)/mailto links)."""
    if not text:
        return Markup("")
    if len(text) <= RENDER_KEPT_CHARS:
        return Markup(_kept_render(text))
    return Markup(_MD.render(text))


@lru_cache(maxsize=RENDERS_KEPT)
def _kept_render(text: str) -> str:
    return _MD.render(text)


def highlight(safe_html: str, terms: Iterable[str]) -> Markup:
    """Wrap case-insensitive matches of ``terms`` in ``<mark>``, in text nodes only.

    ``safe_html`` is safe HTML as :class:`Markup` (from :func:`render_markdown`);
    a plain ``str`` is treated as text and escaped first, so untrusted text can
    never pass through as HTML. Each text node is unescaped, matched against the
    raw terms and escaped again piece by piece: that equals matching the
    HTML-escaped terms against the escaped text, and a term can match neither an
    entity's name (``amp``) nor anything inside a tag or attribute.
    """
    if not hasattr(safe_html, "__html__"):
        safe_html = escape(safe_html)
    pattern = term_pattern(terms)
    if pattern is None:
        return Markup(safe_html)
    out: list[str] = []
    for part in _TAG.split(str(safe_html)):
        if part.startswith("<") or not part:
            out.append(part)
        else:
            out.append(mark(html.unescape(part), pattern, _escaped))
    return Markup("".join(out))


def highlight_text(text: str | None, terms: Iterable[str]) -> Markup:
    """Plain text escaped, then its matches of ``terms`` marked."""
    return highlight(escape(text or ""), terms)


def mentions(text: str | None, terms: Iterable[str]) -> bool:
    """Whether ``text`` contains any of ``terms`` (case-insensitive), as highlight marks."""
    pattern = term_pattern(terms)
    return bool(text and pattern and pattern.search(text))


def _escaped(text: str) -> str:
    return str(escape(text))
