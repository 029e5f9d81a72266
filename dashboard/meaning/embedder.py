"""What a message means, as a vector: the embedder that ships inside a registry package.

WordLlama 0.4 (MIT) is a static embedder: a token's vector is a row of a 256-d table,
a text's vector their weighted mean. Its weights and tokenizer are files inside the
wheel, so it runs offline on one core (~5,000 short messages a second here, PERF_NOTES)
with nothing downloaded, ever: 0.4 looks for its tokenizer in a folder that does not
exist in the wheel (``tokenizer/`` beside ``tokenizers/``) and would then download it,
so it is loaded with its own package folder as its cache folder, where both files
are, and downloads disabled (:func:`load_wordllama`).

The archive keeps each vector as 256 sign bits (:func:`sign_codes`, 32 bytes a
message); index.py compares a query's floats with them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx
import numpy as np

from dashboard.hermes.content import decode_content
from dashboard.text import readable, readable_tool_calls

DIMS = 256
CODE_BYTES = DIMS // 8
#: Characters of a message embedded: a static embedder averages its tokens, so the
#: opening of a long tool output says what it is about as well as all of it would.
TEXT_CHARS = 2_000
WORDLLAMA = "wordllama-0.4-l2_supercat-256"


class Embedder(Protocol):
    """Texts to unit vectors of :data:`DIMS` floats; ``name`` says which vectors they
    are (an archive's codes are only comparable with the same embedder's)."""

    name: str

    def embed(self, texts: list[str]) -> np.ndarray: ...


@dataclass
class WordLlamaEmbedder:
    """The bundled embedder (see the module)."""

    name: str = WORDLLAMA

    def __post_init__(self) -> None:
        self._model = load_wordllama()
        self._lock = threading.Lock()  # one embedding at a time: its tokenizer is shared

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts``, in their order. WordLlama pads each batch to its
        longest text and gathers a (batch × longest × 256) array: batches of texts of
        like length waste none of it (4,096 demo messages: 3.5 s in their order, 1.0 s
        sorted by length in batches of 32; the same vectors)."""
        if not texts:
            return np.zeros((0, DIMS), dtype=np.float32)
        order = np.argsort([len(t) for t in texts], kind="stable")
        with self._lock:
            vectors = self._model.embed([texts[i] for i in order], norm=True, batch_size=32)
        out = np.empty((len(texts), DIMS), dtype=np.float32)
        out[order] = vectors
        return out


ENDPOINT_BATCH = 256  # texts a request to an embeddings endpoint


class EmbedderUnavailable(Exception):
    """The embeddings endpoint did not answer, or not with embeddings."""


@dataclass
class EndpointEmbedder:
    """A stronger model behind an OpenAI-compatible ``/v1/embeddings`` (a local Ollama
    with a multilingual model, say), configured like the summary endpoint. Its vectors
    are not the bundled ones: an index built by one is rebuilt for the other."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 60.0
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        self.name = endpoint_name(self.base_url, self.model)
        self._client = httpx.Client(timeout=self.timeout)

    def embed(self, texts: list[str]) -> np.ndarray:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        rows: list[list[float]] = []
        try:
            for start in range(0, len(texts), ENDPOINT_BATCH):
                batch = texts[start : start + ENDPOINT_BATCH]
                answer = self._client.post(
                    f"{self.base_url}/embeddings",
                    json={"model": self.model, "input": batch},
                    headers=headers,
                )
                answer.raise_for_status()
                data = sorted(answer.json()["data"], key=lambda d: d["index"])
                if len(data) != len(batch):
                    raise ValueError(f"{len(data)} embeddings for {len(batch)} texts")
                rows.extend(d["embedding"] for d in data)
            vectors = np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise EmbedderUnavailable(f"{self.base_url}: {exc}") from exc
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)


def endpoint_name(base_url: str, model: str) -> str:
    return f"endpoint:{model}@{base_url.rstrip('/')}"


@dataclass(frozen=True)
class EmbedderChoice:
    """Which embedder this process uses: an endpoint when ``RECALL_EMBED_BASE_URL`` and
    ``RECALL_EMBED_MODEL`` are set (``recall serve --embed-base-url/--embed-model`` set
    them), else the bundled one. Read from the environment, so the server and its
    worker process agree."""

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> EmbedderChoice:
        base, model = environ.get("RECALL_EMBED_BASE_URL"), environ.get("RECALL_EMBED_MODEL")
        if base and model:
            return cls(base, model, environ.get("RECALL_EMBED_API_KEY") or None)
        return cls()

    @property
    def calls_a_model(self) -> bool:
        """An endpoint: each query's vector is a call to it (a side effect)."""
        return bool(self.base_url and self.model)

    @property
    def name(self) -> str:
        if self.base_url and self.model:
            return endpoint_name(self.base_url, self.model)
        return WORDLLAMA

    def make(self) -> Embedder:
        if self.base_url and self.model:
            return EndpointEmbedder(self.base_url, self.model, self.api_key)
        return WordLlamaEmbedder()


def configured_embedder() -> Embedder:
    """The embedder :class:`EmbedderChoice` names for this process's environment."""
    return EmbedderChoice.from_env().make()


_loaded: object | None = None
_load_lock = threading.Lock()


def load_wordllama() -> object:
    """WordLlama's 256-d model from its own package folder, downloads disabled; loaded
    once per process (0.2 s, 16 MB of weights)."""
    global _loaded
    with _load_lock:
        if _loaded is None:
            import wordllama  # imported here: `import dashboard` stays light for the CLI

            folder = Path(wordllama.__file__).parent
            _loaded = wordllama.WordLlama.load(
                config="l2_supercat", dim=DIMS, cache_dir=folder, disable_download=True
            )
    return _loaded


def sign_codes(vectors: np.ndarray) -> np.ndarray:
    """Each vector's signs as bits (uint8), in whole 64-bit words: a width that is not a
    multiple of 64 (an endpoint's model) ends with False bits, the same in every code."""
    signs = vectors > 0
    short = -signs.shape[1] % 64
    if short:
        signs = np.hstack([signs, np.zeros((signs.shape[0], short), dtype=bool)])
    return np.packbits(signs, axis=1)


def message_text(role: str, content: str | None, tool_calls: str | None) -> str:
    """The text of a message that says what it is about, as a person would read it:
    structured content decoded, JSON tool output as its strings, a tool call as its
    name and arguments; the first :data:`TEXT_CHARS` characters. Empty: nothing to embed."""
    text = readable(decode_content(content)) if content else ""
    if tool_calls:
        text = (
            f"{text}\n{readable_tool_calls(tool_calls)}"
            if text
            else readable_tool_calls(tool_calls)
        )
    text = text.strip()
    if role == "system":
        return ""  # the same prompt in every session: it would make them all alike
    return text[:TEXT_CHARS]
