"""Hermes's staged writes: ``<home>/pending/{memory,skills}/<id>.json``, read as they are.

With ``memory.write_approval`` on (and always for the background review's replace and
remove), Hermes stages a memory write instead of making it, one JSON record a file,
written atomically, and waits for ``/memory approve|reject`` in a chat. Every version's
record has ``id``, ``subsystem``, ``action``, ``summary``, ``origin`` (``foreground`` |
``background_review``), ``created_at`` and ``payload`` (the exact arguments to replay:
for memory ``{action, target, content, old_text}``, or a batch of ``operations``).
Newer ones may add ``payload_sha256``, a ``state`` (``pending`` | ``applying``), a
``_write_guard`` in the payload, ``<id>.claimed`` claim files and ``resolved/``
tombstones; third-party providers add fields of their own.

This module reads them (never writes): each record with what it asks, and every reason
Recall would not apply it itself (:attr:`PendingWrite.problems`): a state, a claim, a
guard or a field it does not understand, a payload that changed since it was staged.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dashboard.hermes.conventions import MEMORY_FILES

PENDING_FOLDER = "pending"
SUBSYSTEMS = ("memory", "skills")
ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
ORIGINS = ("foreground", "background_review")
ACTIONS = ("add", "replace", "remove", "batch")
TARGETS = {f.key: f.name for f in MEMORY_FILES}  # a payload's target -> its file
BASELINE_FIELDS = ("id", "subsystem", "action", "summary", "origin", "created_at", "payload")
NEWER_FIELDS = ("payload_sha256", "state", "applying_started_at")
PAYLOAD_FIELDS = ("action", "target", "content", "old_text", "operations")
MAX_RECORD_BYTES = 1024 * 1024  # a record is a few hundred bytes; a bigger file is not one
CLAIM_SUFFIX = ".claimed"
#: What Recall renames a record to while it applies it (memory/pending_apply): no
#: ``.json`` ending, so Hermes does not list it meanwhile.
APPLYING_SUFFIX = ".recall-applying"


@dataclass(frozen=True)
class PendingWrite:
    """One staged write, as its file says, and why Recall would not apply it."""

    id: str
    subsystem: str
    path: Path
    raw: bytes  # the file's bytes (a decision names them: a changed record is refused)
    record: Mapping[str, Any]
    problems: tuple[str, ...] = ()  # empty: Recall understands every part of it

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()

    @property
    def payload(self) -> Mapping[str, Any]:
        payload = self.record.get("payload")
        return payload if isinstance(payload, dict) else {}

    @property
    def action(self) -> str:
        return str(self.payload.get("action") or self.record.get("action") or "")

    @property
    def target(self) -> str:
        return str(self.payload.get("target") or "memory")

    @property
    def file_name(self) -> str | None:
        """USER.md or MEMORY.md for a memory write; None for anything else."""
        return TARGETS.get(self.target) if self.subsystem == "memory" else None

    @property
    def content(self) -> str:
        return str(self.payload.get("content") or "")

    @property
    def old_text(self) -> str:
        return str(self.payload.get("old_text") or "")

    @property
    def operations(self) -> list[dict[str, Any]]:
        ops = self.payload.get("operations")
        return [o for o in ops if isinstance(o, dict)] if isinstance(ops, list) else []

    @property
    def summary(self) -> str:
        return str(self.record.get("summary") or "")

    @property
    def origin(self) -> str:
        return str(self.record.get("origin") or "")

    @property
    def created_at(self) -> float | None:
        value = self.record.get("created_at")
        return (
            float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        )

    @property
    def understood(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class Unreadable:
    """A file in a pending folder that is not a record Recall can read, and why."""

    name: str
    reason: str


@dataclass(frozen=True)
class PendingWrites:
    """A home's staged writes: memory first (newest first), skills listed read-only."""

    memory: list[PendingWrite] = field(default_factory=list)
    skills: list[PendingWrite] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)

    def find(self, record_id: str) -> PendingWrite | None:
        return next((w for w in self.memory if w.id == record_id), None)


def pending_folder(home_root: Path, subsystem: str) -> Path:
    return home_root / PENDING_FOLDER / subsystem


def read_pending(home_root: Path) -> PendingWrites:
    """Every record in ``home_root``'s pending folders (none when there are none)."""
    found = PendingWrites()
    for subsystem in SUBSYSTEMS:
        into = found.memory if subsystem == "memory" else found.skills
        try:
            files = _record_files(pending_folder(home_root, subsystem))
        except OSError as exc:  # a folder that cannot be listed is said, not a failed page
            found.unreadable.append(Unreadable(subsystem, f"cannot be listed ({exc.strerror})"))
            continue
        for name, path in files:
            write = read_record(path, subsystem)
            if isinstance(write, Unreadable):
                found.unreadable.append(Unreadable(f"{subsystem}/{name}", write.reason))
            else:
                into.append(write)
        into.sort(key=lambda w: (-(w.created_at or 0.0), w.id))
    return found


def count_pending(home_root: Path) -> int:
    """How many memory writes wait (a directory listing: cheap enough for every page);
    0 when the folder cannot be listed (the inbox says why)."""
    try:
        return len(_record_files(pending_folder(home_root, "memory")))
    except OSError:
        return 0


def read_record(path: Path, subsystem: str) -> PendingWrite | Unreadable:
    """One record file, with every reason Recall would not apply it."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_RECORD_BYTES + 1)
    except OSError as exc:
        return Unreadable(path.name, f"cannot be read ({exc.strerror or exc})")
    if len(raw) > MAX_RECORD_BYTES:
        return Unreadable(path.name, "larger than any record (1 MB): not read")
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return Unreadable(path.name, f"is not a JSON record ({exc})")
    if not isinstance(record, dict):
        return Unreadable(path.name, "is not a JSON object")
    stem = path.name[: -len(".json")]
    record_id = str(record.get("id") or stem)
    problems = _problems(record, stem, subsystem, path)
    return PendingWrite(record_id, subsystem, path, raw, record, tuple(problems))


def canonical_sha256(payload: object, *, ascii_only: bool) -> str:
    """sha256 of ``payload``'s canonical JSON (sorted keys, ``,`` and ``:``)."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii_only)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _record_files(folder: Path) -> list[tuple[str, Path]]:
    """The ``<id>.json`` files of ``folder`` (none when it is missing); OSError when it
    cannot be listed."""
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(
        (e.name, Path(e.path))
        for e in entries
        if e.name.endswith(".json") and not e.name.startswith(".") and e.is_file()
    )


def _problems(record: dict, stem: str, subsystem: str, path: Path) -> list[str]:
    """Why Recall would not apply ``record`` itself (empty: it would)."""
    problems: list[str] = []
    record_id = record.get("id")
    if not isinstance(record_id, str) or not ID_PATTERN.match(record_id):
        problems.append("its id is missing or not one Hermes writes")
    elif record_id != stem:
        problems.append(f"its id ({record_id}) is not its file's name")
    if subsystem != "memory" or record.get("subsystem") != "memory":
        problems.append("not a memory write: Recall lists it, Hermes applies it")
    unknown = sorted(k for k in record if k not in BASELINE_FIELDS + NEWER_FIELDS)
    if unknown:
        problems.append(f"fields Recall does not know ({', '.join(unknown)}): apply it in Hermes")
    state = record.get("state")
    if state not in (None, "pending"):
        problems.append(f"its state is {state!r}: Hermes is applying it")
    if (path.parent / f"{stem}{CLAIM_SUFFIX}").exists():
        problems.append("Hermes has claimed it (a .claimed file): it may be being applied")
    payload = record.get("payload")
    if not isinstance(payload, dict):
        problems.append("it has no payload to replay")
        return problems
    if "_write_guard" in payload:
        problems.append("it carries a write guard Recall cannot check: apply it in Hermes")
    extra = sorted(k for k in payload if k not in PAYLOAD_FIELDS and k != "_write_guard")
    if extra:
        problems.append(f"its payload has fields Recall does not know ({', '.join(extra)})")
    expected = record.get("payload_sha256")
    if expected is not None and expected not in {
        canonical_sha256(payload, ascii_only=True),
        canonical_sha256(payload, ascii_only=False),
    }:
        problems.append("its payload changed since it was staged (payload_sha256 differs)")
    problems += _payload_problems(payload)
    if not isinstance(record.get("created_at"), int | float):
        problems.append("it has no creation time")
    if record.get("origin") not in ORIGINS:
        problems.append(f"its origin {record.get('origin')!r} is not one Hermes writes")
    return problems


def _payload_problems(payload: Mapping[str, Any]) -> list[str]:
    action = payload.get("action")
    if action not in ACTIONS:
        return [f"its action {action!r} is not add, replace, remove or batch"]
    if payload.get("target", "memory") not in TARGETS:
        return [f"its target {payload.get('target')!r} is neither memory nor user"]
    ops = [payload] if action != "batch" else payload.get("operations")
    if not isinstance(ops, list) or not ops:
        return ["its batch has no operations"]
    for op in ops:
        if not isinstance(op, dict) or op.get("action") not in ("add", "replace", "remove"):
            return ["an operation of it is not add, replace or remove"]
        for key in ("content", "old_text"):
            if op.get(key) is not None and not isinstance(op.get(key), str):
                return [f"its {key} is not text"]
    return []
