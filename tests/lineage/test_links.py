"""What continues what lives once, in links.py, and every page asks it."""

from __future__ import annotations

import re
from pathlib import Path

from dashboard.lineage import chains, graph, index, links
from dashboard.lineage.graph import Lineage

PACKAGE = Path(links.__file__).resolve().parents[1]


def test_a_compression_child_continues_within_the_clock_slack() -> None:
    parent = {"end_reason": "compression", "ended_at": 200.0, "source": "cli"}
    assert links.classify({"started_at": 200.0 - links.TIMING_SLACK_S}, parent) == "continuation"
    assert links.classify({"started_at": 150.0}, parent) == "unknown"
    assert links.classify({"started_at": None}, parent) == "continuation"
    assert links.classify({"model_config": '{"_branched_from": null}'}, parent) == "branch"
    assert links.classify({"source": "subagent"}, parent) == "delegation"
    assert links.classify({}, {"end_reason": "new_session"}) == "reset"
    assert links.classify({}, {"end_reason": "branched"}) == "branch"
    assert links.classify({}, {"end_reason": "done"}) == "unknown"
    assert links.continues({"started_at": 300.0}, parent)


def test_the_line_runs_from_the_first_segment_to_the_earliest_continuing_child() -> None:
    continued = {"b": "a", "c": "b", "c2": "b"}
    following = links.successors(continued, {"b": 1.0, "c": 3.0, "c2": 2.0})
    assert following == {"a": "b", "b": "c2"}
    assert links.line("b", continued, following) == ["a", "b", "c2"]
    assert links.line("c", continued, following) == ["a", "b", "c"]  # a later sibling's own
    assert links.line("x", continued, following) == ["x"]
    tie = links.successors({"z": "a", "y": "a"}, {})  # same start: the smaller id
    assert tie == {"a": "y"}


def test_a_cycle_of_continuations_is_walked_once() -> None:
    continued = {"a": "b", "b": "a"}
    assert links.line("a", continued, links.successors(continued, {})) == ["b", "a"]


def test_a_part_is_told_only_on_a_line_of_two_or_more() -> None:
    assert links.line_part(["a", "b", "c"], "b") == (2, 3)
    assert links.line_part(["a"], "a") is None
    assert links.line_part(["a", "b"], "z") is None


def test_the_cached_lineage_and_the_chain_walk_the_same_line() -> None:
    lineage = Lineage.from_parents(
        {"b": "a", "c": "b", "d": "b", "e": "a"},
        {"b": "continuation", "c": "continuation", "d": "continuation", "e": "branch"},
        {"b": 2.0, "c": 5.0, "d": 4.0, "e": 3.0},
    )
    assert lineage.line("c") == ["a", "b", "c"]
    assert lineage.line("a") == ["a", "b", "d"]
    assert lineage.part_of("d") == (3, 3)
    assert lineage.part_of("e") is None
    assert index.chain_lines(lineage) == [["a", "b", "d"]]


def test_every_module_asks_the_one_rule() -> None:
    """No other module classifies a link or walks a line of its own."""
    assert chains.links is links and graph.links is links and index.Lineage is Lineage
    own = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p.name != "links.py"
        and re.search(
            r"def (classify\(child|line_part|successors|chain_neighbours)|TIMING_SLACK_S =",
            p.read_text(encoding="utf-8"),
        )
    ]
    assert own == []
