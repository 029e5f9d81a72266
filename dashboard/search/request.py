"""What one search asks (:class:`SearchRequest`, as it appears in the URL) and what it
answers (:class:`SearchResult`: result cards with their hits, the route taken, the notes).

sessions.py runs a request; routes.py, filters.py and cards.py do
the parts. The shapes live here so each of them can name them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dashboard.errors import ValidationError
from dashboard.hermes.model_names import model_family
from dashboard.meaning.builder import MeaningStatus
from dashboard.params import date_bound, whole_number
from dashboard.search.query import ParsedQuery
from dashboard.store.presence import parse_presence

MAX_PER_PAGE = 100
SORTS = ("relevance", "newest", "oldest")
#: hybrid: words and meaning ranked together (words alone until the meaning index is
#: ready); words: the FTS routes only; meaning: the meaning index only.
MODES = ("hybrid", "words", "meaning")
ROLES = ("user", "assistant", "tool", "system")
# What each route did, in the words a person uses (pages and notes say it this way).
ROUTE_WORDS = {
    "unicode61": "searched whole words",
    "trigram": "searched for parts of words",
    "pairs": "searched for parts of words that begin with the term",
    "meaning": "searched by meaning",
    "scan": "searched every message",
}


@dataclass(frozen=True)
class SearchRequest:
    """Everything that shapes one search, as it appears in the URL."""

    query: str = ""
    roles: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()  # empty: every source but filters.HIDDEN_SOURCES
    model: str | None = None
    after: float | None = None
    before: float | None = None
    exclude: tuple[str, ...] = ()
    sort: str = "relevance"
    group: str = "chain"  # "chain": one card per chain root; "session": one per session
    page: int = 1
    per_page: int = 20
    older_than: int | None = None  # continue a bounded search below this message id
    newer_than: int | None = None  # continue an oldest-first search above this message id
    rank_window: int | None = None  # fewer matches ranked (an agent's prefetch), not in URLs
    presence: str = "all"  # all, hermes (still in Hermes), archive (only in Recall's archive)
    # Every stored spelling of ``model`` (its :func:`model_family`); search_sessions fills it.
    model_spellings: tuple[str, ...] = ()
    mode: str = "hybrid"  # one of MODES

    @classmethod
    def from_params(
        cls,
        get: Callable[[str], str | None],
        getlist: Callable[[str], list[str]],
        *,
        now: float | None = None,
    ) -> SearchRequest:
        """Parse URL-style parameters; raise ValidationError naming the bad one."""

        def many(name: str) -> tuple[str, ...]:
            values = [v.strip() for raw in getlist(name) for v in raw.split(",")]
            return tuple(v for v in values if v)

        roles = many("role")
        bad = [r for r in roles if r not in ROLES]
        if bad:
            raise ValidationError(f"role must be one of {', '.join(ROLES)} (got {bad[0]!r})")
        sort = (get("sort") or "relevance").strip()
        if sort not in SORTS:
            raise ValidationError(f"sort must be one of {', '.join(SORTS)}")
        mode = (get("mode") or "hybrid").strip()
        if mode not in MODES:
            raise ValidationError(f"mode must be one of {', '.join(MODES)}")
        group = (get("group") or "chain").strip()
        if group not in ("chain", "session"):
            raise ValidationError("group must be 'chain' or 'session'")
        after = date_bound(get("after"), "after")
        before = date_bound(get("before"), "before", end_of_day=True)
        days = whole_number(get("days"), "days", 1, 36_500)
        if days is not None:
            after = max(after or 0.0, (now or time.time()) - days * 86_400)
        return cls(
            query=(get("q") or "").strip(),
            roles=roles,
            sources=many("source"),
            model=model_family(get("model") or "") or None,
            after=after,
            before=before,
            exclude=many("exclude"),
            sort=sort,
            group=group,
            page=whole_number(get("page"), "page", 1, 100_000) or 1,
            per_page=whole_number(get("per_page"), "per_page", 1, MAX_PER_PAGE) or 20,
            older_than=whole_number(get("older_than"), "older_than", 1, 2**62),
            newer_than=whole_number(get("newer_than"), "newer_than", 0, 2**62),
            presence=parse_presence(get("presence")),
            mode=mode,
        )

    @property
    def continues(self) -> bool:
        """A "search older/newer" page: it carries on a bounded search's message hits."""
        return self.older_than is not None or self.newer_than is not None


@dataclass
class Hit:
    message_id: int
    session_id: str
    role: str
    timestamp: float | None
    snippet: str  # safe HTML: escaped text with <mark> around the terms
    # (k, n): said before compaction k of the session's n in-place compactions (an
    # archived epoch, epochs.py); None in the live epoch or a session never compacted so
    compaction: tuple[int, int] | None = None
    similar: bool = False  # found by meaning, not by the query's words


@dataclass
class SessionResult:
    session_id: str  # the session holding the best hit (the session itself when browsing)
    root_session_id: str
    title: str | None
    preview: str
    source: str
    model: str | None
    started_at: float | None
    last_activity: float | None
    message_count: int | None
    hit_count: int  # matching messages in the card's group (its chain, or the session)
    session_hit_count: int = 0  # of those, in ``session_id`` (what its page counts)
    title_match: bool = False
    hits: list[Hit] = field(default_factory=list)
    chain_part: tuple[int, int] | None = None  # part n of an m-segment compaction chain
    gone_at: float | None = (
        None  # when the card's session left Hermes (store/presence.py), else None
    )
    profile: str | None = None  # the profile the session belongs to (profiles.py)
    # What a person calls the card's conversation (store/names.py): its title, else the
    # first words of its first session, else that session's id.
    name: str = ""

    @property
    def label(self) -> str:
        return self.name or self.title or self.session_id


@dataclass
class SearchResult:
    request: SearchRequest
    parsed: ParsedQuery | None
    route: str  # "recent", "unicode61", "trigram" or "scan"
    results: list[SessionResult]
    total_sessions: int
    total_matches: int | None = None
    bounded: bool = False
    ranked_matches: int | None = None
    older_than: int | None = None  # pass back as older_than to search older matches
    newer_than: int | None = None  # pass back as newer_than to search newer matches
    notes: list[str] = field(default_factory=list)
    took_ms: float = 0.0
    # When nothing matched: the filters that each hide matches ("dates", "model",
    # "source", "role", "exclude"), all active ones when only together; () if none.
    excluded_by: tuple[str, ...] = ()
    home_empty: bool = False  # the home has no sessions at all
    # Reading every profile (2+ of them): each profile with its matching sessions (the
    # cards it would show, in the same window), most first; () in one profile's scope.
    by_profile: tuple[tuple[str, int], ...] = ()
    # The routes that ran, words' first ("unicode61", …, "meaning"); the meaning index's
    # state when the request could use it (hybrid, meaning), else None.
    routes: list[str] = field(default_factory=list)
    meaning: MeaningStatus | None = None

    @property
    def pages(self) -> int:
        return max(1, -(-self.total_sessions // self.request.per_page))

    @property
    def past_end(self) -> bool:
        """The page asked for lies beyond the last page of results."""
        return self.total_sessions > 0 and self.request.page > self.pages

    @property
    def route_words(self) -> str:
        """What the search did, in plain words ("searched for parts of words")."""
        return ROUTE_WORDS.get(self.route, "listed recent conversations")

    @property
    def window(self) -> int | None:
        """How many matching messages were read when the work was bounded, else None."""
        return self.total_matches - 1 if self.bounded and self.total_matches else None

    def to_json(self) -> dict[str, object]:
        """The ``/api/search`` shape."""
        return {
            "query": self.request.query,
            "normalized": self.parsed.display if self.parsed else "",
            "route": self.route,
            "mode": self.request.mode,
            "routes": self.routes or [self.route],
            "meaning_index": self.meaning.to_json() if self.meaning is not None else None,
            "bounded": self.bounded,
            "total_sessions": self.total_sessions,
            "total_matches": self.total_matches,
            "ranked_matches": self.ranked_matches,
            "older_than": self.older_than,
            "newer_than": self.newer_than,
            "past_end": self.past_end,
            "excluded_by": list(self.excluded_by),
            "home_empty": self.home_empty,
            "page": self.request.page,
            "per_page": self.request.per_page,
            "notes": self.notes,
            "by_profile": [[name, n] for name, n in self.by_profile],
            "results": [
                {
                    "session_id": r.session_id,
                    "root_session_id": r.root_session_id,
                    "profile": r.profile,
                    "title": r.title,
                    "name": r.label,
                    "preview": r.preview,
                    "source": r.source,
                    "model": r.model,
                    "started_at": r.started_at,
                    "last_activity": r.last_activity,
                    "message_count": r.message_count,
                    "title_match": r.title_match,
                    "chain_part": list(r.chain_part) if r.chain_part else None,
                    "gone_from_source_at": r.gone_at,
                    "hit_count": r.hit_count,
                    "session_hit_count": r.session_hit_count,
                    "hits": [
                        {
                            "message_id": h.message_id,
                            "session_id": h.session_id,
                            "role": h.role,
                            "timestamp": h.timestamp,
                            "snippet": h.snippet,
                            "before_compaction": list(h.compaction) if h.compaction else None,
                            "similar": h.similar,
                        }
                        for h in r.hits
                    ],
                }
                for r in self.results
            ],
            "took_ms": round(self.took_ms, 2),
        }
