"""An OpenAI-compatible chat-completions and embeddings server on 127.0.0.1, for tests
and benches.

It records every request (headers, body) and how many were in flight at once,
and can answer slowly, with a 500, with malformed JSON or with an empty reply.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

EMBED_DIMS = 96  # not a multiple of 64: a code's last word is padded


def bag_of_words(text: str) -> list[float]:
    """A stand-in embedding: each word counted in one of :data:`EMBED_DIMS` buckets
    (crc32), so texts sharing words lie close and others do not."""
    vector = [0.0] * EMBED_DIMS
    for word in text.lower().split():
        vector[zlib.crc32(word.strip(".,?!").encode()) % EMBED_DIMS] += 1.0
    return vector


class StubLLM:
    """A real HTTP server in a background thread; ``url`` is its ``/v1`` base URL."""

    def __init__(
        self,
        *,
        delay: float = 0.0,
        mode: str = "ok",
        reply: Callable[[dict[str, Any]], str] | None = None,
    ) -> None:
        self.delay = delay
        self.mode = mode  # ok | error500 | malformed | empty
        self.reply = reply  # the chat reply's text for a request body (else a recap)
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with stub._lock:
                    stub.requests.append(
                        {"path": self.path, "headers": dict(self.headers), "body": body}
                    )
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                try:
                    time.sleep(stub.delay)
                    status, payload = stub.answer(body)
                finally:
                    # Done before the reply is written: a client that has the reply may
                    # send its next request at once, and on a loaded machine that one
                    # could be counted before this thread got back here (limit + 1).
                    with stub._lock:
                        stub.in_flight -= 1
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): that is the point of some tests

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
        if self.mode == "error500":
            return 500, {"error": {"message": "upstream exploded"}}
        if self.mode == "malformed":
            return 200, b"{not json"
        if self.mode == "empty":
            return 200, {"choices": [{"message": {"role": "assistant", "content": ""}}]}
        if "input" in body:  # /v1/embeddings
            return 200, {
                "object": "list",
                "model": body.get("model"),
                "data": [
                    {"object": "embedding", "index": i, "embedding": bag_of_words(text)}
                    for i, text in enumerate(body["input"])
                ],
            }
        prompt = body["messages"][-1]["content"]
        topic = prompt.split("\n", 1)[0].removeprefix("Search topic: ")
        text = f"The user worked on **{topic}**. They fixed it and wrote down the commands."
        if self.reply is not None:
            text = self.reply(body)
        return 200, {
            "id": "stub",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": text},
                }
            ],
        }

    def __enter__(self) -> StubLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)
