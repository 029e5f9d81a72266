"""Prefetch latency at 100k messages: the agent's recalled block against raw stage-1 search.

Builds (or reuses) a demo home of 1,000 sessions / 100k messages and picks ~50 user
messages from the store itself (one per session, chosen by a fixed seed; messages
stored as JSON parts and messages with no searchable term are skipped). In the same
process it times, per message (median of ``--rounds``; the two are interleaved so
drift hits both alike):

* prefetch: ``RecallMemoryProvider(home, readonly=True).prefetch(msg, session_id=sid)``,
  ``sid`` being the session the message came from, so its compaction chain is
  excluded as in a real agent turn (telling terms, chain lookup, stage-1 search over
  user/assistant messages for 5 sessions, the recalled block);
* raw stage 1: ``reader.search(SearchRequest(query=terms_query(msg)))``, the baseline;
* speculative: ``queue_prefetch(msg)`` left to finish, then ``prefetch(next)`` with
  the session's next user message; it hands over the block already computed.

It also splits the prefetch into its parts (chain lookup, the provider's own search
request, the block) so a miss can be located, and reports the first call per
message (colder page and lineage caches) separately.

Last line: ``prefetch_p50_ms=.. prefetch_p95_ms=.. raw_search_p50_ms=.. raw_search_p95_ms=..
speculative_p95_ms=.. ratio_p95=..`` (ratio = prefetch p95 / raw p95).
Target: prefetch p95 <= 50 ms.

Usage: python bench/prefetch.py [--home DIR] [--messages 50] [--rounds 3] [--seed 7]
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import pct, timed
from dashboard.agent import RecallMemoryProvider
from dashboard.agent.blocks import recalled_block
from dashboard.agent.provider import PREFETCH_RANK_WINDOW, RECALLED_ROLES
from dashboard.demo.build import build_demo_home
from dashboard.hermes.content import JSON_PREFIX
from dashboard.hermes.home import HermesHome
from dashboard.reader.reader import StateReader
from dashboard.search.related import terms_query
from dashboard.search.sessions import SearchRequest

DEFAULT_HOME = ROOT / "bench" / "out" / "home-100k"
TARGET_P95_MS = 50.0


def pick_messages(db: Path, count: int, seed: int) -> list[tuple[str, str, str | None]]:
    """``(session id, message, next user message of that session or None)``, one per session."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT id, session_id FROM messages WHERE role = 'user' ORDER BY id"
        ).fetchall()
        rng = random.Random(seed)
        rng.shuffle(rows)
        picked: list[tuple[str, str, str | None]] = []
        seen: set[str] = set()
        for message_id, sid in rows:
            if len(picked) >= count:
                break
            if sid in seen:
                continue
            (content,) = conn.execute(
                "SELECT content FROM messages WHERE id = ?", (message_id,)
            ).fetchone()
            if not content or content.startswith(JSON_PREFIX) or not terms_query(content):
                continue
            following = conn.execute(
                "SELECT content FROM messages WHERE session_id = ? AND role = 'user' AND id > ? "
                "AND content IS NOT NULL AND substr(content, 1, ?) <> ? ORDER BY id LIMIT 1",
                (sid, message_id, len(JSON_PREFIX), JSON_PREFIX),
            ).fetchone()
            seen.add(sid)
            picked.append((sid, content, following[0] if following else None))
        return picked
    finally:
        conn.close()


def median_ms(fn, rounds: int) -> float:
    return statistics.median(timed(fn, rounds))


def line(label: str, values: list[float]) -> str:
    return (
        f"{label}: p50 {statistics.median(values):.1f} ms, p95 {pct(values, 0.95):.1f} ms, "
        f"max {max(values):.1f} ms (n={len(values)})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    home: Path = args.home
    if not (home / "state.db").exists():
        print(f"building a 100k-message demo home in {home} …", flush=True)
        report = build_demo_home(home, sessions=1_000, messages=100_000, anchor_day="2026-11-30")
        print(
            f"  {report.sessions:,} sessions, {report.messages:,} messages, {report.seconds:.0f} s"
        )
    db = home / "state.db"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    sessions, messages, children = (
        conn.execute(sql).fetchone()[0]
        for sql in (
            "SELECT count(*) FROM sessions",
            "SELECT count(*) FROM messages",
            "SELECT count(*) FROM sessions WHERE parent_session_id IS NOT NULL",
        )
    )
    conn.close()
    print(f"home {home}: {sessions:,} sessions ({children:,} with a parent), {messages:,} messages")
    picked = pick_messages(db, args.messages, args.seed)
    lengths = [len(m) for _, m, _ in picked]
    print(
        f"{len(picked)} user messages from {len(picked)} sessions, "
        f"{min(lengths)}–{max(lengths)} chars (median {statistics.median(lengths):.0f})"
    )

    provider = RecallMemoryProvider(home, readonly=True)
    reader = StateReader(HermesHome(home))  # the baseline's own reader (own lineage cache)
    for sid, message, _ in picked[:3]:  # warm-up: imports, page cache, lineage caches
        provider.recall(message, session_id=sid)
        reader.search(SearchRequest(query=terms_query(message)))

    first: list[float] = []
    prefetch: list[float] = []
    raw: list[float] = []
    blocks = 0
    block_chars: list[int] = []
    for sid, message, _ in picked:
        t0 = time.perf_counter()
        text = provider.prefetch(message, session_id=sid)
        first.append((time.perf_counter() - t0) * 1000)
        blocks += bool(text)
        if text:
            block_chars.append(len(text))
        prefetch_ms, raw_ms = [], []
        request = SearchRequest(query=terms_query(message))
        for _ in range(args.rounds):
            prefetch_ms += timed(lambda m=message, s=sid: provider.prefetch(m, session_id=s), 1)
            raw_ms += timed(lambda r=request: reader.search(r), 1)
        prefetch.append(statistics.median(prefetch_ms))
        raw.append(statistics.median(raw_ms))

    # Where a prefetch spends its time: the same three steps the provider takes.
    chain_ms, own_ms, block_ms, routes = [], [], [], {}
    now = time.time()
    for sid, message, _ in picked:
        chain_ms.append(median_ms(lambda s=sid: provider.reader.chain_members(s), args.rounds))
        own = SearchRequest(
            query=terms_query(message),
            roles=RECALLED_ROLES,
            per_page=provider.max_sessions,
            exclude=tuple(provider.reader.chain_members(sid)),
            rank_window=PREFETCH_RANK_WINDOW,
        )
        found = provider.reader.search(own)
        routes[found.route] = routes.get(found.route, 0) + 1
        own_ms.append(median_ms(lambda r=own: provider.reader.search(r), args.rounds))
        block_ms.append(
            median_ms(
                lambda f=found: recalled_block(f.results, now, provider.budget_chars), args.rounds
            )
        )

    # Speculative: the previous turn queued the prefetch; this turn takes it.
    speculative: list[float] = []
    used_before = provider.stats["speculative_used"]
    for sid, message, following in picked:
        if following is None:
            continue
        provider.queue_prefetch(message, session_id=sid)
        provider._pending[1].result()  # the agent's model call gives it this long and more
        t0 = time.perf_counter()
        provider.prefetch(following, session_id=sid)
        speculative.append((time.perf_counter() - t0) * 1000)
    assert provider.stats["speculative_used"] - used_before == len(speculative)
    provider.shutdown()

    print(f"search routes of the provider's requests: {routes}")
    print(
        f"non-empty blocks: {blocks}/{len(picked)}, "
        f"{statistics.median(block_chars or [0]):.0f} chars median"
    )
    print(line("raw stage-1 search (reader.search, terms_query)", raw))
    print(
        line(
            "  provider's request alone (roles, per_page=5, chain excluded, newest 2,000 ranked)",
            own_ms,
        )
    )
    print(line("  chain lookup (reader.chain_members)", chain_ms))
    print(line("  recalled block (blocks.recalled_block)", block_ms))
    print(line("prefetch, first call per message (colder caches)", first))
    print(line("prefetch (provider.prefetch)", prefetch))
    print(line("speculative prefetch (queued block taken)", speculative))
    p95 = pct(prefetch, 0.95)
    print(
        f"prefetch_p50_ms={statistics.median(prefetch):.1f} prefetch_p95_ms={p95:.1f} "
        f"raw_search_p50_ms={statistics.median(raw):.1f} raw_search_p95_ms={pct(raw, 0.95):.1f} "
        f"speculative_p95_ms={pct(speculative, 0.95):.2f} ratio_p95={p95 / pct(raw, 0.95):.2f} "
        f"(target prefetch_p95 <= {TARGET_P95_MS:.0f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
