"""The trigram index of a first import, built beside the copy on a second core.

A first import spends most of its time in the trigram index (about 58 % of it at
100k messages, when built by one FTS5 ``rebuild`` after the copy), while the copy and
the word index run on one core and the other one idles. :class:`TrigramBuild`
indexes each batch the import commits, in a scratch file of its own (FTS5 writes
cannot share the archive's single writer), on a thread of its own: SQLite lets go
of the GIL while it works, so the two run in parallel. At the end
:meth:`TrigramBuild.copy_into` copies the finished index's shadow tables into the
archive in one transaction, after checking it covers exactly the archive's messages.

Only for an archive with no message at the start of the import: every row it ends
with then came through a batch this build was given. Anything else (a resumed
import, another home's rows already there) is the plain ``rebuild``, as is any
failure here: the scratch file is a cache, never the only copy of anything.

The adoption runs on a connection of its own, never the archive writer's: FTS5
caches an index's structure per connection and only re-reads it when another
connection changed the file (``PRAGMA data_version``), so shadow tables rewritten
by the writer itself would leave it reading the empty index it had cached.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dashboard.store import schema
from dashboard.store.readonly import readonly_uri

TRIGRAM = schema.FTS_TABLES[1]
#: The FTS5 shadow tables an external-content index keeps (``_content`` it has none).
SHADOW_TABLES = ("data", "idx", "docsize", "config")
SCRATCH_SUFFIX = ".trigram-build"
_ARCHIVE = "archive"  # the archive's schema name on the build's connection
BUILT_SCHEMA = "trigram_build"  # the scratch file's schema name on the adopting connection


class BuildFailed(Exception):
    """The scratch index cannot stand in for a rebuild; the reason is the message."""


def scratch_path(archive: Path) -> Path:
    """Where an archive's side build keeps its index (beside it, so on the same disk)."""
    return archive.with_name(archive.name + SCRATCH_SUFFIX)


def discard(archive: Path) -> None:
    """Remove a scratch index an earlier import left (killed, or failed)."""
    for suffix in ("", "-journal", "-wal", "-shm"):
        try:
            os.remove(f"{scratch_path(archive)}{suffix}")
        except FileNotFoundError:
            pass


class TrigramBuild:
    """Indexes the batches it is given, on its own thread, into a scratch file."""

    def __init__(self, archive: Path) -> None:
        self.archive = Path(archive)
        self.path = scratch_path(self.archive)
        self._todo: queue.SimpleQueue[tuple[str, tuple[Any, ...]] | None] = queue.SimpleQueue()
        self._error: BaseException | None = None
        self._closed = False
        self._cancelled = False
        self.rows = 0
        discard(self.archive)
        # A scratch file: no journal, no fsync. A crash loses it, and the next
        # import discards it and rebuilds.
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=OFF")
        self._conn.execute("PRAGMA synchronous=OFF")
        self._conn.execute(schema.fts_table_sql(TRIGRAM))
        self._conn.execute(f"ATTACH DATABASE ? AS {_ARCHIVE}", (readonly_uri(self.archive),))
        self._thread = threading.Thread(target=self._run, name="trigram-build", daemon=True)
        self._thread.start()

    def add(self, where: str, params: Sequence[Any]) -> None:
        """Index the archive's messages matching ``where`` (committed, never indexed before)."""
        self._todo.put((where, tuple(params)))

    def _run(self) -> None:
        cols = ", ".join(schema.FTS_COLUMNS)
        try:
            while (item := self._todo.get()) is not None:
                if self._cancelled:
                    continue
                where, params = item
                # In id order: FTS5 flushes its pending terms whenever a rowid goes
                # backwards, and each flush is a segment to merge later.
                self.rows += self._conn.execute(
                    f"INSERT INTO main.{TRIGRAM}(rowid, {cols}) SELECT id, {cols} "
                    f"FROM {_ARCHIVE}.messages WHERE {where} ORDER BY id",
                    params,
                ).rowcount
        except BaseException as exc:  # noqa: BLE001 - kept for finish(), which falls back
            self._error = exc
            while self._todo.get() is not None:
                pass

    def finish(self) -> None:
        """Wait for every batch given to be indexed; raise BuildFailed if one was not."""
        self._end()
        if self._cancelled:
            raise BuildFailed("the side build was abandoned")
        if self._error is not None:
            raise BuildFailed(f"the side build stopped: {self._error}") from self._error

    def close(self) -> None:
        """Abandon the build: the statement under way is interrupted, the rest skipped.

        For an import that stopped (an error, Ctrl-C): it must not wait minutes for an
        index nobody will take. After :meth:`finish` it does nothing.
        """
        self._cancelled = True
        if not self._closed:
            self._conn.interrupt()
        self._end()

    def _end(self) -> None:
        if not self._closed:
            self._closed = True
            self._todo.put(None)
            self._thread.join()
            self._conn.close()

    def copy_into(self, conn: sqlite3.Connection) -> None:
        """Copy the finished index into the archive, inside the caller's write transaction.

        ``conn`` is a connection of the archive's own (see the module docstring for why
        not the writer's) with this scratch file attached as :data:`BUILT_SCHEMA`.
        Raises BuildFailed, having written nothing, when the index does not cover
        exactly the archive's messages.
        """
        built = f"{BUILT_SCHEMA}.{TRIGRAM}"
        indexed, missing, total = conn.execute(
            f"SELECT (SELECT count(*) FROM {built}_docsize), "
            "(SELECT count(*) FROM main.messages m WHERE NOT EXISTS "
            f"(SELECT 1 FROM {built}_docsize d WHERE d.id = m.id)), "
            "(SELECT count(*) FROM main.messages)"
        ).fetchone()
        if missing or indexed != total:
            raise BuildFailed(
                f"the side index holds {indexed:,} rows for {total:,} messages, "
                f"{missing:,} of them missing"
            )
        for table in SHADOW_TABLES:
            conn.execute(f"DELETE FROM main.{TRIGRAM}_{table}")
            conn.execute(f"INSERT INTO main.{TRIGRAM}_{table} SELECT * FROM {built}_{table}")
