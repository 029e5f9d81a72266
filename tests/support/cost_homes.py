"""Cost homes and an independent sum of their rows, to check every figure against."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import genai_prices as gp
import pytest

from dashboard.costs.spend import Spend, period_label, period_starts
from dashboard.hermes.home import HermesHome
from dashboard.reader.opening import reading_for
from dashboard.reader.reader import StateReader
from dashboard.store.schema import DERIVED_USAGE_PREFIX
from tests.support import agent_logs as al
from tests.support import hermes_shapes as shapes
from tests.support.archived import archive_home

TZ = "Europe/Stockholm"


def read_row(status: str | None, est: float | None, act: float | None, usage: bool = True):
    """README, "Costs", written out plainly: (status, estimate, bill, effective)."""
    if status not in ("actual", "estimated", "included", "unknown"):
        status = "estimated" if est else "actual" if act else "unknown"  # item 1
    if status == "estimated" and act:  # item 5: a merged row, partly billed
        e = est or None
        return "partial", e, act, act + (e or 0.0)
    if status != "estimated":
        est = est or None  # Hermes's 0 means "no estimate"
    if status in ("actual", "included") and act is None:
        status = "estimated"
    if not usage and status == "actual" and est is not None:  # a session row: mixed calls
        return "partial", est, act, act + est
    if status == "estimated":
        act = None
    if status == "unknown" or (est is None and act is None):
        return "unknown", None, None, None
    return status, est, act, act if act is not None else est


def local_day(ts: float | None, zone: ZoneInfo) -> date | None:
    return None if ts is None else datetime.fromtimestamp(ts, zone).date()


def largest_remainder(total: int, weights: list[int]) -> list[int]:
    whole = sum(weights)
    exact = [total * w / whole for w in weights]
    out = [int(total * w // whole) for w in weights]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


def spread(
    first: date | None, last: date | None, anchor: date | None, calls: list[tuple[date, int | None]]
) -> list[tuple[date, int]]:
    """Item 8: the days of a row's calls, weighed by tokens (all known) or by count."""
    inside = [
        (d, t) for d, t in calls if (first is None or first <= d) and (last is None or d <= last)
    ]
    if anchor is None:
        return []
    if not inside:
        return [(anchor, 1)]
    tokens = all(t and t > 0 for _, t in inside)
    weights: dict[date, int] = defaultdict(int)
    for d, t in inside:
        weights[d] += t if tokens else 1
    return sorted(weights.items())


def archived(builder, tmp_path: Path) -> Path:
    """A Hermes shape built as a home (once per test), then imported: the archive the
    pages read."""
    home = tmp_path / builder.__name__
    if not home.exists():
        builder(home / "state.db")
    return archive_home(home)


def independent(
    db: Path, period: str, by: str, start: date, end: date, tz: str, sources: tuple[str, ...] = ()
) -> tuple[dict, set]:
    """Sums per (period, key) computed row by row in Python from an archive (or a home's
    own Recall store), and the sessions of the range."""
    zone = ZoneInfo(tz)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT u.first_seen, coalesce(u.last_seen, u.first_seen), u.billing_provider,"
            " u.model, s.source, u.task, u.cost_status, u.estimated_cost_usd,"
            " u.actual_cost_usd, u.input_tokens, u.session_id, u.api_call_count, u.src_id,"
            " s.profile FROM session_model_usage u LEFT JOIN sessions s ON s.id = u.session_id"
        ).fetchall()
        replies: dict[str, list] = defaultdict(list)
        for sid, ts, tokens in conn.execute(
            "SELECT session_id, timestamp, token_count FROM messages WHERE role = 'assistant'"
        ):
            replies[sid].append((local_day(ts, zone), tokens))
    finally:
        conn.close()
    starts = period_starts(period, start, end)
    out: dict = defaultdict(
        lambda: {
            "est": [],
            "act": [],
            "eff": [],
            "tokens": 0,
            "ids": set(),
            "calls": defaultdict(int),
        }
    )
    everyone: set = set()
    for (
        first,
        last,
        provider,
        model,
        source,
        task,
        status,
        est,
        act,
        tokens,
        sid,
        n,
        src,
        profile,
    ) in rows:
        if sources and source not in sources:
            continue
        # A row the importer derived from a session row sums the whole session.
        derived = (src or "").startswith(DERIVED_USAGE_PREFIX)
        status, e, a, eff = read_row(status, est, act, usage=not derived)
        # A row stays on its last day when no reply of it is found.
        days = spread(
            local_day(first if first is not None else last, zone),
            local_day(last, zone),
            local_day(last, zone),
            replies[sid],
        )
        if not days:
            continue
        weights = [w for _, w in days]
        token_split = largest_remainder(tokens or 0, weights)
        call_split = largest_remainder(n if n and n > 0 else 1, weights)
        for (day, w), t, c in zip(days, token_split, call_split, strict=True):
            if not starts[0] <= day < end:
                continue
            index = max(i for i, first_day in enumerate(starts) if day >= first_day)
            key = {
                "provider": provider or None,
                "model": model or None,
                "source": source,
                "task": (task or "main"),
                "profile": profile,
            }[by] or "unknown"
            cell = out[(period_label(period, starts[index]), key)]
            share = w / sum(weights)
            for name, value in (("est", e), ("act", a), ("eff", eff)):
                if value is not None:
                    cell[name].append(value * share)
            cell["tokens"] += t
            cell["calls"][status] += c
            cell["ids"].add(sid)
            everyone.add(sid)
    return out, everyone


def assert_matches(result, expected: dict, everyone: set) -> None:
    """Every cell and the total against the independent computation."""
    got = {(c.period, c.key): c for c in result.rows}
    assert set(got) == set(expected)
    for key, want in expected.items():
        cell = got[key]
        for name, values in (
            ("estimated_usd", want["est"]),
            ("actual_usd", want["act"]),
            ("effective_usd", want["eff"]),
        ):
            value = getattr(cell, name)
            if values:
                assert value == pytest.approx(sum(values), abs=1e-9), (key, name)
            else:
                assert value is None, (key, name)  # unknown is never $0
        assert cell.tokens["input"] == want["tokens"], key
        assert cell.sessions == len(want["ids"]), key
        assert {s: n for s, n in cell.status_mix.items() if n} == {
            s: n for s, n in want["calls"].items() if n
        }, key
    assert result.totals.sessions == len(everyone)  # item 4: distinct sessions


PROFILES_ASK = {
    "period": "month",
    "start": date(2026, 1, 1),
    "end": date(2027, 1, 1),
    "timezone": TZ,
}


def profiles_home(root: Path) -> shapes.ProfilesFacts:
    """Issue 17's three-profile home with a July call more in the default profile and in
    the legacy one (each of its own size), so the profiles' figures differ."""
    facts = shapes.build_profiles_home(root)
    july = datetime(2026, 7, 20, 12, tzinfo=ZoneInfo(TZ)).timestamp()
    shapes.grow_usage(facts.dbs["default"], shapes.S_ROOT, 4000, 0.25, july)
    shapes.grow_usage(facts.dbs["legacy"], shapes.S_TELEGRAM, 700, 0.05, july)
    return facts


def profiles_reader(tmp_path: Path) -> StateReader:
    """The reader of every profile of :func:`profiles_home`, synced into one archive."""
    facts = profiles_home(tmp_path / "hermes")
    reading = reading_for(
        HermesHome(facts.root),
        tmp_path / "data" / "archive.db",
        inline=True,
        folder=tmp_path / "data",
    )
    assert reading.syncer is not None
    reading.syncer.poll()
    return reading.reader


def assert_same(raw: Spend, rolled: Spend) -> None:
    """Two answers to one spend question agree on every figure (unknown stays unknown)."""
    assert rolled.periods == raw.periods
    assert [(c.period, c.key) for c in rolled.rows] == [(c.period, c.key) for c in raw.rows]
    for want, got in zip([*raw.rows, raw.totals], [*rolled.rows, rolled.totals], strict=True):
        where = (want.period, want.key)
        for name in ("estimated_usd", "actual_usd", "effective_usd", "drift", "actual_share"):
            expected, value = getattr(want, name), getattr(got, name)
            if expected is None:
                assert value is None, (where, name)  # unknown stays unknown, never $0
            else:
                assert value == expected, (where, name)  # rounded to 1e-10: exactly equal
        assert got.status_mix == want.status_mix, where
        assert got.tokens == want.tokens, where
        assert (got.sessions, got.api_calls) == (want.sessions, want.api_calls), where
        assert got.recomputed == want.recomputed, where  # Recall's price, both ways summed


# -- recomputed costs (issue 28) -----------------------------------------------------------

SONNET = "anthropic/claude-sonnet-4.5"
NOV = datetime(2026, 11, 10, 12, tzinfo=UTC).timestamp()
# One turn of a long conversation: the first call's prompt is past Sonnet's 200k tier.
TURN = [
    al.Call(NOV + 1, "long", 1, SONNET, prompt=250_000, output=3_000, cache_read=60_000),
    al.Call(NOV + 5, "long", 2, SONNET, prompt=90_000, output=800),
    al.Call(NOV + 9, "long", 3, SONNET, prompt=120_000, output=1_000, cache_read=80_000),
]


def calculator(
    model: str,
    provider: str,
    prompt: int,
    cache_read: int,
    cache_write: int,
    output: int,
    when: float,
) -> float:
    """genai-prices' own price of one call or row (input: the whole prompt)."""
    usage = gp.Usage(
        input_tokens=prompt,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        output_tokens=output,
    )
    at = datetime.fromtimestamp(when, UTC)
    found = gp.calc_price(usage, model, provider_id=provider, genai_request_timestamp=at)
    return float(found.total_price)


def base_rate(call: al.Call) -> float:
    """A call at the base rates, whatever its size: the price list is linear below the
    tier, so half the call, priced by the calculator below 200k, doubled."""
    half = calculator(
        SONNET, "openrouter", call.prompt // 2, call.cache_read // 2, 0, call.output // 2, call.at
    )
    return 2 * half


def long_context_home(home: Path, *, logged: bool = True, hermes_unknown: bool = False) -> Path:
    """A Hermes home (today's form) with one session whose three calls (:data:`TURN`)
    Hermes merged into one usage row, estimated at the base rate (no tier), and logged
    in agent.log; archived as ``recall serve`` would. Returns the archive's path."""
    db = shapes.build_current_views(home / "state.db")
    shapes.start_session(db, "long", NOV, title="read the whole repo")
    shapes.append_turn(db, "long", "read the whole repo", "done", NOV + 10)
    estimate = sum(base_rate(c) for c in TURN)
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(
            "INSERT INTO session_model_usage (session_id, model, billing_provider, "
            "billing_base_url, task, api_call_count, input_tokens, output_tokens, "
            "cache_read_tokens, estimated_cost_usd, cost_status, first_seen, last_seen) "
            "VALUES ('long', ?, 'openrouter', 'https://openrouter.ai/api/v1', '', 3, ?, ?, ?, "
            "?, ?, ?, ?)",
            (
                SONNET,
                sum(c.prompt - c.cache_read for c in TURN),
                sum(c.output for c in TURN),
                sum(c.cache_read for c in TURN),
                0.0 if hermes_unknown else estimate,  # NOT NULL DEFAULT 0 in Hermes
                "unknown" if hermes_unknown else "estimated",
                TURN[0].at,
                TURN[-1].at,
            ),
        )
    if logged:
        al.write_log(home, al.with_noise(TURN))
    return archive_home(home)


def months_by_model(db: Path, start: date, end: date) -> Spend:
    """Spend by month and model of ``db`` over [start, end), in UTC."""
    from dashboard.costs.spend import spend
    from dashboard.store.readonly import open_readonly

    with closing(open_readonly(db)) as conn:
        return spend(conn, period="month", by="model", start=start, end=end, timezone="UTC")


#: prices.yaml pricing :data:`SONNET` at $1 a million tokens of every kind used.
SONNET_AT_ONE = f"prices:\n  - model: {SONNET}\n    input: 1\n    output: 1\n    cache_read: 1\n"


@contextmanager
def own_prices(folder: Path, text: str) -> Iterator[Path]:
    """This process's price book reading ``folder``'s prices.yaml, written with ``text``;
    the table alone again afterwards."""
    from dashboard.costs import book as price_book

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prices.yaml").write_text(text)
    price_book.configure(folder)
    try:
        yield folder / "prices.yaml"
    finally:
        price_book.configure(None)
