"""The bundled embedder loads and runs with no network and writes nothing outside its
package (CI has no network either; this proves it rather than relying on it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from dashboard.meaning.embedder import CODE_BYTES, DIMS, WordLlamaEmbedder, message_text, sign_codes

ROOT = Path(__file__).resolve().parents[2]

_OFFLINE = """
import socket
def refuse(*args, **kwargs):
    raise OSError("network used")
socket.socket.connect = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
from dashboard.meaning.embedder import WordLlamaEmbedder
vectors = WordLlamaEmbedder().embed(["the containers could not reach each other"])
print(vectors.shape[1], round(float((vectors ** 2).sum()), 3))
"""


def test_it_loads_offline_from_its_own_package(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "XDG_CACHE_HOME": ""}
    done = subprocess.run(
        [sys.executable, "-c", _OFFLINE], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{DIMS} 1.0"]
    assert list(tmp_path.iterdir()) == []  # no cache folder made in the home


def test_close_meanings_are_closer_than_unrelated_ones() -> None:
    embedder = WordLlamaEmbedder()
    query, near, far = embedder.embed(
        [
            "the time the containers couldn't talk to each other",
            "docker compose service cannot reach postgres on the network",
            "a recipe for lemon cake with icing",
        ]
    )
    assert float(query @ near) > float(query @ far) + 0.1


def test_codes_are_the_signs() -> None:
    vectors = np.array([[1.0, -1.0] * (DIMS // 2), [-0.5] * DIMS], dtype=np.float32)
    codes = sign_codes(vectors)
    assert codes.shape == (2, CODE_BYTES)
    assert codes[0].tobytes() == b"\xaa" * CODE_BYTES and codes[1].tobytes() == b"\x00" * CODE_BYTES


def test_a_messages_text_is_what_a_person_reads() -> None:
    call = '[{"function": {"name": "terminal", "arguments": "{\\"command\\": \\"docker ps\\"}"}}]'
    assert message_text("assistant", "", call) == "terminal: command=docker ps"
    assert message_text("tool", '{"output": "no space left"}', None) == "no space left"
    assert message_text("system", "You are Hermes", None) == ""
    assert message_text("user", "x" * 5000, None) == "x" * 2000
