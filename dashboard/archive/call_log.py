"""Recall's copy of the calls a home's ``logs/agent.log`` logged, kept as the log rotates.

A usage row sums a session's calls of one model; a price that depends on one call's
size (a long-context tier) needs each call's tokens, and only ``agent.log`` has them
(hermes/agent_log.py reads a line). Hermes rotates the file at 5 MB and keeps three old
ones, so the archive keeps every call it has read, as it keeps sessions Hermes pruned.

The files are read read-only and incrementally. Each file is known by its identity
(device, inode), not its name: a rotation renames ``agent.log`` to ``agent.log.1`` and
keeps the inode, so the renamed file goes on from the offset its lines were read to. The
offset is that of the end of the last whole line: a line still being written (no newline
yet) is taken by a later pass. A file smaller than its offset, or whose first bytes are
not those read before (truncated, replaced, a new file that took a deleted one's inode),
is read again from its start; a call is kept once however often its line is read (the
table's unique key: home, session, time, number). Each pass lands in one write
transaction through the store's write core, with the offsets it reached, so a pass
killed half-way lands nothing and the next reads the same lines (a file of more than
:data:`CHUNK_BYTES` to read takes one transaction a chunk).

A home without ``logs/`` has no calls: nothing to say. A file that cannot be read is
said in the pass's notes (the syncer's state shows them); the others are read. The
repricer reads the kept calls through store/logged_calls.py (costs sit below the archive).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from dashboard.archive.marks import source_key
from dashboard.hermes.agent_log import LOG_FOLDER, LoggedCall, log_files, parse_line
from dashboard.hermes.profiles import ArchiveIds
from dashboard.store.schema import CALL_FILES_TABLE, CALLS_TABLE
from dashboard.store.session_store import SessionStore

#: How many of a file's first bytes tell it from another file with the same inode.
HEAD_BYTES = 1024
#: The most of one file a transaction takes: Hermes's files are 5 MB; a log rotated by
#: nothing (a changed logging setup) is read a chunk at a time, not held whole.
CHUNK_BYTES = 16 * 1024 * 1024
#: What a line must hold to be worth parsing (every other log line is skipped unparsed).
_CALL_MARK = b"API call #"

Identity = tuple[int, int]  # (device, inode)
Stamp = tuple[str, int, int, int, int]  # name, device, inode, size, mtime_ns


@dataclass(frozen=True)
class CallsReport:
    """What one pass over a home's log files did."""

    added: int = 0  # calls the archive did not have
    files_read: int = 0  # files with new whole lines
    notes: tuple[str, ...] = ()  # files that could not be read, in a person's words


@dataclass
class _Read:
    """What one file gave this pass: its identity, how far it was read, its calls."""

    identity: Identity
    path: Path
    offset: int
    head: str
    calls: list[LoggedCall] = field(default_factory=list)
    more: bool = False  # the file holds more than this read took (a chunk)


def log_stamps(home_root: Path) -> tuple[Stamp, ...]:
    """The log files' stamps (name, device, inode, size, mtime): when none moved, a pass
    has nothing to read. A missing ``logs/`` gives none."""
    stamps: list[Stamp] = []
    try:
        files = log_files(Path(home_root))
    except OSError:
        return ()  # logs/ cannot be listed: the pass says so (keep_calls)
    for path in files:
        try:
            st = path.stat()
        except OSError:
            continue
        stamps.append((path.name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(stamps)


def keep_calls(
    archive: SessionStore,
    home_root: Path,
    ids: ArchiveIds,
    *,
    now: float | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> CallsReport:
    """Read what ``home_root``'s log files added since the last pass into the archive.

    One write transaction lands the calls and the offsets reached (a file read past
    :data:`CHUNK_BYTES` takes one transaction per chunk, so a log that was never rotated
    is not held in memory whole).

    Args:
        archive: the archive, written through its write core.
        home_root: the home (a profile's folder) whose ``logs/`` is read, read-only.
        ids: how the home's session ids are named in the archive (profiles.ArchiveIds):
            a line's session tag is the source's id.
        now: when the archive first saw the calls (default: the clock).
        chunk_bytes: the most of one file a transaction takes.
    """
    home = source_key(home_root)
    try:
        files = log_files(Path(home_root))
    except OSError as exc:  # logs/ itself cannot be listed (its permissions)
        folder = Path(home_root) / LOG_FOLDER
        return CallsReport(notes=(f"{folder} {_cannot(exc)}",))
    with archive.core.reading() as conn:
        known: dict[Identity, tuple[int, str, str]] = {
            (r[0], r[1]): (r[2], r[3], r[4])
            for r in conn.execute(
                f"SELECT device, inode, offset, head, path FROM {CALL_FILES_TABLE}"
                " WHERE src_home=?",
                (home,),
            )
        }
    added = files_read = 0
    while True:
        reads, notes, seen = _read_files(files, known, chunk_bytes)
        gone = [i for i in known if i not in seen]
        if not reads and not gone:
            break
        at = time.time() if now is None else now
        added += archive.core.write(lambda c, r=reads, g=gone, t=at: _land(c, home, ids, r, g, t))
        files_read += sum(1 for r in reads if r.calls)
        for i in gone:
            known.pop(i)
        for r in reads:
            known[r.identity] = (r.offset, r.head, str(r.path))
        if not any(r.more for r in reads):
            break
    return CallsReport(added, files_read, tuple(notes))


def _read_files(
    files: list[Path], known: dict[Identity, tuple[int, str, str]], chunk_bytes: int
) -> tuple[list[_Read], list[str], set[Identity]]:
    """What each file added past its place (those that moved), the notes of files that
    could not be read, and the identities of every file there."""
    reads: list[_Read] = []
    notes: list[str] = []
    seen: set[Identity] = set()
    for path in files:
        try:
            read = _read_new(path, known, chunk_bytes)
        except FileNotFoundError:
            continue  # rotated away since the listing: the next pass finds it by its new name
        except OSError as exc:
            notes.append(f"{path} {_cannot(exc)}")
            try:
                st = path.stat()
                seen.add((st.st_dev, st.st_ino))
            except OSError:
                pass
            continue
        seen.add(read.identity)
        if known.get(read.identity) != (read.offset, read.head, str(read.path)):
            reads.append(read)
    return reads, notes, seen


def _cannot(exc: OSError) -> str:
    return f"cannot be read ({exc.strerror or exc}): its calls wait until it can"


def _land(
    c: sqlite3.Connection,
    home: str,
    ids: ArchiveIds,
    reads: list[_Read],
    gone: list[Identity],
    at: float,
) -> int:
    """Insert the calls ``reads`` found (each once), record how far each file was read,
    forget the files no longer there; return how many calls were new."""
    added = c.executemany(
        f"INSERT OR IGNORE INTO {CALLS_TABLE} (src_home, session_id, number, at, model,"
        " provider, prompt_tokens, output_tokens, cache_read_tokens, cache_write_tokens,"
        " archive_first_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                home,
                ids.archive_id(call.session_id) if call.session_id else None,
                call.number,
                call.at,
                call.model,
                call.provider,
                call.prompt,
                call.output,
                call.cache_read,
                call.cache_write,
                at,
            )
            for read in reads
            for call in read.calls
        ],
    ).rowcount
    c.executemany(
        f"INSERT INTO {CALL_FILES_TABLE} (src_home, device, inode, offset, head, path,"
        " read_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(src_home, device, inode)"
        " DO UPDATE SET offset=excluded.offset, head=excluded.head, path=excluded.path,"
        " read_at=excluded.read_at",
        [(home, *r.identity, r.offset, r.head, str(r.path), at) for r in reads],
    )
    # A file rotated out of the last place (deleted) is read no more.
    c.executemany(
        f"DELETE FROM {CALL_FILES_TABLE} WHERE src_home=? AND device=? AND inode=?",
        [(home, *i) for i in gone],
    )
    return max(added, 0)


def _read_new(path: Path, known: dict[Identity, tuple[int, str, str]], chunk_bytes: int) -> _Read:
    """The whole lines ``path`` holds past its recorded offset (from 0 when the file is
    new, shorter than the offset, or begins with other bytes than were read), at most
    ``chunk_bytes`` of them."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        identity = (st.st_dev, st.st_ino)
        start = f.read(HEAD_BYTES)
        offset, head, _ = known.get(identity, (0, "", ""))
        if offset > st.st_size or head != _head(start, offset):
            offset = 0
        f.seek(offset)
        # Only what the file held at the stat: a line appended meanwhile is the next pass's.
        data = f.read(min(st.st_size - offset, chunk_bytes))
    more = offset + len(data) < st.st_size
    whole = data[: data.rfind(b"\n") + 1]  # a last line without its newline waits
    if more and not whole:
        whole = data  # a "line" longer than a chunk is no log line: passed over
    calls = []
    for line in whole.split(b"\n"):
        if _CALL_MARK in line:
            call = parse_line(line.decode("utf-8", "replace"))
            if call is not None:
                calls.append(call)
    reached = offset + len(whole)
    return _Read(identity, path, reached, _head(start, reached), calls, more)


def _head(start: bytes, offset: int) -> str:
    """What a file's first bytes read up to ``offset`` were (their count and digest)."""
    n = min(offset, HEAD_BYTES)
    return f"{n}:{hashlib.sha256(start[:n]).hexdigest()[:32]}"
