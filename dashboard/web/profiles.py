"""Which profile a request reads: ``?profile=<name>|all``, else the browser's last choice.

The choice is in the URL (so a link, a bookmark and Back say it), remembered in a
cookie for the next page opened without one, and carried by every ``url_for`` of the
request (``url_defaults``), so a page's links stay in its profile. With one profile
there is nothing to choose: no switcher, no parameter added, nothing on screen
changes. ``recall serve --profile NAME`` serves that profile only: ``all`` means it,
any other name is a 404 that names no one else.

The reader the views call (:func:`dashboard.web.reader.get_reader`) is the chosen
profile's (``StateReader.scoped``).

A page of one session (its URL names a ``session_id``: the session, its chain, its
stitched transcript) opened without ``?profile=`` is read in the session's own
profile, whichever the cookie names: an archive id names one session of one profile
(``profiles.ArchiveIds``), so a link to it opens it, and the page says whose it is.
The cookie is left as it was; an explicit ``?profile=`` is obeyed (another profile's
session is then a 404, as any id that profile lacks).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from flask import Flask, abort, current_app, g, request, url_for

from dashboard.errors import StoreUnavailableError, ValidationError
from dashboard.hermes.profiles import ALL, EVERY_PROFILE, Profile, parse_profile
from dashboard.reader.reader import StateReader

COOKIE_SUFFIX = "_profile"
COOKIE_MAX_AGE = 365 * 24 * 3600
#: Parameters a switch drops: the page number (another profile has other pages) and
#: what one profile's memory page says after a save (``saved``, ``change``, ``before``).
NOT_CARRIED = frozenset(("profile", "page", "saved", "change", "before"))


def init_app(app: Flask) -> None:
    """Register the choice, its cookie, the links' parameter and the switcher's context."""
    reader = app.extensions["recall.reader"]
    only = app.config.get("PROFILE") or None
    profiles: list[Profile] = list(reader.profiles)
    if only is not None:
        profiles = [p for p in profiles if p.name == only]
    app.extensions["recall.profiles"] = profiles
    app.extensions["recall.only_profile"] = only

    @app.before_request
    def choose_profile() -> None:
        g.profile, g.profile_explicit = ALL, False
        if not EVERY_PROFILE.spans(profiles):
            g.profile = profiles[0].name if profiles and only else ALL
            if only and request.args.get("profile") not in (None, "", ALL, only):
                abort(404, description=f"This Recall serves the profile {only!r} only.")
            return
        try:
            asked = parse_profile(request.args.get("profile"), profiles, only=only)
            remembered = parse_profile(request.cookies.get(cookie_name()), profiles)
        except ValidationError as exc:
            if "profile" in request.args:
                abort(404, description=str(exc))
            asked, remembered = None, None  # a stale cookie (a profile removed): ignored
        g.profile = asked or remembered or ALL
        g.profile_explicit = asked is not None
        if asked is None and g.profile != ALL and request.method in ("GET", "HEAD"):
            owner = _session_owner(reader, profiles)
            if owner is not None and owner != g.profile:
                g.profile_moved_from, g.profile = g.profile, owner

    @app.after_request
    def remember_profile(response: Any) -> Any:
        chosen = g.get("profile")
        if g.get("profile_explicit") and request.cookies.get(cookie_name()) != chosen:
            response.set_cookie(
                cookie_name(), chosen, max_age=COOKIE_MAX_AGE, samesite="Strict", httponly=True
            )
        return response

    @app.url_defaults
    def keep_profile(endpoint: str, values: dict[str, Any]) -> None:
        if EVERY_PROFILE.spans(profiles) and endpoint != "static" and "profile" not in values:
            chosen = g.get("profile")
            if chosen:
                values["profile"] = chosen

    @app.context_processor
    def inject_profiles() -> dict[str, object]:
        return {
            "profile_choices": [p.name for p in profiles] if EVERY_PROFILE.spans(profiles) else [],
            "current_profile": g.get("profile", ALL),
            "switch_profile_url": switch_url,
            "profile_moved_from": g.get("profile_moved_from"),
        }


def _session_owner(reader: StateReader, profiles: list[Profile]) -> str | None:
    """The served profile holding the session this request's URL names, if it names one."""
    session_id = (request.view_args or {}).get("session_id")
    if not session_id:
        return None
    try:
        owner = reader.session_profile(session_id)
    except StoreUnavailableError:
        return None  # the view says why the store cannot be read
    return owner if owner in {p.name for p in profiles} else None


def cookie_name() -> str:
    return f"{current_app.config['SESSION_COOKIE_NAME']}{COOKIE_SUFFIX}"


def current_profile() -> str:
    """The profile the request reads (a name, or ``all``)."""
    return g.get("profile", ALL)


def switch_url(name: str) -> str:
    """This page's URL in profile ``name``: the same path and parameters but
    :data:`NOT_CARRIED`. A page of one session or chain (its URL
    names a ``session_id``), which belongs to one profile, switches to the search page
    of the other profile (``all`` still shows it)."""
    if request.view_args and "session_id" in request.view_args and name != ALL:
        return url_for("search.index", profile=name)
    args = [(k, v) for k, v in request.args.items(multi=True) if k not in NOT_CARRIED]
    args.append(("profile", name))
    return f"{request.path}?{urlencode(args)}"


def served_profiles() -> list[Profile]:
    return current_app.extensions.get("recall.profiles", [])
