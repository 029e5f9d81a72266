"""The demo's text tables (dashboard/demo/data/) read into topic specs, vocabularies and prose."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any


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
class Spec:
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


def spec_from_tables(
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
) -> Spec:
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
    return Spec(
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


DATA = resources.files(__package__).joinpath("data")

_SECTION = re.compile(r"^=== (\S+)\n", re.M)


def read_sections(text: str) -> dict[str, str]:
    """``=== name`` sections of a data file (a section runs to the next header)."""
    parts = _SECTION.split(text)
    return {name: body.strip("\n") for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def load_topics(folder: str) -> list[Spec]:
    """Parse every topic file of ``data/<folder>/`` in name order."""
    directory = DATA.joinpath(folder)
    shared_file = directory.joinpath("shared.txt")
    shared = read_sections(shared_file.read_text("utf-8")) if shared_file.is_file() else {}
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
        options.update(read_sections(text))
        key = options.pop("key")
        specs.append(spec_from_tables(str(key), **options))  # type: ignore[arg-type]
    return specs


class Ctx(dict):  # type: ignore[type-arg]
    """Slot values of one turn; unknown slots are drawn lazily from the pools."""

    __slots__ = ()
    pools: dict[str, tuple[str, ...]] = {}
    corpus: Any  # the Corpus drawing this turn (it writes «log» slots)

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


GLOBAL = _vocab(DATA.joinpath("vocab.txt").read_text("utf-8"))

NUMERIC: dict[str, tuple[str, ...]] = {
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

B62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def generated_pools(rng: random.Random) -> dict[str, tuple[str, ...]]:
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


def _prose(lang: str) -> dict[str, tuple[str, ...]]:
    """The line lists of ``data/prose-<lang>.txt`` (openers, closers, risky input, …)."""
    text = DATA.joinpath(f"prose-{lang}.txt").read_text("utf-8")
    return {name: _lines(body) for name, body in read_sections(text).items()}


EN = _prose("en")

ZH = _prose("zh")

# (cause, fix, verify) heading styles; one style per answer
EN_HEADS = (
    ("## What's happening", "## Fix", "## Verify"),
    ("## Root cause", "## Steps", "## Check it worked"),
    ("### Why it fails", "### What to change", "### Sanity check"),
    ("**Why:**", "**Fix:**", "**To confirm:**"),
    ("### Cause", "### Recommended change", "### Verify"),
    ("## Diagnosis", "## Plan", "## Verification"),
)

ZH_HEADS = (
    ("## 原因分析", "## 解决方案", "## 验证"),
    ("### 问题原因", "### 修改步骤", "### 验证"),
    ("**原因：**", "**解决：**", "**验证方法：**"),
    ("## 排查结论", "## 处理办法", "## 确认是否生效"),
)

RISKY = EN["risky"]

RISKY_ZH = ZH["risky"]

SPECS: list[Spec] = load_topics("topics")

SUB_EN = {
    "goal": EN["delegation-goal"],
    "ctx": EN["delegation-ctx"],
    "more": EN["delegation-more"],
    "h_sum": "## Summary",
    "h_find": "## Findings",
    "h_files": "## Evidence (files)",
    "h_next": "## Suggested next step",
}

SUB_ZH = {
    "goal": ZH["delegation-goal"],
    "ctx": ZH["delegation-ctx"],
    "more": ZH["delegation-more"],
    "h_sum": "## 结论",
    "h_find": "## 发现",
    "h_files": "## 相关文件",
    "h_next": "## 建议下一步",
}

CRON: list[Spec] = load_topics("cron")

CRON_JOBS: tuple[tuple[Spec, ...], ...] = tuple(
    tuple(s for s in CRON if s.titles[0] == name)
    for name in dict.fromkeys(s.titles[0] for s in CRON)
)
