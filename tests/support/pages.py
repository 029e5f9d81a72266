"""What every page test checks the same way: hostile text kept inert, the gone badge."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

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
