"""Security baseline for a local web app that every page the user visits can reach.

* Host check: a request whose Host is not a loopback name or the bound host is
  refused (DNS rebinding: an attacker's domain resolving to 127.0.0.1).
* CSRF: every state-changing request carries a token tied to the session cookie
  (``X-CSRF-Token`` header from HTMX, ``csrf_token`` field from forms) and a
  same-origin ``Origin`` or ``Referer``.
* A GET that can call a model (spending the user's LLM budget) answers only the
  page itself or a script: :func:`same_origin_only` refuses ``Sec-Fetch-Site``
  other than ``same-origin``/``none`` and a foreign ``Origin`` or ``Referer``, so an
  ``<img src=".../api/session_search?query=a">`` on another site makes no call.
* Headers: a CSP without inline script, ``frame-ancestors 'none'``, ``nosniff``,
  ``Referrer-Policy: same-origin``.
* The secret key is generated once per data directory and kept there (0600).
* The session cookie's name is per instance (data directory and port): a browser
  sends 127.0.0.1's cookies to every port, so two Recalls sharing one name would
  overwrite each other's session and refuse each other's form tokens.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from flask import Flask, abort, current_app, request, session

F = TypeVar("F", bound=Callable[..., Any])

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)


def init_app(app: Flask) -> None:
    if not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = load_secret_key(app.config.get("DATA_DIR"))
    if not app.config.get("SESSION_COOKIE_NAME"):
        app.config["SESSION_COOKIE_NAME"] = session_cookie_name(
            app.config.get("DATA_DIR"), app.config.get("BIND_PORT")
        )
    app.before_request(check_host)
    app.before_request(check_csrf)
    app.after_request(set_security_headers)
    app.jinja_env.globals["csrf_token"] = csrf_token


def load_secret_key(data_dir: str | os.PathLike[str] | None) -> bytes:
    """The data directory's secret key, created on first use; random per process without
    one, or when the folder cannot hold it (read-only, full: `recall serve` says so)."""
    if not data_dir:
        return secrets.token_bytes(32)
    path = Path(data_dir) / "secret_key"
    try:
        key = path.read_bytes()
        if len(key) >= 32:
            return key
    except FileNotFoundError:
        pass
    except OSError:
        return secrets.token_bytes(32)  # unreadable: forms work until the next start
    key = secrets.token_bytes(32)
    # O_EXCL: two servers starting together must not overwrite each other's key.
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes()
    except OSError:
        return key  # a folder that cannot be written: this process's key only
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(key)
    except OSError:  # a full disk: leave no short key behind for the next start
        path.unlink(missing_ok=True)
    return key


def session_cookie_name(data_dir: str | os.PathLike[str] | None, port: object) -> str:
    """``recall_<12 hex>``, the same for one data directory and port, different otherwise."""
    if not data_dir:  # a random key per process: a name per process too
        return f"recall_{secrets.token_hex(6)}"
    where = f"{Path(data_dir).expanduser().resolve()}\0{port or ''}"
    return f"recall_{hashlib.sha256(where.encode()).hexdigest()[:12]}"


def allowed_hosts(app: Flask) -> frozenset[str]:
    names = set(LOOPBACK_NAMES)
    bound = str(app.config.get("BIND_HOST") or "")
    if bound and bound not in ("0.0.0.0", "::"):
        names.add(bound.lower())
    names.update(h.lower() for h in app.config.get("ALLOWED_HOSTS") or [])
    return frozenset(names)


def host_name(host_header: str) -> str:
    """``example.com:8750`` → ``example.com``; ``[::1]:8750`` → ``[::1]``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def check_host() -> None:
    if host_name(request.host) not in allowed_hosts(current_app):
        abort(400, description="This server only answers to its own address (Host header refused).")


def csrf_token() -> str:
    """This session's CSRF token (created on first use)."""
    token = session.get(CSRF_FIELD)
    if not token:
        token = secrets.token_urlsafe(32)
        session[CSRF_FIELD] = token
    return token


def check_csrf() -> None:
    if request.method not in UNSAFE_METHODS:
        return
    if not _same_origin():
        abort(403, description="Cross-site request refused (Origin/Referer is not this site).")
    expected = session.get(CSRF_FIELD)
    sent = request.headers.get(CSRF_HEADER) or request.form.get(CSRF_FIELD) or ""
    if not expected or not hmac.compare_digest(str(expected), sent):
        abort(403, description="Missing or expired form token. Reload the page and try again.")


# "same-site" too: a page on another port of 127.0.0.1 is the same site, not this one.
# "none": the user typed the URL or followed a bookmark.
FETCH_SITES_ALLOWED = frozenset({"same-origin", "none"})
CROSS_SITE_REFUSED = (
    "Refused: this request came from another site, and answering it would call the "
    "summarization model (spending your LLM budget). Open it from Recall itself."
)


def same_origin_only(view: F) -> F:
    """Refuse the request unless it comes from Recall's own pages, a typed URL or a script.

    For GETs that call a model. Browsers say where a request comes from in
    ``Sec-Fetch-Site``; older ones only in ``Origin``/``Referer``. A request with none
    of them (curl, an agent's script) is not a browser being tricked, and passes.
    """

    @wraps(view)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if not _from_this_site():
            abort(403, description=CROSS_SITE_REFUSED)
        return view(*args, **kwargs)

    return guarded  # type: ignore[return-value]


def from_this_site() -> bool:
    """Whether this request comes from Recall's own pages, a typed URL or a script (what
    :func:`same_origin_only` lets through), for a view that calls a model only then."""
    return _from_this_site()


def _from_this_site() -> bool:
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None and fetch_site.strip().lower() not in FETCH_SITES_ALLOWED:
        return False
    for header in ("Origin", "Referer"):
        value = request.headers.get(header)
        if value is not None and not _is_this_origin(value):
            return False
    return True


def _is_this_origin(url: str) -> bool:
    """Whether ``url`` (an Origin or Referer) names this server's scheme, host and port."""
    here = urlsplit(request.host_url)
    there = urlsplit(url)
    return (there.scheme, there.netloc.lower()) == (here.scheme, here.netloc.lower())


def _same_origin() -> bool:
    origin = request.headers.get("Origin") or request.headers.get("Referer")
    return bool(origin) and _is_this_origin(origin)


def set_security_headers(response):
    headers = response.headers
    headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("Referrer-Policy", "same-origin")
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
    return response
