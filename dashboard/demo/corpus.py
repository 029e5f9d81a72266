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
``=== <field>`` section per table of :func:`spec_from_tables`.

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
from dataclasses import dataclass

from dashboard.demo.tables import (
    B62,
    CRON,
    CRON_JOBS,
    EN,
    EN_HEADS,
    GLOBAL,
    NUMERIC,
    RISKY,
    RISKY_ZH,
    SPECS,
    SUB_EN,
    SUB_ZH,
    ZH,
    ZH_HEADS,
    Ctx,
    Spec,
    generated_pools,
)
from dashboard.demo.tool_calls import ToolCalls, clip_words
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


# --------------------------------------------------------------------------- shared pools


# --------------------------------------------------------------------------- generic prose


# --------------------------------------------------------------------------- topics


# --------------------------------------------------------------------------- delegation


# --------------------------------------------------------------------------- scheduled jobs


# --------------------------------------------------------------------------- generator

_P_TOOLS = 0.62  # share of turns where the assistant calls tools
_LOG_SIZES = (4, 5, 6, 8, 10, 12, 14, 16, 18, 20, 24, 30, 36, 48)
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

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


class Corpus(ToolCalls):
    """Deterministic source of demo conversations; every draw comes from ``rng``."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._random = rng.random
        self._choice = rng.choice
        self._sample = rng.sample
        base = {**GLOBAL, **NUMERIC, **generated_pools(rng)}
        self._ctx: dict[str, type[Ctx]] = {}
        for spec in (*SPECS, *CRON):
            pools = {**base, **spec.vocab}
            for k in list(pools):
                pools.setdefault(k + "2", pools[k])
                pools.setdefault(k + "3", pools[k])
            self._ctx[spec.key] = type(
                f"_Ctx_{spec.key}",
                (Ctx,),
                {
                    "__slots__": (),
                    "pools": pools,
                    "choice": staticmethod(rng.choice),
                    "corpus": self,
                    "spec": spec,
                },
            )
        self._specs = {s.key: s for s in SPECS}
        self._cron_job: tuple[Spec, ...] | None = None
        self._en = tuple(s for s in SPECS if not s.zh)
        self._zh = tuple(s for s in SPECS if s.zh)

    # ------------------------------------------------------------------ public API

    def pick_topic(self, chinese: bool) -> Topic:
        """A topic with a fresh title and session-stable parameters (host, service...)."""
        spec = self._choice(self._zh if chinese else self._en)
        ctx = self._ctx[spec.key]()
        for key in spec.stable:
            ctx[key]  # noqa: B018 - draws and pins the value for the session
        title = clip_words(self._choice(spec.titles).format_map(ctx), TITLE_MAX)
        return Topic(spec.key, title, spec.zh, tuple(ctx.items()))

    def turn(self, topic: Topic, index: int) -> list[Msg]:
        """One exchange: user message, optional tool rounds, final assistant answer."""
        spec = self._specs[topic.key]
        ctx = self._ctx[spec.key](topic.params)
        lang = ZH if spec.zh else EN
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
                    cmd.format_map(ctx).split("\n")[0], ctx["host"], clip_words(first.strip(), 90)
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
            self._cron_job = self._choice(CRON_JOBS)
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
        lang = ZH if spec.zh else EN
        sub = SUB_ZH if spec.zh else SUB_EN
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

    def _user_text(self, spec: Spec, ctx: Ctx, lang: dict, index: int) -> tuple[str, str | None]:
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
            risky = choice(RISKY_ZH if spec.zh else RISKY).format_map(ctx)
            text = f"{text}\n\n{risky}" if rnd() < 0.5 else risky
        return text, lead

    def _tool_rounds(
        self, spec: Spec, ctx: Ctx, lang: dict, msgs: list[Msg], rounds: int, readonly: bool
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
            chars.append(B62[d])
        return "toolu_01" + "".join(chars)

    def _reasoning(self, spec: Spec, ctx: Ctx, lang: dict) -> str:
        choice = self._choice
        first = choice(spec.think or lang["think"]).format_map(ctx)
        if self._random() < 0.5:
            return f"{first}\n\n{choice(lang['think']).format_map(ctx)}"
        return first

    def _answer(self, spec: Spec, ctx: Ctx, lang: dict, lead: str | None) -> str:
        """Final Markdown answer; ``lead`` is the fact matching the question, if known."""
        rnd = self._random
        choice = self._choice
        sep = "" if spec.zh else " "
        first = lead or choice(spec.facts)
        cause_h, fix_h, verify_h = choice(ZH_HEADS if spec.zh else EN_HEADS)
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

    def _steps(self, spec: Spec, ctx: Ctx, k: int) -> str:
        steps = self._sample(spec.steps, min(k, len(spec.steps)))
        if self._random() < 0.6:
            return "\n".join([f"{i}. {s.format_map(ctx)}" for i, s in enumerate(steps, 1)])
        return "\n".join([f"- {s.format_map(ctx)}" for s in steps])

    def _log_lines(self, ctx: Ctx, k: int) -> str:
        spec: Spec = ctx.spec  # type: ignore[attr-defined]
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
        date = choice(NUMERIC["date"])
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

    def _log(self, ctx: Ctx) -> str:
        spec: Spec = ctx.spec  # type: ignore[attr-defined]
        if not spec.logs:
            return ""
        return self._log_lines(ctx, self._choice(_LOG_SIZES))
