"""Run a real ``recall serve`` and drive Debian's Chromium through Playwright."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

CHROMIUM = os.environ.get("RECALL_CHROMIUM", "/usr/bin/chromium")
# Flags that keep Chromium from calling out of this offline machine.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    process: subprocess.Popen[str]
    log: Path


@contextmanager
def running_server(
    args: list[str],
    workdir: Path,
    env: dict[str, str] | None = None,
    *,
    wait_for_import: bool = True,
) -> Iterator[Server]:
    """Start ``recall serve ARGS`` on a free port and wait until /healthz answers (and,
    with ``wait_for_import``, until the archive's first sync has finished or failed)."""
    port = free_port()
    log = workdir / f"serve-{port}.log"
    full_env = {**os.environ, **(env or {})}
    with (
        log.open("w") as out,
        subprocess.Popen(
            [sys.executable, "-m", "dashboard.cli", "serve", "--port", str(port), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env=full_env,
        ) as proc,
    ):
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"recall serve exited: {log.read_text()}")
                try:
                    health = httpx.get(f"{url}/healthz", timeout=1.0).json()
                    sync = health.get("sync")
                    if not wait_for_import or not sync or sync["last_sync_at"] or sync["reason"]:
                        break
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the first import did not finish: {log.read_text()}")
                    time.sleep(0.2)
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            yield Server(url, proc, log)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


@dataclass
class PageWatch:
    """Console errors and failed requests seen by one page."""

    problems: list[str] = field(default_factory=list)

    def attach(self, page) -> None:
        page.on(
            "console", lambda m: m.type == "error" and self.problems.append(f"console: {m.text}")
        )
        page.on("pageerror", lambda e: self.problems.append(f"pageerror: {e}"))
        # ERR_ABORTED is the browser cancelling a request because the page moved
        # on (a navigation mid-load), not a request that failed.
        page.on(
            "requestfailed",
            lambda r: (
                "ERR_ABORTED" not in (r.failure or "")
                and self.problems.append(f"failed: {r.url} {r.failure}")
            ),
        )

        def on_response(response) -> None:
            if response.status >= 400:
                self.problems.append(f"http {response.status}: {response.url}")

        page.on("response", on_response)
