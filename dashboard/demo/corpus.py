"""Deterministic generator of realistic agent conversations for the demo store.

Everything random comes from the ``random.Random`` handed to :class:`Corpus`, so the
same seed always yields byte-identical messages. Templates are compiled once at
import time into ``str.format`` strings; a turn only does ``rng.choice`` look-ups,
``format_map`` calls and joins, which keeps generation in the low microseconds per
message.

The text lives in package data, one file per topic (``data/topics/``) and per scheduled
job variant (``data/cron/``), read in file-name order: a few ``name: value`` header lines
(``key``, and where they differ from the defaults ``zh``, ``logfmt``, ``stable``; a
``<field>-from: <name>`` line takes that field from ``data/cron/shared.txt``), then one
``=== <field>`` section per table of :func:`_topic`.

Template mini-language (used in those tables):

* ``«name»`` is a slot filled from the topic's vocabulary or the shared pools; a
  slot keeps its value for the whole turn (``«name2»`` draws a second value).
* ``¶`` in a one-line template is a newline.
* In line lists, an indented line continues the previous item.
* In block lists, a line ``~~`` separates blocks.

Topic tables keep ``facts[i]`` as the answer to ``asks[i]``, so an opening question gets a
matching first paragraph; the rest of an answer mixes other facts, steps and code blocks.
"""

from __future__ import annotations

import json
import random
import re
import sys
import time
from dataclasses import dataclass
from importlib import resources

from dashboard.hermes.conventions import (
    COMPACTION_MARKER,
    LEGACY_SUMMARY_MARKER,
    SUMMARY_END_MARKER,
)

TITLE_MAX = 80
TOOL_OUTPUT_MAX = 3000

__all__ = ["COMPACTION_MARKER", "LEGACY_SUMMARY_MARKER", "Corpus", "Msg", "Topic"]


@dataclass(frozen=True, slots=True)
class Msg:
    """One message row as Hermes stores it."""

    role: str
    content: str | None
    tool_calls: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    reasoning: str | None = None
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class Topic:
    """A conversation subject; ``params`` pins hosts/services for a whole session."""

    key: str
    title: str
    chinese: bool
    params: tuple[tuple[str, str], ...] = ()


# --------------------------------------------------------------------------- parsing


def _fmt(t: str) -> str:
    """Compile a «slot» template into a ``str.format`` string."""
    return (
        t.replace("{", "{{")
        .replace("}", "}}")
        .replace("«", "{")
        .replace("»", "}")
        .replace("¶", "\n")
    )


def _glue(a: str, b: str) -> str:
    """Join a continuation line: no space between two CJK characters."""
    if ord(a[-1]) >= 0x2E80 and ord(b[0]) >= 0x2E80:
        return a + b
    return a + " " + b


def _items(s: str) -> list[str]:
    """Split a line list; indented lines continue the previous item."""
    out: list[str] = []
    for line in s.split("\n"):
        text = line.strip()
        if not text:
            continue
        if line.startswith("  ") and out:
            out[-1] = _glue(out[-1], text)
        else:
            out.append(text)
    return out


def _lines(s: str) -> tuple[str, ...]:
    """Compiled one-line templates."""
    return tuple(_fmt(x) for x in _items(s))


def _raw_blocks(s: str) -> list[str]:
    """Multi-line blocks separated by ``~~`` lines."""
    return [b.strip("\n") for b in s.split("\n~~\n") if b.strip()]


def _blocks(s: str) -> tuple[str, ...]:
    """Compiled multi-line templates."""
    return tuple(_fmt(b) for b in _raw_blocks(s))


def _cmds(s: str) -> tuple[tuple[str, str], ...]:
    """Blocks whose first line(s) are ``$ command`` (``\\`` continues), then the output."""
    out: list[tuple[str, str]] = []
    for block in _raw_blocks(s):
        rows = block.split("\n")
        if not rows[0].startswith("$ "):
            raise ValueError(f"command block must start with '$ ': {rows[0]!r}")
        n = 1
        while rows[n - 1].endswith("\\") and n < len(rows):
            n += 1
        cmd = "\n".join(rows[:n])[2:]
        out.append((_fmt(cmd), _fmt("\n".join(rows[n:]))))
    return tuple(out)


def _files(s: str) -> tuple[tuple[str, str], ...]:
    """Blocks whose first line is a path, then the file body (with a typical file header)."""
    out = []
    for block in _raw_blocks(s):
        path, _, body = block.partition("\n")
        path = path.strip()
        heads = _FILE_HEADS.get(path.rsplit(".", 1)[-1], ())
        if heads and not body.startswith(("#!", "import", "from", '"""')):
            body = heads[len(path) % len(heads)] + body
        out.append((_fmt(path), _fmt(body)))
    return tuple(out)


_FILE_HEADS: dict[str, tuple[str, ...]] = {
    "py": (
        '"""«mod» helpers."""\n\nfrom __future__ import annotations\n\n'
        "import json\nimport logging\n"
        "import os\nfrom typing import Any\n\nfrom app.config import settings\n\n"
        "log = logging.getLogger(__name__)\n\n\n",
        "import logging\nimport time\nfrom dataclasses import dataclass\n\n"
        "from sqlalchemy import select\n\nfrom app.db import session_scope\n"
        "from app.models import Invoice, Order\n\n"
        "logger = logging.getLogger(__name__)\nRETRIES = 3\n\n\n",
        '"""Part of «repo» — see docs/architecture.md."""\n\nimport csv\nimport datetime as dt\n'
        "from pathlib import Path\n\nimport httpx\n\nfrom app.settings import Settings\n\n"
        "settings = Settings()\n\n\n",
    ),
    "ts": (
        'import type { Request, Response } from "express";\nimport { logger } from "../logger";\n'
        'import { config } from "../config";\n\n',
        'import { WebSocketServer } from "ws";\nimport type { Update } from "../types";\n\n'
        "const log = logger.child({ module: __filename });\n\n",
    ),
    "yml": ("# Managed in git — edit via PR, not in the UI.\n",),
    "yaml": ("# Source of truth: «repo»/deploy. Changes are applied by CI on merge.\n", ""),
    "conf": (
        "# Managed by ansible (roles/«svc»). Local changes will be overwritten.\n"
        "# Last deployed «date» by «user».\n\n",
    ),
    "tf": ("# terraform >= 1.6, provider pinned in versions.tf\n\n", ""),
}


def _patches(s: str) -> tuple[tuple[str, str, str], ...]:
    """Blocks: path line, old text, a ``=>`` line, new text."""
    out = []
    for block in _raw_blocks(s):
        path, _, rest = block.partition("\n")
        old, _, new = rest.partition("\n=>\n")
        out.append((_fmt(path.strip()), _fmt(old), _fmt(new)))
    return tuple(out)


def _vocab(s: str) -> dict[str, tuple[str, ...]]:
    """``key: a | b | c`` lines (a key may repeat) into literal value pools."""
    d: dict[str, list[str]] = {}
    for item in _items(s):
        key, _, values = item.partition(": ")
        d.setdefault(key.strip(), []).extend(v.strip() for v in values.split(" | "))
    return {k: tuple(v) for k, v in d.items()}


def _docs(s: str) -> tuple[tuple[str, str], ...]:
    """``title | url`` lines."""
    out = []
    for item in _items(s):
        title, _, url = item.rpartition(" | ")
        out.append((title, url))
    return tuple(out)


@dataclass(slots=True)
class _Spec:
    """Compiled vocabulary and templates of one topic (or one cron job)."""

    key: str
    zh: bool
    titles: tuple[str, ...]
    asks: tuple[str, ...]
    follow: tuple[str, ...]
    facts: tuple[str, ...]
    steps: tuple[str, ...]
    blocks: tuple[str, ...]
    think: tuple[str, ...]
    logs: tuple[str, ...]
    cmds: tuple[tuple[str, str], ...]
    files: tuple[tuple[str, str], ...]
    patches: tuple[tuple[str, str, str], ...]
    web: tuple[str, ...]
    docs: tuple[tuple[str, str], ...]
    vocab: dict[str, tuple[str, ...]]
    logfmt: str
    stable: tuple[str, ...]
    hits: tuple[tuple[str, tuple[tuple[str, int, str], ...]], ...]


def _topic(
    key: str,
    *,
    zh: bool = False,
    logfmt: str = "iso",
    stable: str = "host svc repo env",
    titles: str = "",
    asks: str = "",
    follow: str = "",
    facts: str = "",
    steps: str = "",
    blocks: str = "",
    think: str = "",
    logs: str = "",
    cmds: str = "",
    files: str = "",
    patches: str = "",
    greps: str = "",
    web: str = "",
    docs: str = "",
    vocab: str = "",
) -> _Spec:
    """Parse one topic's data tables."""
    fls = _files(files)
    hits = []
    for pattern in _items(greps):
        found = []
        for path, body in fls:
            for no, line in enumerate(body.split("\n"), 1):
                if pattern in line:
                    found.append((path, no, line.strip()))
        if found:
            hits.append((pattern, tuple(found)))
    return _Spec(
        key=key,
        zh=zh,
        titles=_lines(titles),
        asks=_lines(asks),
        follow=_lines(follow),
        facts=_lines(facts),
        steps=_lines(steps),
        blocks=_blocks(blocks),
        think=_lines(think),
        logs=_lines(logs),
        cmds=_cmds(cmds),
        files=fls,
        patches=_patches(patches),
        web=_lines(web),
        docs=_docs(docs),
        vocab=_vocab(vocab),
        logfmt=logfmt,
        stable=tuple(stable.split() + ["org"]) if stable else (),
        hits=tuple(hits),
    )


_DATA = resources.files(__package__).joinpath("data")
_SECTION = re.compile(r"^=== (\S+)\n", re.M)


def _sections(text: str) -> dict[str, str]:
    """``=== name`` sections of a data file (a section runs to the next header)."""
    parts = _SECTION.split(text)
    return {name: body.strip("\n") for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def _load_topics(folder: str) -> list[_Spec]:
    """Parse every topic file of ``data/<folder>/`` in name order."""
    directory = _DATA.joinpath(folder)
    shared_file = directory.joinpath("shared.txt")
    shared = _sections(shared_file.read_text("utf-8")) if shared_file.is_file() else {}
    specs = []
    for entry in sorted(directory.iterdir(), key=lambda e: e.name):
        if entry.name == "shared.txt" or not entry.name.endswith(".txt"):
            continue
        text = entry.read_text("utf-8")
        head, _, _ = text.partition("\n=== ")
        options: dict[str, object] = {}
        for line in head.splitlines():
            name, sep, value = line.partition(":")
            if not sep:
                continue
            value = value.strip()
            if name.endswith("-from"):
                options[name.removesuffix("-from")] = shared[value]
            elif name == "zh":
                options["zh"] = value == "yes"
            else:
                options[name] = value
        options.update(_sections(text))
        key = options.pop("key")
        specs.append(_topic(str(key), **options))  # type: ignore[arg-type]
    return specs


class _Ctx(dict):  # type: ignore[type-arg]
    """Slot values of one turn; unknown slots are drawn lazily from the pools."""

    __slots__ = ()
    pools: dict[str, tuple[str, ...]] = {}
    corpus: Corpus

    def __missing__(self, key: str) -> str:
        pool = self.pools.get(key)
        if pool is None:
            if key == "log":
                return self.corpus._log(self)
            raise KeyError(key)
        value = self.choice(pool)  # type: ignore[attr-defined]
        if key[-1] in "23" and len(pool) > 3:
            # «host2» should differ from «host» (and «host3» from both)
            taken = (self.get(key[:-1]), self.get(key[:-1] + "2"))
            while value in taken:
                value = self.choice(pool)  # type: ignore[attr-defined]
        self[key] = value
        return value


# --------------------------------------------------------------------------- shared pools

_GLOBAL = _vocab(_DATA.joinpath("vocab.txt").read_text("utf-8"))

_NUMERIC: dict[str, tuple[str, ...]] = {
    "n": tuple(str(i) for i in range(2, 13)),
    "num": tuple(str(i) for i in range(13, 5000, 37)),
    "big": tuple(f"{i:,}" for i in range(12_000, 2_400_000, 23_117)),
    "ms": tuple(str(i) for i in (*range(3, 120, 7), *range(120, 9000, 173))),
    "sec": tuple(str(i) for i in range(1, 121, 3)),
    "mb": tuple(str(i) for i in range(64, 8192, 61)),
    "gb": tuple(str(i) for i in (*range(1, 64), 80, 100, 128, 200, 256, 500)),
    "pct": tuple(str(i) for i in range(1, 100)),
    "hi": tuple(str(i) for i in range(81, 100)),
    "lo": tuple(str(i) for i in range(5, 80)),
    "kb": tuple(str(i) for i in range(4, 900, 11)),
    "date": tuple(f"2026-{m:02d}-{d:02d}" for m in range(1, 10) for d in range(1, 29)),
    "hms": tuple(
        f"{h:02d}:{m:02d}:{s:02d}"
        for h in range(24)
        for m in (3, 11, 17, 24, 38, 42, 51, 59)
        for s in (2, 19, 33, 47)
    ),
    "ver": tuple(
        f"{a}.{b}.{c}" for a in (1, 2, 3, 4) for b in range(0, 14, 3) for c in (0, 1, 4, 7)
    ),
    "pyver": ("3.10.14", "3.11.9", "3.11.7", "3.12.4", "3.12.7", "3.13.1"),
    "dur": tuple(f"{m}m{s:02d}s" for m in range(0, 14) for s in (4, 17, 31, 48)),
    "cost": tuple(f"{d}.{c:02d}" for d in range(0, 60) for c in (4, 18, 37, 62, 90)),
    "pid": tuple(str(i) for i in range(1021, 64000, 997)),
    "lineno": tuple(str(i) for i in range(12, 480, 7)),
    "hh": tuple(f"{h:02d}" for h in range(24)),
    "mm": tuple(f"{m:02d}" for m in range(0, 60, 5)),
}

_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
_K8S_ALPHA = "bcdfghjklmnpqrstvwxz2456789"
_B62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _generated_pools(rng: random.Random) -> dict[str, tuple[str, ...]]:
    """Random-looking identifiers (hashes, IPs, pod suffixes) drawn once from ``rng``."""

    def word(alpha: str, k: int) -> str:
        return "".join(rng.choices(alpha, k=k))

    return {
        "sha": tuple(f"{rng.getrandbits(28):07x}" for _ in range(1500)),
        "sha40": tuple(f"{rng.getrandbits(160):040x}" for _ in range(300)),
        "ip": tuple(
            rng.choice(
                (
                    f"10.{rng.randrange(0, 40)}.{rng.randrange(0, 16)}.{rng.randrange(2, 250)}",
                    f"172.{rng.randrange(17, 24)}.0.{rng.randrange(2, 30)}",
                    f"192.168.{rng.randrange(0, 3)}.{rng.randrange(2, 250)}",
                )
            )
            for _ in range(400)
        ),
        "pubip": tuple(
            f"{rng.choice((49, 78, 91, 116, 135, 157, 188, 203))}.{rng.randrange(1, 255)}."
            f"{rng.randrange(1, 255)}.{rng.randrange(1, 255)}"
            for _ in range(200)
        ),
        "reqid": tuple(f"{rng.getrandbits(64):016x}" for _ in range(800)),
        "uuid": tuple(
            f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}-"
            f"{rng.choice('89ab')}{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}"
            for _ in range(300)
        ),
        "rs": tuple(word(_K8S_ALPHA, 9) for _ in range(200)),
        "pod5": tuple(word(_K8S_ALPHA, 5) for _ in range(600)),
        "token8": tuple(word(_ALNUM, 8) for _ in range(300)),
        "sid": tuple(
            f"2026{rng.randrange(1, 9):02d}{rng.randrange(1, 29):02d}_"
            f"{rng.randrange(0, 24):02d}{rng.randrange(0, 60):02d}{rng.randrange(0, 60):02d}_"
            f"{rng.getrandbits(24):06x}"
            for _ in range(400)
        ),
    }


# --------------------------------------------------------------------------- generic prose


def _prose(lang: str) -> dict[str, tuple[str, ...]]:
    """The line lists of ``data/prose-<lang>.txt`` (openers, closers, risky input, …)."""
    text = _DATA.joinpath(f"prose-{lang}.txt").read_text("utf-8")
    return {name: _lines(body) for name, body in _sections(text).items()}


_EN = _prose("en")
_ZH = _prose("zh")

# (cause, fix, verify) heading styles; one style per answer
_EN_HEADS = (
    ("## What's happening", "## Fix", "## Verify"),
    ("## Root cause", "## Steps", "## Check it worked"),
    ("### Why it fails", "### What to change", "### Sanity check"),
    ("**Why:**", "**Fix:**", "**To confirm:**"),
    ("### Cause", "### Recommended change", "### Verify"),
    ("## Diagnosis", "## Plan", "## Verification"),
)
_ZH_HEADS = (
    ("## 原因分析", "## 解决方案", "## 验证"),
    ("### 问题原因", "### 修改步骤", "### 验证"),
    ("**原因：**", "**解决：**", "**验证方法：**"),
    ("## 排查结论", "## 处理办法", "## 确认是否生效"),
)

_RISKY = _EN["risky"]
_RISKY_ZH = _ZH["risky"]

# --------------------------------------------------------------------------- topics

_SPECS: list[_Spec] = _load_topics("topics")

# --------------------------------------------------------------------------- delegation

_SUB_EN = {
    "goal": _EN["delegation-goal"],
    "ctx": _EN["delegation-ctx"],
    "more": _EN["delegation-more"],
    "h_sum": "## Summary",
    "h_find": "## Findings",
    "h_files": "## Evidence (files)",
    "h_next": "## Suggested next step",
}

_SUB_ZH = {
    "goal": _ZH["delegation-goal"],
    "ctx": _ZH["delegation-ctx"],
    "more": _ZH["delegation-more"],
    "h_sum": "## 结论",
    "h_find": "## 发现",
    "h_files": "## 相关文件",
    "h_next": "## 建议下一步",
}

# --------------------------------------------------------------------------- scheduled jobs

_CRON: list[_Spec] = _load_topics("cron")

_CRON_JOBS: tuple[tuple[_Spec, ...], ...] = tuple(
    tuple(s for s in _CRON if s.titles[0] == name)
    for name in dict.fromkeys(s.titles[0] for s in _CRON)
)

# --------------------------------------------------------------------------- generator

_P_TOOLS = 0.62  # share of turns where the assistant calls tools
_LOG_SIZES = (4, 5, 6, 8, 10, 12, 14, 16, 18, 20, 24, 30, 36, 48)
_SOURCES = ("cli", "cli", "telegram", "tui", "discord", "slack", "cli")
_LIMITS = {"user": 1375, "memory": 2200}
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

_RECAP_EN = (
    "Earlier debugging of `{err}` on {host}. {step}",
    "The user hit `{err}` in {svc}; the session ended with: {step}",
    "Same symptom ({err}) on {host} a few weeks ago. Resolution: {step}",
    "Discussed {svc} on {host}; root cause was related to `{err}`. {step}",
)
_RECAP_ZH = (
    "之前排查过 {host} 上的 `{err}`。{step}",
    "用户在 {svc} 遇到过 `{err}`，最后的处理：{step}",
    "几周前 {host} 出现过同样的问题（{err}）。解决办法：{step}",
)

_SUMMARY_HEAD = (
    f"{COMPACTION_MARKER} Earlier turns were compacted into the summary below. It is background "
    "from a previous context window, not an instruction: do not redo the work it describes and "
    "answer only the latest user message that follows it."
)
_SUMMARY_END = f"{SUMMARY_END_MARKER} — respond to the message below, not the summary above ---"

_LABELS = {
    False: {
        "ran": "Ran `{}` on {} — {}",
        "read": "Read `{}` and confirmed the current settings.",
        "seg": "This is segment {} of the conversation; earlier segments were compacted too.",
        "err": "Error being chased: `{}`",
        "where": "Environment: {} on `{}`, service `{}`, repo `{}`.",
        "legacy": "The user asked: {} So far: {} Next: {}",
        "files": "Files involved: {}.",
    },
    True: {
        "ran": "在 {1} 上执行了 `{0}` —— {2}",
        "read": "查看了 `{}`，确认了当前配置。",
        "seg": "这是本次对话的第 {} 段，之前的内容已被压缩。",
        "err": "正在排查的报错：`{}`",
        "where": "环境：{}，主机 `{}`，服务 `{}`，仓库 `{}`。",
        "legacy": "用户的问题：{} 目前进展：{} 下一步：{}",
        "files": "涉及文件：{}。",
    },
}


class Corpus:
    """Deterministic source of demo conversations; every draw comes from ``rng``."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._random = rng.random
        self._choice = rng.choice
        self._sample = rng.sample
        base = {**_GLOBAL, **_NUMERIC, **_generated_pools(rng)}
        self._ctx: dict[str, type[_Ctx]] = {}
        for spec in (*_SPECS, *_CRON):
            pools = {**base, **spec.vocab}
            for k in list(pools):
                pools.setdefault(k + "2", pools[k])
                pools.setdefault(k + "3", pools[k])
            self._ctx[spec.key] = type(
                f"_Ctx_{spec.key}",
                (_Ctx,),
                {
                    "__slots__": (),
                    "pools": pools,
                    "choice": staticmethod(rng.choice),
                    "corpus": self,
                    "spec": spec,
                },
            )
        self._specs = {s.key: s for s in _SPECS}
        self._cron_job: tuple[_Spec, ...] | None = None
        self._en = tuple(s for s in _SPECS if not s.zh)
        self._zh = tuple(s for s in _SPECS if s.zh)

    # ------------------------------------------------------------------ public API

    def pick_topic(self, chinese: bool) -> Topic:
        """A topic with a fresh title and session-stable parameters (host, service...)."""
        spec = self._choice(self._zh if chinese else self._en)
        ctx = self._ctx[spec.key]()
        for key in spec.stable:
            ctx[key]  # noqa: B018 - draws and pins the value for the session
        title = _clip(self._choice(spec.titles).format_map(ctx), TITLE_MAX)
        return Topic(spec.key, title, spec.zh, tuple(ctx.items()))

    def turn(self, topic: Topic, index: int) -> list[Msg]:
        """One exchange: user message, optional tool rounds, final assistant answer."""
        spec = self._specs[topic.key]
        ctx = self._ctx[spec.key](topic.params)
        lang = _ZH if spec.zh else _EN
        text, lead = self._user_text(spec, ctx, lang, index)
        msgs = [Msg("user", text)]
        rnd = self._random
        if rnd() < _P_TOOLS:
            rounds = 1 + (rnd() < 0.38) + (rnd() < 0.12)
            self._tool_rounds(spec, ctx, lang, msgs, rounds, readonly=False)
            reasoning = self._reasoning(spec, ctx, lang) if rnd() < 0.15 else None
        else:
            reasoning = self._reasoning(spec, ctx, lang) if rnd() < 0.3 else None
        msgs.append(
            Msg(
                "assistant",
                self._answer(spec, ctx, lang, lead),
                reasoning=reasoning,
                finish_reason="stop",
            )
        )
        return msgs

    def compaction_summary(self, topic: Topic, segment: int, older: bool = False) -> str:
        """Handoff text that opens a compressed continuation session."""
        spec = self._specs[topic.key]
        ctx = self._ctx[spec.key](topic.params)
        lab = _LABELS[spec.zh]
        choice = self._choice
        ask = choice(spec.asks).format_map(ctx)
        facts = [f.format_map(ctx) for f in self._sample(spec.facts, min(2, len(spec.facts)))]
        steps = [s.format_map(ctx) for s in self._sample(spec.steps, min(4, len(spec.steps)))]
        paths = list(dict.fromkeys(p.format_map(ctx) for p, _ in spec.files))
        if older:
            body = lab["legacy"].format(ask, " ".join(facts), steps[0])
            lines = [f"{LEGACY_SUMMARY_MARKER} {body}"]
            if paths:
                lines.append(lab["files"].format(", ".join(paths)))
            lines.append(lab["err"].format(ctx["err"]))
            return "\n".join(lines)
        done = []
        for cmd, out in self._sample(spec.cmds, min(2, len(spec.cmds))):
            first = next((ln for ln in out.format_map(ctx).split("\n") if ln.strip()), "ok")
            done.append(
                lab["ran"].format(
                    cmd.format_map(ctx).split("\n")[0], ctx["host"], _clip(first.strip(), 90)
                )
            )
        if paths:
            done.append(lab["read"].format(paths[0]))
        done.append(steps[0])
        parts = [
            _SUMMARY_HEAD,
            "## Historical Task Snapshot\n" + ask,
            "## Completed Actions\n" + "\n".join(f"{i}. {d}" for i, d in enumerate(done, 1)),
            "## Key Decisions\n" + "\n".join(f"- {f}" for f in (*facts, steps[1])),
        ]
        if paths:
            parts.append("## Relevant Files\n" + "\n".join(f"- `{p}`" for p in paths))
        parts.append("## Historical Remaining Work\n" + "\n".join(f"- {s}" for s in steps[2:]))
        parts.append(
            "## Critical Context\n"
            f"- {lab['err'].format(ctx['err'])}\n"
            f"- {lab['where'].format(ctx['env'], ctx['host'], ctx['svc'], ctx['repo'])}\n"
            f"- {lab['seg'].format(segment + 1)}"
        )
        parts.append(_SUMMARY_END)
        return "\n\n".join(parts)

    def cron_turn(self, index: int) -> list[Msg]:
        """A scheduled-job run: the job prompt, its commands, and the delivered report.

        ``index`` is the turn's position in its session; later turns of a session re-run the
        job picked at index 0 (Hermes runs one job per session).
        """
        if index == 0 or self._cron_job is None:
            self._cron_job = self._choice(_CRON_JOBS)
        variants = self._cron_job
        spec = self._choice(variants)
        ctx = self._ctx[spec.key]()
        name = spec.titles[0]
        prompt = variants[0].asks[index % len(variants[0].asks)].format_map(ctx)
        head = f"schedule `{ctx['schedule']}`" if index == 0 else f"run {index + 1}"
        msgs = [Msg("user", f"[Scheduled job `{name}` · {head}]\n\n{prompt}")]
        rnd = self._random
        steps = spec.cmds or tuple((q, "") for q in spec.web)
        n = min(len(steps), 1 + int(rnd() * len(steps)))
        for cmd, out in steps[:n]:
            cid = self._call_id()
            if spec.cmds:
                tool, args = "terminal", {"command": cmd.format_map(ctx)}
                result = out.format_map(ctx)
            else:
                tool, args, result = self._web_search(spec, ctx, cmd)
            call = {
                "id": cid,
                "type": "function",
                "function": {"name": tool, "arguments": json.dumps(args)},
            }
            msgs.append(
                Msg("assistant", None, tool_calls=json.dumps([call]), finish_reason="tool_calls")
            )
            msgs.append(Msg("tool", result, tool_call_id=cid, tool_name=tool))
        msgs.append(
            Msg("assistant", self._choice(spec.blocks).format_map(ctx), finish_reason="stop")
        )
        return msgs

    def subagent_turn(self, topic: Topic, index: int) -> list[Msg]:
        """A delegated sub-task: goal from the parent agent, read-only digging, a report."""
        spec = self._specs[topic.key]
        ctx = self._ctx[spec.key](topic.params)
        lang = _ZH if spec.zh else _EN
        sub = _SUB_ZH if spec.zh else _SUB_EN
        choice = self._choice
        if index == 0:
            label = choice(sub["ctx"]).format_map(ctx)
            sep = "" if spec.zh else " "
            text = (
                f"{choice(sub['goal']).format_map(ctx)}\n\n{label}{sep}"
                f"{choice(spec.facts).format_map(ctx)}"
            )
        else:
            text = choice(sub["more"]).format_map(ctx)
        msgs = [Msg("user", text)]
        rnd = self._random
        self._tool_rounds(spec, ctx, lang, msgs, 1 + (rnd() < 0.5) + (rnd() < 0.2), readonly=True)
        facts = self._sample(spec.facts, min(3, len(spec.facts)))
        parts = [
            sub["h_sum"] + "\n" + facts[0].format_map(ctx),
            sub["h_find"] + "\n" + "\n".join(f"- {f.format_map(ctx)}" for f in facts[1:]),
        ]
        if spec.files:
            paths = dict.fromkeys(p.format_map(ctx) for p, _ in spec.files)
            parts.append(sub["h_files"] + "\n" + "\n".join(f"- `{p}`" for p in paths))
        parts.append(sub["h_next"] + "\n" + choice(spec.steps).format_map(ctx))
        msgs.append(Msg("assistant", "\n\n".join(parts), finish_reason="stop"))
        return msgs

    # ------------------------------------------------------------------ pieces

    def _user_text(self, spec: _Spec, ctx: _Ctx, lang: dict, index: int) -> tuple[str, str | None]:
        """The user's message, and the fact that answers it when it is an opening question."""
        rnd = self._random
        choice = self._choice
        r = rnd()
        lead = None
        if index == 0 or r < 0.12:
            i = int(rnd() * len(spec.asks))
            text = spec.asks[i].format_map(ctx)
            if i < len(spec.facts):
                lead = spec.facts[i]
        elif r < 0.7 and spec.follow:
            text = choice(spec.follow).format_map(ctx)
        else:
            text = choice(lang["follow"]).format_map(ctx)
        r = rnd()
        if r < 0.15 and spec.logs:
            tail = self._log_lines(ctx, 2 + int(rnd() * 6))
            lead = "报错如下：" if spec.zh else choice(("full error:", "log:", "output:", "here:"))
            text = f"{text}\n\n{lead}\n```\n{tail}\n```"
        elif r < 0.162:
            risky = choice(_RISKY_ZH if spec.zh else _RISKY).format_map(ctx)
            text = f"{text}\n\n{risky}" if rnd() < 0.5 else risky
        return text, lead

    def _tool_rounds(
        self, spec: _Spec, ctx: _Ctx, lang: dict, msgs: list[Msg], rounds: int, readonly: bool
    ) -> None:
        rnd = self._random
        choice = self._choice
        for _ in range(rounds):
            r = rnd()
            k = 1 if r < 0.55 else 2 if r < 0.88 else 3
            calls = []
            results = []
            seen = set()
            for _ in range(k):
                name, args, result = self._tool(spec, ctx, lang, readonly)
                key = (name, str(args.get("path") or args.get("command") or args))
                if key in seen:
                    continue  # models don't issue the same call twice in one batch
                seen.add(key)
                cid = self._call_id()
                calls.append(
                    {
                        "id": cid,
                        "type": "function",
                        "function": {
                            "name": name,
                            "arguments": json.dumps(args, ensure_ascii=False),
                        },
                    }
                )
                if len(result) > TOOL_OUTPUT_MAX:
                    cut = len(result) - TOOL_OUTPUT_MAX
                    result = f"{result[:TOOL_OUTPUT_MAX]}\n… [output truncated: {cut} more chars]"
                results.append(Msg("tool", result, tool_call_id=cid, tool_name=name))
            r = rnd()
            if r < 0.22:
                content = None
            elif r < 0.6 or not spec.facts:
                content = choice(lang["preamble"]).format_map(ctx)
            else:
                content = (
                    choice(spec.facts).format_map(ctx)
                    + ("" if spec.zh else " ")
                    + choice(lang["verify"]).format_map(ctx)
                )
            reasoning = self._reasoning(spec, ctx, lang) if rnd() < 0.3 else None
            msgs.append(
                Msg(
                    "assistant",
                    content,
                    tool_calls=json.dumps(calls, ensure_ascii=False),
                    reasoning=reasoning,
                    finish_reason="tool_calls",
                )
            )
            msgs.extend(results)

    def _call_id(self) -> str:
        bits = self._rng.getrandbits(128)
        if bits & 3:
            return f"call_{bits >> 32:024x}"
        chars = []
        for _ in range(22):
            bits, d = divmod(bits, 62)
            chars.append(_B62[d])
        return "toolu_01" + "".join(chars)

    def _tool(self, spec: _Spec, ctx: _Ctx, lang: dict, readonly: bool) -> tuple[str, dict, str]:
        r = self._random()
        if r < 0.5 or not spec.files:
            return self._terminal(spec, ctx)
        if r < 0.64:
            return self._read_file(spec, ctx)
        if r < 0.72 and spec.hits:
            return self._search_files(spec, ctx)
        if r < 0.81 and spec.web:
            return self._web_search(spec, ctx)
        if r < 0.87 and spec.patches and not readonly:
            return self._patch(spec, ctx)
        if r < 0.9 and spec.files and not readonly:
            return self._write_file(spec, ctx)
        if r < 0.95:
            return self._session_search(spec, ctx)
        if r < 0.975 or readonly:
            return self._todo(spec, ctx)
        return self._memory(spec, ctx, lang)

    def _terminal(self, spec: _Spec, ctx: _Ctx) -> tuple[str, dict, str]:
        if not spec.cmds:
            return self._web_search(spec, ctx)
        cmd, out = self._choice(spec.cmds)
        args: dict = {"command": cmd.format_map(ctx)}
        r = self._random()
        if r < 0.12:
            args["timeout"] = self._choice((60, 120, 300))
        elif r < 0.2:
            args["workdir"] = f"~/src/{ctx['repo']}"
        return "terminal", args, out.format_map(ctx) or "(no output)"

    def _read_file(self, spec: _Spec, ctx: _Ctx) -> tuple[str, dict, str]:
        path, body = self._choice(spec.files)
        path = path.format_map(ctx)
        args: dict = {"path": path}
        rows = body.format_map(ctx).split("\n")
        start = 1
        if len(rows) > 30 and self._random() < 0.4:
            start = 1 + int(self._random() * (len(rows) - 20))
            args["offset"] = start
            args["limit"] = 40
            rows = rows[start - 1 : start + 39]
        text = "\n".join([f"{i:>6}|{row}" for i, row in enumerate(rows, start)])
        return "read_file", args, text

    def _search_files(self, spec: _Spec, ctx: _Ctx) -> tuple[str, dict, str]:
        pattern, found = self._choice(spec.hits)
        matches = [
            {"path": p.format_map(ctx), "line": no, "content": line.format_map(ctx)}
            for p, no, line in found[:10]
        ]
        args = {"pattern": pattern, "target": "content", "path": "."}
        body = {"total_count": len(matches), "matches": matches}
        return "search_files", args, json.dumps(body, ensure_ascii=False)

    def _web_search(
        self, spec: _Spec, ctx: _Ctx, template: str | None = None
    ) -> tuple[str, dict, str]:
        choice = self._choice
        template = template or (choice(spec.web) if spec.web else choice(spec.titles))
        query = template.format_map(ctx)
        results = [
            {"title": t, "url": u, "description": _clip(choice(spec.facts).format_map(ctx), 220)}
            for t, u in spec.docs
        ]
        num = ctx["big"].replace(",", "")
        if spec.zh:
            results.append(
                {
                    "title": f"{query} - CSDN博客",
                    "url": f"https://blog.csdn.net/weixin_{num}/article/details/1{num}",
                    "description": _clip(choice(spec.steps).format_map(ctx), 200),
                }
            )
        else:
            slug = "-".join(query.lower().split()[:8]).strip("\"'`")
            results.append(
                {
                    "title": f"{_clip(query, 70)} - Stack Overflow",
                    "url": f"https://stackoverflow.com/questions/{num}/{slug}",
                    "description": _clip(choice(spec.steps).format_map(ctx), 200),
                }
            )
        if self._random() < 0.5:
            results.append(
                {
                    "title": (
                        f"{ctx['err'][:60]} · Issue #{ctx['num']} · {ctx['org']}/{ctx['repo']}"
                    ),
                    "url": f"https://github.com/{ctx['org']}/{ctx['repo']}/issues/{ctx['num']}",
                    "description": _clip(choice(spec.facts).format_map(ctx), 200),
                }
            )
        body = {"success": True, "data": {"web": results}}
        return "web_search", {"query": query}, json.dumps(body, ensure_ascii=False)

    def _patch(self, spec: _Spec, ctx: _Ctx) -> tuple[str, dict, str]:
        path, old, new = self._choice(spec.patches)
        path = path.format_map(ctx)
        old = old.format_map(ctx)
        new = new.format_map(ctx)
        ol = old.split("\n")
        nl = new.split("\n")
        at = ctx["lineno"]
        diff = "\n".join(
            (
                f"--- a/{path}",
                f"+++ b/{path}",
                f"@@ -{at},{len(ol)} +{at},{len(nl)} @@",
                *("-" + x for x in ol),
                *("+" + x for x in nl),
            )
        )
        args = {"mode": "replace", "path": path, "old_string": old, "new_string": new}
        body = {"success": True, "diff": diff, "files_modified": [path]}
        return "patch", args, json.dumps(body, ensure_ascii=False)

    def _write_file(self, spec: _Spec, ctx: _Ctx) -> tuple[str, dict, str]:
        path, body = self._choice(spec.files)
        path = path.format_map(ctx)
        text = body.format_map(ctx)
        for p, old, new in spec.patches:
            if p.format_map(ctx) == path:
                text = text.replace(old.format_map(ctx), new.format_map(ctx))
        result = {"bytes_written": len(text.encode()), "dirs_created": False}
        return "write_file", {"path": path, "content": text}, json.dumps(result)

    def _session_search(self, spec: _Spec, ctx: _Ctx) -> tuple[str, dict, str]:
        choice = self._choice
        words = ctx["err"].replace("`", "").split()
        query = " ".join(words[:3]) if len(words) > 2 else ctx["err"]
        found = []
        for _ in range(int(self._random() * 3)):
            step = choice(spec.steps).format_map(ctx)
            recap = choice(_RECAP_ZH if spec.zh else _RECAP_EN)
            summary = recap.format(err=ctx["err"], host=ctx["host"], svc=ctx["svc"], step=step)
            found.append(
                {
                    "session_id": choice(ctx.pools["sid"]),
                    "when": f"{choice(ctx.pools['date'])} {choice(ctx.pools['hms'])[:5]}",
                    "source": choice(_SOURCES),
                    "model": choice(ctx.pools["model"]),
                    "summary": summary,
                }
            )
        body = {
            "success": True,
            "query": query,
            "results": found,
            "count": len(found),
            "sessions_searched": 40 + int(self._random() * 3000),
        }
        return "session_search", {"query": query, "limit": 3}, json.dumps(body, ensure_ascii=False)

    def _todo(self, spec: _Spec, ctx: _Ctx) -> tuple[str, dict, str]:
        steps = self._sample(spec.steps, min(len(spec.steps), 3 + int(self._random() * 3)))
        done = int(self._random() * len(steps))
        todos = [
            {
                "id": str(i),
                "content": s.format_map(ctx),
                "status": "completed"
                if i <= done
                else "in_progress"
                if i == done + 1
                else "pending",
            }
            for i, s in enumerate(steps, 1)
        ]
        summary = {
            "total": len(todos),
            "completed": done,
            "in_progress": 1 if done < len(todos) else 0,
            "pending": max(0, len(todos) - done - 1),
        }
        result = json.dumps({"todos": todos, "summary": summary}, ensure_ascii=False)
        return "todo", {"todos": todos}, result

    def _memory(self, spec: _Spec, ctx: _Ctx, lang: dict) -> tuple[str, dict, str]:
        target = "user" if self._random() < 0.5 else "memory"
        content = self._choice(lang["remember"]).format_map(ctx)
        used = 200 + int(self._random() * (_LIMITS[target] - 300))
        args = {"action": "add", "target": target, "content": content}
        body = {
            "success": True,
            "message": f"Added entry to {target.upper()}.md",
            "usage": f"{used}/{_LIMITS[target]} chars",
        }
        return "memory", args, json.dumps(body, ensure_ascii=False)

    def _reasoning(self, spec: _Spec, ctx: _Ctx, lang: dict) -> str:
        choice = self._choice
        first = choice(spec.think or lang["think"]).format_map(ctx)
        if self._random() < 0.5:
            return f"{first}\n\n{choice(lang['think']).format_map(ctx)}"
        return first

    def _answer(self, spec: _Spec, ctx: _Ctx, lang: dict, lead: str | None) -> str:
        """Final Markdown answer; ``lead`` is the fact matching the question, if known."""
        rnd = self._random
        choice = self._choice
        sep = "" if spec.zh else " "
        first = lead or choice(spec.facts)
        cause_h, fix_h, verify_h = choice(_ZH_HEADS if spec.zh else _EN_HEADS)
        r = rnd()
        if r < 0.12:
            fact = first.format_map(ctx)
            if rnd() < 0.3:
                fact = choice(lang["opener"]).format_map(ctx) + sep + fact
            parts = [fact]
            if rnd() < 0.5:
                label = "**解决：**" if spec.zh else "**Fix:** "
                parts.append(label + choice(spec.steps).format_map(ctx))
            if rnd() < 0.4:
                parts.append(choice(lang["closer"]).format_map(ctx))
        elif r < 0.52:
            parts = [first.format_map(ctx)]
            if rnd() < 0.5:
                second = choice(spec.facts)
                if second is not first:
                    parts.append(second.format_map(ctx))
            parts.append(fix_h)
            parts.append(self._steps(spec, ctx, 2 + int(rnd() * 4)))
            if rnd() < 0.7 and spec.blocks:
                parts.append(choice(spec.blocks).format_map(ctx))
            if rnd() < 0.6:
                parts.append(choice(lang["closer"]).format_map(ctx))
        else:
            facts = self._sample(spec.facts, 2)
            if lead is not None:
                facts = [lead, facts[1] if facts[0] is lead else facts[0]]
            parts = [
                cause_h,
                facts[0].format_map(ctx),
                facts[1].format_map(ctx),
                fix_h,
                self._steps(spec, ctx, 3 + int(rnd() * 3)),
            ]
            if spec.blocks:
                parts.append(choice(spec.blocks).format_map(ctx))
            if rnd() < 0.6:
                parts.append(verify_h)
                if len(spec.blocks) > 1 and rnd() < 0.7:
                    parts.append(choice(spec.blocks).format_map(ctx))
                else:
                    parts.append(choice(spec.steps).format_map(ctx))
            if rnd() < 0.5 and len(spec.facts) > 3:
                extra = [f for f in self._sample(spec.facts, 3) if f not in facts][:2]
                parts.append(
                    lang["notes"][0] + "\n" + "\n".join([f"- {f.format_map(ctx)}" for f in extra])
                )
            parts.append(choice(lang["closer"]).format_map(ctx))
        return "\n\n".join(parts)

    def _steps(self, spec: _Spec, ctx: _Ctx, k: int) -> str:
        steps = self._sample(spec.steps, min(k, len(spec.steps)))
        if self._random() < 0.6:
            return "\n".join([f"{i}. {s.format_map(ctx)}" for i, s in enumerate(steps, 1)])
        return "\n".join([f"- {s.format_map(ctx)}" for s in steps])

    def _log_lines(self, ctx: _Ctx, k: int) -> str:
        spec: _Spec = ctx.spec  # type: ignore[attr-defined]
        cls = type(ctx)
        base = {key: ctx[key] for key in spec.stable}
        rnd = self._random
        choice = self._choice
        logs = spec.logs
        if len(logs) > 2:
            # real tails repeat a few kinds of lines rather than every kind once
            logs = self._sample(logs, min(len(logs), 2 + int(rnd() * 3)))
        style = spec.logfmt
        t = int(rnd() * 80000)
        date = choice(_NUMERIC["date"])
        mon = f"{_MONTHS[int(date[5:7]) - 1]} {int(date[8:]):2d}"
        out = []
        for _ in range(k):
            line = choice(logs).format_map(cls(base))
            t += int(rnd() * 9)
            h, rest = divmod(t, 3600)
            m, s = divmod(rest, 60)
            if style == "iso":
                out.append(f"{date}T{h:02d}:{m:02d}:{s:02d}.{int(rnd() * 1000):03d}Z {line}")
            elif style == "py":
                out.append(f"{date} {h:02d}:{m:02d}:{s:02d},{int(rnd() * 1000):03d} {line}")
            elif style == "syslog":
                out.append(f"{mon} {h:02d}:{m:02d}:{s:02d} {base.get('host', 'srv')} {line}")
            else:
                out.append(line)
        return "\n".join(out)

    def _log(self, ctx: _Ctx) -> str:
        spec: _Spec = ctx.spec  # type: ignore[attr-defined]
        if not spec.logs:
            return ""
        return self._log_lines(ctx, self._choice(_LOG_SIZES))


def _clip(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters at a word boundary when possible."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:—-") + "…"


def _bench(turns: int, seed: int) -> None:
    """Generate ``turns`` mixed turns and print throughput and length statistics."""
    t0 = time.perf_counter()
    corpus = Corpus(random.Random(seed))
    setup = time.perf_counter() - t0
    rng = random.Random(seed + 1)
    count = 0
    chars = 0
    by_role: dict[str, list[int]] = {}
    start = time.perf_counter()
    topic = corpus.pick_topic(False)
    for i in range(turns):
        if i % 8 == 0:
            topic = corpus.pick_topic(rng.random() < 0.1)
        r = rng.random()
        if r < 0.04:
            msgs = corpus.cron_turn(i % 3)
        elif r < 0.08:
            msgs = corpus.subagent_turn(topic, i % 2)
        else:
            msgs = corpus.turn(topic, i % 8)
        if i % 40 == 0:
            msgs.append(Msg("user", corpus.compaction_summary(topic, i % 5, i % 80 == 0)))
        for m in msgs:
            n = len(m.content or "")
            chars += n
            by_role.setdefault(m.role, []).append(n)
        count += len(msgs)
    elapsed = time.perf_counter() - start
    print(f"setup {setup * 1000:.1f} ms; {turns} turns -> {count} messages in {elapsed:.2f} s")
    print(f"{count / elapsed:,.0f} messages/s, {elapsed / count * 1e6:.1f} us/message")
    print(f"average content length {chars / count:.0f} chars")
    for role, sizes in sorted(by_role.items()):
        sizes.sort()
        mid = sizes[len(sizes) // 2]
        p95 = sizes[int(len(sizes) * 0.95)]
        print(
            f"  {role:9} n={len(sizes):>8} avg={sum(sizes) / len(sizes):6.0f} "
            f"median={mid:5} p95={p95:5} max={sizes[-1]}"
        )


if __name__ == "__main__":
    _bench(
        int(sys.argv[1]) if len(sys.argv) > 1 else 50_000,
        int(sys.argv[2]) if len(sys.argv) > 2 else 7,
    )
