"""A compaction chain drawn server-side as SVG: one row per segment on a time axis.

Presentation only (no SQL, no request state beyond building links): the picture
is made from a :class:`~dashboard.lineage.chains.Chain`. Rows follow
``chain.segments`` (depth-first from the root), so a child is always below its
parent and the connector between them runs down, then right to the child's
start. Every style is a class in ``static/app.css`` (the CSP forbids ``style``);
geometry uses SVG attributes. Every piece of text is escaped: titles are
untrusted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta

from markupsafe import Markup, escape

from dashboard.costs.rules import STATUS_LABELS, CostSummary
from dashboard.hermes.conventions import TOKEN_KINDS
from dashboard.lineage.chains import Chain, Segment
from dashboard.lineage.epochs import Epoch
from dashboard.text import clip_line
from dashboard.web.format import duration, shortdate, usd

WIDTH = 1120  # viewBox width; the stylesheet scales the picture to the column
GUTTER = 290  # left column of row labels
PLOT_LEFT = GUTTER + 10
PLOT_RIGHT = WIDTH - 48  # room after the last bar for the "tip" mark
ROW_H = 18  # 200 segments stay readable at 18 px a row
BAR_H = 10
MIN_BAR_W = 4.0  # a segment of a few seconds is still a visible, clickable bar
LEGEND_H = 26
AXIS_H = 24
TOP = LEGEND_H + AXIS_H
BOTTOM_PAD = 8
BOTTOM_AXIS_ROWS = 30  # taller pictures repeat the axis labels under the last row
BOTTOM_AXIS_H = 18
LABEL_CHARS = 44  # characters of a title that fit the gutter at the label font size
INDENT = 12  # px per nesting level (branches, delegations, resets; not continuations)
MAX_INDENT_LEVELS = 6
MIN_TICK_GAP = 110  # px between axis labels
COMPACTION_TIMES_H = 18  # the strip under the rows naming each in-place compaction's time
MIN_TIME_GAP = 40  # px between two of those labels ("10:03" is ~28 px); closer ones skip

EDGE_KINDS = ("continuation", "branch", "delegation", "reset", "unknown")
LEGEND = (
    ("continuation", "continuation"),
    ("branch", "branch"),
    ("delegation", "delegation"),
    ("reset", "reset"),
    ("unknown", "unknown link"),
)
# Axis steps in seconds; each below a day divides a day, so ticks fall on round times.
_STEPS = (
    1,
    2,
    5,
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    10800,
    21600,
    43200,
    86400,
    2 * 86400,
    7 * 86400,
    14 * 86400,
    28 * 86400,
    91 * 86400,
    182 * 86400,
    364 * 86400,
)
_DAY = 86400


def render_chain_svg(chain: Chain, session_url: Callable[[str], str] | None = None) -> Markup:
    """The chain as an accessible SVG; every bar links to its session via ``session_url``."""
    if session_url is None:
        from flask import url_for

        def session_url(sid: str) -> str:
            return url_for("sessions.show", session_id=sid)

    segments = list(chain.segments)
    t0, t1 = _time_range(segments)
    scale = _Scale(t0, t1)
    rows = {s.session_id: i for i, s in enumerate(segments)}
    levels = _levels(segments)
    rows_h = max(1, len(segments)) * ROW_H
    bottom_axis = len(segments) > BOTTOM_AXIS_ROWS
    height = TOP + rows_h + BOTTOM_PAD + (BOTTOM_AXIS_H if bottom_axis else 0)
    times_y = height + COMPACTION_TIMES_H - 6  # the compactions' times, under everything
    if any(s.compactions for s in segments):
        height += COMPACTION_TIMES_H
    root = chain.segment(chain.root) or (segments[0] if segments else None)
    n, m = chain.part_of(chain.focus) or (1, len(chain.line))

    out: list[str] = [
        f'<svg class="chain-svg" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'aria-labelledby="chain-svg-title chain-svg-desc">',
        f'<title id="chain-svg-title">{escape(_title(root, len(segments), chain))}</title>',
        f'<desc id="chain-svg-desc">{escape(_description(chain, t0, t1, n, m))}</desc>',
    ]
    out += _legend({s.kind for s in segments})
    out += _axis(scale, TOP + rows_h, bottom_axis)
    out += _rows_background(segments, chain.focus)
    out += _edges(segments, rows, scale)
    for i, seg in enumerate(segments):
        out += _row(
            seg, i, scale, levels.get(seg.session_id, 0), chain, session_url(seg.session_id)
        )
    out += _compaction_times(segments, scale, times_y)
    out.append("</svg>")
    return Markup("\n".join(out))


def epoch_url(session_id: str, epoch: Epoch) -> str:
    """The transcript where an epoch begins: its summary carrier (the compaction that
    opened it), epoch 1 its first message; the page holding it, scrolled to it."""
    from flask import url_for

    at = epoch.summary_id if epoch.summary_id is not None else epoch.first_id
    return url_for("sessions.show", session_id=session_id, at=at, _anchor=f"m{at}")


# -- geometry --------------------------------------------------------------------------


class _Scale:
    """Seconds since the epoch → x within the plot area."""

    def __init__(self, t0: float, t1: float) -> None:
        self.t0, self.t1 = t0, t1
        self.k = (PLOT_RIGHT - PLOT_LEFT) / (t1 - t0)

    def x(self, t: float) -> float:
        return PLOT_LEFT + (t - self.t0) * self.k


def _time_range(segments: list[Segment]) -> tuple[float, float]:
    starts = [s.started_at for s in segments if s.started_at is not None]
    ends = [s.end for s in segments if s.end is not None]
    if not starts:
        return 0.0, 60.0
    t0, t1 = min(starts), max(ends + starts)
    if t1 - t0 < 60:  # a chain of a few seconds still gets a readable axis
        t1 = t0 + 60
    pad = (t1 - t0) * 0.01
    return t0 - pad, t1 + pad


def _bar(seg: Segment, scale: _Scale) -> tuple[float, float]:
    """``(x, width)`` of a segment's bar; a segment with no start sits at the axis start."""
    start = seg.started_at if seg.started_at is not None else scale.t0
    end = seg.end if seg.end is not None else start
    x = scale.x(start)
    w = max(MIN_BAR_W, scale.x(end) - x)
    return x, w


def _row_y(i: int) -> float:
    """Centre line of row ``i``."""
    return TOP + i * ROW_H + ROW_H / 2


def _levels(segments: list[Segment]) -> dict[str, int]:
    """Nesting of each row: a continuation stays at its parent's level, other links go in."""
    by_id = {s.session_id: s for s in segments}
    levels: dict[str, int] = {}
    for seg in segments:  # parents come first in depth-first order
        parent = by_id.get(seg.parent_session_id or "")
        if parent is None or seg.kind == "root":
            levels[seg.session_id] = 0
        else:
            step = 0 if seg.kind == "continuation" else 1
            levels[seg.session_id] = levels.get(parent.session_id, 0) + step
    return levels


# -- parts ---------------------------------------------------------------------------


def _legend(kinds: set[str]) -> list[str]:
    """Keys for the links drawn (a root draws none; an unclassified kind is "unknown")."""
    drawn = {k if k in EDGE_KINDS else "unknown" for k in kinds if k != "root"}
    out = ['<g class="chain-legend" aria-hidden="true">']
    x = 4.0
    y = 14
    for kind, label in LEGEND:
        if kind not in drawn:
            continue
        out.append(f'<line class="edge edge-{kind}" x1="{x}" y1="{y}" x2="{x + 26}" y2="{y}"/>')
        out.append(f'<text class="legend-text" x="{x + 32}" y="{y + 4}">{escape(label)}</text>')
        x += 44 + round(len(label) * 6.4)
    out.append(f'<circle class="tip-ring" cx="{x + 6}" cy="{y}" r="4.5"/>')
    out.append(f'<text class="legend-text" x="{x + 16}" y="{y + 4}">tip (latest segment)</text>')
    x += 150
    out.append(f'<rect class="row-focus" x="{x}" y="{y - 7}" width="26" height="14" rx="2"/>')
    out.append(f'<text class="legend-text" x="{x + 32}" y="{y + 4}">this session</text>')
    out.append("</g>")
    return out


def _axis(scale: _Scale, rows_end: int, bottom: bool) -> list[str]:
    """Tick labels over the rows (and under them too when the picture is tall), grid lines."""
    y = LEGEND_H + AXIS_H - 4
    out = ['<g class="chain-axis" aria-hidden="true">']
    out.append(f'<line class="axis-line" x1="{PLOT_LEFT}" y1="{y}" x2="{PLOT_RIGHT}" y2="{y}"/>')
    for t, label in _ticks(scale.t0, scale.t1):
        x = round(scale.x(t), 1)
        out.append(f'<line class="grid-line" x1="{x}" y1="{y}" x2="{x}" y2="{rows_end}"/>')
        out.append(f'<text class="axis-text" x="{x}" y="{y - 5}">{escape(label)}</text>')
        if bottom:
            out.append(
                f'<text class="axis-text axis-bottom" x="{x}" y="{rows_end + 14}">'
                f"{escape(label)}</text>"
            )
    out.append("</g>")
    return out


def _ticks(t0: float, t1: float) -> list[tuple[float, str]]:
    """Round times across ``[t0, t1]`` with labels: times of day, or dates for long ranges."""
    most = max(2, int((PLOT_RIGHT - PLOT_LEFT) // MIN_TICK_GAP))
    step = next((s for s in _STEPS if (t1 - t0) / s <= most), _STEPS[-1])
    times: list[float] = []
    if step < _DAY:
        first = datetime.fromtimestamp(t0)
        midnight = first.replace(hour=0, minute=0, second=0, microsecond=0)
        since = (first - midnight).total_seconds()
        t = t0 - since + math.ceil(since / step) * step
        while t <= t1 and len(times) < 100:
            times.append(t)
            t += step
    else:
        day = datetime.fromtimestamp(t0).replace(hour=0, minute=0, second=0, microsecond=0)
        day += timedelta(days=1)
        days = step // _DAY
        while day.timestamp() <= t1 and len(times) < 100:
            times.append(day.timestamp())
            day += timedelta(days=days)
    span_years = datetime.fromtimestamp(t0).year != datetime.fromtimestamp(t1).year
    out = []
    previous_day = None
    for t in times:
        dt = datetime.fromtimestamp(t)
        if step >= _DAY:
            label = f"{dt:%Y-%m-%d}" if span_years else f"{dt:%b} {dt.day}"
        else:
            clock = f"{dt:%H:%M:%S}" if step < 60 else f"{dt:%H:%M}"
            today = dt.date()
            label = clock if today == previous_day else f"{dt:%b} {dt.day} {clock}"
            previous_day = today
        out.append((t, label))
    return out


def _rows_background(segments: list[Segment], focus: str) -> list[str]:
    """Zebra bands and the focus highlight, under the connectors."""
    out = ['<g class="chain-rows" aria-hidden="true">']
    for i, seg in enumerate(segments):
        y = TOP + i * ROW_H
        if seg.session_id == focus:
            out.append(f'<rect class="row-focus" x="0" y="{y}" width="{WIDTH}" height="{ROW_H}"/>')
        elif i % 2:
            out.append(f'<rect class="row-band" x="0" y="{y}" width="{WIDTH}" height="{ROW_H}"/>')
    out.append("</g>")
    return out


def _edges(segments: list[Segment], rows: dict[str, int], scale: _Scale) -> list[str]:
    """Connectors parent → child: down from the parent's bar, then right to the child's start."""
    by_id = {s.session_id: s for s in segments}
    out = ['<g class="chain-edges" aria-hidden="true">']
    for seg in segments:
        parent = by_id.get(seg.parent_session_id or "")
        if parent is None or seg.kind == "root":
            continue
        px, pw = _bar(parent, scale)
        cx, _ = _bar(seg, scale)
        x = round(min(max(cx, px), px + pw), 1)
        y_from = round(_row_y(rows[parent.session_id]) + BAR_H / 2, 1)
        y_to = round(_row_y(rows[seg.session_id]), 1)
        kind = seg.kind if seg.kind in EDGE_KINDS else "unknown"
        out.append(
            f'<path class="edge edge-{kind}" d="M{x},{y_from} V{y_to} H{round(cx, 1)}">'
            f"<title>{escape(kind)}: {escape(parent.label)} → {escape(seg.label)}</title></path>"
        )
    out.append("</g>")
    return out


def _row(seg: Segment, i: int, scale: _Scale, level: int, chain: Chain, href: str) -> list[str]:
    y = TOP + i * ROW_H
    cy = _row_y(i)
    x, w = _bar(seg, scale)
    part = chain.part_of(seg.session_id) if seg.session_id in chain.line else None
    classes = ["seg", f"seg-{seg.kind}"]
    if seg.session_id == chain.focus:
        classes.append("is-focus")
    if seg.is_tip:
        classes.append("is-tip")
    if part is None:
        classes.append("off-line")
    indent = INDENT * min(level, MAX_INDENT_LEVELS)
    number = (
        str(part[0])
        if part
        else {"branch": "↳", "delegation": "⇢", "reset": "↺"}.get(seg.kind, "·")
    )
    label = clip_line(seg.label, LABEL_CHARS - indent // 6)
    out = [
        f'<a class="{" ".join(classes)}" href="{escape(href)}" tabindex="0" '
        f'data-session-id="{escape(seg.session_id)}" aria-describedby="{panel_id(i)}">',
        # Native tooltip for pages without JavaScript; static/chains.js removes it and
        # shows the HTML panel (render_segment_panels) on hover, focus and tap instead.
        f"<title>{escape(tooltip(seg, part))}</title>",
        f'<rect class="row-hit" x="0" y="{y}" width="{WIDTH}" height="{ROW_H}"/>',
        f'<text class="row-num" x="28" y="{cy + 4}">{escape(number)}</text>',
        f'<text class="row-label" x="{36 + indent}" y="{cy + 4}">{escape(label)}</text>',
        f'<rect class="bar bar-{seg.kind}" x="{round(x, 1)}" y="{cy - BAR_H / 2}" '
        f'width="{round(w, 1)}" height="{BAR_H}" rx="2"/>',
    ]
    if seg.is_tip:
        tx = round(x + w + 7, 1)
        out.append(f'<circle class="tip-ring" cx="{tx}" cy="{cy}" r="4.5"/>')
        out.append(f'<text class="tip-label" x="{tx + 8}" y="{cy + 4}">tip</text>')
    out.append("</a>")
    if seg.compactions:
        out += _epoch_bars(seg, i, scale)
    return out


def _compaction_times(segments: list[Segment], scale: _Scale, y: float) -> list[str]:
    """The time of each in-place compaction written under the picture at its mark (a
    label too close to the previous one is left out: the mark's tooltip still has it)."""
    marks = sorted(
        (e.compacted_at, e.number, s.compactions)
        for s in segments
        if s.compactions and s.epochs is not None
        for e in s.epochs.epochs
        if e.compacted_at is not None
    )
    if not marks:
        return []
    within_day = scale.t1 - scale.t0 < _DAY
    out = ['<g class="compaction-times">']
    last = float("-inf")
    for at, number, n in marks:
        x = scale.x(at)
        if x - last < MIN_TIME_GAP:
            continue
        last = x
        when = datetime.fromtimestamp(at)
        label = when.strftime("%H:%M") if within_day else when.strftime("%m-%d %H:%M")
        out.append(
            f'<text class="compaction-time" x="{round(x, 1)}" y="{y}" '
            f'aria-label="compaction {number} of {n}: {escape(shortdate(at))}">'
            f"{escape(label)}</text>"
        )
    out.append("</g>")
    return out


def _epoch_spans(seg: Segment, scale: _Scale) -> list[tuple[float, float]]:
    """``(x, width)`` of each epoch's piece of a segment's bar: from the compaction that
    opened it (epoch 1: the segment's start) to the one closing it (the live epoch: the
    segment's end)."""
    x0, w0 = _bar(seg, scale)
    epochs = seg.epochs.epochs if seg.epochs is not None else ()
    edges = [x0] + [scale.x(e.compacted_at) for e in epochs if e.compacted_at is not None]
    edges.append(max(x0 + w0, edges[-1]))
    return [(a, max(MIN_BAR_W, b - a)) for a, b in zip(edges, edges[1:], strict=False)]


def _epoch_bars(seg: Segment, i: int, scale: _Scale) -> list[str]:
    """Each epoch as its own link over the segment's bar (to where it begins in the
    transcript), split by a mark at each compaction."""
    assert seg.epochs is not None
    cy = _row_y(i)
    out = []
    spans = _epoch_spans(seg, scale)
    for epoch, (x, w) in zip(seg.epochs.epochs, spans, strict=True):
        classes = f"epoch{' epoch-live' if epoch.live else ''}"
        out.append(
            f'<a class="{classes}" href="{escape(epoch_url(seg.session_id, epoch))}" '
            f'tabindex="0" data-session-id="{escape(seg.session_id)}" data-epoch="{epoch.number}" '
            f'aria-describedby="{epoch_panel_id(i, epoch.number)}">'
            f"<title>{escape(epoch_tooltip(seg, epoch))}</title>"
            f'<rect class="bar bar-{seg.kind} epoch-bar" x="{round(x, 1)}" '
            f'y="{cy - BAR_H / 2}" width="{round(w, 1)}" height="{BAR_H}" rx="1"/></a>'
        )
    n = seg.compactions
    for epoch, (x, _) in zip(seg.epochs.epochs[1:], spans[1:], strict=True):
        when = shortdate(seg.epochs.epochs[epoch.number - 2].compacted_at)
        out.append(
            f'<line class="compaction-mark" x1="{round(x, 1)}" y1="{cy - BAR_H / 2 - 3}" '
            f'x2="{round(x, 1)}" y2="{cy + BAR_H / 2 + 3}">'
            f"<title>compaction {epoch.number - 1} of {n} · {escape(when)}</title></line>"
        )
    return out


# -- details panels -------------------------------------------------------------------


def panel_id(row: int) -> str:
    """The id of row ``row``'s details panel (the bar's ``aria-describedby``)."""
    return f"seg-panel-{row}"


def epoch_panel_id(row: int, number: int) -> str:
    """The id of the details panel of epoch ``number`` of row ``row``."""
    return f"epoch-panel-{row}-{number}"


def render_segment_panels(chain: Chain, session_url: Callable[[str], str] | None = None) -> Markup:
    """One HTML panel per bar with its figures, hidden until its bar is hovered, focused
    or tapped (``static/chains.js``); the segments table holds the same figures."""
    if session_url is None:
        from flask import url_for

        def session_url(sid: str) -> str:
            return url_for("sessions.show", session_id=sid)

    out = ['<div class="seg-panels">']
    for i, seg in enumerate(chain.segments):
        part = chain.part_of(seg.session_id)
        out.append(
            _panel(
                panel_id(i),
                seg.session_id,
                None,
                tooltip(seg, part),
                session_url(seg.session_id),
                "Open session",
            )
        )
        for epoch in seg.epochs.epochs if seg.compactions and seg.epochs else ():
            out.append(
                _panel(
                    epoch_panel_id(i, epoch.number),
                    seg.session_id,
                    epoch.number,
                    epoch_tooltip(seg, epoch),
                    epoch_url(seg.session_id, epoch),
                    "Open the transcript here",
                )
            )
    out.append("</div>")
    return Markup("".join(out))


# -- text ---------------------------------------------------------------------------


def tooltip(seg: Segment, part: tuple[int, int] | None) -> str:
    """A segment's figures, one per line (the bar's tooltip; plain text, escaped by callers)."""
    where = f"part {part[0]} of {part[1]}" if part else "off the continuation line"
    when = shortdate(seg.started_at) or "start unknown"
    if seg.end is not None and seg.end != seg.started_at:
        when += f" → {shortdate(seg.end)}"
    tokens = " · ".join(
        f"{kind.replace('_', ' ')} {seg.tokens.get(kind, 0):,}" for kind in TOKEN_KINDS
    )
    lines = [
        seg.label,
        f"{where} · {seg.kind}" + (" · tip" if seg.is_tip else ""),
        f"{when} ({duration(seg.span_s)})",
        f"ended: {seg.end_reason or 'still open'}",
        f"messages {seg.message_count:,} · tool calls {seg.tool_call_count:,}",
        f"tokens: {tokens}",
        "cost: unknown"
        if seg.cost.effective is None
        else f"cost: {usd(seg.cost.effective)} ({STATUS_LABELS[seg.cost.status]})"
        f" · billed {usd(seg.cost.billed)}",
    ]
    if seg.source or seg.model:
        lines.append(" · ".join(x for x in (seg.source, seg.model) if x))
    lines.append(seg.session_id)
    return "\n".join(lines)


def epoch_tooltip(seg: Segment, epoch: Epoch) -> str:
    """An epoch's figures, one per line (plain text, escaped by callers)."""
    assert seg.epochs is not None
    total, n = len(seg.epochs.epochs), seg.compactions
    end = epoch.compacted_at if epoch.compacted_at is not None else epoch.ended_at
    lines = [
        f"Epoch {epoch.number} of {total} · {seg.label}",
        f"{shortdate(epoch.started_at)} → {shortdate(end)} ({duration(end - epoch.started_at)})",
        "live: what the agent sees now"
        if epoch.live
        else f"closed by compaction {epoch.number} of {n} at {shortdate(epoch.compacted_at)}"
        f" · {epoch.archived:,} turns archived",
        f"messages {epoch.rows:,} · tokens "
        + ("not recorded" if epoch.tokens is None else f"{epoch.tokens:,}"),
        epoch_cost_text(seg.epoch_costs[epoch.number - 1]),
    ]
    if epoch.summary_opening:
        lines.append(f"summary: {epoch.summary_opening}")
    return "\n".join(lines)


def epoch_cost_text(cost: CostSummary) -> str:
    """An epoch's cost in words: its usage rows' figure, or plainly why there is none."""
    rows = sum(cost.counts.values())
    if not rows:
        return (
            "cost: not attributable (Hermes records cost per session and model, and no"
            " usage row lies inside this epoch alone)"
        )
    if cost.effective is None:
        return f"cost: unknown ({rows} usage row{'s' if rows > 1 else ''} inside it, no price)"
    return f"cost: {usd(cost.effective)} (from {rows} usage row{'s' if rows > 1 else ''} inside it)"


def _title(root: Segment | None, count: int, chain: Chain) -> str:
    name = root.label if root else "unknown"
    title = f"Compaction chain of “{name}”: {count} segment{'' if count == 1 else 's'}"
    epochs = sum(len(s.epochs.epochs) for s in chain.segments if s.compactions and s.epochs)
    if epochs:
        title += f", {epochs + sum(1 for s in chain.segments if not s.compactions)} epochs"
    return title


def _description(chain: Chain, t0: float, t1: float, n: int, m: int) -> str:
    kinds: dict[str, int] = {}
    for s in chain.segments:
        kinds[s.kind] = kinds.get(s.kind, 0) + 1
    counted = ", ".join(f"{v} {k}" for k, v in kinds.items())
    return (
        f"Timeline of every segment from {shortdate(t0)} to {shortdate(t1)} ({counted}). "
        f"This session is part {n} of {m} of its continuation line. Each bar links to its "
        "session; the table below lists the same figures." + _in_place_description(chain)
    )


def _in_place_description(chain: Chain) -> str:
    compactions = sum(s.compactions for s in chain.segments)
    if not compactions:
        return ""
    return (
        f" {compactions} in-place compaction{'' if compactions == 1 else 's'} split bars into"
        " epochs, each marked with its time; each piece links to where its epoch begins."
    )


def _panel(
    element_id: str, session_id: str, epoch: int | None, text: str, href: str, link: str
) -> str:
    """One bar's (or epoch's) figures as a panel: its first line the title, the rest a list."""
    first, *rest = text.split("\n")
    lines = "".join(f"<li>{escape(line)}</li>" for line in rest)
    data_epoch = f' data-epoch="{epoch}"' if epoch is not None else ""
    return (
        f'<div class="seg-panel" id="{element_id}" role="tooltip" hidden '
        f'data-session-id="{escape(session_id)}"{data_epoch}>'
        f'<p class="seg-panel-title">{escape(first)}</p><ul>{lines}</ul>'
        f'<a href="{escape(href)}">{link}</a></div>'
    )
