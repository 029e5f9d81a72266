"""A 52,000-message session: size and render time of its page and its stitched chain.

Builds (bulk path, once) a home holding one session of 52,000 messages (user,
assistant with Markdown and tool calls, tool output) that ends by compression and
a 2,000-message continuation starting with a compaction summary. Renders, in
process through the Flask test client (no network, no browser):

* ``/sessions/<long>``: the first page (the whole transcript before paging);
* ``/sessions/<long>?q=WORD``: with the highlight and the list of matches;
* ``/sessions/<long>?at=<a message near the end>``: the page holding that message;
* ``/chains/<long>/transcript``: the stitched transcript of both segments.

Prints bytes and the median of ``--rounds`` render times per URL. The machine is
shared and noisy: compare runs made one after the other, not with other days.

Usage: python bench/long_transcript.py [--home DIR] [--messages 52000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import timed  # noqa: E402
from dashboard import create_app  # noqa: E402
from dashboard.repository.store import ImportSession, NewMessage, SessionStore  # noqa: E402

DEFAULT_HOME = ROOT / "bench" / "out" / "home-long"
LONG = "20261101_090000_10a9a1"
NEXT = "20261103_090000_10a9a2"
WORD = "walrusine"  # in one message of 500
WORDS = (
    "deploy the service check the logs restart the worker pool redis timeout nginx "
    "config migration database index query latency backup retry queue memory disk"
).split()


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _messages(count: int, start: float, rng: random.Random) -> list[NewMessage]:
    out: list[NewMessage] = []
    for i in range(count):
        at = start + i * 3
        kind = i % 4
        word = f" {WORD}" if i % 500 == 7 else ""
        if kind == 0:
            out.append(NewMessage("user", _text(rng, 30) + word + "?", timestamp=at))
        elif kind == 1:
            body = f"**Plan**\n\n- {_text(rng, 12)}\n- {_text(rng, 12)}\n\n`{_text(rng, 3)}`{word}"
            calls = [{"id": f"call_{i}", "type": "function",
                      "function": {"name": "terminal",
                                   "arguments": f'{{"command": "{_text(rng, 5)}"}}'}}]  # fmt: skip
            out.append(NewMessage("assistant", body, tool_calls=calls, timestamp=at))
        elif kind == 2:
            output = json.dumps({"output": "\n".join(_text(rng, 10) for _ in range(6)),
                                 "exit_code": 0})  # fmt: skip
            out.append(NewMessage("tool", output, tool_call_id=f"call_{i - 1}",
                                  tool_name="terminal", timestamp=at))  # fmt: skip
        else:
            out.append(NewMessage("assistant", _text(rng, 60) + word, timestamp=at))
    return out


def build_home(home: Path, messages: int) -> None:
    rng = random.Random(52)
    start = 1.79e9
    long_msgs = _messages(messages, start, rng)
    end = start + messages * 3 + 10
    summary = "[CONTEXT COMPACTION — REFERENCE ONLY] The work so far: " + _text(rng, 200)
    tail = [NewMessage("user", summary, timestamp=end + 1), *_messages(2000, end + 5, rng)]
    with SessionStore(home / "state.db") as store:
        store.bulk_import([
            ImportSession(id=LONG, source="cli", started_at=start, model="m", title="A long one",
                          messages=long_msgs, ended_at=end, end_reason="compression"),
            ImportSession(id=NEXT, source="cli", started_at=end + 1, model="m",
                          parent_session_id=LONG, messages=tail),
        ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--messages", type=int, default=52_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if not (args.home / "state.db").exists():
        print(f"building {args.home} ({args.messages:,} messages) …", flush=True)
        build_home(args.home, args.messages)
    with tempfile.TemporaryDirectory() as data:
        app = create_app({"HERMES_HOME": str(args.home), "DATA_DIR": data, "TESTING": True})
        client = app.test_client()
        with closing(sqlite3.connect(f"file:{args.home / 'state.db'}?mode=ro", uri=True)) as conn:
            late = conn.execute(
                "SELECT id FROM messages WHERE session_id = ? ORDER BY id DESC LIMIT 1 OFFSET 9",
                (LONG,),
            ).fetchone()[0]
        urls = [
            f"/sessions/{LONG}",
            f"/sessions/{LONG}?q={WORD}",
            f"/sessions/{LONG}?at={late}",
            f"/chains/{LONG}/transcript",
        ]
        print(f"{'url':<52} {'bytes':>12} {'render_ms':>10} {'messages':>9}")
        for url in urls:
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)
            body = response.get_data(as_text=True)
            shown = body.count('class="msg role-')
            ms = statistics.median(timed(lambda url=url: client.get(url).get_data(), args.rounds))
            print(f"{url[:52]:<52} {len(body.encode()):>12,} {ms:>10.0f} {shown:>9,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
