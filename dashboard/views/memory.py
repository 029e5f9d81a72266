"""Memory: read and edit USER.md / MEMORY.md safely (diff before saving, revisions, restore).

Works without JavaScript: every action is a plain form POST (CSRF token and
same-origin check from :mod:`dashboard.web.security`). A save never overwrites a
file that changed since the page was loaded (three-way conflict view, 409), never
writes text with a blocking finding (400), and records a revision in Recall's own
database. Hermes reads the files at session start: edits reach the agent from its
next session.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, make_response, redirect, render_template, request, url_for

from dashboard.errors import NotFoundError, NotWritableError
from dashboard.hermes.conventions import MEMORY_FILE_NAMES, USER_FILE
from dashboard.hermes.home import HermesHome
from dashboard.hermes.pending import read_pending
from dashboard.hermes.profiles import EVERY_PROFILE
from dashboard.memory.checks import BLOCK, blocking, check
from dashboard.memory.entries import edit_entries, split_entries
from dashboard.memory.files import (
    BlockedContentError,
    MemoryConflict,
    MemoryFile,
    MemoryLockTimeout,
    SaveResult,
    home_key,
    profile_memory_files,
    read_memory_file,
    remember_loaded,
    restore_revision,
    revision_text,
    save_merging,
)
from dashboard.memory.prompt import agent_block
from dashboard.params import whole_number
from dashboard.reader.staleness import MemoryStaleness
from dashboard.store.recalldb import RecallData
from dashboard.summaries.judge import judge_all, kept_judgements
from dashboard.web.diff import diff_lines
from dashboard.web.htmx import render_page, wants_partial
from dashboard.web.profiles import current_profile, served_profiles
from dashboard.web.reader import get_reader, one_profile_home, profile_home
from dashboard.web.summaries import get_judgements, get_recall_data, get_summaries

bp = Blueprint("memory", __name__)

HISTORY_LIMIT = 50
MAX_ENTRY_INDEX = 1_000_000  # far more entries than a file within its limit can hold
# How the history names a one-step entry save (ops are checked by edit_entries first).
ENTRY_NOTES = {
    "edit": "edited entry {}",
    "delete": "deleted entry {}",
    "up": "moved entry {} up",
    "down": "moved entry {} down",
    "add": "added an entry",
}


def _home() -> HermesHome:
    """The home whose files are edited: the profile the request reads (web/profiles.py).

    Under ``all`` of several profiles nothing here says whose file a form means, so
    every action needs one profile (a 400; the page itself lists each profile's files).
    """
    return one_profile_home()


def _profile_context() -> dict[str, Any]:
    """Which profile's files the page shows: named when the homes have several profiles
    (also when Recall serves one of them only); a home of one profile shows no name."""
    several = EVERY_PROFILE.spans(get_reader().profiles)
    return {"profile_name": current_profile() if several else None}


def _data() -> RecallData:
    return get_recall_data()


def _checked_name(name: str) -> str:
    if name not in MEMORY_FILE_NAMES:
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


def _history(name: str, revisions: list[dict]) -> list[dict]:
    """Each revision with the diff from the one before it (the oldest shown has none)."""
    shown = []
    for index, revision in enumerate(revisions):
        older = revisions[index + 1] if index + 1 < len(revisions) else None
        changes = None
        if older is not None:
            changes = diff_lines(
                older["content"], revision["content"], name, f"#{older['id']}", f"#{revision['id']}"
            )
        shown.append({**revision, "changes": changes})
    return shown


def _last_change(file: MemoryFile) -> dict[str, Any] | None:
    """What the save named in the URL (``?change=&before=``) changed, and its undo."""
    change = whole_number(request.args.get("change"), "change", 1, 2**62)
    before = whole_number(request.args.get("before"), "before", 1, 2**62)
    if change is None or before is None:
        return None
    key = home_key(_home())
    try:
        new, old = _data().revision(change), _data().revision(before)
    except (NotFoundError, NotWritableError):
        return None
    if any(r["home"] != key or r["name"] != file.name for r in (new, old)):
        return None
    return {
        "diff": diff_lines(old["content"], new["content"], file.name, "before", "now"),
        "undo": old["id"] if new["sha256"] == file.sha256 else None,  # only while it is current
        "merged": request.args.get("merged") == "1",
    }


def _context(file: MemoryFile, **extra: Any) -> dict[str, Any]:
    entries, whole = _entries_with_findings(file.text, file.limit)
    try:
        revisions = _data().revisions(home_key(_home()), file.name, limit=HISTORY_LIMIT)
        history_error = None
    except NotWritableError as exc:  # Recall's folder: the file is shown, its history not
        revisions, history_error = [], f"The history cannot be shown: {exc}"
    context: dict[str, Any] = {
        "file": file,
        "names": MEMORY_FILE_NAMES,
        "entries": entries,
        "whole_findings": whole,
        "agent_block": agent_block(file),
        "revisions": _history(file.name, revisions),
        # Where each entry came from: the archive's memory calls (reader/provenance.py).
        "provenance": get_reader().memory_provenance(file.name, file.text, revisions),
        "history_error": history_error,
        "over_limit": file.used > file.limit,
        "edit_text": file.text,
        "edit_base": file.sha256,
        "saved": request.args.get("saved") == "1",
        # "Edit entry N" from the newer conversations opens that entry's editor.
        "edit_entry": whole_number(request.args.get("edit"), "edit", 1, MAX_ENTRY_INDEX),
        "blocked": None,
        "conflict": None,
        "last_change": None,
        "error": None,
        # Staged writes to this file: a save may leave them matching nothing (issue 29).
        "pending_here": [w for w in read_pending(_home().root).memory if w.file_name == file.name],
        **_profile_context(),
    }
    context.update(extra)
    return context


def _render(file: MemoryFile, status: int = 200, **extra: Any):
    return make_response(render_template("memory.html", **_context(file, **extra)), status)


def _conflict_view(file: MemoryFile, exc: MemoryConflict):
    conflict = {
        "theirs": exc.theirs,
        "yours": exc.yours,
        "base": _revision_text(file.name, exc.base_sha256),
        "diff": diff_lines(exc.theirs, exc.yours, file.name),
    }
    # The form now starts from their version: saving again overwrites it knowingly.
    return _render(file, 409, conflict=conflict, edit_text=exc.yours, edit_base=exc.their_sha256)


def _save(name: str, action):
    """Run ``action`` (a save or a restore) and answer with its page or error view."""
    home = _home()
    try:
        result = action(home)
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
    except NotWritableError as exc:
        file = read_memory_file(home, name)
        edit = request.form.get("text")
        return _render(
            file,
            403,
            error=str(exc),
            edit_text=file.text if edit is None else edit.replace("\r\n", "\n"),
        )
    return _saved(name, result)


def _saved(name: str, result: SaveResult | None):
    """Back to the file, naming the revisions before and after so the page shows the diff."""
    args: dict[str, Any] = {"name": name, "saved": 1}
    if result is not None and result.revision_id and result.replaced_revision_id:
        args.update(change=result.revision_id, before=result.replaced_revision_id)
        if result.merged:
            args["merged"] = 1
    return redirect(url_for("memory.show", **args), code=303)


@bp.get("/memory")
def index():
    """The editor opens on USER.md."""
    return show(USER_FILE.name)


@bp.get("/memory/<name>")
def show(name: str):
    """The file as entries with their findings, the raw editor, the agent's view, history;
    under all profiles, each profile's files."""
    _checked_name(name)
    if profile_home() is None:
        return render_template(
            "memory_profiles.html",
            names=MEMORY_FILE_NAMES,
            files=profile_memory_files(served_profiles()),
        )
    home = _home()
    file = read_memory_file(home, name)
    try:
        remember_loaded(home, file, _data())  # a save from this page can then merge
    except NotWritableError:
        pass  # Recall's folder cannot take it: the history says so, a save would too
    return _render(file, last_change=_last_change(file))


@bp.post("/memory/<name>/preview")
def preview(name: str):
    """The diff between the file on disk and the submitted text, with the findings."""
    file = read_memory_file(_home(), _checked_name(name))
    return _preview_page(file, _submitted_text(), _submitted_base())


def _preview_page(file: MemoryFile, text: str, base: str):
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
        **_profile_context(),
    )


def _revision_text(name: str, sha256: str) -> str | None:
    return revision_text(_home(), name, sha256, _data())


@bp.post("/memory/<name>/entries")
def entries(name: str):
    """One entry edit (edit/delete/up/down/add), saved in one step when its checks pass.

    The edit applies to the text the page was loaded with. Blocked content gets the
    preview page (nothing written); a file changed since is merged entry by entry
    when the two changes touch different entries, else the three-way view.
    """
    home = _home()
    file = read_memory_file(home, _checked_name(name))
    base = _submitted_base()
    op = request.form.get("op", "")
    index = whole_number(request.form.get("index"), "index", 0, MAX_ENTRY_INDEX) or 0
    value = request.form.get("value", "").replace("\r\n", "\n")
    base_text = file.text if base == file.sha256 else _revision_text(name, base)
    if base_text is None:
        return _render(
            file,
            409,
            error=f"{file.name} changed since you loaded it and Recall has no copy of the "
            "version you started from, so your change was not applied. Nothing was written; "
            "make the change again on this page.",
        )
    yours = edit_entries(base_text, op, index, value)
    if blocking(check(yours, file.limit)):
        return _preview_page(file, yours, base)
    return _save(
        name,
        lambda home: save_merging(
            home,
            name,
            yours,
            base_sha256=base,
            base_text=base_text,
            data=_data(),
            note=ENTRY_NOTES[op].format(index + 1),
        ),
    )


@bp.post("/memory/<name>")
def save(name: str):
    """Save the submitted text (checked, locked, conflict-safe) and record a revision."""
    _checked_name(name)
    text = _submitted_text()
    base = _submitted_base()
    return _save(
        name,
        lambda home: save_merging(
            home,
            name,
            text,
            base_sha256=base,
            base_text=_revision_text(name, base),
            data=_data(),
            note="edited in Recall",
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


def _staleness_of(name: str) -> MemoryStaleness:
    home = _home()
    file = read_memory_file(home, name)
    try:
        revisions = _data().revisions(home_key(home), name, limit=HISTORY_LIMIT)
    except NotWritableError:  # Recall's folder: dates from revisions are unknown then
        revisions = []
    return get_reader().memory_staleness(name, file.text, revisions)


def _staleness_page(name: str, found: MemoryStaleness, judged: dict, **extra: Any):
    """The newer conversations of each entry: the memory page's partial, or a page."""
    return render_page(
        "memory_staleness.html",
        "_memory_staleness.html",
        "memory-staleness",
        file_name=name,
        staleness=found,
        judge_enabled=get_summaries().enabled,
        judged=judged,
        oob=wants_partial("memory-staleness"),
        **{"judge_failed": {}, "judge_error": None, **extra},
    )


@bp.get("/memory/<name>/staleness")
def staleness(name: str):
    """Each entry's newer conversations, flagged when they may overturn it, with the
    model's judgements already made."""
    found = _staleness_of(_checked_name(name))
    model = get_summaries().summarizer.config.model
    return _staleness_page(name, found, kept_judgements(get_judgements(), model, found))


@bp.post("/memory/<name>/staleness/judge")
def judge_staleness(name: str):
    """Ask the summary model to judge each entry's newer conversations (a model call:
    a POST, with the CSRF token and the same-origin check)."""
    found = _staleness_of(_checked_name(name))
    summaries = get_summaries()
    if not summaries.enabled:
        return _staleness_page(name, found, {}, judge_error="No summary endpoint is configured.")
    judged, failed = judge_all(summaries.summarizer, get_judgements(), found, name)
    return _staleness_page(name, found, judged, judge_failed=failed)
