"""Which of a session's rows a transcript view shows, in order: the one rule of both views.

* ``everything`` (the default): the whole history as a person reads it — archived
  epochs and the live one, each in-place compaction's carrier as a divider, each
  re-inserted row once (as the row it copies, in the epoch it was said in: a
  superseded original is shown), rewound and hidden rows left out.
* ``live``: what the agent sees now — exactly the ``active=1`` rows, by id, as Hermes
  feeds them: the re-inserted head and tail copies (each marked with the row it
  repeats) and the carrier opening them included.

``include_inactive`` (``all=1``) adds the rows the view leaves out, flagged by the
page: rewound and hidden rows to ``everything``, hidden live rows to ``live`` (a
rewound row is never something the agent sees). Epochs, copies and rewound rows come
from epochs.py, never re-derived here.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from functools import cached_property

from dashboard.hermes.conventions import is_visible
from dashboard.lineage.epochs import Epochs, session_epochs
from dashboard.params import one_of

VIEWS = ("everything", "live")
# Conversation order is Hermes's: by its ids, as it feeds the agent ("timestamps are
# not monotonic", HERMES_FACTS "Hermes v31"). A re-inserted copy keeps its original's
# timestamp, so a by-time order put a summary after the tail it precedes. The archive's
# own ids mostly keep the source's order, but not after a restored older copy: a source
# id another message already held gets a fresh archive id, past rows that came after it
# there. So the source's id orders (its leading digits: a retired row's "47~53" is 47),
# and the archive's breaks ties and orders rows with no source (Recall's own store).
ORDER_SQL = "coalesce(CAST(m.src_id AS INTEGER), m.id), m.id"


def parse_view(text: str | None) -> str:
    """The ``view`` parameter: blank is ``everything``; ValidationError for anything else."""
    return one_of(text, "view", VIEWS)


@dataclass(frozen=True)
class Divider:
    """An in-place compaction as the transcript shows it, at its summary carrier."""

    id: int  # the carrier row
    compaction: int  # k of "compaction k of n"
    of: int  # n: how many times the session compacted in place
    at: float | None  # when it ran
    archived: int  # rows it flipped to archived


@dataclass(frozen=True)
class ShownRows:
    """A session's rows as one view shows them."""

    view: str
    order: tuple[int, ...]  # ids shown, in conversation order (dividers included)
    dividers: dict[int, Divider] = field(default_factory=dict)  # carrier id -> its compaction
    copy_of: dict[int, int] = field(default_factory=dict)  # a shown copy -> the row it repeats
    # A shown row -> the ids it stands for that this view does not show (a folded copy,
    # or in the live view the archived row a live copy repeats): their links land on it.
    aliases: dict[int, tuple[int, ...]] = field(default_factory=dict)
    left_out: int = 0  # rows this view could show only with include_inactive
    compactions: int = 0  # how many times the session compacted in place
    #: shown rows a compaction re-inserted (active=0 like a rewound row, but history)
    superseded: frozenset[int] = frozenset()

    def land(self, message_id: int | None) -> int | None:
        """The shown row a link to ``message_id`` lands on (None: no row stands for it)."""
        if message_id is None:
            return None
        return self._landing.get(message_id)

    @cached_property
    def _landing(self) -> dict[int, int]:
        landing = {mid: mid for mid in self.order}
        for shown, others in self.aliases.items():
            for other in others:
                landing.setdefault(other, shown)
        return landing


def shown_rows(
    conn: sqlite3.Connection,
    session_id: str,
    view: str = "everything",
    include_inactive: bool = False,
    epochs: Epochs | None = None,
) -> ShownRows:
    """The rows of ``session_id`` that ``view`` shows (see the module's docstring).

    Args:
        conn: a connection to the archive (read-only is enough).
        session_id: the session (an unknown one shows nothing).
        view: one of :data:`VIEWS`.
        include_inactive: also the rows the view leaves out (``all=1``).
        epochs: the session's epochs when already read (:class:`epochs.EpochsCache`).
    """
    if epochs is None:
        epochs = session_epochs(conn, session_id)
    rows = conn.execute(
        "SELECT m.id, m.active, m.compacted, m.display_kind, m.repeats FROM messages m"
        f" WHERE m.session_id = ? ORDER BY {ORDER_SQL}",
        (session_id,),
    ).fetchall()
    if view == "live":
        return _live(rows, epochs, include_inactive)
    return _everything(rows, epochs, include_inactive)


def _everything(rows: list[tuple], epochs: Epochs, include_inactive: bool) -> ShownRows:
    superseded = epochs.superseded
    base = [
        r[0]
        for r in rows
        if include_inactive or is_visible(r[1], r[2], r[3], r[4], r[0] in superseded)
    ]
    kept = set(base)
    # A copy is folded into the row it repeats when that row is shown; else it stands.
    folded = {c for c in epochs.copies if epochs.shown_once(c) in kept}
    aliases: dict[int, list[int]] = {}
    for copy in folded:
        aliases.setdefault(epochs.shown_once(copy), []).append(copy)
    order = tuple(i for i in base if i not in folded)
    # A copy shown as its original is not left out: only rewound and hidden rows are.
    left_out = sum(1 for r in rows if r[0] not in kept and r[0] not in folded)
    return ShownRows(
        "everything",
        order,
        _dividers(epochs, set(order)),
        {},
        {k: tuple(sorted(v)) for k, v in aliases.items()},
        left_out,
        epochs.compactions,
        superseded & kept,
    )


def _live(rows: list[tuple], epochs: Epochs, include_inactive: bool) -> ShownRows:
    active = [r for r in rows if r[1] == 1]
    order = tuple(r[0] for r in active if include_inactive or (r[3] or "") != "hidden")
    shown = set(order)
    copy_of = {c: epochs.shown_once(c) for c in epochs.copies if c in shown}
    aliases = {c: tuple(_repeated(epochs, c)) for c in copy_of}
    # A carrier a summary was merged into also re-inserts a retained row.
    copy_of.update({c: o for c, o in epochs.merged.items() if c in shown})
    return ShownRows(
        "live",
        order,
        _dividers(epochs, shown),
        copy_of,
        aliases,
        len(active) - len(order),
        epochs.compactions,
    )


def _repeated(epochs: Epochs, copy: int) -> list[int]:
    """Every earlier row ``copy`` repeats, nearest first (a copy of a copy: both)."""
    out = []
    while copy in epochs.copies:
        copy = epochs.copies[copy]
        out.append(copy)
    return out


def _dividers(epochs: Epochs, shown: set[int]) -> dict[int, Divider]:
    """The carriers among ``shown``, each with the compaction it stands for."""
    out: dict[int, Divider] = {}
    for closed, opened in zip(epochs.epochs, epochs.epochs[1:], strict=False):
        if opened.summary_id is not None and opened.summary_id in shown:
            out[opened.summary_id] = Divider(
                opened.summary_id,
                closed.number,
                epochs.compactions,
                closed.compacted_at,
                closed.archived,
            )
    return out
