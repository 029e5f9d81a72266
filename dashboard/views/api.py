"""JSON API: the same data as the pages, for scripts and agents."""

from __future__ import annotations

from dataclasses import asdict

from flask import Blueprint, jsonify, request

from dashboard.costs.reconcile import verdicts
from dashboard.costs.rules import CostSummary
from dashboard.errors import (
    NotFoundError,
    NotWritableError,
    ValidationError,
)
from dashboard.hermes.conventions import MEMORY_FILES
from dashboard.lineage.epochs import Epoch
from dashboard.memory.checks import check
from dashboard.memory.entries import split_entries
from dashboard.memory.files import (
    BlockedContentError,
    MemoryConflict,
    MemoryFile,
    MemoryLockTimeout,
    home_key,
    read_memory_file,
    save_memory_file,
)
from dashboard.memory.provenance import REVISIONS_READ
from dashboard.params import whole_number
from dashboard.summaries.service import DEFAULT_TOOL_LIMIT, session_search_result
from dashboard.web.agent_memory import preview_block
from dashboard.web.asked import costs_request, current_time, search_request, transcript_request
from dashboard.web.errors import answer_json
from dashboard.web.lineage_svg import epoch_url
from dashboard.web.reader import get_reader, one_profile_home
from dashboard.web.rollup import get_cost_rollup
from dashboard.web.security import same_origin_only
from dashboard.web.summaries import get_recall_data, get_summaries

bp = Blueprint("api", __name__, url_prefix="/api")
answer_json(bp)  # errors as JSON, at the status the pages give them (web/errors.py)


@bp.get("/search")
def search():
    """Search sessions; the result shape is documented in the README."""
    shown = get_reader().search_page(search_request(), facets=False)
    return jsonify(shown.checked().to_json())


@bp.get("/sessions/<session_id>/messages")
def session_messages(session_id: str):
    """Return a session's transcript (``view=live``: what the agent sees now; ``all=1``:
    rewound and hidden rows too)."""
    wanted = transcript_request()
    # The session page's object, with every message (the page shows them 500 at a time).
    transcript = get_reader().session_page(session_id, wanted, page_size=None).transcript
    return jsonify(transcript.to_json())


@bp.get("/session_search")
@same_origin_only
def session_search():
    """The seed tool's session_search: stage 1, then a recap of each session (waits)."""
    limit = whole_number(request.args.get("limit"), "limit", 1, 20) or DEFAULT_TOOL_LIMIT
    query = request.args.get("query", "")
    return jsonify(session_search_result(get_reader(), get_summaries(), query, limit))


@bp.get("/chains/<session_id>")
def chain(session_id: str):
    """Return a session's lineage: every segment with its kind and figures, and line totals."""
    found = get_reader().chain_page(session_id).chain
    return jsonify(
        {
            "root": found.root,
            "compactions_in_place": found.compactions_in_place,
            "tip": found.tip,
            "focus": found.focus,
            "line": list(found.line),
            "warnings": list(found.warnings),
            "nodes": [
                {
                    "session_id": s.session_id,
                    "parent_session_id": s.parent_session_id,
                    "kind": s.kind,
                    "depth": s.depth,
                    "part": (found.part_of(s.session_id) or (None,))[0],
                    "is_tip": s.is_tip,
                    "title": s.title,
                    "name": s.label,
                    "source": s.source,
                    "model": s.model,
                    "started_at": s.started_at,
                    "ended_at": s.ended_at,
                    "end_reason": s.end_reason,
                    "message_count": s.message_count,
                    "tool_call_count": s.tool_call_count,
                    "input_tokens": s.tokens.get("input", 0),
                    "output_tokens": s.tokens.get("output", 0),
                    "cache_read_tokens": s.tokens.get("cache_read", 0),
                    "cache_write_tokens": s.tokens.get("cache_write", 0),
                    "reasoning_tokens": s.tokens.get("reasoning", 0),
                    "effective_cost_usd": s.cost.effective,
                    "estimated_cost_usd": s.estimated_cost_usd,
                    "actual_cost_usd": s.actual_cost_usd,
                    "cost_status": s.cost_status,
                    "summary_preview": s.summary_preview,
                    "compactions": s.compactions,
                    "epochs": [
                        _epoch_json(s.session_id, e, c)
                        for e, c in zip(s.epochs.epochs, s.epoch_costs, strict=True)
                    ],
                    "unattributed_usage_rows": s.unattributed_usage,
                }
                for s in found.segments
            ],
            "totals": found.totals,
        }
    )


def _epoch_json(session_id: str, epoch: Epoch, cost: CostSummary) -> dict[str, object]:
    """One in-place epoch of a chain node: its boundaries, counts and attributable cost."""
    return {
        "number": epoch.number,
        "first_message_id": epoch.first_id,
        "last_message_id": epoch.last_id,
        "started_at": epoch.started_at,
        "ended_at": epoch.ended_at,
        "compacted_at": epoch.compacted_at,
        "live": epoch.live,
        "rows": epoch.rows,
        "archived": epoch.archived,
        "summary_message_id": epoch.summary_id,
        "summary_opening": epoch.summary_opening,
        "tokens": epoch.tokens,
        "link": epoch_url(session_id, epoch),
        # Hermes records cost per session, model and task: only usage rows lying inside
        # this epoch are its (epochs.usage_epoch); none: its cost is not known.
        "cost": {
            "usage_rows": sum(cost.counts.values()),
            "effective_cost_usd": cost.effective,
            "estimated_cost_usd": cost.estimated,
            "actual_cost_usd": cost.billed,
        },
    }


@bp.get("/preview")
def preview():
    """What the agent would get for ``message`` (``session``, ``model`` optional)."""
    block = preview_block(
        request.args.get("message", ""),
        request.args.get("session", "").strip() or None,
        request.args.get("model", "").strip() or None,
    )
    return jsonify(block.to_json())


@bp.get("/costs")
def costs():
    """Spend per period and dimension: the numbers of the costs page (``to`` is exclusive)."""
    now = current_time()
    asked = costs_request(now)
    report = get_reader().costs_report(asked, now=now, rollup=get_cost_rollup(), cards=False)
    report = report.checked()
    assert report.spend is not None
    body = report.spend.to_json()
    body["verdicts"] = [v.to_json() for v in verdicts(report.spend)]
    if asked.notices:
        body["notices"] = list(asked.notices)
    return jsonify(body)


def _memory_name(which: str) -> str:
    kind = next((f for f in MEMORY_FILES if f.key == which), None)
    if kind is None:
        raise NotFoundError(f"no memory file {which!r}: use 'user' or 'memory'")
    return kind.name


def _memory_json(file: MemoryFile) -> dict[str, object]:
    return {
        "name": file.name,
        "content": file.text,
        "hash": file.sha256,
        "limit": file.limit,
        "chars": len(file.text),
        "entries": list(split_entries(file.text)),
        "problems": [asdict(f) for f in check(file.text, file.limit)],
        "editable": file.editable,
        "problem": file.problem,
    }


@bp.get("/memory/<which>")
def memory_file(which: str):
    """Return USER.md or MEMORY.md with its hash, limit, entries and problems."""
    return jsonify(_memory_json(read_memory_file(one_profile_home(), _memory_name(which))))


def _file_and_revisions(which: str) -> tuple[MemoryFile, list[dict]]:
    home = one_profile_home()
    file = read_memory_file(home, _memory_name(which))
    try:
        revisions = get_recall_data().revisions(home_key(home), file.name, limit=REVISIONS_READ)
    except NotWritableError:  # Recall's folder: the calls still say where entries came from
        revisions = []
    return file, revisions


@bp.get("/memory/<which>/provenance")
def memory_provenance(which: str):
    """Return where each entry of USER.md or MEMORY.md came from (docs/memory.md)."""
    file, revisions = _file_and_revisions(which)
    return jsonify(get_reader().memory_provenance(file.name, file.text, revisions).to_json())


@bp.get("/memory/<which>/staleness")
def memory_staleness(which: str):
    """Return each entry's newer conversations, flagged when they may overturn it."""
    file, revisions = _file_and_revisions(which)
    return jsonify(get_reader().memory_staleness(file.name, file.text, revisions).to_json())


@bp.put("/memory/<which>")
def save_memory(which: str):
    """Save a memory file if ``base_hash`` is still current (409 if not, 422 if blocked)."""
    name = _memory_name(which)
    body = request.get_json(silent=True)
    if not isinstance(body, dict) or not isinstance(body.get("content"), str):
        raise ValidationError('send JSON {"content": "...", "base_hash": "..."}')
    home = one_profile_home()
    try:
        result = save_memory_file(
            home,
            name,
            body["content"],
            base_sha256=str(body.get("base_hash", "")),
            data=get_recall_data(),
            note="saved through the API",
        )
    except BlockedContentError as exc:
        return jsonify({"error": str(exc), "problems": [asdict(f) for f in exc.findings]}), 422
    except MemoryConflict as exc:
        return jsonify({"error": str(exc), "content": exc.theirs, "hash": exc.their_sha256}), 409
    except MemoryLockTimeout as exc:
        return jsonify({"error": str(exc), "reason": "busy"}), 503
    except NotWritableError as exc:
        return jsonify({"error": str(exc), "reason": "readonly"}), 403
    return jsonify(
        {
            "hash": result.sha256,
            "revision_id": result.revision_id,
            "problems": [asdict(f) for f in result.findings],
        }
    )
