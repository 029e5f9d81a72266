"""The demo conversation generator: deterministic, well-formed, realistic enough to search."""

from __future__ import annotations

import json
import random
import re
import time

import pytest

from dashboard.demo import tables
from dashboard.demo.corpus import (
    COMPACTION_MARKER,
    LEGACY_SUMMARY_MARKER,
    TOOL_OUTPUT_MAX,
    Corpus,
    Msg,
    Topic,
)

ROLES = {"user", "assistant", "tool", "system"}
JSON_TOOLS = {
    "search_files",
    "web_search",
    "patch",
    "write_file",
    "session_search",
    "todo",
    "memory",
}
CODE_BLOCK = re.compile(r"```.*?```", re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")


def _cjk(text: str) -> int:
    return sum(1 for c in text if "\u4e00" <= c <= "\u9fff")


def _latin(text: str) -> int:
    return sum(1 for c in text if c.isascii() and c.isalpha())


def _script(seed: int, turns: int = 200) -> list[object]:
    """A fixed sequence of every kind of call, as the demo planner would make them."""
    corpus = Corpus(random.Random(seed))
    out: list[object] = []
    topic = corpus.pick_topic(False)
    for i in range(turns):
        if i % 7 == 0:
            topic = corpus.pick_topic(i % 21 == 0)
            out.append(topic)
        out.extend(corpus.turn(topic, i % 7))
        if i % 25 == 0:
            out.append(corpus.compaction_summary(topic, i % 4, older=i % 50 == 0))
        if i % 11 == 0:
            out.extend(corpus.cron_turn(i % 2))
        if i % 13 == 0:
            out.extend(corpus.subagent_turn(topic, i % 2))
    return out


def _turns(seed: int, count: int, chinese: float = 0.1) -> list[tuple[Topic, list[Msg]]]:
    corpus = Corpus(random.Random(seed))
    pick = random.Random(seed + 1)
    result = []
    topic = corpus.pick_topic(False)
    for i in range(count):
        if i % 6 == 0:
            topic = corpus.pick_topic(pick.random() < chinese)
        result.append((topic, corpus.turn(topic, i % 6)))
    return result


def _check_turn(msgs: list[Msg]) -> None:
    """Tool calls are valid OpenAI JSON and every call is answered by a matching tool row."""
    assert msgs[0].role == "user" and msgs[0].content
    assert msgs[-1].role == "assistant" and msgs[-1].finish_reason == "stop"
    assert msgs[-1].tool_calls is None and msgs[-1].content
    pending: list[tuple[str, str]] = []
    for msg in msgs[1:]:
        assert msg.role in ROLES
        if msg.role == "assistant":
            assert not pending, "assistant spoke before all tool results arrived"
            if msg.tool_calls is None:
                continue
            assert msg.finish_reason == "tool_calls"
            calls = json.loads(msg.tool_calls)
            assert isinstance(calls, list) and calls
            for call in calls:
                assert set(call) == {"id", "type", "function"}
                assert call["type"] == "function"
                assert set(call["function"]) == {"name", "arguments"}
                assert isinstance(call["function"]["arguments"], str)
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
                pending.append((call["id"], call["function"]["name"]))
        elif msg.role == "tool":
            call_id, name = pending.pop(0)
            assert msg.tool_call_id == call_id
            assert msg.tool_name == name
            assert msg.content
            assert len(msg.content) <= TOOL_OUTPUT_MAX + 60
            if name in JSON_TOOLS:
                json.loads(msg.content)
    assert not pending


def test_same_seed_gives_identical_output() -> None:
    assert _script(42) == _script(42)
    assert repr(_script(7, 60)) == repr(_script(7, 60))


def test_different_seed_gives_different_output() -> None:
    assert _script(1, 40) != _script(2, 40)


def test_no_global_random_or_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("generator must only use the rng it was given")

    for name in ("random", "choice", "choices", "randrange", "randint", "sample", "shuffle"):
        monkeypatch.setattr(random, name, boom)
    for name in ("time", "perf_counter", "monotonic"):
        monkeypatch.setattr(time, name, boom)
    assert _script(3, 30)


def test_tool_calls_are_openai_format_and_ids_match() -> None:
    ids: set[str] = set()
    names: set[str] = set()
    for _, msgs in _turns(5, 1500):
        _check_turn(msgs)
        for m in msgs:
            if m.role == "tool":
                assert m.tool_call_id not in ids
                ids.add(m.tool_call_id)
                names.add(m.tool_name)
    expected = {"terminal", "read_file", "search_files", "web_search", "patch", "session_search"}
    assert expected <= names


def test_cron_and_subagent_turns_are_well_formed() -> None:
    corpus = Corpus(random.Random(11))
    for i in range(300):
        topic = corpus.pick_topic(i % 10 == 0)
        cron = corpus.cron_turn(i % 3)
        _check_turn(cron)
        assert cron[0].content.startswith("[Scheduled job `")
        _check_turn(corpus.subagent_turn(topic, i % 2))


def test_cron_session_keeps_its_job() -> None:
    corpus = Corpus(random.Random(12))
    for _ in range(20):
        first = corpus.cron_turn(0)[0].content
        again = corpus.cron_turn(1)[0].content
        assert first.split("`")[1] == again.split("`")[1]


def test_roles_and_reasoning() -> None:
    msgs = [m for _, turn in _turns(6, 800) for m in turn]
    assert {m.role for m in msgs} <= ROLES
    assistants = [m for m in msgs if m.role == "assistant"]
    with_reasoning = [m for m in assistants if m.reasoning]
    assert 0.05 < len(with_reasoning) / len(assistants) < 0.6
    assert all(m.finish_reason in ("stop", "tool_calls") for m in assistants)
    assert any("```" in (m.content or "") for m in assistants)
    assert any((m.content or "").startswith(("#", "**")) for m in assistants)


def test_chinese_topics_are_mostly_chinese() -> None:
    corpus = Corpus(random.Random(8))
    cjk = latin = 0
    for i in range(300):
        topic = corpus.pick_topic(True)
        assert topic.chinese
        assert _cjk(topic.title) >= 2
        for msg in corpus.turn(topic, i % 4):
            if msg.role == "user":
                assert _cjk(msg.content) > 0
            if msg.role in ("user", "assistant") and msg.content:
                prose = INLINE_CODE.sub("", CODE_BLOCK.sub("", msg.content))
                cjk += _cjk(prose)
                latin += _latin(prose)
    assert cjk / (cjk + latin) > 0.6


def test_english_topics_have_no_chinese() -> None:
    for topic, msgs in _turns(9, 400, chinese=0.0):
        assert not topic.chinese
        assert all(_cjk(m.content or "") == 0 for m in msgs if m.role == "user")


def test_compaction_summaries_start_with_marker() -> None:
    corpus = Corpus(random.Random(4))
    for i in range(100):
        topic = corpus.pick_topic(i % 5 == 0)
        text = corpus.compaction_summary(topic, i % 6)
        assert text.startswith(COMPACTION_MARKER)
        assert text.count("\n") >= 10
        assert "## Completed Actions" in text
        old = corpus.compaction_summary(topic, i % 6, older=True)
        assert old.startswith(LEGACY_SUMMARY_MARKER)
        assert old.count("\n") >= 1
    assert COMPACTION_MARKER == "[CONTEXT COMPACTION — REFERENCE ONLY]"
    assert LEGACY_SUMMARY_MARKER == "[CONTEXT SUMMARY]:"


def test_average_message_length_in_band() -> None:
    for seed in (1, 2):
        lengths = [len(m.content or "") for _, turn in _turns(seed, 900) for m in turn]
        assert len(lengths) > 3000
        average = sum(lengths) / len(lengths)
        assert 350 <= average <= 450, average
    users = [len(m.content) for _, t in _turns(3, 600) for m in t if m.role == "user"]
    users.sort()
    assert 20 <= users[len(users) // 2] <= 200


def test_titles_are_short_and_varied() -> None:
    corpus = Corpus(random.Random(10))
    titles = [corpus.pick_topic(i % 10 == 0).title for i in range(2000)]
    assert all(0 < len(t) <= 80 for t in titles)
    assert len(set(titles)) > 500


def test_topic_catalogue() -> None:
    specs = tables.SPECS
    keys = [s.key for s in specs]
    assert len(keys) == len(set(keys)) >= 30
    share = sum(s.zh for s in specs) / len(specs)
    assert 0.08 <= share <= 0.2


def test_every_template_renders() -> None:
    """Every slot used by any template exists in the pools (a typo would raise KeyError)."""
    corpus = Corpus(random.Random(0))
    for spec in (*tables.SPECS, *tables.CRON):
        ctx_cls = corpus._ctx[spec.key]
        templates = [
            *spec.titles,
            *spec.asks,
            *spec.follow,
            *spec.facts,
            *spec.steps,
            *spec.blocks,
            *spec.think,
            *spec.logs,
            *spec.web,
            *(t for pair in spec.cmds + spec.files for t in pair),
            *(t for triple in spec.patches for t in triple),
        ]
        for lang in (tables.EN, tables.ZH):
            templates.extend(t for group in lang.values() for t in group)
        for template in templates:
            template.format_map(ctx_cls())


def test_searchable_vocabulary_and_untrusted_text() -> None:
    text = "\n".join(m.content or "" for _, t in _turns(13, 3000) for m in t)
    for needle in (
        "ECONNREFUSED 127.0.0.1",
        "database is locked",
        "OOMKilled",
        "CrashLoopBackOff",
        "maxmemory",
        "docker compose",
        "kubectl",
        "terraform",
        "连接池",
        "内存",
    ):
        assert needle in text, needle
    assert "<script>" in text or "onerror=" in text


def test_topic_data_files_parse_into_every_topic():
    """Each data file is one topic; a section name _topic does not know would be lost text."""
    known = set(tables.spec_from_tables.__kwdefaults__) | {"key"}
    files = sorted(tables.DATA.joinpath("topics").iterdir(), key=lambda e: e.name)
    assert [s.key for s in tables.SPECS] == [
        f.name.split("-", 1)[1].removesuffix(".txt") for f in files
    ]
    for folder in ("topics", "cron"):
        for entry in tables.DATA.joinpath(folder).iterdir():
            sections = tables.read_sections(entry.read_text("utf-8"))
            assert set(sections) <= known or entry.name == "shared.txt", entry.name
    for spec in (*tables.SPECS, *tables.CRON):
        assert spec.titles and spec.asks, spec.key


def test_sections_split_only_on_header_lines():
    text = "key: x\n\n=== titles\nA === not a header\n\n=== asks\nfirst\n  more\n"
    assert tables.read_sections(text) == {"titles": "A === not a header", "asks": "first\n  more"}
