"""What this request asks of a screen, read from its query string by the screen's one
parser (``CostsRequest`` / ``SearchRequest`` / ``TranscriptRequest.from_params``), for
its page and its JSON alike; and the user's clock."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime
from zoneinfo import ZoneInfo

from flask import current_app, request

from dashboard.costs.request import CostsRequest
from dashboard.costs.spend import DIMENSIONS
from dashboard.hermes.profiles import EVERY_PROFILE
from dashboard.meaning.embedder import EmbedderChoice
from dashboard.search.sessions import SearchRequest
from dashboard.sessions.transcript import TranscriptRequest
from dashboard.web.profiles import served_profiles
from dashboard.web.security import from_this_site


def current_timezone() -> str | None:
    """The user's timezone: ``TIMEZONE`` from the config, else the machine's."""
    return current_app.config.get("TIMEZONE") or None


def current_time() -> datetime:
    """Now, in the user's timezone (``COSTS_NOW``, epoch seconds, pins it for tests)."""
    stamp = float(current_app.config.get("COSTS_NOW") or time.time())
    zone = current_timezone()
    if zone:
        return datetime.fromtimestamp(stamp, ZoneInfo(zone))
    return datetime.fromtimestamp(stamp).astimezone()


def offered_dimensions() -> tuple[str, ...]:
    """The costs dimensions of the page, its CSV and JSON: ``profile`` only when this
    Recall serves 2+ profiles (with one, everything stays as it always was)."""
    several = EVERY_PROFILE.spans(served_profiles())
    return tuple(d for d in DIMENSIONS if d != "profile" or several)


def costs_request(now: datetime) -> CostsRequest:
    """The costs request of the query string (ValidationError if malformed)."""
    return CostsRequest.from_params(
        request.args,
        today=now.date(),
        timezone=current_timezone(),
        dimensions=offered_dimensions(),
    )


def search_request() -> SearchRequest:
    """The search request of the query string (ValidationError if malformed).

    A search by meaning with an embeddings endpoint configured calls a model, a side
    effect: a request another site made (an ``<img>`` pointing here) searches by words
    only, as :func:`security.same_origin_only` refuses model calls from elsewhere."""
    asked = SearchRequest.from_params(request.args.get, request.args.getlist)
    if asked.mode != "words" and EmbedderChoice.from_env().calls_a_model and not from_this_site():
        return replace(asked, mode="words")
    return asked


def transcript_request() -> TranscriptRequest:
    """The transcript request of the query string (ValidationError if malformed)."""
    return TranscriptRequest.from_params(request.args.get)
