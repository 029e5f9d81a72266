"""Security baseline: Host check, CSRF with same-origin, headers, secret key, bind address."""

from __future__ import annotations

import re
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from flask import Flask
from flask.testing import FlaskClient

from dashboard.web.security import host_name, load_secret_key, session_cookie_name
from tests.support import hermes_shapes as shapes
from tests.support.app import make_app
from tests.support.browser_support import running_server
from tests.support.llm_stub import StubLLM


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8750", "10.0.0.5", "attacker.localhost.com"]
)
def test_foreign_host_header_is_refused(client: FlaskClient, host: str) -> None:
    response = client.get("/", headers={"Host": host})
    assert response.status_code == 400
    assert b"Host header refused" in response.data


@pytest.mark.parametrize("host", ["127.0.0.1:8750", "localhost:8750", "[::1]:8750", "localhost"])
def test_loopback_host_headers_are_served(client: FlaskClient, host: str) -> None:
    assert client.get("/", headers={"Host": host}).status_code == 200


def test_bound_and_configured_hosts_are_accepted(hermes_home: Path, tmp_path: Path) -> None:
    app = make_app(
        hermes_home, tmp_path / "d", BIND_HOST="192.168.1.20", ALLOWED_HOSTS=["recall.lan"]
    )
    c = app.test_client()
    assert c.get("/", headers={"Host": "192.168.1.20:8750"}).status_code == 200
    assert c.get("/", headers={"Host": "recall.lan"}).status_code == 200
    assert c.get("/", headers={"Host": "other.lan"}).status_code == 400


def test_host_name_parsing() -> None:
    assert host_name("Example.COM:8750") == "example.com"
    assert host_name("[::1]:8750") == "[::1]"
    assert host_name("::1") == "::1"


def _token(client: FlaskClient) -> str:
    page = client.get("/").get_data(as_text=True)
    match = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
    assert match, "every page carries the token"
    return match.group(1)


def test_post_without_token_is_forbidden(client: FlaskClient) -> None:
    _token(client)
    response = client.post("/", headers={"Origin": "http://localhost"})
    assert response.status_code == 403
    assert b"token" in response.data


def test_post_with_token_but_cross_origin_is_forbidden(client: FlaskClient) -> None:
    token = _token(client)
    for headers in (
        {"Origin": "http://evil.example"},
        {"Referer": "http://evil.example/page"},
        {},  # neither Origin nor Referer
    ):
        response = client.post("/", headers={"X-CSRF-Token": token, **headers})
        assert response.status_code == 403, headers


def test_post_with_token_and_same_origin_passes_the_check(client: FlaskClient) -> None:
    token = _token(client)
    # The overview has no POST handler: 405 shows the request got past CSRF.
    by_header = client.post("/", headers={"X-CSRF-Token": token, "Origin": "http://localhost"})
    assert by_header.status_code == 405
    by_form = client.post("/", data={"csrf_token": token}, headers={"Referer": "http://localhost/"})
    assert by_form.status_code == 405
    wrong = client.post(
        "/", data={"csrf_token": token + "x"}, headers={"Origin": "http://localhost"}
    )
    assert wrong.status_code == 403


def test_a_token_from_another_session_does_not_work(app: Flask) -> None:
    a, b = app.test_client(), app.test_client()
    token_a = _token(a)
    _token(b)
    response = b.post("/", headers={"X-CSRF-Token": token_a, "Origin": "http://localhost"})
    assert response.status_code == 403


@pytest.mark.parametrize("path", ["/", "/healthz", "/static/app.css", "/no-such-page"])
def test_security_headers_on_every_response(client: FlaskClient, path: str) -> None:
    with client.get(path) as response:  # static files hold an open file until closed
        headers = response.headers
    csp = headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"


def test_pages_have_no_inline_script_or_style(client: FlaskClient) -> None:
    html = client.get("/").get_data(as_text=True)
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html)
    assert "<style" not in html and " style=" not in html
    assert not re.search(r"\son[a-z]+=", html)


def test_secret_key_is_per_data_dir_private_and_stable(tmp_path: Path) -> None:
    one = load_secret_key(tmp_path / "one")
    assert load_secret_key(tmp_path / "one") == one
    assert load_secret_key(tmp_path / "two") != one
    mode = stat.S_IMODE((tmp_path / "one" / "secret_key").stat().st_mode)
    assert mode == 0o600
    assert len(one) >= 32


def test_a_read_only_data_folder_gives_a_key_for_this_process_only(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    with shapes.read_only(folder):
        one, two = load_secret_key(folder), load_secret_key(folder)
    assert len(one) >= 32 and one != two  # nothing could be kept: one per start
    assert list(folder.iterdir()) == []


def test_session_cookie_is_strict_and_http_only(client: FlaskClient) -> None:
    cookie = client.get("/").headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie


def test_non_loopback_bind_needs_allow_remote(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "dashboard.cli",
            "serve",
            "--host",
            "0.0.0.0",
            "--home",
            str(tmp_path),
            "--port",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--allow-remote" in result.stderr


def _memory_form(client: httpx.Client) -> dict[str, str]:
    page = client.get("/memory/USER.md").text
    fields = dict(re.findall(r'name="(csrf_token|base_sha256)" value="([^"]*)"', page))
    return {**fields, "text": "Name: Ada"}


@pytest.mark.parametrize("same_data_dir", [False, True])
def test_two_instances_in_one_browser_keep_their_own_sessions(
    tmp_path: Path, same_data_dir: bool
) -> None:
    """A browser sends 127.0.0.1's cookies to every port: each instance needs its own name."""
    homes = []
    for name in ("a", "b"):
        home = tmp_path / name
        shapes.build_current_views(home / "state.db")
        homes.append(home)
    data = [tmp_path / "data", tmp_path / ("data" if same_data_dir else "data-b")]
    with (
        running_server(["--home", str(homes[0]), "--data-dir", str(data[0])], tmp_path) as one,
        running_server(["--home", str(homes[1]), "--data-dir", str(data[1])], tmp_path) as two,
        httpx.Client(timeout=30) as browser,  # one cookie jar, as one browser has
    ):
        browser.base_url = one.url
        form_one = _memory_form(browser)
        browser.base_url = two.url
        form_two = _memory_form(browser)  # the second tab sets its cookie too
        browser.base_url = one.url
        saved = browser.post("/memory/USER.md", data=form_one, headers={"Origin": one.url})
        browser.base_url = two.url
        saved_two = browser.post("/memory/USER.md", data=form_two, headers={"Origin": two.url})
        names = {cookie.name for cookie in browser.cookies.jar}
    assert saved.status_code == 303, saved.text[:500]
    assert saved_two.status_code == 303, saved_two.text[:500]
    assert len(names) == 2
    assert (homes[0] / "memories" / "USER.md").read_text() == "Name: Ada"
    assert (homes[1] / "memories" / "USER.md").read_text() == "Name: Ada"


def test_the_cookie_name_follows_the_data_dir_and_port(tmp_path: Path) -> None:
    name = session_cookie_name(tmp_path / "a", 8750)
    assert name == session_cookie_name(tmp_path / "a", 8750) and name.startswith("recall_")
    assert name != session_cookie_name(tmp_path / "a", 8751)
    assert name != session_cookie_name(tmp_path / "b", 8750)


CROSS_SITE = [
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},  # another port of 127.0.0.1 is the same site
    {"Origin": "http://evil.example"},
    {"Referer": "http://evil.example/cats.html"},
    {"Origin": "null"},
]
MODEL_ROUTES = [
    ("/api/session_search", {"query": "pool", "limit": "5"}),
    (f"/summaries/{shapes.S_ROOT}", {"q": "pool"}),
]


@pytest.mark.parametrize("headers", CROSS_SITE)
@pytest.mark.parametrize("path, params", MODEL_ROUTES)
def test_a_cross_site_get_that_could_call_a_model_makes_no_call(
    hermes_home: Path, tmp_path: Path, llm_stub: StubLLM, headers: dict, path: str, params: dict
) -> None:
    """``<img src="http://127.0.0.1:8750/api/session_search?query=a&limit=20">`` on any page."""
    app = make_app(hermes_home, tmp_path / "data", LLM_BASE_URL=llm_stub.url, LLM_MODEL="m")
    client = app.test_client()
    for extra in ({}, {"HX-Request": "true"}):
        response = client.get(path, query_string=params, headers={**headers, **extra})
        assert response.status_code == 403
        assert "another site" in response.get_data(as_text=True)
    assert llm_stub.requests == []


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "same-origin"},
        {"Sec-Fetch-Site": "none"},
        {"Referer": "http://localhost/"},
        {},
    ],
)
def test_the_same_gets_from_the_page_itself_or_a_script_do_call_it(
    hermes_home: Path, tmp_path: Path, llm_stub: StubLLM, headers: dict
) -> None:
    app = make_app(hermes_home, tmp_path / "data", LLM_BASE_URL=llm_stub.url, LLM_MODEL="m")
    client = app.test_client()
    response = client.get("/api/session_search", query_string={"query": "pool"}, headers=headers)
    assert response.status_code == 200 and response.json["success"]
    assert llm_stub.requests
