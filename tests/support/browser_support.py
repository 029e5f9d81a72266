"""Run a real ``recall serve`` and drive Debian's Chromium through Playwright."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
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
    wrapper: Sequence[str] = (),
) -> Iterator[Server]:
    """Start ``recall serve ARGS`` on a free port and wait until /healthz answers (and,
    with ``wait_for_import``, until the archive's first sync has finished or failed).

    A free port is free only until someone binds it: another test worker's server or
    an outgoing connection may take it before ``recall serve`` does. So the server
    counts as up only once its own log says it serves that port (it says so after
    binding it; another server on the port could answer /healthz too), and a port
    taken in between is given up for another one. ``wrapper`` runs before the command
    and must ``exec`` it (the server keeps the process's id: :func:`on_small_disk`).
    """
    full_env = {**os.environ, **(env or {})}
    for _ in range(PORT_TRIES):
        port = free_port()
        log = workdir / f"serve-{port}.log"
        with (
            log.open("w") as out,
            subprocess.Popen(
                [
                    *wrapper,
                    *(sys.executable, "-m", "dashboard.cli", "serve", "--port", str(port)),
                    *args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                env=full_env,
            ) as proc,
        ):
            url = f"http://127.0.0.1:{port}"
            try:
                if not _wait_until_up(proc, log, url, wait_for_import):
                    continue  # the port was taken before the server bound it
                yield Server(url, proc, log)
                return
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
    raise RuntimeError(f"no free port for recall serve in {PORT_TRIES} tries")


PORT_TRIES = 5


def on_small_disk(folder: Path, kilobytes: int) -> list[str]:
    """A :func:`running_server` wrapper: the server runs in a mount namespace of its own
    where ``folder`` is a tmpfs of ``kilobytes`` (a real disk that fills, gone with the
    process; root only, as the tests run). The test reaches the folder as the server sees
    it through ``/proc/<pid>/root``: :func:`seen_by`."""
    script = f'mount -t tmpfs -o size={kilobytes}k,mode=0700 recall-test "$0" && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, str(folder)]


def seen_by(server: Server, path: Path) -> Path:
    """``path`` as the server's process sees it (its own mounts: :func:`on_small_disk`)."""
    return Path(f"/proc/{server.process.pid}/root") / path.resolve().relative_to("/")


def _wait_until_up(proc: subprocess.Popen[str], log: Path, url: str, wait_for_import: bool) -> bool:
    """True once the server on ``url`` is this process and ready; False if its port was
    taken (it exits saying so)."""
    deadline = time.monotonic() + 120
    serving = f"at {url}/"
    while True:
        if proc.poll() is not None:
            said = log.read_text()
            if "is already in use" in said:
                return False
            raise RuntimeError(f"recall serve exited: {said}")
        if serving in log.read_text():
            try:
                health = httpx.get(f"{url}/healthz", timeout=1.0).json()
                sync = health.get("sync")
                settled = sync and (
                    sync["last_sync_at"] or sync["reason"] or sync.get("folder_reason")
                )
                if not wait_for_import or not sync or settled:
                    return True
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the first import did not finish: {log.read_text()}")
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
        elif time.monotonic() > deadline:
            raise TimeoutError(f"recall serve did not start: {log.read_text()}")
        time.sleep(0.2)


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
