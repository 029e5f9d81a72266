"""The meaning index's worker process, seen from ``recall serve`` (see __main__.py)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path


class MeaningWorker:
    """One ``python -m dashboard.meaning`` child building the index of ``path``:
    started on the first :meth:`wake`, woken after each sync pass, started again if it
    died, stopped with the server."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._process: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self._stopped = False

    def wake(self) -> None:
        """Start the worker, or tell it that new rows may have landed."""
        with self._lock:
            if self._stopped:
                return
            process = self._process
            if process is None or process.poll() is not None:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "dashboard.meaning", str(self.path)],
                    stdin=subprocess.PIPE,
                    text=True,
                )
                return
            try:
                assert process.stdin is not None
                process.stdin.write("\n")
                process.stdin.flush()
            except (BrokenPipeError, OSError):
                pass  # it is ending; the next wake starts another

    def stop(self) -> None:
        """End the worker: its stdin closes (it exits between batches), then a
        terminate if it is mid-batch (the batch is lost; the next start redoes it)."""
        with self._lock:
            self._stopped = True
            process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()
        except OSError:
            pass
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
