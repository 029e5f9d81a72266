"""A 52,000-message session: size and render time of its page and its stitched chain.

Builds (bulk path, once) a home holding one session of 52,000 messages (user,
assistant with Markdown and tool calls, tool output) that ends by compression and
a 2,000-message continuation starting with a compaction summary. Renders, in
process through the Flask test client (no network, no browser):

* ``/sessions/<long>``: the first page (the whole transcript before paging);
* ``/sessions/<long>?q=WORD``: with the highlight and the list of matches;
* ``/sessions/<long>?at=<a message near the end>``: the page holding that message;
* ``/chains/<long>/transcript``: the stitched transcript of both segments.

Then, in a second home, a session of ``--epoch-rows`` (5,000) rows that compacted in
place ``--compactions`` (20) times through ``SessionStore.compact_in_place`` (each
re-inserting a 2-row tail), beside a plain session of the same row count that never
compacted: the session page of the plain one is the baseline, timed in the same run
(``ratio``), against the in-place one in both views, at a re-inserted copy, and its
stitched transcript.

Prints bytes and the median of ``--rounds`` render times per URL, wall and CPU time
of this process (the ratio is of CPU time, which moves less with the other processes
of a shared machine). Compare runs made one after the other, not with other days.

Usage: python bench/long_transcript.py [--home DIR] [--messages 52000] [--rounds 3]
       [--epochs-home DIR] [--epoch-rows 5000] [--compactions 20]
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

from bench.common import cpu_timed, timed
from dashboard.app import create_app
from dashboard.lineage import epochs
from dashboard.store.records import ImportSession, NewMessage
from dashboard.store.session_store import SessionStore

DEFAULT_HOME = ROOT / "bench" / "out" / "home-long"
DEFAULT_EPOCHS_HOME = ROOT / "bench" / "out" / "home-epochs"
LONG = "20261101_090000_10a9a1"
NEXT = "20261103_090000_10a9a2"
IN_PLACE = "20261105_090000_10a9a3"  # compacts in place
PLAIN = "20261106_090000_10a9a4"  # the same size, never compacted: the baseline
KEEP = 2  # rows each compaction re-inserts
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
            calls = [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {
                        "name": "terminal",
                        "arguments": f'{{"command": "{_text(rng, 5)}"}}',
                    },
                }
            ]
            out.append(NewMessage("assistant", body, tool_calls=calls, timestamp=at))
        elif kind == 2:
            output = json.dumps(
                {"output": "\n".join(_text(rng, 10) for _ in range(6)), "exit_code": 0}
            )
            out.append(
                NewMessage(
                    "tool", output, tool_call_id=f"call_{i - 1}", tool_name="terminal", timestamp=at
                )
            )
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
        store.bulk_import(
            [
                ImportSession(
                    id=LONG,
                    source="cli",
                    started_at=start,
                    model="m",
                    title="A long one",
                    messages=long_msgs,
                    ended_at=end,
                    end_reason="compression",
                ),
                ImportSession(
                    id=NEXT,
                    source="cli",
                    started_at=end + 1,
                    model="m",
                    parent_session_id=LONG,
                    messages=tail,
                ),
            ]
        )


def build_epochs_home(home: Path, rows: int, compactions: int) -> None:
    """A session of ``rows`` rows (carriers and re-inserted tails counted) compacted in
    place ``compactions`` times, and a plain session of ``rows`` rows."""
    rng = random.Random(16)
    start = 1.8e9
    written = compactions * (1 + KEEP)
    per_epoch = (rows - written) // (compactions + 1)
    with SessionStore(home / "state.db") as store:
        store.bulk_import(
            [
                ImportSession(
                    id=PLAIN,
                    source="cli",
                    started_at=start,
                    model="m",
                    title="A plain long one",
                    messages=_messages(rows, start, rng),
                    ended_at=start + rows * 3 + 10,
                    end_reason="user_exit",
                ),
            ]
        )
        store.create_session("cli", session_id=IN_PLACE, model="m", started_at=start)
        at = start
        for epoch in range(compactions + 1):
            count = per_epoch if epoch < compactions else rows - written - per_epoch * epoch
            batch = _messages(count, at, rng)
            for n in range(0, len(batch), 500):
                store.append_messages(IN_PLACE, batch[n : n + 500])
            at += count * 3 + 5
            if epoch < compactions:
                summary = f"Epoch {epoch + 1} so far: " + _text(rng, 150)
                store.compact_in_place(IN_PLACE, summary, keep=KEEP, at=at)
                at += 5


def _epoch_urls(home: Path) -> list[str]:
    with closing(sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True)) as conn:
        total = conn.execute(
            "SELECT count(*) FROM messages WHERE session_id = ?", (IN_PLACE,)
        ).fetchone()[0]
        # The first row of the first re-inserted tail: a copy, read as the row it repeats.
        copy = (
            conn.execute(
                "SELECT id FROM messages WHERE session_id = ? AND content LIKE ? ORDER BY id",
                (IN_PLACE, "[CONTEXT COMPACTION%"),
            ).fetchone()[0]
            + 1
        )
    print(f"in-place session: {total:,} rows; plain session: the same size")
    return [
        f"/sessions/{PLAIN}",
        f"/sessions/{IN_PLACE}",
        f"/sessions/{IN_PLACE}?view=live",
        f"/sessions/{IN_PLACE}?at={copy}",
        f"/chains/{PLAIN}/transcript",
        f"/chains/{IN_PLACE}/transcript",
    ]


def _time_urls(home: Path, urls: list[str], rounds: int, baseline: str | None = None) -> None:
    """Print each URL's bytes, median render time, messages shown (and the ratio to
    ``baseline``'s time when given)."""
    with tempfile.TemporaryDirectory() as data:
        app = create_app({"HERMES_HOME": str(home), "DATA_DIR": data, "TESTING": True})
        client = app.test_client()
        print(
            f"{'url':<52} {'bytes':>12} {'render_ms':>10} {'cpu_ms':>7} {'messages':>9}"
            + (f" {'ratio':>6}" if baseline else "")
        )
        base_cpu = None
        for url in urls:
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)
            body = response.get_data(as_text=True)
            shown = body.count('class="msg role-') + body.count('class="compaction-divider')
            ms = statistics.median(timed(lambda url=url: client.get(url).get_data(), rounds))
            cpu = statistics.median(cpu_timed(lambda url=url: client.get(url).get_data(), rounds))
            if url == baseline:
                base_cpu = cpu
            ratio = f" {cpu / base_cpu:>6.2f}" if base_cpu else ""  # of CPU time: steadier
            print(
                f"{url[:52]:<52} {len(body.encode()):>12,} {ms:>10.0f} {cpu:>7.0f} "
                f"{shown:>9,}{ratio}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--messages", type=int, default=52_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs-home", type=Path, default=DEFAULT_EPOCHS_HOME)
    parser.add_argument("--epoch-rows", type=int, default=5_000)
    parser.add_argument("--compactions", type=int, default=20)
    parser.add_argument("--only-epochs", action="store_true", help="skip the 52,000-row home")
    parser.add_argument(
        "--cold",
        action="store_true",
        help="keep no session's epochs between requests (every open is a first)",
    )
    args = parser.parse_args(argv)
    if args.cold:  # every reader's cache keeps no session: every open is a first
        epochs.EPOCHS_KEPT = 0
    print(f"code: {Path(create_app.__code__.co_filename).parents[1]}")
    if not (args.epochs_home / "state.db").exists():
        print(
            f"building {args.epochs_home} ({args.epoch_rows:,} rows, "
            f"{args.compactions} in-place compactions) …",
            flush=True,
        )
        build_epochs_home(args.epochs_home, args.epoch_rows, args.compactions)
    urls = _epoch_urls(args.epochs_home)
    _time_urls(args.epochs_home, urls, args.rounds, baseline=urls[0])
    if args.only_epochs:
        return 0
    if not (args.home / "state.db").exists():
        print(f"building {args.home} ({args.messages:,} messages) …", flush=True)
        build_home(args.home, args.messages)
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
    _time_urls(args.home, urls, args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
