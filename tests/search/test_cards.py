"""From matching rows to cards (search/cards.py): the per-session shortcuts give the
groups, counts, order and first hits a plain walk over every row gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dashboard.lineage.graph import Lineage
from dashboard.search.cards import HIT_CANDIDATES, group_rows, page_of
from dashboard.search.request import SearchRequest

SESSIONS = ["a", "b", "c", "d", "e"]
LINEAGE = Lineage.from_parents({"b": "a", "c": "b", "e": "d"})  # chains a-b-c and d-e


def _plain(rows, request, titles):
    """The rule read plainly: one pass over every row, in order."""
    chains = request.group == "chain"
    oldest = request.sort == "oldest"
    groups: dict[str, dict] = {}

    def key(sid: str) -> str:
        return LINEAGE.root(sid) if chains else sid

    def seen(g: dict, when: float) -> None:
        if g["when"] is None or (when < g["when"] if oldest else when > g["when"]):
            g["when"] = when

    def new(k: str, sid: str) -> dict:
        return {"key": k, "best": sid, "count": 0, "sessions": {}, "hits": [], "when": None}

    for sid, started in titles:
        g = groups.setdefault(key(sid), new(key(sid), sid))
        g["title"] = True
        seen(g, started)
    for mid, sid, _score, when, _archived in rows:
        g = groups.setdefault(key(sid), new(key(sid), sid))
        if request.sort != "relevance" and not g["count"]:
            seen(g, when)
        g["count"] += 1
        g["sessions"][sid] = g["sessions"].get(sid, 0) + 1
        if len(g["hits"]) < HIT_CANDIDATES:
            g["hits"].append((mid, sid))
    ordered = list(groups.values())
    if request.sort != "relevance":
        ordered.sort(key=lambda g: g["when"] or 0.0, reverse=not oldest)
    start = (request.page - 1) * request.per_page
    return ordered, ordered[start : start + request.per_page]


rows_strategy = st.lists(
    st.tuples(st.sampled_from(SESSIONS), st.floats(-20, 0), st.floats(0, 1e6), st.booleans()),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(
    found=rows_strategy,
    titles=st.lists(st.tuples(st.sampled_from(SESSIONS), st.floats(0, 1e6)), max_size=3),
    sort=st.sampled_from(["relevance", "newest", "oldest"]),
    group=st.sampled_from(["chain", "session"]),
    page=st.integers(1, 3),
    per_page=st.integers(1, 3),
)
def test_groups_and_first_hits_are_the_plain_walk_s(
    found: list, titles: list, sort: str, group: str, page: int, per_page: int
) -> None:
    rows = [
        (n + 1, sid, score, when, int(arch)) for n, (sid, score, when, arch) in enumerate(found)
    ]
    request = SearchRequest(query="w", sort=sort, group=group, page=page, per_page=per_page)
    groups = group_rows(rows, LINEAGE, request, titles)
    shown = page_of(groups, request, rows)
    every, expected = _plain(rows, request, titles)
    summary = [(g.key, g.best_session, g.hit_count, g.session_hits, g.when) for g in groups]
    assert summary == [(g["key"], g["best"], g["count"], g["sessions"], g["when"]) for g in every]
    assert [(g.key, g.hit_ids) for g in shown] == [(g["key"], g["hits"]) for g in expected]
