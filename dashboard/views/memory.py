"""Memory: read and edit USER.md / MEMORY.md safely (diff before saving, revisions, restore).

Works without JavaScript: every action is a plain form POST (CSRF token and
same-origin check from :mod:`dashboard.web.security`). A save never overwrites a
file that changed since the page was loaded (three-way conflict view, 409), never
writes text with a blocking finding (400), and records a revision in Recall's own
database. Hermes reads the files at session start: edits reach the agent from its
next session.
"""

from __future__ import annotations

import difflib
from typing import Any

from flask import Blueprint, abort, make_response, redirect, render_template, request, url_for

from dashboard.repository.home import HermesHome
from dashboard.repository.memoryfiles import (
    BLOCK,
    NAMES,
    BlockedContentError,
    MemoryConflict,
    MemoryFile,
    MemoryLockTimeout,
    agent_block,
    check,
    home_key,
    read_memory_file,
    restore_revision,
    save_memory_file,
    split_entries,
)
from dashboard.repository.recalldb import RecallData
from dashboard.web.reader import get_reader
from dashboard.web.summaries import get_summaries

bp = Blueprint("memory", __name__)

HISTORY_LIMIT = 50


def _home() -> HermesHome:
    return get_reader().home


def _data() -> RecallData:
    # The one RecallData of the app (owned by the summary service): one writer per file.
    return get_summaries().data


def _checked_name(name: str) -> str:
    if name not in NAMES:
        abort(404, description=f"There is no memory file called {name!r} (USER.md or MEMORY.md).")
    return name


def _submitted_text() -> str:
    # Browsers send a textarea's line breaks as CRLF; Hermes writes and splits on LF.
    return request.form.get("text", "").replace("\r\n", "\n")


def _submitted_base() -> str:
    base = request.form.get("base_sha256", "")
    if not base:
        abort(400, description="The form has no base_sha256: reload the page and try again.")
    return base


def _entries_with_findings(text: str, limit: int) -> tuple[list[dict], list]:
    """Each entry with its findings, and the findings about the whole file."""
    findings = check(text, limit)
    entries = [
        {"number": i + 1, "text": entry, "findings": [], "blocked": False}
        for i, entry in enumerate(split_entries(text))
    ]
    whole = []
    for finding in findings:
        if finding.entry_index is None:
            whole.append(finding)
        else:
            entries[finding.entry_index]["findings"].append(finding)
            if finding.severity == BLOCK:
                entries[finding.entry_index]["blocked"] = True
    return entries, whole


def diff_lines(old: str, new: str, name: str) -> list[tuple[str, str]]:
    """A unified diff of ``old`` → ``new`` as ``(kind, line)``; kind is add/del/hunk/file/same."""
    out: list[tuple[str, str]] = []
    lines = difflib.unified_diff(
        old.splitlines(),
        new.splitlines(),
        fromfile=f"{name} (on disk)",
        tofile=f"{name} (yours)",
        lineterm="",
    )
    for line in lines:
        if line.startswith(("---", "+++")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "same"
        out.append((kind, line))
    return out


def _context(file: MemoryFile, **extra: Any) -> dict[str, Any]:
    entries, whole = _entries_with_findings(file.text, file.limit)
    revisions = _data().revisions(home_key(_home()), file.name, limit=HISTORY_LIMIT)
    context: dict[str, Any] = {
        "file": file,
        "names": NAMES,
        "entries": entries,
        "whole_findings": whole,
        "agent_block": agent_block(file),
        "revisions": revisions,
        "over_limit": file.used > file.limit,
        "edit_text": file.text,
        "edit_base": file.sha256,
        "saved": request.args.get("saved") == "1",
        "blocked": None,
        "conflict": None,
        "error": None,
    }
    context.update(extra)
    return context


def _render(file: MemoryFile, status: int = 200, **extra: Any):
    return make_response(render_template("memory.html", **_context(file, **extra)), status)


def _conflict_view(file: MemoryFile, exc: MemoryConflict):
    base_text = None
    for revision in _data().revisions(home_key(_home()), file.name, limit=500):
        if revision["sha256"] == exc.base_sha256:
            base_text = revision["content"]
            break
    conflict = {
        "theirs": exc.theirs,
        "yours": exc.yours,
        "base": base_text,
        "diff": diff_lines(exc.theirs, exc.yours, file.name),
    }
    # The form now starts from their version: saving again overwrites it knowingly.
    return _render(file, 409, conflict=conflict, edit_text=exc.yours, edit_base=exc.their_sha256)


def _save(name: str, action):
    """Run ``action`` (a save or a restore) and answer with its page or error view."""
    home = _home()
    try:
        action(home)
    except BlockedContentError as exc:
        file = read_memory_file(home, name)
        return _render(
            file,
            400,
            blocked=exc.findings,
            edit_text=request.form.get("text", file.text).replace("\r\n", "\n"),
            edit_base=request.form.get("base_sha256", file.sha256),
        )
    except MemoryConflict as exc:
        return _conflict_view(read_memory_file(home, name), exc)
    except MemoryLockTimeout as exc:
        file = read_memory_file(home, name)
        return _render(file, 503, error=f"{exc} Nothing was written; try again in a moment.")
    return redirect(url_for("memory.show", name=name, saved=1), code=303)


@bp.get("/memory")
def index():
    """The editor opens on USER.md."""
    return show("USER.md")


@bp.get("/memory/<name>")
def show(name: str):
    """The file as entries with their findings, the raw editor, the agent's view, history."""
    return _render(read_memory_file(_home(), _checked_name(name)))


@bp.post("/memory/<name>/preview")
def preview(name: str):
    """The diff between the file on disk and the submitted text, with the findings."""
    file = read_memory_file(_home(), _checked_name(name))
    text = _submitted_text()
    base = _submitted_base()
    findings = check(text, file.limit)
    return render_template(
        "memory_preview.html",
        file=file,
        text=text,
        base=base,
        stale=base != file.sha256,
        diff=diff_lines(file.text, text, file.name),
        findings=findings,
        has_block=any(f.severity == BLOCK for f in findings),
        used=len(text),
    )


@bp.post("/memory/<name>")
def save(name: str):
    """Save the submitted text (checked, locked, conflict-safe) and record a revision."""
    _checked_name(name)
    text = _submitted_text()
    base = _submitted_base()
    return _save(
        name,
        lambda home: save_memory_file(
            home, name, text, base_sha256=base, data=_data(), note="edited in Recall"
        ),
    )


@bp.post("/memory/<name>/restore/<int:revision_id>")
def restore(name: str, revision_id: int):
    """Write an earlier revision back, with the same checks and conflict rule as a save."""
    _checked_name(name)
    base = _submitted_base()
    return _save(
        name,
        lambda home: restore_revision(home, name, revision_id, base_sha256=base, data=_data()),
    )
