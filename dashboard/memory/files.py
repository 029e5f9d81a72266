"""USER.md and MEMORY.md: read, check, save safely, keep revisions.

The two files live in ``<home>/memories/``; each is a list of entries joined by
the line ``§`` (``"\\n§\\n"``). Hermes reads them once at session start and puts
them verbatim into the system prompt, so an edit takes effect from the agent's
next session, and every save is checked for the same threats Hermes rejects.

Saving follows Hermes's own discipline so the two never corrupt each other:

* an exclusive ``fcntl.flock`` on ``<file>.lock`` (the lock Hermes takes);
* under the lock the file is re-read and its SHA-256 compared with the hash the
  user's edit started from: a difference raises :class:`MemoryConflict` and the
  file is never overwritten;
* the new text goes to a temp file in the same folder, is fsynced, renamed over
  the file with ``os.replace`` and the folder is fsynced.

Revisions are kept in Recall's own database (:class:`RecallData`), never next to
the user's files.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from dashboard.errors import (
    ConflictError,
    NotFoundError,
    NotWritableError,
    ValidationError,
)
from dashboard.hermes.conventions import MEMORY_FILE, MEMORY_FILE_NAMES, USER_FILE
from dashboard.hermes.home import HermesHome
from dashboard.hermes.profiles import Profile
from dashboard.memory.checks import WARN, Finding, blocking, check
from dashboard.memory.entries import SEPARATOR, split_entries
from dashboard.memory.merge import merge_entries
from dashboard.store.atomic import NEW_FILE_MODE, atomic_write, mode_of, remove_stale_temp_files
from dashboard.store.recalldb import RecallData

LOCK_TIMEOUT_S = 30.0
_LOCK_POLL_S = 0.02


# -- reading --------------------------------------------------------------------------


# 190 times Hermes's default USER.md limit; a page for it stays well under 1 MB, and a
# form posting it stays under MAX_CONTENT_LENGTH. A larger file is not read whole.
MAX_EDITABLE_BYTES = 256 * 1024


@dataclass(frozen=True)
class MemoryFile:
    """One memory file as it is on disk.

    ``text`` is the exact file text ("" when missing; bytes that are not UTF-8 are
    shown as U+FFFD, and ``problem`` says where), ``sha256`` the hash of the exact
    bytes (of ``b""`` when missing) — pass it back as ``base_sha256`` when saving.
    ``entries`` is :func:`split_entries` of ``text``: raw, unstripped, lossless.
    ``editable`` is False when the path cannot be edited at all (a directory, a named
    pipe, a file too large for the editor, an unreadable file); ``problem`` says why.
    """

    name: str
    path: Path
    text: str
    exists: bool
    sha256: str
    limit: int
    entries: tuple[str, ...]
    limit_problem: str | None = None  # why config.yaml's limit was not used
    problem: str | None = None
    editable: bool = True
    changed_at: float | None = None  # the file's mtime (Hermes's writes count too)

    @property
    def used(self) -> int:
        """Characters counted against the limit (the whole file)."""
        return len(self.text)


def memory_path(home: HermesHome, name: str) -> Path:
    """``<home>/memories/<name>`` for ``USER.md`` or ``MEMORY.md``; anything else is refused."""
    if name == USER_FILE.name:
        return home.user_md
    if name == MEMORY_FILE.name:
        return home.memory_md
    raise NotFoundError(f"no memory file called {name!r} (only USER.md and MEMORY.md)")


def home_key(home: HermesHome) -> str:
    """How a home is named in Recall's revision table (its absolute path)."""
    return str(Path(home.root).expanduser().resolve())


def read_memory_file(home: HermesHome, name: str) -> MemoryFile:
    """Read one memory file; a missing file (or folder) reads as empty.

    Never blocks and never raises for what is at the path: a directory, a named
    pipe, an unreadable or oversized file comes back with ``editable=False`` and a
    ``problem``; text that is not UTF-8 comes back with a ``problem`` too.
    """
    path = memory_path(home, name)
    found = read_file_bytes(path)
    limit = home.char_limit(name)
    text, problem = "", found.problem
    if found.data is not None:
        text, problem = _decode(name, found.data)
    return MemoryFile(
        name=name,
        path=path,
        text=text,
        exists=found.exists,
        sha256=_sha256(found.data or b""),
        limit=limit.chars,
        entries=tuple(split_entries(text)),
        limit_problem=limit.problem,
        problem=problem,
        editable=found.data is not None or not found.exists,
        changed_at=found.mtime,
    )


def profile_memory_files(profiles: Sequence[Profile]) -> list[tuple[str, list[MemoryFile]]]:
    """Each profile's name with its USER.md and MEMORY.md (size, own limit, last change)."""
    return [
        (p.name, [read_memory_file(p.home, name) for name in MEMORY_FILE_NAMES]) for p in profiles
    ]


@dataclass(frozen=True)
class FileBytes:
    """What is at a memory file's path: its bytes, or why they cannot be used."""

    exists: bool
    data: bytes | None = None
    problem: str | None = None
    mtime: float | None = None


_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _not_a_file(path: Path, mode: int) -> str:
    kind = next((label for test, label in _FILE_KINDS if test(mode)), "not a regular file")
    return (
        f"{path} is {kind}, not a file: Hermes cannot read it as {path.name} either. "
        f"Move it out of the way (e.g. `mv {path} {path}.moved`), then reload."
    )


def read_file_bytes(path: Path) -> FileBytes:
    """The file's bytes, never blocking: the type is checked before and after opening."""
    try:
        before = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return FileBytes(exists=False)
    except OSError as exc:
        return FileBytes(exists=True, problem=f"{path} cannot be read ({exc.strerror}).")
    if not stat.S_ISREG(before.st_mode):
        return FileBytes(exists=True, problem=_not_a_file(path, before.st_mode))
    if before.st_size > MAX_EDITABLE_BYTES:
        return FileBytes(exists=True, problem=_too_large(path, before.st_size))
    try:
        # O_NONBLOCK: if a FIFO replaced the file since the stat, open() must not wait
        # for a writer (it would pin a server thread forever).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return FileBytes(exists=False)
    except OSError as exc:
        return FileBytes(exists=True, problem=f"{path} cannot be read ({exc.strerror}).")
    with os.fdopen(fd, "rb") as handle:
        now = os.fstat(handle.fileno())
        if not stat.S_ISREG(now.st_mode):
            return FileBytes(exists=True, problem=_not_a_file(path, now.st_mode))
        data = handle.read(MAX_EDITABLE_BYTES + 1)
    if len(data) > MAX_EDITABLE_BYTES:
        return FileBytes(exists=True, problem=_too_large(path, max(now.st_size, len(data))))
    return FileBytes(exists=True, data=data, mtime=now.st_mtime)


def _too_large(path: Path, size: int) -> str:
    return (
        f"{path.name} is {size / 1e6:.1f} MB, too large for the editor (it takes up to "
        f"{MAX_EDITABLE_BYTES // 1024} KB; Hermes's limit for the file is a few thousand "
        f"characters, so the agent cannot use most of it). Shorten {path} in a text editor "
        "(keep the entries the agent needs), then reload."
    )


def _decode(name: str, data: bytes) -> tuple[str, str | None]:
    """The text, and a problem naming the first byte that is not UTF-8 (if any)."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        entry = data[: exc.start].decode("utf-8", errors="replace").count(SEPARATOR) + 1
        bad = data[exc.start]
        return text, (
            f"{name} is not valid UTF-8: byte 0x{bad:02x} at offset {exc.start:,} (entry "
            f"{entry}) and any others are shown as \ufffd. Recall will not save text that "
            f"still holds them, as that would replace bytes you did not edit: replace or "
            f"delete each \ufffd, or fix the file's encoding in a text editor."
        )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- entries --------------------------------------------------------------------------


# -- checks ---------------------------------------------------------------------------


# -- saving ---------------------------------------------------------------------------


class BlockedContentError(ValidationError):
    """The new text has ``block`` findings; nothing was written."""

    def __init__(self, name: str, findings: Sequence[Finding]) -> None:
        self.findings = tuple(findings)
        lines = "; ".join(f.message for f in self.findings)
        super().__init__(f"{name} not saved: {lines}")


class MemoryConflict(ConflictError):
    """The file changed since the user loaded it; nothing was written.

    ``theirs`` is the file's current text, ``yours`` the text that was to be
    saved, ``base_sha256`` the hash the edit started from, ``their_sha256`` the
    current hash (the base for a retry after merging).
    """

    def __init__(
        self, name: str, *, theirs: str, yours: str, base_sha256: str, their_sha256: str
    ) -> None:
        self.name = name
        self.theirs = theirs
        self.yours = yours
        self.base_sha256 = base_sha256
        self.their_sha256 = their_sha256
        super().__init__(f"{name} changed since it was loaded; nothing was overwritten")


class MemoryLockTimeout(ConflictError):
    """Another writer held ``<file>.lock`` for longer than the timeout."""


@dataclass(frozen=True)
class SaveResult:
    sha256: str
    revision_id: int | None
    findings: tuple[Finding, ...]  # the warnings the saved text still has
    replaced_revision_id: int | None = None  # the revision holding the text replaced (undo)
    merged: bool = False  # another writer's change was merged in (see save_merging)


@contextmanager
def file_lock(path: Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<path>.lock`` (created when missing), like Hermes.

    Waits for another holder (polling, so a hung holder gives
    :class:`MemoryLockTimeout` after ``timeout_s`` instead of a hung request).
    """
    lock_path = path.with_name(path.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, NEW_FILE_MODE)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                raise MemoryLockTimeout(f"{path.name} is locked by another writer ({lock_path})")
            time.sleep(_LOCK_POLL_S)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def save_memory_file(
    home: HermesHome,
    name: str,
    new_text: str,
    *,
    base_sha256: str,
    data: RecallData | None = None,
    note: str | None = None,
    lock_timeout_s: float = LOCK_TIMEOUT_S,
) -> SaveResult:
    """Replace ``name``'s text with ``new_text`` unless it changed since ``base_sha256``.

    Raises :class:`BlockedContentError` (a ValidationError) when :func:`check` finds
    a threat or invisible character, :class:`MemoryConflict` when the file on disk
    is no longer the one the edit started from, :class:`MemoryLockTimeout` when the
    lock cannot be had, :class:`NotWritableError` when the folder refuses the write
    (permissions, a read-only disk). In every one of those cases the file is left
    untouched.
    With ``data``, the saved text is recorded as a revision; when the file existed
    and has no revision yet, its previous text is recorded first.
    """
    path = memory_path(home, name)
    if not isinstance(new_text, str):
        raise ValidationError(f"{name}: the new text must be a string")
    try:
        new_bytes = new_text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(f"{name}: the text is not valid Unicode ({exc.reason})") from exc
    if len(new_bytes) > MAX_EDITABLE_BYTES:
        raise ValidationError(
            f"{name} not saved: {len(new_bytes) / 1e6:.1f} MB is too large for the editor "
            f"(at most {MAX_EDITABLE_BYTES // 1024} KB)"
        )
    findings = check(new_text, home.char_limits()[name])
    blocked = blocking(findings)
    if blocked:
        raise BlockedContentError(name, blocked)

    key = home_key(home)
    with _refused_writes_named(name, path), file_lock(path, lock_timeout_s):
        remove_stale_temp_files(path)
        found = read_file_bytes(path)
        if found.problem:
            raise ValidationError(f"{found.problem} Nothing was written.")
        current = found.data
        current_sha = _sha256(current or b"")
        if current_sha != base_sha256:
            raise MemoryConflict(
                name,
                theirs=(current or b"").decode("utf-8", errors="replace"),
                yours=new_text,
                base_sha256=base_sha256,
                their_sha256=current_sha,
            )
        if current is not None and "\ufffd" in new_text:
            _, undecodable = _decode(name, current)
            if undecodable:
                raise ValidationError(f"{undecodable} Nothing was written.")
        replaced = None
        if data is not None and current is not None:
            replaced = _remember(data, key, name, current.decode("utf-8", errors="replace"))
        mode = mode_of(path)
        atomic_write(path, new_bytes, mode)
        revision_id = None
        if data is not None:
            revision_id = data.add_revision(key, name, new_text, note=note)
    return SaveResult(
        sha256=_sha256(new_bytes),
        revision_id=revision_id,
        findings=tuple(f for f in findings if f.severity == WARN),
        replaced_revision_id=replaced,
    )


def _remember(data: RecallData, key: str, name: str, text: str) -> int:
    """The id of the newest revision holding ``text``, recording it first when the newest
    revision is something else (the first edit, or a file written outside Recall)."""
    newest = data.revisions(key, name, limit=1)
    if newest and newest[0]["content"] == text:
        return newest[0]["id"]
    note = "written outside Recall" if newest else "before first edit"
    return data.add_revision(key, name, text, note=note)


def remember_loaded(home: HermesHome, file: MemoryFile, data: RecallData) -> None:
    """Keep the text a page was loaded with as a revision, if Recall has none of it yet.

    A later save from that page then has its base text, so a change made meanwhile
    (another tab, the agent) can be merged entry by entry; and the history shows the
    agent's own edits between Recall's. Only Recall's database is written.
    """
    if file.exists and file.editable and file.problem is None:
        _remember(data, home_key(home), file.name, file.text)


def revision_text(home: HermesHome, name: str, sha256: str, data: RecallData) -> str | None:
    """The text of the newest revision of ``name`` whose hash is ``sha256``, if any."""
    for revision in data.revisions(home_key(home), name, limit=500):
        if revision["sha256"] == sha256:
            return revision["content"]
    return None


def save_merging(
    home: HermesHome,
    name: str,
    new_text: str,
    *,
    base_sha256: str,
    base_text: str | None,
    data: RecallData,
    note: str,
) -> SaveResult:
    """:func:`save_memory_file`, merging in a change made since ``base_sha256`` when the two
    touched different entries (:func:`memory.merge.merge_entries`).

    ``base_text`` is the text the edit started from (None when Recall has no copy:
    then no merge is tried). A real overlap raises :class:`MemoryConflict` as a plain
    save does; the merged text goes through the same checks, lock and hash guard.
    """

    try:
        return save_memory_file(home, name, new_text, base_sha256=base_sha256, data=data, note=note)
    except MemoryConflict as exc:
        merged = None if base_text is None else merge_entries(base_text, exc.theirs, new_text)
        if merged is None:
            raise
        done = save_memory_file(
            home,
            name,
            merged,
            base_sha256=exc.their_sha256,
            data=data,
            note=f"{note} · merged with a change made elsewhere",
        )
        return replace(done, merged=True)


# EACCES/EPERM: permissions (or an immutable file); EROFS: a read-only mount.
_NOT_WRITABLE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


@contextmanager
def _refused_writes_named(name: str, path: Path) -> Iterator[None]:
    """Create the folder if needed; a refused write becomes :class:`NotWritableError`."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield
    except OSError as exc:
        if exc.errno not in _NOT_WRITABLE:
            raise
        raise NotWritableError(
            f"Recall cannot write {name}: {path.parent} is read-only for the user Recall "
            f"runs as ({exc.strerror}: {exc.filename}). Nothing was written; give this user "
            "write access to the folder, or edit the file as the agent's user.",
            str(path.parent),
        ) from exc


def restore_revision(
    home: HermesHome,
    name: str,
    revision_id: int,
    *,
    base_sha256: str,
    data: RecallData,
    lock_timeout_s: float = LOCK_TIMEOUT_S,
) -> SaveResult:
    """Save revision ``revision_id``'s text back: the same checks and conflict rule as a save."""
    memory_path(home, name)
    revision = data.revision(revision_id)
    if revision["home"] != home_key(home) or revision["name"] != name:
        raise NotFoundError(f"revision {revision_id} is not a revision of {name} in this home")
    return save_memory_file(
        home,
        name,
        revision["content"],
        base_sha256=base_sha256,
        data=data,
        note=f"restored from revision {revision_id}",
        lock_timeout_s=lock_timeout_s,
    )


# -- what the agent sees --------------------------------------------------------------
