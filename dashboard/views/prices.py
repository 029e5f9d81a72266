"""The prices page: where every recomputed figure's price comes from, and prices.yaml.

What the table and the user's overrides price, route by route (the calls the archive
holds), the routes nothing prices (with an entry to copy), and prices.yaml edited in
place: checked whole before it is written (costs/overrides.save: atomic), refused with
the line that is wrong, and refused when the file changed on disk since the page was
loaded (the text typed is kept on the page, nothing is lost).
"""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, current_app, redirect, render_template, request, url_for

from dashboard.costs import overrides
from dashboard.costs.book import current_book
from dashboard.errors import ConflictError, ValidationError
from dashboard.web.reader import get_reader

bp = Blueprint("prices", __name__)

MAX_TEXT = 256 * 1024  # characters: a price list, not a dump
EXAMPLE = """\
# Recall's price overrides: dollars per million tokens. First match wins.
# Every figure priced here says "prices.yaml" beside it.
prices:
#  - model: llama3.3:70b          # as Hermes records it, or any spelling of it
#    provider: custom             # optional: only calls through this provider
#    input: 0.05
#    output: 0.10
#    note: electricity and the GPU's wear
#  - model: google/gemini-2.5-pro
#    provider: openrouter
#    input: 1.25
#    output: 10
#    cache_read: 0.31
#    to: 2026-10-19               # optional: until this day (UTC), not included
#    tiers:                       # a call whose whole prompt is above this costs these
#      - above: 200000
#        input: 2.5
#        output: 15
"""


def _folder() -> Path:
    return Path(current_app.config["DATA_DIR"])


def _page(
    status: int = 200, *, text: str | None = None, error: str | None = None, conflict: bool = False
):
    """The page; ``text`` is what the form shows (the typed text after a refused save)."""
    book = current_book()
    try:
        on_disk, digest = overrides.on_disk(_folder())
    except ValidationError as exc:
        on_disk, digest, error = None, overrides.NO_FILE, error or str(exc)
    routes = get_reader().route_prices(book)
    body = render_template(
        "prices.html",
        book=book,
        path=_folder() / overrides.FILE_NAME,
        text=text if text is not None else (on_disk if on_disk is not None else EXAMPLE),
        on_disk=on_disk,
        digest=digest,
        error=error,
        conflict=conflict,
        saved=request.args.get("saved") == "1" and status == 200,
        priced=[r for r in routes if r.priced],
        unpriced=[r for r in routes if not r.priced],
    )
    return body, status


@bp.get("/costs/prices")
def index():
    """Where prices come from, the routes nothing prices, and prices.yaml."""
    return _page()


@bp.post("/costs/prices")
def save():
    """Check the submitted prices.yaml whole and write it, or say why not."""
    text = request.form.get("text", "").replace("\r\n", "\n")
    if len(text) > MAX_TEXT:
        return _page(400, text=text[:MAX_TEXT], error="prices.yaml is limited to 256 KB")
    try:
        overrides.save(_folder(), text, request.form.get("base_sha256", ""))
    except ConflictError as exc:
        message = f"{exc}. Your text is below; the file as it is now is under it."
        return _page(409, text=text, error=message, conflict=True)
    except ValidationError as exc:
        return _page(400, text=text, error=f"Not saved: {exc}")
    except OSError as exc:
        return _page(503, text=text, error=f"Not saved: {exc.strerror or exc}")
    return redirect(url_for("prices.index", saved="1"), code=303)
