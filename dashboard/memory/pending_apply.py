"""Approve or reject a staged memory write the way Hermes applies it, or refuse.

Hermes's memory store (its documented behaviour, replayed here for the baseline record
shape only; hermes/pending.py says which records Recall leaves to Hermes):

* the file is read as entries: split on ``"\\n§\\n"``, each stripped, empty ones and
  exact repeats dropped; it is written back as those entries joined by ``"\\n§\\n"``;
* ``add`` appends the stripped content unless an entry is exactly it (then nothing is
  written and the write counts as done); ``replace`` and ``remove`` find the one entry
  containing ``old_text`` (several identical ones: the first; several different: refused);
  ``batch`` applies its operations in order, all or nothing, the limit checked on the
  result only;
* the whole file must stay within its character limit (config.yaml); new text must pass
  the threat checks; ``replace``, ``remove`` and ``batch`` refuse a file that does not
  round-trip through that reading or holds an entry longer than the limit (edited by
  hand: rewriting it would lose what was added).

An approval holds Hermes's lock (``<file>.lock``), re-reads the file, and makes the
write and the record's removal one step for anyone reading the folder: an intent
(the file's hash before and after) is written first, the record is renamed aside (Hermes
lists ``*.json`` only), the file replaced atomically, then both are removed. A process
killed anywhere in between is repaired by :func:`recover` (run before every listing and
decision): the file as it was with the record back, or the new file and no record. A
record is never applied twice.

When a Hermes installation is found (hermes/installation), approve and reject go
through Hermes's own approval code instead, for every record shape its version knows;
Recall still checks the record is the one the page showed, holds one decision at a time
per home, and compares the files before and after with what Hermes says it did.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dashboard.errors import ConflictError, NotFoundError, RecallError, ValidationError
from dashboard.hermes import installation
from dashboard.hermes.home import HermesHome
from dashboard.hermes.installation import Installation
from dashboard.hermes.pending import (
    APPLYING_SUFFIX,
    ID_PATTERN,
    PendingWrite,
    PendingWrites,
    pending_folder,
    read_pending,
    read_record,
)
from dashboard.memory.checks import blocking, check
from dashboard.memory.entries import SEPARATOR
from dashboard.memory.files import (
    file_lock,
    home_key,
    memory_path,
    read_file_bytes,
    read_memory_file,
)
from dashboard.store.atomic import atomic_write, remove_stale_temp_files, sync_folder
from dashboard.store.recalldb import RecallData

INTENT_SUFFIX = ".recall-intent"
DECIDING = ".recall-deciding"  # its .lock: one decision through Hermes at a time per home


class ApplyRefused(ValidationError):
    """Hermes would refuse this write (the reason is its words, or close to them)."""


@dataclass(frozen=True)
class Decision:
    """What an approval or a rejection did."""

    record_id: str
    file_name: str | None
    changed: bool  # the file's text changed (an add of an existing entry changes nothing)
    message: str
    by: str = "Recall"  # who applied it: Recall's writer, or "Hermes <version>"


def entries_of(text: str) -> list[str]:
    """The entries Hermes reads from ``text`` (stripped, no empty ones, no repeats)."""
    if not text.strip():
        return []
    parsed = [e.strip() for e in text.split(SEPARATOR)]
    return list(dict.fromkeys(e for e in parsed if e))


def replay(text: str, payload: Mapping[str, Any], limit: int) -> str:
    """The file's text after ``payload`` is applied to ``text`` (see the module);
    :class:`ApplyRefused` with the reason Hermes would give."""
    action = payload.get("action")
    ops: Sequence[Mapping[str, Any]] = (
        payload.get("operations") or [] if action == "batch" else [payload]
    )
    if action != "add":
        _refuse_drift(text, limit)
    entries = before = entries_of(text)
    for number, op in enumerate(ops, start=1):
        where = f"operation {number}: " if action == "batch" else ""
        entries = _one(entries, op, where, limit, final=action != "batch")
    if action == "batch":
        _within(entries, limit, "after every operation, ")
    if action == "add" and entries is before:
        return text  # Hermes: "Entry already exists (no duplicate added)": nothing written
    return SEPARATOR.join(entries)


def _one(
    entries: list[str], op: Mapping[str, Any], where: str, limit: int, *, final: bool
) -> list[str]:
    act = op.get("action")
    content = str(op.get("content") or "").strip()
    old = str(op.get("old_text") or "").strip()
    if act in ("add", "replace"):
        if not content:
            raise ApplyRefused(f"{where}the content is empty")
        threats = blocking(check(content, limit))
        if threats:
            raise ApplyRefused(f"{where}{threats[0].message}")
    if act == "add":
        if content in entries:
            return entries  # Hermes: "Entry already exists (no duplicate added)"
        out = [*entries, content]
    else:
        if not old:
            raise ApplyRefused(f"{where}old_text is empty")
        matches = [i for i, e in enumerate(entries) if old in e]
        if not matches:
            raise ApplyRefused(f"{where}no entry matches '{old}'")
        if len({entries[i] for i in matches}) > 1:
            raise ApplyRefused(f"{where}several entries match '{old}': Hermes asks for more")
        out = list(entries)
        if act == "replace":
            out[matches[0]] = content
        else:
            out.pop(matches[0])
    if final:
        _within(out, limit, "")
    return out


def _within(entries: list[str], limit: int, when: str) -> None:
    total = len(SEPARATOR.join(entries))
    if total > limit:
        raise ApplyRefused(f"{when}the file would hold {total:,} of its {limit:,} characters")


def _refuse_drift(text: str, limit: int) -> None:
    parsed = [e.strip() for e in text.split(SEPARATOR) if e.strip()]
    if text.strip() != SEPARATOR.join(parsed) or max(map(len, parsed), default=0) > limit:
        raise ApplyRefused(
            "the file does not read back as Hermes writes it (edited by hand?): Hermes "
            "refuses to rewrite it; tidy it on the memory page first"
        )


# -- decisions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Preview:
    """A memory write against its file as it is now: the text after it, or why not."""

    before: str
    after: str | None  # None: Hermes would refuse it (``refusal`` says why)
    refusal: str | None


def preview(home: HermesHome, write: PendingWrite) -> Preview | None:
    """What approving ``write`` would do to its file now; None for a write to no
    memory file (a skill, a target Recall does not know)."""
    name = write.file_name
    if name is None:
        return None
    before = read_memory_file(home, name).text
    try:
        return Preview(before, replay(before, write.payload, home.char_limits()[name]), None)
    except ApplyRefused as exc:
        return Preview(before, None, f"Hermes would refuse it: {exc}")


def pending_of(home: HermesHome) -> PendingWrites:
    """``home``'s staged writes, after repairing any decision a killed process left."""
    recover(home)
    return read_pending(home.root)


def decider(home: HermesHome) -> installation.Lookup:
    """Who decides ``home``'s staged writes: a Hermes installation, or Recall's writer
    (with why a Hermes that was found cannot be used)."""
    return installation.find(home.root)


def approve(
    home: HermesHome, record_id: str, digest: str, data: RecallData | None = None
) -> Decision:
    """Apply the record ``record_id`` (whose bytes hash to ``digest``: the one the page
    showed) and remove it, as one step; refuse what Hermes would refuse or what Recall
    does not understand. Nothing changes when it refuses."""
    hermes = decider(home).installation
    if hermes is not None:
        return _by_hermes(hermes, home, record_id, digest, "approve", data)
    write = _the_record(home, record_id, digest)
    if write.problems:
        raise ApplyRefused(f"Recall does not apply this record: {'; '.join(write.problems)}")
    name = write.file_name
    assert name is not None  # a memory write without problems has a target
    path = memory_path(home, name)
    limit = home.char_limits()[name]
    with file_lock(path):
        remove_stale_temp_files(path)  # a killed write's temp file, never the file
        found = read_file_bytes(path)
        if found.problem:
            raise ApplyRefused(found.problem)
        before = found.data or b""
        text = before.decode("utf-8", errors="strict")
        after = replay(text, write.payload, limit).encode("utf-8")
        if write.path.read_bytes() != write.raw:  # changed between the page and now
            raise ConflictError("the record changed on disk since the page showed it")
        aside = _aside(write.path)
        intent = _intent(write.path)
        atomic_write(
            intent, _json({"file": str(path), "before": _sha(before), "after": _sha(after)})
        )
        os.replace(write.path, aside)
        sync_folder(write.path.parent)
        if after != before:
            atomic_write(path, after)
            if data is not None:
                note = f"approved pending write {write.id} ({write.action})"
                data.add_revision(home_key(home), name, after.decode("utf-8"), note=note)
        aside.unlink()
        intent.unlink()
        sync_folder(write.path.parent)
    message = f"Approved: {write.action} in {name}" + ("" if after != before else " (no change)")
    return Decision(write.id, name, after != before, message)


def reject(home: HermesHome, record_id: str, digest: str) -> Decision:
    """Remove the record (Hermes's reject); the file is not touched."""
    hermes = decider(home).installation
    if hermes is not None:
        return _by_hermes(hermes, home, record_id, digest, "reject", None)
    write = _the_record(home, record_id, digest)
    write.path.unlink()
    sync_folder(write.path.parent)
    return Decision(write.id, write.file_name, False, f"Rejected: {write.action}")


@dataclass(frozen=True)
class Outcome:
    """One record of a decision taken on many: what was done, or why not."""

    record_id: str
    decision: Decision | None
    problem: str | None = None


def decide_all(
    home: HermesHome,
    shown: Sequence[tuple[str, str]],
    verb: str,
    data: RecallData | None = None,
) -> list[Outcome]:
    """Approve or reject every record of ``shown`` ((id, digest) as the page showed
    them), one at a time as :func:`approve` / :func:`reject` do, oldest staged first (the
    order they were made in, which Hermes's own "approve all" keeps); a record that fails
    stays and says why, and the others go on."""
    staged = {w.id: w.created_at or 0.0 for w in pending_of(home).memory}
    ordered = sorted(shown, key=lambda pair: (staged.get(pair[0], float("inf")), pair[0]))
    outcomes = []
    for record_id, digest in ordered:
        try:
            if verb == "approve":
                done = approve(home, record_id, digest, data)
            else:
                done = reject(home, record_id, digest)
        except (RecallError, OSError) as exc:  # this record's refusal: the rest go on
            outcomes.append(Outcome(record_id, None, str(exc)))
            continue
        outcomes.append(Outcome(record_id, done))
    return outcomes


def _by_hermes(
    hermes: Installation,
    home: HermesHome,
    record_id: str,
    digest: str,
    verb: str,
    data: RecallData | None,
) -> Decision:
    """Ask Hermes's own code, then check the disk agrees with its reply."""
    folder = pending_folder(home.root, "memory")
    with file_lock(folder / DECIDING, timeout_s=installation.DECIDE_TIMEOUT_S):
        write = _the_record(home, record_id, digest)
        path = memory_path(home, write.file_name) if write.file_name else None
        before = read_file_bytes(path).data if path else None
        answer = installation.decide(hermes, home.root, verb, write.id)
        after = read_file_bytes(path).data if path else None
        waiting = write.path.exists()
    changed = after != before
    if answer.missing:
        raise NotFoundError(f"{hermes.label} has no pending memory write {write.id!r}")
    if not answer.done:
        moved = f" (yet {write.file_name} changed meanwhile)" if changed else ""
        raise ApplyRefused(f"{hermes.label} did not apply it: {answer.reason}{moved}")
    notes = list(answer.notes)
    if waiting:
        notes.append("Hermes says it is done, but the record is still waiting")
    if verb == "reject" and changed:
        notes.append(f"{write.file_name} changed meanwhile (another writer)")
    if changed and data is not None and path is not None and after is not None:
        note = f"approved pending write {write.id} ({write.action}) by {hermes.label}"
        data.add_revision(home_key(home), path.name, after.decode("utf-8", "replace"), note=note)
    done = "Approved" if verb == "approve" else "Rejected"
    where = f" in {write.file_name}" if write.file_name else ""
    quiet = " (no change)" if verb == "approve" and not changed else ""
    told = "".join(f"; {n}" for n in notes)
    message = f"{done} by {hermes.label}: {write.action}{where}{quiet}{told}"
    return Decision(write.id, write.file_name, changed, message, by=hermes.label)


def recover(home: HermesHome) -> list[str]:
    """Finish or undo every approval a killed process left half done; the ids repaired.

    An intent names the file's hash before and after: the file at "after" means the
    write happened (the record goes); anything else means it did not, or another writer
    came since (the record comes back, to be decided again)."""
    folder = pending_folder(home.root, "memory")
    repaired = []
    try:
        intents = [p for p in folder.iterdir() if p.name.endswith(INTENT_SUFFIX)]
    except OSError:  # no folder, or one that cannot be listed (the inbox says so)
        return []
    for stale in folder.glob(f".*{INTENT_SUFFIX}.*.tmp"):  # an intent killed half written
        stale.unlink(missing_ok=True)
    for intent in intents:
        stem = intent.name[1 : -len(INTENT_SUFFIX)]
        record = folder / f"{stem}.json"
        aside = _aside(record)
        try:
            said = json.loads(intent.read_text(encoding="utf-8"))
            path = Path(said["file"])
        except (OSError, ValueError, KeyError, TypeError):
            said, path = {}, None
        if path is None:
            if aside.exists():
                os.replace(aside, record)
            intent.unlink(missing_ok=True)
            repaired.append(stem)
            continue
        with file_lock(path):
            now = _sha(path.read_bytes()) if path.exists() else _sha(b"")
            if now == said.get("after"):
                aside.unlink(missing_ok=True)  # written: the record is done with
            elif aside.exists():
                os.replace(aside, record)
            intent.unlink(missing_ok=True)
            sync_folder(folder)
        repaired.append(stem)
    return repaired


def _the_record(home: HermesHome, record_id: str, digest: str) -> PendingWrite:
    """The record ``record_id`` as the page showed it (its bytes hash to ``digest``).
    Its own file is read (a decision of many reads each once, not the whole folder each
    time); an id that is not its file's name is looked for in the listing."""
    recover(home)
    write = None
    if ID_PATTERN.match(record_id):  # never a path the URL made up
        found = read_record(pending_folder(home.root, "memory") / f"{record_id}.json", "memory")
        write = found if isinstance(found, PendingWrite) and found.id == record_id else None
    if write is None:
        write = read_pending(home.root).find(record_id)
    if write is None:
        raise NotFoundError(f"no pending memory write {record_id!r} (decided already?)")
    if write.digest != digest:
        raise ConflictError("the record changed on disk since the page showed it: look again")
    return write


def _aside(record: Path) -> Path:
    return record.with_name(f".{record.name}{APPLYING_SUFFIX}")


def _intent(record: Path) -> Path:
    return record.with_name(f".{record.name[: -len('.json')]}{INTENT_SUFFIX}")


def _json(value: object) -> bytes:
    return json.dumps(value).encode("utf-8")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
