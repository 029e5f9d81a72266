"""Plan a demo home: which sessions exist, how they chain, what they cost.

The plan is pure data derived from one seeded ``random.Random`` and an anchor
time, so the same seed and anchor always give the same home. Text comes from
:mod:`dashboard.demo.corpus`; this module decides structure: sources, models,
providers, compaction chains, branches, delegations, resets, a year of
timestamps, tokens and costs with realistic drift between estimate and bill.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from dashboard.demo.corpus import Corpus, Msg, Topic
from dashboard.demo.pricing import AUX_MODEL, MODELS, Model, usage_rows
from dashboard.demo.story import Scene, scenes
from dashboard.hermes.conventions import BRANCHED_FROM, DELEGATE_FROM, RESET_FROM
from dashboard.store.records import ImportSession, NewMessage, carrier_text

IN_PLACE_KEEP = 2  # live rows an in-place compaction re-inserts after its summary

DAY = 86_400.0
YEAR_DAYS = 365


SOURCES = (("cli", 44), ("telegram", 20), ("discord", 10), ("tui", 6), ("slack", 4), ("cron", 16))


@dataclass
class PlannedSession:
    """One session of the demo: its stored record plus how it was written."""

    record: ImportSession
    turns: list[list[NewMessage]]
    summary: str | None = None  # compaction summary, when this continues a parent
    #: In-place compactions: (index of the turn they come before, summary, time).
    compactions: list[tuple[int, str, float]] = field(default_factory=list)
    story: bool = False  # a scripted conversation of demo/story.py, on no planned topic


def anchor_for(day: str | None) -> float:
    """The demo's "now": midnight UTC of ``day`` (YYYY-MM-DD), default today."""
    if day:
        moment = datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC)
    else:
        moment = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return moment.timestamp()


class DemoPlanner:
    """Yields the sessions of a demo home, parents always before their children."""

    def __init__(
        self, seed: int, anchor: float, sessions: int, messages: int, *, story: bool = True
    ) -> None:
        self.rng = random.Random(seed)
        # The story draws from a stream of its own: with it or without, every other
        # session of a seed is the same.
        self.story_rng = random.Random(f"demo-story:{seed}")
        self.story = story
        self.corpus = Corpus(random.Random(seed + 1))
        self.anchor = anchor
        self.target_sessions = sessions
        self.target_messages = messages
        self.messages_made = 0
        self.made = 0
        self._ids: set[str] = set()
        self._titles: set[str] = set()
        self._bases: set[str] = set()
        self._chain_base: str | None = None
        self._straddled = False  # the conversation across the in-place switch is planned

    # -- the stream -------------------------------------------------------------------

    def sessions(self) -> Iterator[PlannedSession]:
        """All sessions of the home, in an order that satisfies parent links; the
        story's conversations come before the first conversation that begins later
        (``target_sessions`` counts the planned ones only)."""
        story = [self._scripted(scene) for scene in scenes(self.anchor)] if self.story else []
        while self.made < self.target_sessions:
            conversation = list(self._conversation())
            begins = conversation[0].record.started_at
            while story and story[0].record.started_at <= begins:
                yield story.pop(0)
            yield from conversation
        yield from story

    def _scripted(self, scene: Scene) -> PlannedSession:
        """One conversation of the story, timed and billed with :attr:`story_rng`."""
        rng = self.story_rng
        model = next(m for m in MODELS if m.name == scene.model)
        day = self.anchor - DAY * scene.days_before
        start = day + scene.hour * 3600 + rng.uniform(0, 3500)
        sid = self._new_id(start, rng)
        turns: list[list[NewMessage]] = []
        clock = start
        for index, said in enumerate(scene.turns):
            turn = []
            clock += rng.uniform(40, 400) if index else rng.uniform(1, 5)
            for msg in said:
                clock += rng.uniform(2.0, 25.0)
                turn.append(_message(msg, clock))
            turns.append(turn)
        messages = [m for t in turns for m in t]
        record = ImportSession(
            id=sid,
            source=scene.source,
            started_at=start,
            model=model.name,
            title=scene.title,
            ended_at=clock + rng.uniform(30, 900),
            end_reason="user_exit",
            messages=messages,
            user_id=_user_id(scene.source),
            model_config=json.dumps({"temperature": 0.7, "max_tokens": 8192}),
            system_prompt="You are Hermes, a helpful agent.",
            billing_provider=model.provider,
        )
        record.usage = usage_rows(rng, model, messages, start, clock, compressed=False)
        self._titles.add(scene.title)
        return PlannedSession(record, turns, story=True)

    def _conversation(self) -> Iterator[PlannedSession]:
        rng = self.rng
        source = _weighted(rng, SOURCES)
        if source == "cron":
            yield self._cron()
            return
        model = _weighted(rng, [(m, m.weight) for m in MODELS])
        topic = self.corpus.pick_topic(chinese=rng.random() < 0.10)
        start = self._next_start()
        roll = rng.random()
        segments = 1
        if roll < 0.12:
            # Long-lived conversations: mostly short chains, a few of 10+ segments.
            segments = min(12, 2 + int(rng.expovariate(0.45)))
        switch = self._in_place_since()
        straddles = not self._straddled and start >= switch - 2 * DAY
        if straddles:
            # The conversation under way when Hermes switched to compacting in place:
            # rotation history before the switch, in-place epochs after it.
            self._straddled = True
            segments = max(segments, 4)
            start = min(start, switch - rng.uniform(600, 3600))
        remaining = self.target_sessions - self.made
        segments = max(1, min(segments, remaining))
        parent: PlannedSession | None = None
        # Segments of one chain share a base title ("X", "X #2", …), made unique
        # per conversation so two chains on one topic never interleave their names.
        self._chain_base = self._unique_base(topic.title)
        for seg in range(segments):
            last = seg == segments - 1
            if not last and start >= self._in_place_since():
                # Since the switch a long conversation keeps its session and compacts in
                # place; one that began before it keeps its rotation history.
                session = self._session(
                    source, model, topic, start, parent=parent, segment=seg, last=True
                )
                for later in range(seg + 1, segments):
                    self._compact_in_place(session, topic, model, later, last=later == segments - 1)
                children = list(self._offshoots(session, topic, model, True))
                yield session
                yield from children
                return
            session = self._session(
                source, model, topic, start, parent=parent, segment=seg, last=last
            )
            # Offshoots may still change the parent's ending, so decide them first.
            children = list(self._offshoots(session, topic, model, last))
            if straddles and seg == 1 and session.record.ended_at is not None:
                # Hermes was upgraded during this segment: the next starts after it.
                session.record.ended_at = max(session.record.ended_at, switch)
            yield session
            yield from children
            start = session.record.ended_at or session.record.started_at
            parent = session

    def _offshoots(
        self, session: PlannedSession, topic: Topic, model: Model, last: bool
    ) -> Iterator[PlannedSession]:
        """Delegations (subagents), a branch or a reset hanging off a session."""
        rng = self.rng
        rec = session.record
        if self.made >= self.target_sessions:
            return
        last_at = rec.messages[-1].timestamp if rec.messages else rec.started_at
        if rng.random() < 0.10:
            mid = rec.started_at + ((last_at or rec.started_at) - rec.started_at) * rng.uniform(
                0.2, 0.8
            )
            yield self._subagent(rec, topic, model, mid)
        if not last or self.made >= self.target_sessions:
            return
        roll = rng.random()
        if roll < 0.07:
            rec.ended_at = rec.ended_at or (last_at or rec.started_at) + rng.uniform(5, 60)
        if roll < 0.04:
            # The conversation branched: the parent ends as 'branched' and a sibling
            # line of work continues with a marker pointing back.
            rec.end_reason = "branched"
            yield self._session(
                rec.source,
                model,
                topic,
                rec.ended_at or rec.started_at,
                parent=session,
                segment=0,
                last=True,
                lineage=(BRANCHED_FROM, rec.id),
            )
        elif roll < 0.07:
            rec.end_reason = rng.choice(("session_reset", "new_session"))
            yield self._session(
                rec.source,
                model,
                topic,
                rec.ended_at or rec.started_at,
                parent=session,
                segment=0,
                last=True,
                lineage=(RESET_FROM, rec.id),
            )

    # -- one session ------------------------------------------------------------------

    def _session(
        self,
        source: str,
        model: Model,
        topic: Topic,
        start: float,
        *,
        parent: PlannedSession | None,
        segment: int,
        last: bool,
        lineage: tuple[str, str] | None = None,
    ) -> PlannedSession:
        sid = self._new_id(start)
        summary = None
        messages: list[NewMessage] = []
        continuation = parent is not None and lineage is None
        if continuation:
            summary = self.corpus.compaction_summary(topic, segment, older=start < self._cutover())
            messages.append(NewMessage("user", summary, timestamp=start))
        turns, clock = self._turns(
            start, self._message_budget(), lambda i: self.corpus.turn(topic, i)
        )
        for turn in turns:
            messages.extend(turn)
        ended_at, end_reason = self._ending(clock, last, continuation_next=not last)
        title = self._title(self._chain_base or topic.title, segment if continuation else 0)
        config: dict[str, object] = {"temperature": 0.7, "max_tokens": 8192}
        if lineage:
            config[lineage[0]] = lineage[1]
        record = ImportSession(
            id=sid,
            source=source,
            started_at=start,
            model=model.name,
            title=title,
            parent_session_id=parent.record.id if parent else None,
            ended_at=ended_at,
            end_reason=end_reason,
            messages=messages,
            user_id=_user_id(source),
            model_config=json.dumps(config),
            system_prompt="You are Hermes, a helpful agent.",
            billing_provider=model.provider,
        )
        record.usage = usage_rows(self.rng, model, messages, start, clock, compressed=not last)
        self.made += 1
        self.messages_made += len(record.messages)
        return PlannedSession(record, turns, summary)

    def _compact_in_place(
        self, planned: PlannedSession, topic: Topic, model: Model, segment: int, *, last: bool
    ) -> None:
        """One in-place compaction of ``planned`` and the turns after it (as
        :meth:`SessionStore.compact_in_place` writes it: the live rows archived, a
        summary carrier and a copy of the last two live rows inserted live)."""
        rec = planned.record
        last_at = max((m.timestamp or rec.started_at) for m in rec.messages)
        at = last_at + self.rng.uniform(1, 30)
        summary = self.corpus.compaction_summary(topic, segment)
        live = [m for m in rec.messages if m.active == 1]
        tail = live[-IN_PLACE_KEEP:]
        rec.messages = [
            replace(m, active=0, compacted=1) if m.active == 1 else m for m in rec.messages
        ]
        rec.messages.append(NewMessage("user", carrier_text(summary), timestamp=at))
        rec.messages.extend(
            replace(m, timestamp=at + n / 1000, active=1, compacted=0)
            for n, m in enumerate(tail, start=1)
        )
        planned.compactions.append((len(planned.turns), summary, at))
        turns, clock = self._turns(at, self._message_budget(), lambda i: self.corpus.turn(topic, i))
        for turn in turns:
            rec.messages.extend(turn)
        planned.turns.extend(turns)
        rec.ended_at, rec.end_reason = self._ending(clock, last, continuation_next=False)
        times = [c[2] for c in planned.compactions]
        rec.usage = usage_rows(
            self.rng,
            model,
            rec.messages,
            rec.started_at,
            clock,
            compressed=False,
            compactions=times,
        )
        self.messages_made += 1 + len(tail) + sum(len(t) for t in turns)

    def _subagent(
        self, parent: ImportSession, topic: Topic, model: Model, at: float
    ) -> PlannedSession:
        sid = self._new_id(at)
        turns, clock = self._turns(
            at,
            max(3, int(self._mean_messages() * 0.3)),
            lambda i: self.corpus.subagent_turn(topic, i),
        )
        messages = [m for t in turns for m in t]
        record = ImportSession(
            id=sid,
            source="subagent",
            started_at=at,
            model=model.name,
            parent_session_id=parent.id,
            ended_at=clock,
            end_reason="completed",
            messages=messages,
            model_config=json.dumps({DELEGATE_FROM: parent.id}),
            system_prompt="You are a focused sub-agent.",
            billing_provider=model.provider,
        )
        record.usage = usage_rows(self.rng, model, messages, at, clock, compressed=False)
        self.made += 1
        self.messages_made += len(record.messages)
        return PlannedSession(record, turns)

    def _cron(self) -> PlannedSession:
        start = self._next_start()
        sid = self._new_id(start)
        model = MODELS[-3] if self.rng.random() < 0.5 else AUX_MODEL
        turns, clock = self._turns(
            start, max(2, int(self._mean_messages() * 0.15)), self.corpus.cron_turn
        )
        messages = [m for t in turns for m in t]
        record = ImportSession(
            id=sid,
            source="cron",
            started_at=start,
            model=model.name,
            ended_at=clock,
            end_reason="completed",
            messages=messages,
            model_config=json.dumps({"job": "scheduled"}),
            billing_provider=model.provider,
        )
        record.usage = usage_rows(self.rng, model, messages, start, clock, compressed=False)
        self.made += 1
        self.messages_made += len(record.messages)
        return PlannedSession(record, turns)

    def _turns(self, start: float, budget: int, make) -> tuple[list[list[NewMessage]], float]:
        """Generate turns until ``budget`` messages; timestamps advance realistically."""
        rng = self.rng
        turns: list[list[NewMessage]] = []
        clock = start
        count = 0
        index = 0
        while count < budget:
            turn = []
            clock += rng.uniform(20, 600) if index else rng.uniform(1, 5)
            for msg in make(index):
                clock += rng.uniform(0.5, 25.0)
                turn.append(_message(msg, clock))
            turns.append(turn)
            count += len(turn)
            index += 1
        return turns, clock

    def _mean_messages(self) -> float:
        """Messages per session still to make, so the total lands near the target."""
        left = max(2, self.target_messages - self.messages_made)
        return max(4.0, left / max(1, self.target_sessions - self.made))

    def _message_budget(self) -> int:
        # Skewed lengths: many short sessions, a tail of long ones, mean ≈ target.
        if self.made == self.target_sessions - 1:  # the last one takes what is left
            return max(2, self.target_messages - self.messages_made)
        return max(2, int(self.rng.expovariate(1.0 / self._mean_messages())))

    def _ending(
        self, clock: float, last: bool, continuation_next: bool
    ) -> tuple[float | None, str | None]:
        if continuation_next:
            return clock + self.rng.uniform(1, 30), "compression"
        if clock > self.anchor - DAY * 2 and self.rng.random() < 0.5:
            return None, None  # still open
        return clock + self.rng.uniform(5, 900), self.rng.choice(
            ("user_exit", "user_exit", "idle_timeout", "gateway_restart")
        )

    # -- ids, titles, times ---------------------------------------------------------------

    def _start_time(self, progress: float) -> float:
        # Usage grew over the year: more sessions in recent months.
        age_days = YEAR_DAYS * (1 - math.sqrt(progress))
        hour = self.rng.choice((9, 10, 11, 14, 15, 16, 17, 20, 21, 22, 23, 1))
        day_start = self.anchor - DAY * math.ceil(age_days)
        return day_start + hour * 3600 + self.rng.uniform(0, 3500)

    def _next_start(self) -> float:
        """Conversations begin in time order (as they do in a real store, where
        message ids grow with time): progress through the plan walks the year."""
        progress = min(0.999999, (self.made + self.rng.random()) / self.target_sessions)
        return self._start_time(progress)

    def _in_place_since(self) -> float:
        """Since this moment long conversations compact in place (Hermes's default since
        June 2026: six months before the demo's "now"); before it they rotate."""
        return self.anchor - DAY * 183

    def _cutover(self) -> float:
        """Before this moment compaction summaries used the older marker."""
        return self.anchor - DAY * 200

    def _new_id(self, at: float, rng: random.Random | None = None) -> str:
        stamp = datetime.fromtimestamp(at, UTC).strftime("%Y%m%d_%H%M%S")
        draw = (rng or self.rng).getrandbits
        while True:
            sid = f"{stamp}_{draw(24):06x}"
            if sid not in self._ids:
                self._ids.add(sid)
                return sid

    def _unique_base(self, title: str) -> str:
        base, n = title[:90], 2
        while base in self._bases:
            base = f"{title[:85]} ({n})"
            n += 1
        self._bases.add(base)
        return base

    def _title(self, base: str, segment: int) -> str | None:
        if self.rng.random() < 0.12:
            return None  # untitled sessions exist; the UI falls back to a preview
        title = base if segment == 0 else f"{base} #{segment + 1}"
        title = title[:100]
        n = 2
        candidate = title
        while candidate in self._titles:
            suffix = f" ({n})"
            candidate = title[: 100 - len(suffix)] + suffix
            n += 1
        self._titles.add(candidate)
        return candidate


def _message(msg: Msg, at: float) -> NewMessage:
    return NewMessage(
        role=msg.role,
        content=msg.content,
        tool_calls=msg.tool_calls,
        tool_call_id=msg.tool_call_id,
        tool_name=msg.tool_name,
        reasoning=msg.reasoning,
        finish_reason=msg.finish_reason,
        timestamp=at,
        token_count=int(len(msg.content or "") / 3.8) + 1,
    )


def _weighted(rng: random.Random, options):
    items, weights = zip(*options, strict=True)
    return rng.choices(items, weights=weights, k=1)[0]


def _user_id(source: str) -> str | None:
    return {"telegram": "tg:48213377", "discord": "dc:771203", "slack": "U04QZ7"}.get(source)
