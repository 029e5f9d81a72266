"""What every page test checks the same way: hostile text kept inert, the gone badge, a
session named as its own page names it."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

from flask.testing import FlaskClient

from dashboard.store.records import NewMessage
from dashboard.store.session_store import SessionStore

SCRIPT = "<script>alert(1)</script>"


IMG = '"><img src=x onerror=alert(1)>'


RAW_HTML_MD = (
    'Some **bold** text <div onclick="alert(2)">raw html</div> and '
    "[a bad link](javascript:alert(3)) and [a good one](https://example.com/docs) "
    'and <a href="javascript:alert(4)">an html link</a>.'
)


class Tags(HTMLParser):
    """Every start tag of a document, with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def assert_inert(html: str) -> None:
    """No script of ours but the two static files, no handlers, no javascript: URLs."""
    assert "<script>alert" not in html
    assert not re.search(r"<[^>]*\sonerror\s*=", html, re.IGNORECASE)
    assert not re.search(r"href\s*=\s*[\"']?\s*javascript:", html, re.IGNORECASE)
    parser = Tags()
    parser.feed(html)
    for tag, attrs in parser.tags:
        if tag == "script":
            assert dict(attrs).get("src", "").startswith("/static/")
        assert tag != "img"
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name)
            assert "<" not in (value or ""), (tag, name, value)


def xss_home(root: Path) -> tuple[Path, str]:
    """A Recall store whose one session holds every payload, in every part of a message."""
    home = root / "xss-home"
    with SessionStore(home / "state.db") as store:
        sid = store.create_session("cli", model="evil/model", title=f"Title {IMG}")
        store.append_messages(
            sid,
            [
                NewMessage("user", SCRIPT),
                NewMessage("assistant", IMG, reasoning=f"thinking {SCRIPT}"),
                NewMessage("user", RAW_HTML_MD),
                NewMessage(
                    "assistant",
                    None,
                    tool_calls=[
                        {
                            "id": "call_x",
                            "type": "function",
                            "function": {"name": f"run{IMG}", "arguments": f'{{"c": "{IMG}"}}'},
                        }
                    ],
                ),
                NewMessage("tool", f"{SCRIPT}\n{IMG}", tool_call_id="call_x", tool_name=IMG),
                NewMessage("system", SCRIPT),
            ],
        )
    return home, sid


GONE_BADGE = "deleted from Hermes on 2026-09-14 — kept in Recall's archive"


def session_page_name(client: FlaskClient, session_id: str) -> tuple[str, bool]:
    """The name a session's own page gives it (its heading), and whether it is untitled."""
    page = client.get(f"/sessions/{session_id}").get_data(as_text=True)
    found = re.search(
        r'<h1 class="session-title">(.*?)(<span class="tag"[^>]*>untitled|</h1>)', page, re.S
    )
    assert found is not None, page[:300]
    return html.unescape(found.group(1).strip()), found.group(2) != "</h1>"


def shown_as(text: str, name: str) -> bool:
    """Whether ``text`` (a link's text, maybe cut by Jinja's ``truncate(n, True, "…")``)
    shows ``name``."""
    text = html.unescape(" ".join(text.split()))
    return text == name or (text.endswith("…") and name.startswith(text[:-1]))


def names_shown_as_their_pages(
    client: FlaskClient, links: list[tuple[str, str]]
) -> list[tuple[str, str, bool]]:
    """For each ``(session id, text shown for it)``: the id, its page's name, untitled."""
    out = []
    for session_id, text in links:
        name, untitled = session_page_name(client, session_id)
        assert shown_as(text, name), (session_id, text, name)
        out.append((session_id, name, untitled))
    return out
