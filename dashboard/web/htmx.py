"""Full page or partial, decided in one place, on the HTMX target."""

from __future__ import annotations

from typing import Any

from flask import Flask, Response, make_response, render_template
from htmx_flask import Htmx, request


def init_app(app: Flask) -> None:
    Htmx(app)

    @app.after_request
    def vary_on_htmx(response: Response) -> Response:
        # A partial and a full page share a URL: caches must tell them apart.
        response.vary.add("HX-Request")
        response.vary.add("HX-Target")
        return response


def wants_partial(target: str) -> bool:
    """True when HTMX asks for the element ``#target`` (and not a history restore)."""
    return (
        bool(request.htmx)
        and request.htmx.target == target
        and not (request.htmx.history_restore_request)
    )


def render_page(page: str, partial: str, target: str, **context: Any) -> Response:
    """Render the full ``page``, or just ``partial`` when HTMX targets ``target``."""
    return make_response(render_template(partial if wants_partial(target) else page, **context))
