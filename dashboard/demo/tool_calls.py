"""The tool calls a demo assistant makes and what each one returns."""

from __future__ import annotations

import json

from dashboard.demo.tables import (
    Ctx,
    Spec,
)
from dashboard.hermes.conventions import (
    MEMORY_FILES,
)

_SOURCES = ("cli", "cli", "telegram", "tui", "discord", "slack", "cli")
_LIMITS = {f.key: f.default_limit for f in MEMORY_FILES}  # the memory tool's usage line
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


def clip_words(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters at a word boundary when possible."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:—-") + "…"


class ToolCalls:
    """The tool calls of :class:`corpus.Corpus` (its random draws and call ids)."""

    def _tool(self, spec: Spec, ctx: Ctx, lang: dict, readonly: bool) -> tuple[str, dict, str]:
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

    def _terminal(self, spec: Spec, ctx: Ctx) -> tuple[str, dict, str]:
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

    def _read_file(self, spec: Spec, ctx: Ctx) -> tuple[str, dict, str]:
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

    def _search_files(self, spec: Spec, ctx: Ctx) -> tuple[str, dict, str]:
        pattern, found = self._choice(spec.hits)
        matches = [
            {"path": p.format_map(ctx), "line": no, "content": line.format_map(ctx)}
            for p, no, line in found[:10]
        ]
        args = {"pattern": pattern, "target": "content", "path": "."}
        body = {"total_count": len(matches), "matches": matches}
        return "search_files", args, json.dumps(body, ensure_ascii=False)

    def _web_search(
        self, spec: Spec, ctx: Ctx, template: str | None = None
    ) -> tuple[str, dict, str]:
        choice = self._choice
        template = template or (choice(spec.web) if spec.web else choice(spec.titles))
        query = template.format_map(ctx)
        results = [
            {
                "title": t,
                "url": u,
                "description": clip_words(choice(spec.facts).format_map(ctx), 220),
            }
            for t, u in spec.docs
        ]
        num = ctx["big"].replace(",", "")
        if spec.zh:
            results.append(
                {
                    "title": f"{query} - CSDN博客",
                    "url": f"https://blog.csdn.net/weixin_{num}/article/details/1{num}",
                    "description": clip_words(choice(spec.steps).format_map(ctx), 200),
                }
            )
        else:
            slug = "-".join(query.lower().split()[:8]).strip("\"'`")
            results.append(
                {
                    "title": f"{clip_words(query, 70)} - Stack Overflow",
                    "url": f"https://stackoverflow.com/questions/{num}/{slug}",
                    "description": clip_words(choice(spec.steps).format_map(ctx), 200),
                }
            )
        if self._random() < 0.5:
            results.append(
                {
                    "title": (
                        f"{ctx['err'][:60]} · Issue #{ctx['num']} · {ctx['org']}/{ctx['repo']}"
                    ),
                    "url": f"https://github.com/{ctx['org']}/{ctx['repo']}/issues/{ctx['num']}",
                    "description": clip_words(choice(spec.facts).format_map(ctx), 200),
                }
            )
        body = {"success": True, "data": {"web": results}}
        return "web_search", {"query": query}, json.dumps(body, ensure_ascii=False)

    def _patch(self, spec: Spec, ctx: Ctx) -> tuple[str, dict, str]:
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

    def _write_file(self, spec: Spec, ctx: Ctx) -> tuple[str, dict, str]:
        path, body = self._choice(spec.files)
        path = path.format_map(ctx)
        text = body.format_map(ctx)
        for p, old, new in spec.patches:
            if p.format_map(ctx) == path:
                text = text.replace(old.format_map(ctx), new.format_map(ctx))
        result = {"bytes_written": len(text.encode()), "dirs_created": False}
        return "write_file", {"path": path, "content": text}, json.dumps(result)

    def _session_search(self, spec: Spec, ctx: Ctx) -> tuple[str, dict, str]:
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

    def _todo(self, spec: Spec, ctx: Ctx) -> tuple[str, dict, str]:
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

    def _memory(self, spec: Spec, ctx: Ctx, lang: dict) -> tuple[str, dict, str]:
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
