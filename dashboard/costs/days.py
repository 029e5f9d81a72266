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
import math
from collections.abc import Iterable, Sequence
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

Parts = tuple[tuple[int, int], ...]  # (local day as a proleptic ordinal, weight)
EPOCH_DAY = date(1970, 1, 1).toordinal()
# Offsets are sampled this often: no zone has changed its offset twice within 6 hours.
OFFSET_STEP_S = 6 * 3600
# Times this close to an offset change, or this close to a local midnight, are left
# to :meth:`DayClock.day` (where a clock goes back across midnight, or a float's
# rounding, could tell another day than plain arithmetic): a day covers any change
# but Samoa's skipped day of 2011, which moved no midnight back.
CHANGE_MARGIN_S = 86400
MIDNIGHT_MARGIN_S = 1


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

    @staticmethod
    def local_sql(expr: str, stretches: Iterable[tuple[float, float, float]]) -> str:
        """SQL for the local seconds of the epoch seconds ``expr``.

        Inside one of ``stretches`` (:meth:`steady`), on a number, it is ``expr +
        offset``; elsewhere NULL. :func:`one_day_sql` reads it. The bounds are whole
        seconds (midnights, samples of the offset), written as literals.
        """
        steps = [
            f"WHEN {expr} >= {start!r} AND {expr} < {end!r} THEN {expr} + {offset!r}"
            for start, end, offset in stretches
        ]
        return f"CASE {' '.join(steps)} END" if steps else "NULL"

    def steady(self, lo: float, hi: float) -> tuple[tuple[float, float, float], ...]:
        """``(start, end, offset)``: stretches of [lo, hi) where the zone's UTC offset is
        ``offset`` seconds, kept ``CHANGE_MARGIN_S`` away from every change."""
        lo = max(lo, 2 * 86400.0)  # local seconds stay >= 0 (CAST truncates toward zero)
        if lo >= hi:
            return ()
        moment, zone = datetime.fromtimestamp, self.zone
        try:
            moment(lo, zone), moment(hi, zone)
        except (OverflowError, OSError, ValueError):
            return ()  # beyond the years a datetime holds: no stretch is sure
        # Every OFFSET_STEP_S from lo, then hi: ~1,500 samples a year, in one pass.
        at = [lo + i * OFFSET_STEP_S for i in range(math.ceil((hi - lo) / OFFSET_STEP_S))]
        at.append(hi)
        offsets = [moment(ts, zone).utcoffset() for ts in at]
        out = []
        start = lo
        for i in [i for i in range(1, len(at)) if offsets[i] != offsets[i - 1]]:
            # A change in (at[i - 1], at[i]].
            out.append((start, at[i - 1] - CHANGE_MARGIN_S, _seconds(offsets[i - 1])))
            start = at[i] + CHANGE_MARGIN_S
        out.append((start, hi, _seconds(offsets[-1])))
        return tuple((s, e, o) for s, e, o in out if s < e)


def _seconds(offset: timedelta | None) -> float:
    return offset.total_seconds() if offset is not None else 0.0


def one_day_sql(first: str, last: str) -> str:
    """SQL true when local seconds ``first`` and ``last`` (:meth:`DayClock.local_sql`) fall
    on one local day, away from its midnights: there :meth:`DayClock.day` of both is
    ``last // 86400`` days after 1970-01-01 (``EPOCH_DAY``)."""
    into = f"86400 * CAST({last} / 86400 AS INTEGER)"  # its midnight (local seconds >= 0)
    inside = f"BETWEEN {MIDNIGHT_MARGIN_S} AND {86400 - MIDNIGHT_MARGIN_S}"
    return f"({first} - {into} {inside} AND {last} - {into} {inside})"


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
