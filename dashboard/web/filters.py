"""The Jinja filters, tests and globals every template uses: registration only (the
formats live in :mod:`web.format`, the text in :mod:`web.markdown`)."""

from __future__ import annotations

from flask import Flask, request, url_for

from dashboard.web import markdown
from dashboard.web.costs_table import cost_html
from dashboard.web.format import (
    clock,
    compact_number,
    duration,
    filesize,
    isotime,
    localday,
    shortdate,
    usd,
)
from dashboard.web.lineage_svg import epoch_url, render_chain_svg, render_segment_panels
from dashboard.web.reader import get_reader


def url_with(**changes: object) -> str:
    """This page's URL with some query parameters changed (repeated ones kept)."""
    params = request.args.to_dict(flat=False)
    for key, value in changes.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = [str(value)]
    return url_for(request.endpoint or "search.index", **(request.view_args or {}), **params)


def profiles_shown() -> bool:
    """Whether this page reads every profile of several: each row then names its profile
    (the reader's rule, :attr:`StateReader.spans_profiles`)."""
    return get_reader().spans_profiles


def init_app(app: Flask) -> None:
    """Register every filter, test and global the templates use."""
    app.add_template_global(url_with)
    app.add_template_global(profiles_shown)
    app.add_template_filter(isotime)
    app.add_template_filter(shortdate)
    app.add_template_filter(filesize)
    app.add_template_filter(clock)
    app.add_template_filter(localday)
    app.add_template_filter(usd)
    app.add_template_filter(cost_html, "cost")
    app.add_template_filter(duration)
    app.add_template_filter(compact_number)
    app.add_template_global(render_chain_svg, "chain_svg")
    app.add_template_global(render_segment_panels, "chain_panels")
    app.add_template_global(epoch_url)
    app.add_template_filter(markdown.render_markdown, "markdown")
    app.add_template_filter(markdown.highlight)
    app.add_template_filter(markdown.highlight_text)
    app.add_template_test(markdown.mentions, "mentioning")
