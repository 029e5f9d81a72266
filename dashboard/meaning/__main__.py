"""``python -m dashboard.meaning ARCHIVE``: the meaning index's worker process.

``recall serve`` runs the builder here, not on one of its own threads: embedding is
CPU work, and a thread of the server's would hold the GIL its request threads and its
syncer need (measured: a test's truncation was reported late enough for the writer to
act first). It steps until the index is complete, then waits for a line on stdin (a
sync pass added rows) or :data:`builder.IDLE_S`; end of stdin (the server gone) ends it.
It runs at a lower priority, and a kill at any moment loses at most one batch.
"""

from __future__ import annotations

import os
import select
import sys

from dashboard.meaning.builder import ERROR_WAIT_S, IDLE_S, MeaningBuilder


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m dashboard.meaning ARCHIVE", file=sys.stderr)
        return 2
    os.nice(10)
    builder = MeaningBuilder(argv[0])
    said = ""
    while True:
        try:
            done = builder.step()
        except Exception as exc:  # noqa: BLE001 - a bad moment of the file: try again later
            if str(exc) != said:  # once per fault, not every half minute
                said = str(exc)
                print(f"recall: the meaning index cannot be written now: {exc}", file=sys.stderr)
            builder.close()
            done, wait = 0, ERROR_WAIT_S
        else:
            wait = IDLE_S
        if done:
            continue
        ready, _, _ = select.select([sys.stdin], [], [], wait)
        if ready and not sys.stdin.readline():
            return 0  # the server closed our stdin: it is gone


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
