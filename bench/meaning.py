"""Search by meaning (issue 27): paraphrase recall on the demo's topics, and its cost at 1M.

Quality: builds (or reuses) a 600-session demo home (``recall demo --sessions 600 --seed 7
--anchor 2026-11-30``), starts a real ``recall serve`` on it as the demo it built (the one
store besides an archive it writes a meaning index into: :func:`demo_data_dir`), waits
until the server says its meaning index is ready (``meaning_index.ready`` in
``/api/search``; progress every 15 s, given up after 15 minutes), and sends each
paraphrase of ``bench/meaning_queries.yaml`` four ways:

- ``words``: ``mode=words``, the query as typed;
- ``words_or``: ``mode=words``, the query's content words joined with ``OR`` (the seed
  tool's advice for a query that finds nothing);
- ``meaning``: ``mode=meaning``;
- ``hybrid``: ``mode=hybrid``.

A card is right when its session or its chain's root belongs to the query's topic. The
truth comes from the demo's own planner: replayed with the home's seed, sessions and anchor,
it says which topic it planned each session on (checked against the home's session ids, so
a home built otherwise is refused, not scored wrongly). Each variant reports hit@5 (a right
card among the first 5) and MRR (1/rank of the first right card among the first 20, else
0) over the English queries; the Chinese ones (``lang: zh``, kept on the trigram and scan
routes) are reported apart. Last line: ``hybrid_hit5=.. hybrid_mrr=.. words_best_mrr=..
PASS|FAIL`` (issue 27: hit@5 >= 0.8, MRR >= the better words variant's + 0.25).

``--reference``: the issue's plain baseline in this process, no server: the meaning
index's embedder (WordLlama 0.4, 256-d) embeds every message of the home as the index
reads it (dashboard/meaning/embedder.message_text) and each query, floats kept whole;
sessions rank by their best message's cosine, no fusion, no chain cards. Prints ``reference_hit5=..
reference_mrr=..`` per language and a column per query: what the bundled embedder alone
finds on this set.

``--latency`` (issue 27): against the 1M home (``bench/out/home-1m``, built if missing;
served as the demo, so ``recall serve`` migrates it and writes its meaning index into it,
minutes the first time: point ``--latency-home`` at a copy you may write), the
fixed mix of bench/search.py through ``mode=words`` and ``mode=hybrid``, median of
``--rounds`` each, in alternating order. Reports both p95s (goal: hybrid p95 <= 2 x words
p95 + 30 ms) and the exact-word check: for every query where words-only found something,
hybrid's first ``EXACT_TOP`` cards hold words-only's first 3 (goal: no failure).

Usage: python bench/meaning.py [--home DIR] [--reference] [--latency] [--latency-home DIR]
[--rounds 3]
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import pct, timed, wait_idle
from bench.search import build_once, ensure_1m_home, fixed_mix
from dashboard.demo.corpus import Topic
from dashboard.demo.plan import DemoPlanner, anchor_for
from tests.support.browser_support import running_server

OUT = ROOT / "bench" / "out"
QUERIES_FILE = Path(__file__).with_name("meaning_queries.yaml")
DEFAULT_HOME = OUT / "meaning-600"
LATENCY_HOME = OUT / "home-1m"
# The labelled home: what `recall demo --sessions 600 --seed 7 --anchor 2026-11-30` builds.
SESSIONS, SEED, ANCHOR_DAY = 600, 7, "2026-11-30"
MESSAGES_PER_SESSION = 60  # the demo's default
TOP = 20  # cards read per query: the first page
HIT_AT = 5
EXACT_TOP = 10  # hybrid's cards that must hold words-only's first 3
EXACT_KEEP = 3
HIT5_TARGET = 0.8
MRR_MARGIN = 0.25
P95_FACTOR, P95_SLACK_MS = 2.0, 30.0
READY_TIMEOUT_S = 15 * 60  # the index of 1M messages takes minutes on a busy machine
VARIANTS = ("words", "words_or", "meaning", "hybrid")

WORD = re.compile(r"[^\W_]+")
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
# Words a paraphrase shares with any text: left out of the ORed query (each would match
# most messages) and of the "worded away" check of the labelled set.
STOP_WORDS = frozenset(
    """a about after again all also am an and any are aren as at be because been before
    being both but by can cannot could couldn d did didn do does doesn doing don down each
    even ever every few for from get gets got had has have having he her here him his how
    i if in into is isn it its itself just let ll m me more most my no nor not now of off
    on once one only or other our out over own re s same she should so some still such t
    than that the their them then there these they this those through to too under until
    up us ve very was wasn way we were what when where which while who whom why will with
    won would you your""".split()
)


@dataclass(frozen=True)
class Paraphrase:
    """One labelled query: its text, the topic key it belongs to, its language."""

    text: str
    topic: str
    lang: str = "en"


def load_queries(path: Path = QUERIES_FILE) -> list[Paraphrase]:
    """The labelled set, in file order."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [
        Paraphrase(str(e["q"]), str(e["topic"]), str(e.get("lang", "en"))) for e in data["queries"]
    ]


def stem(word: str) -> str:
    """A word without a simple plural ``s`` (``keys`` -> ``key``, not ``class``)."""
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def content_words(text: str) -> list[str]:
    """The words of ``text`` (unicode61's cut, lower-cased) that are not stop words or
    single letters, first occurrence order."""
    words = (w.lower() for w in WORD.findall(text))
    return list(dict.fromkeys(w for w in words if w not in STOP_WORDS and len(w) > 1))


def cjk_pairs(text: str) -> set[str]:
    """Every two adjacent CJK characters of ``text``."""
    return {run[i : i + 2] for run in CJK.findall(text) for i in range(len(run) - 1)}


def ored(text: str) -> str:
    """The seed tool's rewrite: the content words joined with ``OR``."""
    return " OR ".join(content_words(text))


# -- the truth ----------------------------------------------------------------------------


def planned_topics(
    seed: int = SEED,
    sessions: int = SESSIONS,
    messages: int | None = None,
    anchor_day: str = ANCHOR_DAY,
) -> dict[str, str | None]:
    """Each session id of the demo home these arguments build, with the topic key the
    demo's planner wrote it on (None for scheduled-job sessions and the scripted story's
    conversations, demo/story.py, which have none).

    The planner picks a topic once per conversation and writes every session of it
    (segments, branches, resets, subagents) on that topic; a cron session belongs to none.
    """
    total = messages if messages is not None else sessions * MESSAGES_PER_SESSION
    planner = DemoPlanner(seed, anchor_for(anchor_day), sessions, total)
    picked: list[str] = []
    pick = planner.corpus.pick_topic

    def noting(chinese: bool) -> Topic:
        topic = pick(chinese)
        picked.append(topic.key)
        return topic

    planner.corpus.pick_topic = noting  # type: ignore[method-assign]
    return {
        p.record.id: None if p.story or p.record.source == "cron" else picked[-1]
        for p in planner.sessions()
    }


def check_home(db: Path, topics: dict[str, str | None]) -> None:
    """Refuse a home whose sessions are not the planned ones (another seed, anchor or
    size): its cards would be scored against another home's truth."""
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        ids = {sid for (sid,) in conn.execute("SELECT id FROM sessions")}
    if ids != set(topics):
        raise SystemExit(
            f"{db} holds {len(ids)} sessions, {len(ids & set(topics))} of them planned by "
            f"the demo with seed {SEED}, {SESSIONS} sessions, anchor {ANCHOR_DAY}: build it "
            "again (remove the folder)"
        )


def right(card: dict, topic: str, topics: dict[str, str | None]) -> bool:
    """A card is right when its session or its chain's root is on ``topic``."""
    return topic in (topics.get(card["session_id"]), topics.get(card.get("root_session_id")))


def first_right(cards: list[dict], topic: str, topics: dict[str, str | None]) -> int | None:
    """The rank (1-based) of the first right card among the first ``TOP``, else None."""
    for rank, card in enumerate(cards[:TOP], start=1):
        if right(card, topic, topics):
            return rank
    return None


def hit_at(ranks: list[int | None], k: int = HIT_AT) -> float:
    """The share of queries with a right card among the first ``k``."""
    return sum(1 for r in ranks if r is not None and r <= k) / len(ranks) if ranks else 0.0


def mrr(ranks: list[int | None]) -> float:
    """Mean reciprocal rank of the first right card (0 when none in the first ``TOP``)."""
    return sum(1 / r for r in ranks if r is not None) / len(ranks) if ranks else 0.0


def quality_met(scores: dict[str, tuple[float, float]]) -> bool:
    """Issue 27's goals on the English paraphrases: hybrid hit@5 >= 0.8 and its MRR at
    least 0.25 above the better words-only variant's."""
    hybrid_hit, hybrid_mrr = scores["hybrid"]
    words_best = max(scores["words"][1], scores["words_or"][1])
    return hybrid_hit >= HIT5_TARGET and hybrid_mrr >= words_best + MRR_MARGIN


def latency_met(hybrid_p95: float, words_p95: float, exact_failures: int) -> bool:
    """Issue 27's cost goals: hybrid p95 <= 2 x words p95 + 30 ms, exact words kept."""
    return hybrid_p95 <= P95_FACTOR * words_p95 + P95_SLACK_MS and exact_failures == 0


def card_key(card: dict) -> str:
    """What names a card across modes: its chain's root, else its session."""
    return card.get("root_session_id") or card["session_id"]


def exact_kept(words_cards: list[dict], hybrid_cards: list[dict]) -> bool:
    """Hybrid's first ``EXACT_TOP`` cards hold words-only's first ``EXACT_KEEP``."""
    kept = {card_key(c) for c in hybrid_cards[:EXACT_TOP]}
    return all(card_key(c) in kept for c in words_cards[:EXACT_KEEP])


# -- the plain embedder's baseline ---------------------------------------------------------


def reference_ranks(
    db: Path, queries: list[Paraphrase], topics: dict[str, str | None]
) -> list[int | None]:
    """Each query's rank of the first right session when sessions rank by their best
    message's cosine with the query under plain WordLlama (``--reference``): the meaning
    index's embedder and texts, its floats kept whole (no sign bits), nothing fused."""
    import numpy as np  # only this baseline needs them

    from dashboard.meaning.embedder import WordLlamaEmbedder, message_text

    embedder = WordLlamaEmbedder()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # wordllama logs at INFO
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        read = conn.execute("SELECT session_id, role, content, tool_calls FROM messages")
        rows = [(sid, text) for sid, *msg in read if (text := message_text(*msg))]
    began = time.perf_counter()
    vectors = embedder.embed([text for _, text in rows])
    print(f"reference: {len(rows):,} messages embedded in {time.perf_counter() - began:.1f} s")
    ids = sorted({sid for sid, _ in rows})
    column = {sid: i for i, sid in enumerate(ids)}
    owner = np.array([column[sid] for sid, _ in rows])
    ranks: list[int | None] = []
    for p in queries:
        best = np.full(len(ids), -np.inf, dtype=np.float32)
        np.maximum.at(best, owner, vectors @ embedder.embed([p.text])[0])
        cards = [{"session_id": ids[i]} for i in np.argsort(-best)[:TOP]]
        ranks.append(first_right(cards, p.topic, topics))
    return ranks


# -- the server ---------------------------------------------------------------------------


def variant_params(variant: str, p: Paraphrase) -> dict[str, str]:
    """The ``/api/search`` parameters of one variant of a paraphrase."""
    if variant == "words_or":
        return {"q": ored(p.text) or p.text, "mode": "words"}
    return {"q": p.text, "mode": variant}


def wait_ready(client: httpx.Client, timeout_s: float = READY_TIMEOUT_S) -> bool:
    """Wait until the server's meaning index is ready, saying how far it is every 15 s.
    False at once when the server has no meaning index (it answers words only)."""
    began = said = time.monotonic()
    while True:
        body = client.get("/api/search", params={"q": "x"}).json()
        index = body.get("meaning_index")
        if index is None:
            print("the server reports no meaning_index: modes are ignored, words only")
            return False
        if index.get("ready"):
            print(
                f"meaning index ready after {time.monotonic() - began:.0f} s "
                f"({index.get('covered', 0):,}/{index.get('total', 0):,})",
                flush=True,
            )
            return True
        if time.monotonic() - began > timeout_s:
            raise SystemExit(
                f"the meaning index was not ready after {timeout_s:.0f} s "
                f"({index.get('covered', 0):,}/{index.get('total', 0):,}): no meaning figures"
            )
        if time.monotonic() - said >= 15:
            said = time.monotonic()
            print(
                f"  meaning index: {index.get('covered', 0):,}/{index.get('total', 0):,} "
                f"({time.monotonic() - began:.0f} s)",
                flush=True,
            )
        time.sleep(2)


def demo_data_dir(home: Path) -> Path:
    """A data folder whose demo home is ``home`` (a link to it): ``recall serve
    --data-dir`` on it serves ``home`` as the demo it built, the one Recall store besides
    an archive it writes a meaning index into (a store given with ``--home`` is only
    read, so its index would never be ready)."""
    data = OUT / f"serve-{home.name}"
    data.mkdir(parents=True, exist_ok=True)
    link = data / "demo-home"
    if link.is_symlink() and link.resolve() != home.resolve():
        link.unlink()
    if not link.is_symlink():
        link.symlink_to(home.resolve(), target_is_directory=True)
    return data


@contextmanager
def ready_server(home: Path) -> Iterator[httpx.Client]:
    """A ``recall serve`` on the demo home ``home`` with its meaning index built and its
    start's background work done; a client to it."""
    # No Hermes home to find: neither $HERMES_HOME nor a ~/.hermes (HOME is an empty
    # folder), so the demo home of --data-dir is the one served.
    nowhere = OUT / "no-hermes"
    nowhere.mkdir(parents=True, exist_ok=True)
    env = {"HERMES_HOME": "", "HOME": str(nowhere)}
    with (
        running_server(["--data-dir", str(demo_data_dir(home))], OUT, env) as srv,
        httpx.Client(base_url=srv.url, timeout=120) as client,
    ):
        wait_ready(client)
        print(f"server idle after {wait_idle(srv.process.pid):.0f} s", flush=True)
        yield client


def search(client: httpx.Client, params: dict[str, str]) -> dict:
    """One ``/api/search`` answer."""
    response = client.get("/api/search", params=params)
    response.raise_for_status()
    return response.json()


# -- the two measurements -----------------------------------------------------------------


def measure_quality(
    client: httpx.Client,
    queries: list[Paraphrase],
    topics: dict[str, str | None],
    reference: list[int | None] | None = None,
) -> dict[str, dict[str, list[int | None]]]:
    """Each query's rank of the first right card per variant (and ``reference``'s, when
    given), by language; prints a line per query and notes a mode the server did not run."""
    ranks: dict[str, dict[str, list[int | None]]] = {}
    ignored: set[str] = set()
    names = [*VARIANTS, *(["reference"] if reference else [])]
    print(f"{'topic':<22} " + " ".join(f"{v:>9}" for v in names) + "  query")
    for i, p in enumerate(queries):
        found: dict[str, int | None] = {}
        for variant in VARIANTS:
            params = variant_params(variant, p)
            body = search(client, params)
            if body.get("mode", params["mode"]) != params["mode"]:
                ignored.add(variant)
            found[variant] = first_right(body["results"], p.topic, topics)
        if reference:
            found["reference"] = reference[i]
        for name, rank in found.items():
            ranks.setdefault(p.lang, {}).setdefault(name, []).append(rank)
        print(
            f"{p.topic:<22} " + " ".join(f"{r or '-':>9}" for r in found.values()) + f"  {p.text}"
        )
    if ignored:
        print(f"the server answered other modes than asked for: {', '.join(sorted(ignored))}")
    return ranks


def report_quality(ranks: dict[str, dict[str, list[int | None]]]) -> bool:
    """Print hit@5 and MRR per variant and language, then the verdict line."""
    scores: dict[str, tuple[float, float]] = {}
    for lang, per in sorted(ranks.items()):
        n = len(next(iter(per.values())))
        for variant in per:
            h, m = hit_at(per[variant]), mrr(per[variant])
            if lang == "en":
                scores[variant] = (h, m)
            print(f"{lang} ({n} queries) {variant}_hit5={h:.2f} {variant}_mrr={m:.2f}")
    if "en" not in ranks:
        return False
    passed = quality_met(scores)
    words_best = max(scores["words"][1], scores["words_or"][1])
    print(
        f"hybrid_hit5={scores['hybrid'][0]:.2f} (target >= {HIT5_TARGET}) "
        f"hybrid_mrr={scores['hybrid'][1]:.2f} words_best_mrr={words_best:.2f} "
        f"(target hybrid >= words_best + {MRR_MARGIN}) {'PASS' if passed else 'FAIL'}"
    )
    return passed


def measure_latency(client: httpx.Client, rounds: int) -> bool:
    """bench/search.py's fixed mix through words and hybrid: p95s and the exact-word
    check; prints a line per query and the verdict line."""
    words_ms: list[float] = []
    hybrid_ms: list[float] = []
    failures = checked = ignored = 0
    print(f"{'class':<8} {'query':<26} {'words_ms':>8} {'hybrid_ms':>9}  words/hybrid  exact")
    for i, mq in enumerate(fixed_mix()):
        asks: dict[str, Callable[[], dict]] = {
            mode: lambda mode=mode, q=mq.text: search(client, {"q": q, "mode": mode})
            for mode in ("words", "hybrid")
        }
        words, hybrid = asks["words"](), asks["hybrid"]()  # first requests: not timed
        if hybrid.get("mode", "words") != "hybrid":
            ignored += 1
        samples: dict[str, list[float]] = {"words": [], "hybrid": []}
        order = ["words", "hybrid"] if i % 2 == 0 else ["hybrid", "words"]
        for _ in range(rounds):  # alternating, so the machine's noise falls on both alike
            for mode in order:
                samples[mode] += timed(asks[mode], 1)
        w, h = statistics.median(samples["words"]), statistics.median(samples["hybrid"])
        words_ms.append(w)
        hybrid_ms.append(h)
        exact = "-"
        if words["results"]:
            checked += 1
            kept = exact_kept(words["results"], hybrid["results"])
            failures += not kept
            exact = "ok" if kept else "LOST"
        found = f"{words['total_sessions']}/{hybrid['total_sessions']}"
        print(f"{mq.kind:<8} {mq.text:<26} {w:8.1f} {h:9.1f}  {found:<12}  {exact}")
    if ignored:
        print(f"the server answered {ignored} hybrid queries in another mode: words against words")
    words_p95, hybrid_p95 = pct(words_ms, 0.95), pct(hybrid_ms, 0.95)
    passed = latency_met(hybrid_p95, words_p95, failures) and not ignored
    print(
        f"words_p50_ms={statistics.median(words_ms):.1f} "
        f"hybrid_p50_ms={statistics.median(hybrid_ms):.1f}; load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"words_p95_ms={words_p95:.1f} hybrid_p95_ms={hybrid_p95:.1f} "
        f"(target <= {P95_FACTOR:g} x words + {P95_SLACK_MS:g} = "
        f"{P95_FACTOR * words_p95 + P95_SLACK_MS:.1f}) exact_lost={failures} of {checked} "
        f"(target 0) {'NOT MEASURED' if ignored else 'PASS' if passed else 'FAIL'}"
    )
    return passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--reference", action="store_true", help="also plain WordLlama, in process")
    parser.add_argument("--latency", action="store_true", help="also hybrid's cost at 1M")
    parser.add_argument("--latency-home", type=Path, default=LATENCY_HOME)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    home: Path = args.home
    if not (home / "state.db").exists():
        print(f"building the labelled demo home in {home} …", flush=True)
        build_once(home, sessions=SESSIONS, messages=SESSIONS * MESSAGES_PER_SESSION, seed=SEED)
    topics = planned_topics()
    check_home(home / "state.db", topics)
    queries = load_queries()
    on = {key for key in topics.values() if key}
    print(
        f"home {home}: {len(topics)} sessions on {len(on)} topics; {len(queries)} queries "
        f"on {len({p.topic for p in queries})} topics; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    missing = sorted({p.topic for p in queries} - on)
    if missing:
        raise SystemExit(f"no session of the home is on {', '.join(missing)}")
    reference = reference_ranks(home / "state.db", queries, topics) if args.reference else None
    with ready_server(home) as client:
        passed = report_quality(measure_quality(client, queries, topics, reference))
    if args.latency:
        ensure_1m_home(args.latency_home)
        print(f"== latency: {args.latency_home}, {args.rounds} rounds ==", flush=True)
        with ready_server(args.latency_home) as client:
            passed = measure_latency(client, args.rounds) and passed
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
