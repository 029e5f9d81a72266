"""How fast the demo's conversation generator writes messages, and how long they are.

python bench/corpus.py [turns] [seed]
"""

from __future__ import annotations

import random
import sys
import time

from dashboard.demo.corpus import Corpus, Msg


def bench(turns: int, seed: int) -> None:
    """Generate ``turns`` mixed turns and print throughput and length statistics."""
    t0 = time.perf_counter()
    corpus = Corpus(random.Random(seed))
    setup = time.perf_counter() - t0
    rng = random.Random(seed + 1)
    count = 0
    chars = 0
    by_role: dict[str, list[int]] = {}
    start = time.perf_counter()
    topic = corpus.pick_topic(False)
    for i in range(turns):
        if i % 8 == 0:
            topic = corpus.pick_topic(rng.random() < 0.1)
        r = rng.random()
        if r < 0.04:
            msgs = corpus.cron_turn(i % 3)
        elif r < 0.08:
            msgs = corpus.subagent_turn(topic, i % 2)
        else:
            msgs = corpus.turn(topic, i % 8)
        if i % 40 == 0:
            msgs.append(Msg("user", corpus.compaction_summary(topic, i % 5, i % 80 == 0)))
        for m in msgs:
            n = len(m.content or "")
            chars += n
            by_role.setdefault(m.role, []).append(n)
        count += len(msgs)
    elapsed = time.perf_counter() - start
    print(f"setup {setup * 1000:.1f} ms; {turns} turns -> {count} messages in {elapsed:.2f} s")
    print(f"{count / elapsed:,.0f} messages/s, {elapsed / count * 1e6:.1f} us/message")
    print(f"average content length {chars / count:.0f} chars")
    for role, sizes in sorted(by_role.items()):
        sizes.sort()
        mid = sizes[len(sizes) // 2]
        p95 = sizes[int(len(sizes) * 0.95)]
        print(
            f"  {role:9} n={len(sizes):>8} avg={sum(sizes) / len(sizes):6.0f} "
            f"median={mid:5} p95={p95:5} max={sizes[-1]}"
        )


if __name__ == "__main__":
    bench(
        int(sys.argv[1]) if len(sys.argv) > 1 else 50_000,
        int(sys.argv[2]) if len(sys.argv) > 2 else 7,
    )
