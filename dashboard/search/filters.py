"""A search request's filters as SQL, and which of them an empty result can blame.

Every route and the title match read through the same :class:`Filters`: visible rows
only (conventions.visible_sql), then role, dates, source (cron and subagent hidden
unless asked for), model (every stored spelling), excluded sessions and presence in
Hermes (store/presence.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.hermes.conventions import visible_sql
from dashboard.search.request import SearchRequest
from dashboard.store.presence import presence_sql

HIDDEN_SOURCES = ("cron", "subagent")  # background sessions: shown only when asked for
FILTERS = ("dates", "model", "source", "role", "exclude", "presence")  # what can be blamed


@dataclass(frozen=True)
class Filters:
    sql: str  # " AND ..." fragments over aliases m (messages) and s (sessions)
    params: tuple[object, ...]
    session_sql: str  # the same, for session-level queries (alias s only)
    session_params: tuple[object, ...]


def request_filters(request: SearchRequest, skip: frozenset[str] = frozenset()) -> Filters:
    """The request's filters as SQL; ``skip`` leaves some out (see :data:`FILTERS`)."""
    msg: list[str] = [visible_sql("m")]
    msg_params: list[object] = []
    ses: list[str] = []
    ses_params: list[object] = []
    if request.roles and "role" not in skip:
        msg.append(f"m.role IN ({','.join('?' * len(request.roles))})")
        msg_params.extend(request.roles)
    if request.after is not None and "dates" not in skip:
        msg.append("m.timestamp >= ?")
        msg_params.append(request.after)
        ses.append("coalesce(s.ended_at, s.started_at) >= ?")
        ses_params.append(request.after)
    if request.before is not None and "dates" not in skip:
        msg.append("m.timestamp < ?")
        msg_params.append(request.before)
        ses.append("s.started_at < ?")
        ses_params.append(request.before)
    if "source" in skip:
        pass
    elif request.sources:
        ses.append(f"s.source IN ({','.join('?' * len(request.sources))})")
        ses_params.extend(request.sources)
    else:
        ses.append(f"s.source NOT IN ({','.join('?' * len(HIDDEN_SOURCES))})")
        ses_params.extend(HIDDEN_SOURCES)
    if request.model and "model" not in skip:
        spellings = request.model_spellings or (request.model,)
        ses.append(f"s.model IN ({','.join('?' * len(spellings))})")
        ses_params.extend(spellings)
    if request.exclude and "exclude" not in skip:
        ses.append(f"s.id NOT IN ({','.join('?' * len(request.exclude))})")
        ses_params.extend(request.exclude)
    if request.presence != "all" and "presence" not in skip:
        ses.append(presence_sql(request.presence, "s"))
    both = msg + ses
    return Filters(
        sql="".join(f" AND {c}" for c in both),
        params=(*msg_params, *ses_params),
        session_sql="".join(f" AND {c}" for c in ses),
        session_params=tuple(ses_params),
    )


def active_filters(request: SearchRequest) -> list[str]:
    """The filters that narrow this request (the default source filter always does)."""
    active = {
        "dates": request.after is not None or request.before is not None,
        "model": bool(request.model),
        "source": True,
        "role": bool(request.roles),
        "exclude": bool(request.exclude),
        "presence": request.presence != "all",
    }
    return [name for name in FILTERS if active[name]]


def session_level(request: SearchRequest) -> bool:
    """Whether every filter of ``request`` is its session's (and the order the best
    match): a message-to-session map (row_map.py) can then apply them with no join."""
    dated = request.after is not None or request.before is not None
    return request.sort == "relevance" and not request.roles and not dated
