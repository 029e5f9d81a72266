"""Approvals: Hermes's staged memory writes, per profile, approved or rejected here.

Each pending write shows what it asks (add, replace, remove, a batch), its file, its
text, where it came from (a conversation, or the background review) and its age, and
the file as it would be after it (a diff against the file as it is now), or why Hermes
would refuse it. Approve and Reject are form POSTs (CSRF and same-origin, as every
write): through Hermes's own approval code when an installation is found (any record
shape its version knows), else memory/pending_apply applies the baseline record shape
as Hermes does and leaves every record it does not understand to Hermes, saying why.
Pending skill writes are listed, read-only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from flask import Blueprint, abort, redirect, render_template, request, url_for

from dashboard.errors import ConflictError, NotFoundError, ValidationError
from dashboard.hermes.installation import Lookup
from dashboard.hermes.pending import PendingWrite, PendingWrites, count_pending
from dashboard.hermes.profiles import ALL, EVERY_PROFILE, Profile
from dashboard.memory.pending_apply import (
    ApplyRefused,
    approve,
    decide_all,
    decider,
    pending_of,
    preview,
    reject,
)
from dashboard.web.diff import diff_lines
from dashboard.web.profiles import current_profile, served_profiles
from dashboard.web.summaries import get_recall_data

bp = Blueprint("approvals", __name__)

DECISIONS = ("approve", "reject")


@dataclass(frozen=True)
class ShownWrite:
    """A pending write as the inbox shows it."""

    write: PendingWrite
    age_s: float | None
    diff: list[Any]  # the file now -> after approval (empty when refused)
    refusal: str | None  # why Hermes (or Recall) would not apply it
    approvable: bool  # Approve is offered (Hermes's code decides what Recall cannot)


@dataclass(frozen=True)
class ProfileInbox:
    profile: Profile
    writes: list[ShownWrite]
    pending: PendingWrites
    decider: Lookup  # Hermes's own code, or Recall's writer (and why)


def _profiles() -> list[Profile]:
    chosen = current_profile()
    served = served_profiles()
    return served if chosen == ALL else [p for p in served if p.name == chosen]


def _shown(profile: Profile, write: PendingWrite, now: float, by_hermes: bool) -> ShownWrite:
    age = None if write.created_at is None else max(now - write.created_at, 0.0)
    seen = preview(profile.home, write)
    if seen is None or seen.after is None:
        refusal = seen.refusal if seen is not None else "; ".join(write.problems)
        if by_hermes and write.problems:
            refusal = f"Recall cannot preview it ({refusal}); Hermes's own code decides it"
        return ShownWrite(write, age, [], refusal, by_hermes)
    diff = diff_lines(seen.before, seen.after, write.file_name or "", "now", "after approval")
    caveat = "; ".join(write.problems) or None
    if by_hermes and caveat:
        caveat = f"Recall's preview may differ ({caveat}); Hermes's own code decides it"
    return ShownWrite(write, age, diff, caveat, by_hermes or not caveat)


def _page(status: int = 200, message: str | None = None, error: str | None = None):
    now = time.time()
    inboxes = []
    for profile in _profiles():
        pending = pending_of(profile.home)
        found = decider(profile.home)
        hermes = found.installation is not None
        writes = [_shown(profile, w, now, hermes) for w in pending.memory]
        inboxes.append(ProfileInbox(profile, writes, pending, found))
    body = render_template(
        "approvals.html",
        inboxes=inboxes,
        several=EVERY_PROFILE.spans(served_profiles()),
        message=message or request.args.get("done"),
        error=error,
    )
    return body, status


@bp.app_context_processor
def pending_badge() -> dict[str, int]:
    """The header's count of memory writes waiting in the profiles shown (a folder
    listing each: cheap enough for every page)."""
    return {"pending_writes": sum(count_pending(p.home.root) for p in _profiles())}


@bp.get("/memory/pending")
def index():
    """Every pending memory write of the profiles shown, newest first."""
    return _page()


def _served(profile: str) -> Profile:
    found = next((p for p in served_profiles() if p.name == profile), None)
    if found is None:
        raise NotFoundError(f"no profile {profile!r} is served here")
    return found


@bp.post("/memory/pending/<profile>/<decision>")
def decide_many(profile: str, decision: str):
    """Approve or reject every record the page listed (``record``: ``<id> <digest>``
    each, as shown), oldest staged first; each alone as the single decision is."""
    if decision not in DECISIONS:
        abort(404)
    found = _served(profile)
    shown = [tuple(v.split(" ", 1)) for v in request.form.getlist("record") if " " in v]
    if not shown:
        return _page(400, error="No record was named: reload the page and try again.")
    data = get_recall_data() if decision == "approve" else None
    outcomes = decide_all(found.home, shown, decision, data)
    done = sum(o.decision is not None for o in outcomes)
    verb = "Approved" if decision == "approve" else "Rejected"
    where = f" ({found.name})" if EVERY_PROFILE.spans(served_profiles()) else ""
    summary = f"{verb} {done} of {len(outcomes)}{where}."
    failed = [f"{o.record_id}: {o.problem}" for o in outcomes if o.problem]
    if failed:
        return _page(200 if done else 400, message=summary, error="Not done: " + "; ".join(failed))
    return redirect(url_for("approvals.index", done=summary), code=303)


@bp.post("/memory/pending/<profile>/<record_id>/<decision>")
def decide(profile: str, record_id: str, decision: str):
    """Approve or reject one record (the one whose bytes the page showed)."""
    if decision not in DECISIONS:
        abort(404)
    found = _served(profile)
    digest = request.form.get("digest", "")
    try:
        if decision == "approve":
            done = approve(found.home, record_id, digest, get_recall_data())
        else:
            done = reject(found.home, record_id, digest)
    except ApplyRefused as exc:
        return _page(400, error=f"Not applied: {exc}")
    except ConflictError as exc:
        return _page(409, error=f"Not applied: {exc}")
    except NotFoundError as exc:
        return _page(404, error=str(exc))
    except (ValidationError, OSError) as exc:
        return _page(400, error=f"Not applied: {exc}")
    where = f" ({found.name})" if EVERY_PROFILE.spans(served_profiles()) else ""
    return redirect(url_for("approvals.index", done=f"{done.message}{where}."), code=303)
