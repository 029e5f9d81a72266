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

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

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
    """Each vector's signs as bits, :data:`CODE_BYTES` bytes a row (uint8)."""
    return np.packbits(vectors > 0, axis=1)


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
