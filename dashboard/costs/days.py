"""Which days a usage row's spend belongs to: the days of its calls, not its last one.

A usage row sums every call of one (session, model, provider, task); Hermes keeps
only its ``first_seen`` and ``last_seen``. The session's assistant messages (one
per model reply, archived and rewound rows included: each was a call) tell on which
local days the calls happened. The rule (README, "Costs"):

* a row's days are the local days of its session's assistant messages that fall
  between the local day of its ``first_seen`` and that of its ``last_seen`` (a row
  the importer derived from a session: its start and its last activity);
* each day weighs the ``token_count`` of those messages when every one of them has
  a positive count, else the number of messages;
* a row with no such message stays on the day of its ``last_seen``;
* money is split in proportion (a float share per day); tokens and calls are whole
  numbers split by largest remainder, so each day's counts are integers that add
  up to the row's.

The raw sums and Recall's rollup both split rows with :func:`split`, so they agree.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

Parts = tuple[tuple[int, int], ...]  # (local day as a proleptic ordinal, weight)


class DayClock:
    """Local calendar days of epoch seconds in one zone, remembering each day's bounds.

    ``datetime.fromtimestamp`` with a ZoneInfo costs a few microseconds; a session
    home has a few thousand distinct days and hundreds of thousands of messages.
    """

    def __init__(self, zone: ZoneInfo) -> None:
        self.zone = zone
        self._starts: list[float] = []
        self._ends: list[float] = []
        self._days: list[int] = []
        self._last = (0.0, 0.0, 0)  # the day found last: rows come roughly in time order

    def day(self, ts: object) -> int | None:
        """The local day (ordinal) of ``ts``; None when it is not a usable time."""
        if type(ts) is not float and (isinstance(ts, bool) or not isinstance(ts, int)):
            return None
        start, end, found = self._last
        if start <= ts < end:  # type: ignore[operator]
            return found
        i = bisect.bisect_right(self._starts, ts) - 1
        if i >= 0 and ts < self._ends[i]:
            self._last = (self._starts[i], self._ends[i], self._days[i])
            return self._days[i]
        try:
            local = datetime.fromtimestamp(ts, self.zone).date()
        except (OverflowError, OSError, ValueError):
            return None
        start = datetime(local.year, local.month, local.day, tzinfo=self.zone).timestamp()
        nxt = local + timedelta(days=1)
        end = datetime(nxt.year, nxt.month, nxt.day, tzinfo=self.zone).timestamp()
        if start <= ts < end:  # not so across a midnight a DST change skips: then uncached
            at = bisect.bisect_left(self._starts, start)
            self._starts.insert(at, start)
            self._ends.insert(at, end)
            self._days.insert(at, local.toordinal())
        return local.toordinal()


def row_parts(
    anchor: int | None,
    first: int | None,
    last: int | None,
    calls: Iterable[tuple[int, int | None]],
) -> Parts:
    """The days of a row and their weights (module docstring).

    ``anchor`` is the fallback day (None: the row has no time and no day), ``first``
    and ``last`` bound the row's days, ``calls`` are ``(day, token_count)`` of its
    session's assistant messages.
    """
    if anchor is None:
        return ()
    low = first if first is not None else anchor
    high = last if last is not None else anchor
    inside = [(day, tokens) for day, tokens in calls if low <= day <= high]
    if not inside:
        return ((anchor, 1),)
    by_tokens = all(isinstance(t, int) and t > 0 for _, t in inside)
    weights: dict[int, int] = {}
    for day, tokens in inside:
        weights[day] = weights.get(day, 0) + (tokens if by_tokens and tokens else 1)
    return tuple(sorted(weights.items()))


def apportion(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` in whole numbers (largest remainder)."""
    whole = sum(weights)
    if len(weights) == 1 or whole <= 0:
        return [total] + [0] * (len(weights) - 1)
    shares = [divmod(total * w, whole) for w in weights]
    out = [q for q, _ in shares]
    left = total - sum(out)
    # Ties go to the earlier day, so both paths give the same split.
    for i in sorted(range(len(weights)), key=lambda i: (-shares[i][1], i))[:left]:
        out[i] += 1
    return out


def fractions(weights: Sequence[int]) -> list[float]:
    """Each weight's share of the whole, exactly 1.0 for a single day."""
    if len(weights) == 1:
        return [1.0]
    whole = float(sum(weights))
    return [w / whole for w in weights]
