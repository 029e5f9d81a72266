"""The costs page, its CSV and its JSON show exactly the repository's numbers."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, date, datetime
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pytest
from flask.testing import FlaskClient

from dashboard.costs.reconcile import verdicts
from dashboard.costs.spend import STATUSES, Cell, Spend, spend
from dashboard.hermes.conventions import TOKEN_KINDS
from dashboard.reader.costs_report import CostsReport
from dashboard.reader.reader import StateReader
from dashboard.store.readonly import open_readonly
from dashboard.store.records import Usage
from dashboard.store.session_store import SessionStore
from dashboard.web.format import usd
from dashboard.web.reader import get_reader
from dashboard.web.rollup import get_cost_rollup
from tests.support import hermes_shapes as shapes
from tests.support.app import make_app
from tests.support.cost_homes import assert_matches, independent, profiles_home
from tests.support.demo_homes import demo_home_copy
from tests.support.pages import names_shown_as_their_pages
from tests.support.snapshots import count_snapshots

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)  # the demo's anchor day, at noon
SHAPES_NOW = datetime(2026, 7, 25, 12, 0, tzinfo=UTC)  # the shapes' sessions are in July 2026
YEAR = {"from": "2026-01-01", "to": "2027-01-01"}


# --- Reading what the page shows --------------------------------------------------------


class Tables(HTMLParser):
    """Every ``table.costs-table``: header labels and rows of (text, classes) cells."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, dict[str, list]] = {}
        self._table: dict[str, list] | None = None
        self._row: list[tuple[str, str]] | None = None
        self._cell: list[str] | None = None
        self._classes = ""
        self._in_head = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = a.get("class") or ""
        if tag == "table" and "costs-table" in classes:
            kind = "spend" if "costs-spend" in classes else "tokens"
            self._table = self.tables[kind] = {"head": [], "rows": [], "flagged_rows": []}
        elif self._table is None:
            return
        elif tag == "thead":
            self._in_head = True
        elif tag == "tr":
            self._row = []
            if "drift-row" in classes:
                self._table["flagged_rows"].append(len(self._table["rows"]))
        elif tag in ("td", "th"):
            self._cell, self._classes = [], classes

    def handle_endtag(self, tag: str) -> None:
        if self._table is None:
            return
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(("".join(self._cell).strip(), self._classes))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._in_head:
                self._table["head"] = [text for text, _ in self._row]
            else:
                self._table["rows"].append(self._row)
            self._row = None
        elif tag == "thead":
            self._in_head = False
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def shown_tables(html: str) -> dict[str, dict[str, list]]:
    parser = Tables()
    parser.feed(html)
    return parser.tables


def texts(row: list[tuple[str, str]]) -> list[str]:
    return [text for text, _ in row]


# --- What the repository says, formatted independently -----------------------------------


def read_path(client: FlaskClient) -> Path:
    """The file the app's pages read: the home's archive, or the home's own Recall store."""
    with client.application.app_context():
        return get_reader().path


def repository_spend(db: Path, **options: object) -> Spend:
    """What the repository answers over ``db`` (an archive, or a home's own Recall store)."""
    with closing(open_readonly(db)) as conn:
        return spend(conn, timezone="UTC", **options)


def money(value: float | None, cell: Cell) -> str:
    mix = cell.status_mix
    only_included = mix.get("included", 0) > 0 and sum(mix.values()) == mix["included"]
    if only_included and not value:
        return "included"
    return usd(value)  # "unknown" for None


def expected_spend_row(cell: Cell, period: str, key: str) -> list[str]:
    drift = "—" if cell.drift is None else f"{cell.drift:.2f}×"
    share = "—" if cell.actual_share is None else f"{cell.actual_share * 100:.0f}%"
    labels = {"actual": "billed", "partial": "partly billed", "unknown": "unknown price"}
    mix = ", ".join(
        f"{cell.status_mix[s]:,} {labels.get(s, s)}" for s in STATUSES if cell.status_mix.get(s)
    )
    return [
        period,
        key,
        money(cell.estimated_usd, cell),
        recomputed_text(cell),
        money(cell.actual_usd, cell),
        money(cell.effective_usd, cell),
        drift,
        versus_text(cell.recomputed.estimate_ratio),
        versus_text(cell.recomputed.billed_ratio),
        share,
        mix or "—",
        f"{cell.sessions:,}",
        f"{cell.api_calls:,}",
    ]


def recomputed_text(cell: Cell) -> str:
    """Recall's price as the table shows it: a star when some calls were not priced or
    their tier not checked."""
    again = cell.recomputed
    if again.usd is None:
        return money(None, cell) if not again.unpriced_calls else "unknown"
    return usd(again.usd) + ("*" if again.unpriced_calls or again.unsized_calls else "")


def versus_text(ratio: float | None) -> str:
    if ratio is None:
        return "—"
    percent = round((ratio - 1) * 100)
    return "0%" if percent == 0 else f"{'+' if percent > 0 else '−'}{abs(percent)}%"


def expected_token_row(cell: Cell, period: str, key: str) -> list[str]:
    return [period, key, *(f"{cell.tokens[k]:,}" for k in TOKEN_KINDS)]


def as_csv(text: str) -> str:
    """A table cell as the CSV holds it: no $ sign, separators, units or dashes."""
    if text == "—":
        return ""
    return re.sub(r"[$,×%]", "", text) if re.fullmatch(r"\$?[\d,.]+[×%]?", text) else text


# --- Fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("costs") / "demo"
    return demo_home_copy(
        tmp_path_factory, home, sessions=60, messages=1500, anchor_day="2026-11-30"
    )


def client_for(home: Path, data: Path, now: datetime = NOW, **extra: object) -> FlaskClient:
    app = make_app(home, data, COSTS_NOW=now.timestamp(), TIMEZONE="UTC", **extra)
    return app.test_client()


@pytest.fixture(params=["rollup", "raw"])
def demo(request: pytest.FixtureRequest, demo_home: Path, tmp_path: Path) -> FlaskClient:
    """The page answered from Recall's per-day rollup (built first), and from the raw rows."""
    if request.param == "raw":
        return client_for(demo_home, tmp_path / "data", COST_ROLLUP="off")
    client = client_for(demo_home, tmp_path / "data")
    with client.application.app_context():
        rollup = get_cost_rollup()
    assert rollup is not None
    rollup.prepare(ZoneInfo("UTC"))  # the background build a server starts with
    rollup.wait_until_built(timeout=60)
    assert rollup.last_refresh.get("rebuilt", 0) > 0
    return client


@pytest.fixture(params=["current", "seed"])
def shape_home(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """With session_model_usage (current form) and without it (seed form)."""
    home = tmp_path / request.param
    build = shapes.build_current_views if request.param == "current" else shapes.build_seed_inline
    build(home / "state.db")
    yield home


def get(client: FlaskClient, path: str, status: int = 200, **params: object) -> str:
    response = client.get(path, query_string=params)
    assert response.status_code == status, (path, params, response.get_data(as_text=True)[:500])
    return response.get_data(as_text=True)


# --- The page, the CSV and the JSON against the repository -------------------------------

CASES = [
    {},
    {"by": "model"},
    {"by": "task"},
    {"by": "source", "period": "week"},
    {"period": "day", "by": "provider", "source": ["telegram", "tui"]},
    {"from": "2026-06-01", "to": "2026-12-01", "by": "model", "source": ["cli", "telegram"]},
]


@pytest.mark.parametrize("params", CASES, ids=lambda p: "-".join(map(str, p.values())) or "default")
def test_page_csv_and_json_show_the_repository_numbers(demo: FlaskClient, params: dict) -> None:
    period, by = params.get("period", "month"), params.get("by", "provider")
    with closing(open_readonly(read_path(demo))) as conn:
        (first,) = conn.execute("SELECT min(started_at) FROM sessions").fetchone()
    first_month = datetime.fromtimestamp(first, UTC).date().replace(day=1)
    default = {
        # 13 months (last December shown), from the first session's month when later
        "month": (max(date(2025, 11, 1), first_month), date(2026, 12, 1)),
        "week": (date(2026, 9, 14), date(2026, 12, 7)),  # 12 ISO weeks through 2026-W49
        "day": (date(2026, 11, 1), date(2026, 12, 1)),
    }[period]
    start = date.fromisoformat(params["from"]) if "from" in params else default[0]
    end = date.fromisoformat(params["to"]) if "to" in params else default[1]
    sources = tuple(sorted(params.get("source", [])))
    truth = repository_spend(
        read_path(demo), period=period, by=by, start=start, end=end, sources=sources
    )
    assert truth.rows, "the demo should have spend in every case"

    tables = shown_tables(get(demo, "/costs", **params))
    spend_rows, token_rows = tables["spend"]["rows"], tables["tokens"]["rows"]
    assert len(spend_rows) == len(token_rows) == len(truth.rows) + 1  # + the total row
    for shown, cell in zip(spend_rows, truth.rows, strict=False):
        assert texts(shown) == expected_spend_row(cell, cell.period, cell.key)
    for shown, cell in zip(token_rows, truth.rows, strict=False):
        assert texts(shown) == expected_token_row(cell, cell.period, cell.key)
    assert texts(spend_rows[-1]) == expected_spend_row(truth.totals, "Total", "all")
    assert texts(token_rows[-1]) == expected_token_row(truth.totals, "Total", "all")
    flagged = [i for i, c in enumerate(truth.rows) if c.drift_flagged]
    assert tables["spend"]["flagged_rows"] == flagged
    for i in flagged:
        assert "drift-flagged" in spend_rows[i][6][1]

    # The CSV: the same rows, the spend table's columns then the token table's.
    response = demo.get("/costs.csv", query_string=params)
    assert response.status_code == 200
    assert response.mimetype == "text/csv"
    assert response.headers["Content-Disposition"] == (
        f"attachment; filename=recall-costs-{period}-{by}.csv"
    )
    header, *lines = list(csv.reader(io.StringIO(response.get_data(as_text=True))))
    assert header[:2] == ["period", by]
    assert len(lines) == len(spend_rows)  # exactly the rows on screen, then the total
    for line, shown, cell in zip(lines, spend_rows, [*truth.rows, truth.totals], strict=True):
        assert line[:2] == texts(shown)[:2]
        row = dict(zip(header, line, strict=True))
        for name in ("estimated_usd", "actual_usd", "effective_usd", "drift"):
            value = getattr(cell, name)
            assert row[name] == ("" if value is None else repr(value)), name
        assert int(row["sessions"]) == cell.sessions and int(row["api_calls"]) == cell.api_calls
        tokens = [int(row[f"{k}_tokens"]) for k in TOKEN_KINDS]
        assert tokens == [cell.tokens[k] for k in TOKEN_KINDS]
        again = cell.recomputed
        for name, value in (
            ("recomputed_usd", again.usd),
            ("estimate_ratio", again.estimate_ratio),
            ("billed_ratio", again.billed_ratio),
            ("recovered_usd", again.recovered_usd),
        ):
            assert row[name] == ("" if value is None else repr(value)), name
        assert int(row["unpriced_calls"]) == again.unpriced_calls
        assert row["price_table"] == truth.price_table != ""

    # The JSON: the repository's own to_json, through JSON.
    body = demo.get("/api/costs", query_string=params)
    assert body.status_code == 200
    found = body.get_json()
    said = found.pop("verdicts")
    assert found == json.loads(json.dumps(truth.to_json()))
    assert said == json.loads(json.dumps([v.to_json() for v in verdicts(truth)]))


def test_shapes_with_and_without_usage_rows(shape_home: Path, tmp_path: Path) -> None:
    client = client_for(shape_home, tmp_path / "data", now=SHAPES_NOW)
    html = get(client, "/costs", **YEAR)
    truth = repository_spend(
        read_path(client),
        period="month",
        by="provider",
        start=date(2026, 1, 1),
        end=date(2027, 1, 1),
    )
    rows = shown_tables(html)["spend"]["rows"]
    assert [texts(r) for r in rows[:-1]] == [
        expected_spend_row(c, c.period, c.key) for c in truth.rows
    ]
    # The pages read the archive, which has usage rows whatever the source kept: a source
    # without a usage table gives one row per session, all of it the main loop.
    assert '<option value="task"' in html
    get(client, "/costs", 200, by="task", **YEAR)
    tasks = json.loads(get(client, "/api/costs", 200, by="task", **YEAR))
    if shape_home.name == "seed":
        assert {r["key"] for r in tasks["rows"]} == {"main"}


def test_unknown_cost_is_never_shown_as_zero(hermes_home: Path, tmp_path: Path) -> None:
    client = client_for(hermes_home, tmp_path / "data", now=SHAPES_NOW)
    tables = shown_tables(get(client, "/costs", **YEAR))
    # The "custom" provider's sessions (a local model) have no price at all.
    (custom,) = [r for r in tables["spend"]["rows"] if texts(r)[1] == "custom"]
    assert texts(custom)[2:5] == ["unknown"] * 3
    assert all("muted" in classes for _, classes in custom[2:5])
    csv_text = get(client, "/costs.csv", **YEAR)
    (line,) = [row for row in csv.DictReader(io.StringIO(csv_text)) if row["provider"] == "custom"]
    assert [line[k] for k in ("estimated_usd", "actual_usd", "effective_usd")] == [""] * 3
    assert line["coverage"] == "unknown price"  # unknown, in a column of its own
    api = client.get("/api/costs", query_string=YEAR).get_json()
    (row,) = [r for r in api["rows"] if r["key"] == "custom"]
    assert row["estimated_usd"] is None and row["effective_usd"] is None


def test_large_drift_is_flagged(tmp_path: Path) -> None:
    from dashboard.store.records import Usage
    from dashboard.store.session_store import SessionStore

    at = SHAPES_NOW.timestamp()
    with SessionStore(tmp_path / "own" / "state.db") as store:
        sid = store.create_session("cli", started_at=at)
        # Billed 2.5x the estimate for the same calls: flagged. 1.1x: not flagged.
        store.record_usage(
            sid,
            Usage(
                model="a",
                billing_provider="openrouter",
                estimated_cost_usd=0.10,
                actual_cost_usd=0.25,
                cost_status="actual",
                at=at,
            ),
        )
        store.record_usage(
            sid,
            Usage(
                model="b",
                billing_provider="steady",
                estimated_cost_usd=1.00,
                actual_cost_usd=1.10,
                cost_status="actual",
                at=at,
            ),
        )
    client = client_for(tmp_path / "own", tmp_path / "data", now=SHAPES_NOW)
    tables = shown_tables(get(client, "/costs", **YEAR))
    rows = tables["spend"]["rows"]
    (flagged,) = tables["spend"]["flagged_rows"]
    assert texts(rows[flagged])[1] == "openrouter"
    assert "drift-flagged" in rows[flagged][6][1]
    assert not any(
        "drift-flagged" in cls for r in rows[:flagged] + rows[flagged + 1 :] for _, cls in r
    )


def test_sessions_only_files_show_no_drift(tmp_path: Path) -> None:
    # A sessions row mixes a billed main loop with an estimated title call: no pairing.
    home = tmp_path / "seed"
    shapes.build_seed_inline(home / "state.db")
    client = client_for(home, tmp_path / "data", now=SHAPES_NOW)
    assert shown_tables(get(client, "/costs", **YEAR))["spend"]["flagged_rows"] == []


# --- Headline cards and the budget ----------------------------------------------------------


def costly_rows(html: str) -> list:
    """The costliest sessions' table: its header texts, then (session id, cell texts) a row."""
    table = html[html.index('<table class="grid costs-sessions">') :]
    table = table[: table.index("</table>")]
    head = [re.sub(r"<[^>]+>", "", h).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", table)]
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", table[table.index("<tbody>") :], re.S):
        sid = re.search(r'href="[^"]*/sessions/([^"?]+)', row)[1]
        found = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in found]
        rows.append((sid, cells))
    return [head, *rows]


def cards(html: str) -> dict[str, str]:
    found = re.findall(
        r'<div class="stat-value[^"]*">(.*?)</div><div class="stat-label">(.*?)</div>', html
    )
    return {re.sub(r"<[^>]+>", "", label): re.sub(r"<[^>]+>", "", value) for value, label in found}


def _with_unknown(found: Spend) -> str:
    """A card's figure: the known spend, and the calls of unknown price beside it."""
    text = usd(found.totals.effective_usd)
    unknown = found.totals.status_mix.get("unknown", 0)
    if unknown:
        text += f" + {unknown:,} call{'s' if unknown != 1 else ''} of unknown price"
    return text


def test_headline_cards(demo: FlaskClient) -> None:
    shown = cards(get(demo, "/costs"))
    so_far = repository_spend(
        read_path(demo), by="provider", start=date(2026, 11, 1), end=date(2026, 12, 1)
    )
    last = repository_spend(
        read_path(demo), by="provider", start=date(2026, 10, 1), end=date(2026, 10, 31)
    )
    assert shown["spent so far"] == _with_unknown(so_far)
    assert shown["recomputed so far (Recall's prices)"] == usd(so_far.totals.recomputed.usd)
    assert so_far.totals.recomputed.usd is not None
    assert shown["last month by day 30"] == _with_unknown(last)
    elapsed = 29.5 / 30  # noon on the 30th of a 30-day month
    projected = usd((so_far.totals.effective_usd or 0) / elapsed)
    assert shown["projected for the month"] == _with_unknown(so_far).replace(
        usd(so_far.totals.effective_usd), projected, 1
    )
    top = min(so_far.rows, key=lambda c: (-(c.effective_usd or 0), c.key))
    assert shown[f"top provider · {usd(top.effective_usd)}"] == top.key
    share = so_far.totals.actual_share
    assert shown["of spend billed (actual figures)"] == f"{(share or 0) * 100:.0f}%"


def test_budget_banner_only_when_the_projection_passes_it(demo_home: Path, tmp_path: Path) -> None:
    so_far = repository_spend(
        demo_home / "state.db", by="provider", start=date(2026, 11, 1), end=date(2026, 12, 1)
    )
    projection = (so_far.totals.effective_usd or 0) / (29.5 / 30)
    below = client_for(demo_home, tmp_path / "a", MONTHLY_BUDGET_USD=projection * 0.9)
    above = client_for(demo_home, tmp_path / "b", MONTHLY_BUDGET_USD=projection * 1.1)
    unset = client_for(demo_home, tmp_path / "c")
    assert "Over budget." in get(below, "/costs")
    assert f"budget {usd(projection * 0.9)}" in get(below, "/costs")
    assert "Over budget." not in get(above, "/costs")
    assert f"budget {usd(projection * 1.1)}" in get(above, "/costs")
    assert "Over budget." not in get(unset, "/costs")


def test_budget_from_the_environment(
    demo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECALL_MONTHLY_BUDGET_USD", "0.01")
    assert "Over budget." in get(client_for(demo_home, tmp_path / "d"), "/costs")


# --- Requests -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"period": "year"},
        {"by": "colour"},
        {"from": "yesterday"},
        {"from": "2026-05-01", "to": "2026-04-01"},
        {"period": "day", "from": "2000-01-01", "to": "2026-01-01"},
    ],
)
def test_bad_parameters_are_400(demo: FlaskClient, params: dict) -> None:
    html = get(demo, "/costs", 400, **params)
    assert "Can't show those costs." in html and 'id="costs-form"' in html
    response = demo.get("/api/costs", query_string=params)
    assert response.status_code == 400 and response.get_json()["error"]
    assert demo.get("/costs.csv", query_string=params).status_code == 400


def test_htmx_gets_the_partial_and_every_filter_is_in_the_url(demo: FlaskClient) -> None:
    response = demo.get(
        "/costs", query_string={"by": "model"}, headers={"HX-Request": "true", "HX-Target": "costs"}
    )
    html = response.get_data(as_text=True)
    assert html.lstrip().startswith('<section id="costs"')
    assert "HX-Request" in response.headers["Vary"]
    page = get(demo, "/costs", by="source", period="week", source="cli")
    assert 'hx-push-url="true"' in page
    assert '<option value="source" selected>' in page
    assert 'value="week" checked' in page
    assert 'href="/costs.csv?by=source&amp;period=week&amp;source=cli"' in page


def test_the_page_is_strict_csp_clean(demo: FlaskClient) -> None:
    html = get(demo, "/costs")
    assert " style=" not in html and "<style" not in html
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
    for attrs, body in scripts:
        assert "src=" in attrs or 'type="application/json"' in attrs, attrs
        if body.strip():
            json.loads(body)  # data only, never code
    assert "Costs" in html and 'href="/costs"' in html  # in the navigation


def test_empty_range_says_so(demo: FlaskClient) -> None:
    html = get(demo, "/costs", **{"from": "2020-01-01", "to": "2020-02-01"})
    assert "No sessions in this range" in html and "<canvas" not in html


def test_new_spend_shows_up_through_the_rollup(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with SessionStore(home / "state.db") as store:
        sid = store.create_session("cli", started_at=NOW.timestamp() - 3600)
        call = Usage(
            model="m",
            billing_provider="p",
            estimated_cost_usd=1.25,
            cost_status="estimated",
            at=NOW.timestamp() - 3600,
        )
        store.record_usage(sid, call)
    client = client_for(home, tmp_path / "data")
    assert get_json(client)["totals"]["estimated_usd"] == 1.25  # the first answer starts the build
    rollup = client.application.extensions["recall.cost_rollup"]
    rollup.wait_until_built(timeout=60)
    with SessionStore(home / "state.db") as store:
        call = Usage(
            model="m",
            billing_provider="p",
            estimated_cost_usd=0.5,
            cost_status="estimated",
            at=NOW.timestamp() - 60,
        )
        store.record_usage(sid, call)
    # What each refresh of the next request did (one report asks several questions).
    refreshes: list[dict[str, float]] = []
    refresh = rollup.refresh

    def recorded(*args: object, **kwargs: object) -> bool:
        done = refresh(*args, **kwargs)
        refreshes.append(dict(rollup.last_refresh))
        return done

    rollup.refresh = recorded
    assert get_json(client)["totals"]["estimated_usd"] == 1.75
    assert refreshes and not any("rebuilt" in r for r in refreshes)
    assert refreshes[0]["changed"] >= 1  # the first question applied the new call
    assert "$1.75" in get(client, "/costs")


def get_json(client: FlaskClient) -> dict:
    response = client.get("/api/costs", query_string={"from": "2026-11-01", "to": "2026-12-01"})
    assert response.status_code == 200
    return response.get_json()


def test_cards_say_how_much_is_known_and_that_some_is_not(tmp_path: Path) -> None:
    # Item 2: calls of unknown price are named beside the known spend; no calls is $0.00.
    home = tmp_path / "home"
    at = NOW.timestamp() - 86400
    with SessionStore(home / "state.db") as store:
        sid = store.create_session("cli", started_at=at)
        store.record_usage(
            sid,
            Usage(
                model="m",
                billing_provider="p",
                estimated_cost_usd=2.10,
                cost_status="estimated",
                at=at,
            ),
        )
        store.record_usage(
            sid,
            Usage(
                model="local", billing_provider="custom", api_calls=3, cost_status="unknown", at=at
            ),
        )
    shown = cards(get(client_for(home, tmp_path / "a"), "/costs"))
    assert shown["spent so far"] == "$2.10 + 3 calls of unknown price"
    assert shown["last month by day 30"] == "$0.00"  # October had no calls: nothing spent
    assert shown["projected for the month"].startswith("$2.1")
    first_of_december = datetime(2026, 12, 1, 6, tzinfo=UTC)
    shown = cards(get(client_for(home, tmp_path / "b", now=first_of_december), "/costs"))
    assert shown["spent so far"] == "$0.00" and shown["projected for the month"] == "$0.00"
    assert shown["last month by day 1"] == "$0.00"
    assert shown["recomputed so far (Recall's prices)"] == "$0.00"  # no call: nothing to price


def facts_client(tmp_path: Path, builder=shapes.build_cost_facts, **extra: object) -> FlaskClient:
    home = tmp_path / "facts"
    builder(home / "state.db")
    return client_for(home, tmp_path / "data", **extra)


def test_the_total_row_counts_distinct_sessions(tmp_path: Path) -> None:
    # Item 4: a session on four days and in two models is one session in the Total row.
    client = facts_client(tmp_path, COST_ROLLUP="off")
    params = {"period": "day", "by": "model", "from": "2026-11-01", "to": "2026-11-30"}
    rows = shown_tables(get(client, "/costs", **params))["spend"]["rows"]
    head = shown_tables(get(client, "/costs", **params))["spend"]["head"]
    sessions = head.index("Sessions")
    assert sum(int(texts(r)[sessions]) for r in rows[:-1]) == 5
    assert texts(rows[-1])[sessions] == "1"


def csv_rows(client: FlaskClient, **params: object) -> list[dict[str, str]]:
    response = client.get("/costs.csv", query_string=params)
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(response.get_data(as_text=True))))


def test_csv_numbers_are_numbers_at_full_precision(tmp_path: Path) -> None:
    # Item 7: no "unknown"/"included" words in numeric columns; status in its own columns.
    client = facts_client(tmp_path)
    params = {"period": "day", "by": "model", "from": "2026-07-01", "to": "2026-12-01"}
    truth = client.get("/api/costs", query_string=params).get_json()
    lines = csv_rows(client, **params)
    assert len(lines) == len(truth["rows"]) + 1
    numeric = [
        "estimated_usd",
        "actual_usd",
        "effective_usd",
        "drift",
        "billed_share",
        "sessions",
        "api_calls",
        *(f"calls_{s}" for s in STATUSES),
        *(f"{k}_tokens" for k in TOKEN_KINDS),
    ]
    for line, row in zip(lines, [*truth["rows"], truth["totals"]], strict=True):
        for name in numeric:
            if line[name] != "":
                float(line[name])  # a number, nothing else
        for name in ("estimated_usd", "actual_usd", "effective_usd"):
            value = row[name]
            assert line[name] == ("" if value is None else repr(value)), (row["key"], name)
        assert line["coverage"] in (
            "billed",
            "partly billed",
            "estimated",
            "included",
            "unknown price",
        )
        for s in STATUSES:
            assert int(line[f"calls_{s}"]) == row["status_mix"][s]
    main = [
        r
        for r in lines
        if r["model"] == "anthropic/claude-sonnet-4.5" and r["period"] == "2026-11-05"
    ]
    assert main[0]["effective_usd"] == repr(0.255) and main[0]["coverage"] == "partly billed"
    unknown = [r for r in lines if r["model"] == "qwen3-coder-30b"]
    assert unknown and unknown[0]["effective_usd"] == ""
    assert unknown[0]["coverage"] == "unknown price"


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised(tmp_path: Path) -> None:
    # Item 7: a model named like a formula is exported as text (OWASP: a leading quote).
    home = tmp_path / "home"
    at = NOW.timestamp() - 3600
    evil = ['=HYPERLINK("http://x.test","click")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"]
    with SessionStore(home / "state.db") as store:
        sid = store.create_session("cli", started_at=at)
        for n, model in enumerate(evil):
            store.record_usage(
                sid,
                Usage(
                    model=model,
                    billing_provider="p",
                    estimated_cost_usd=0.1 * (n + 1),
                    cost_status="estimated",
                    at=at,
                ),
            )
    client = client_for(home, tmp_path / "data")
    models = {line["model"] for line in csv_rows(client, by="model")}
    assert models == {"'" + m for m in evil} | {"all"}


# --- Property: the API's figures are the README's rules, row by row ------------------------

ALL_SHAPES = {**shapes.SHAPES, **shapes.COST_SHAPES}


def as_result(body: dict) -> SimpleNamespace:
    return SimpleNamespace(
        rows=[SimpleNamespace(**r) for r in body["rows"]], totals=SimpleNamespace(**body["totals"])
    )


@pytest.mark.parametrize("mode", ["rollup", "raw"])
@pytest.mark.parametrize("shape", sorted(ALL_SHAPES))
def test_api_figures_follow_the_readme_rules_row_by_row(
    tmp_path: Path, shape: str, mode: str
) -> None:
    """Every shape, period and dimension: /api/costs equals an independent computation of
    the README's rules (NULL status, partial bills, days of the calls, distinct sessions)."""
    home = tmp_path / "home"
    ALL_SHAPES[shape](home / "state.db")
    client = client_for(home, tmp_path / "data", COST_ROLLUP="on" if mode == "rollup" else "off")
    get(client, "/costs", **YEAR)  # the first page starts the rollup's build
    rollup = client.application.extensions.get("recall.cost_rollup")
    if mode == "rollup":
        # Every shape: the archive has usage rows (derived ones for a source without them).
        assert rollup is not None
        rollup.wait_until_built(timeout=60)  # every answer below comes from the rollup
    start, end = date(2026, 6, 29), date(2027, 1, 1)
    for period in ("month", "week", "day"):
        for by in ("provider", "model", "source", "task"):
            params = {"period": period, "by": by, "from": start.isoformat(), "to": end.isoformat()}
            body = client.get("/api/costs", query_string=params).get_json()
            first = {"month": start.replace(day=1), "week": start, "day": start}[period]
            expected, everyone = independent(read_path(client), period, by, first, end, "UTC")
            assert_matches(as_result(body), expected, everyone)
    if mode == "rollup":
        assert rollup is not None and rollup.last_refresh.get("changed") == 0  # answered by it


def test_chart_tooltips_use_the_pages_money_rule(demo: FlaskClient) -> None:
    """Item 12: the chart's money text is the server's rule, so it matches the tables."""
    html = get(demo, "/costs", **YEAR)
    chart = json.loads(re.search(r'id="costs-data">(.*?)</script>', html, re.S).group(1))
    for part, by_key in chart["spend"].items():
        for key, values in by_key.items():
            texts = chart["texts"]["spend"][part][key]
            assert texts == [None if v is None else usd(v) for v in values]
    assert chart["texts"]["totals"]["effective"] == [
        None if v is None else usd(v) for v in chart["totals"]["effective"]
    ]
    # One precision per size: no four-decimal figure of a cent or more anywhere.
    assert not re.findall(r"\$0\.(?:0[1-9]|[1-9]\d)\d\d\b", html)


# --- Item 11: ranges one click away, field names as in the URL --------------------------


def test_the_default_range_shows_last_december(demo_home: Path, tmp_path: Path) -> None:
    """On the 1st of December, last December is still on the page (13 months); when the
    home is younger than that, the range begins with its first month, not empty ones."""
    client = client_for(demo_home, tmp_path / "data", datetime(2026, 12, 1, 9, tzinfo=UTC))
    body = json.loads(get(client, "/api/costs"))
    assert body["from"] == "2025-12-01" and body["to"] == "2027-01-01"
    assert body["periods"][0] == "2025-12" and len(body["periods"]) == 13
    with closing(open_readonly(read_path(client))) as conn:
        (first,) = conn.execute("SELECT min(started_at) FROM sessions").fetchone()
    first_month = datetime.fromtimestamp(first, UTC).strftime("%Y-%m")
    earlier = client_for(demo_home, tmp_path / "earlier", datetime(2026, 6, 15, 9, tzinfo=UTC))
    body = json.loads(get(earlier, "/api/costs"))
    assert body["from"] == f"{first_month}-01" > "2025-06-01" and body["to"] == "2026-07-01"
    assert body["periods"][0] == first_month


def test_range_shortcuts_are_links_with_from_and_to(demo: FlaskClient, demo_home: Path) -> None:
    html = get(demo, "/costs", by="model", before="2026-06-01")
    nav = html[html.index('class="costs-shortcuts"') :]
    nav = nav[: nav.index("</nav>")]
    links = dict(
        (label, href.replace("&amp;", "&"))
        for href, label in re.findall(r'href="([^"]+)"[^>]*>([^<]+)</a>', nav)
    )
    assert set(links) == {"This month", "Last month", "Last 30 days", "This year", "All time"}
    assert "from=2026-10-01" in links["Last month"] and "to=2026-11-01" in links["Last month"]
    assert "from=2026-01-01" in links["This year"] and "to=2027-01-01" in links["This year"]
    # All time starts with the month of the first session and keeps the other filters.
    assert "to=2026-12-01" in links["All time"] and "by=model" in links["All time"]
    assert all("before=" not in href for href in links.values())
    with closing(open_readonly(demo_home / "state.db")) as conn:
        (first,) = conn.execute("SELECT min(started_at) FROM sessions").fetchone()
    month = datetime.fromtimestamp(first, UTC).strftime("%Y-%m")
    assert f"from={month}-01" in links["All time"]


def test_the_header_names_the_last_day_and_the_form_says_to(demo: FlaskClient) -> None:
    html = get(demo, "/costs", **{"from": "2026-10-01", "to": "2026-11-01"})
    meta = html[html.index('class="result-meta">') + 20 :]
    meta = " ".join(re.sub(r"<[^>]+>", " ", meta).split())
    assert meta.startswith(
        "1 month from 2026-10-01 through 2026-10-31 (to=2026-11-01, not included)"
    )
    assert re.search(
        r"<label>To <span[^>]*>\(not included\)</span> <input type=\"date\" name=\"to\"", html
    )
    assert "Before" not in html
    assert 'aria-current="true">Last month</a>' in html


def test_before_is_read_as_to_and_said_so(demo: FlaskClient) -> None:
    page = get(demo, "/costs", **{"from": "2026-10-01", "before": "2026-11-01"})
    assert 'through <strong class="costs-last-day">2026-10-31</strong>' in page
    assert "before= is the old name of to=" in page
    body = json.loads(get(demo, "/api/costs", **{"from": "2026-10-01", "before": "2026-11-01"}))
    assert body["to"] == "2026-11-01" and "before= is the old name of to=" in body["notices"][0]
    conflict = get(demo, "/costs", 400, to="2026-12-01", before="2026-11-01")
    assert "not both" in conflict
    # The same date twice is no conflict.
    get(demo, "/api/costs", to="2026-11-01", before="2026-11-01")


# --- Item 13: the sessions that cost the most, and a period opened from the chart -------


def session_rows(html: str) -> list[dict[str, str]]:
    """The costly-sessions table: each row's links, cost text, tokens and calls."""
    table = html[html.index('<table class="grid costs-sessions">') :]
    table = table[: table.index("</table>")]
    out = []
    for row in re.findall(r"<tr>\s*<td class=\"text session-cell\">(.*?)</tr>", table, re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", '<td class="x">' + row, re.S)
        text = [" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in cells]
        out.append(
            {
                "session": re.search(r'href="/sessions/([^"]+)"', row).group(1),
                "chain": (re.search(r'href="/chains/([^"]+)"', row) or [None, None])[1],
                "cost": text[3],
                "recomputed": text[5],
                "tokens": text[6],
                "calls": text[7],
            }
        )
    return out


def test_costly_sessions_are_listed_and_link_to_session_and_chain(demo: FlaskClient) -> None:
    html = get(demo, "/costs", **YEAR)
    rows = session_rows(html)
    assert 5 <= len(rows) <= 25
    body = json.loads(get(demo, "/api/costs", **YEAR))
    assert f"of {body['totals']['sessions']:,} that spent" in html
    costs = [float(r["cost"].split()[0].strip("$").replace(",", "")) for r in rows]
    assert costs == sorted(costs, reverse=True)
    assert any(r["chain"] == r["session"] for r in rows), "the demo's costly sessions are chained"
    assert 'aria-sort="descending"><a href="/costs?' in html
    head = html[html.index('<table class="grid costs-sessions">') :]
    head = head[: head.index("</thead>")].replace("&amp;", "&")
    assert "sort=cost&dir=asc" in head and "sort=tokens&dir=desc" in head


def test_each_costly_session_is_named_as_its_own_page_names_it(demo: FlaskClient) -> None:
    """Issue 24: an untitled session has one name everywhere, never its raw id alone."""
    # The cheapest too: the demo's untitled sessions (cron runs, delegations) cost little.
    html = get(demo, "/costs", **YEAR) + get(demo, "/costs", sort="cost", dir="asc", **YEAR)
    table = "".join(
        part.split("</table>", 1)[0]
        for part in html.split('<table class="grid costs-sessions">')[1:]
    )
    links = re.findall(
        r'<td class="text session-cell"><a href="/sessions/([^"?]+)[^"]*" title="[^"]*">(.*?)</a>',
        table,
        re.S,
    )
    shown = names_shown_as_their_pages(demo, links)
    untitled = [(sid, name) for sid, name, bare in shown if bare]
    assert len(shown) > 25 and untitled
    assert all(name != sid for sid, name in untitled)


def test_sessions_sort_by_calls_both_ways(demo: FlaskClient) -> None:
    down = session_rows(get(demo, "/costs", sort="calls", **YEAR))
    calls = [int(r["calls"].replace(",", "")) for r in down]
    assert calls == sorted(calls, reverse=True)
    up = session_rows(get(demo, "/costs", sort="calls", dir="asc", **YEAR))
    calls_up = [int(r["calls"].replace(",", "")) for r in up]
    assert calls_up == sorted(calls_up) and calls_up[0] <= calls[-1]
    assert 'aria-sort="ascending"' in get(demo, "/costs", sort="calls", dir="asc", **YEAR)
    assert "sort must be one of" in get(demo, "/costs", 400, sort="price")


def test_each_period_opens_as_its_days_and_sessions(demo: FlaskClient) -> None:
    html = get(demo, "/costs", by="model", **YEAR)
    nav = html[html.index('class="costs-drill"') :]
    nav = nav[: nav.index("</nav>")].replace("&amp;", "&")
    links = re.findall(r'<a href="([^"]+)" data-index="(\d+)">([^<]+)', nav)
    assert [label.strip() for _, _, label in links] == [f"2026-{m:02d}" for m in range(1, 13)]
    href = next(h for h, _, label in links if label.strip() == "2026-10")
    assert "from=2026-10-01" in href and "to=2026-11-01" in href and "period=day" in href
    assert "by=model" in href
    response = demo.get(href)
    assert response.status_code == 200
    october = response.get_data(as_text=True)
    body = json.loads(
        get(demo, "/api/costs", period="day", **{"from": "2026-10-01", "to": "2026-11-01"})
    )
    assert len(body["periods"]) == 31
    assert f"of {body['totals']['sessions']:,} that spent from 2026-10-01 through 2026-10-31" in (
        " ".join(re.sub(r"<[^>]+>", " ", october).split())
    )


def test_a_month_opened_by_day_lists_its_costliest_sessions_first(demo: FlaskClient) -> None:
    """A column opens its month by day (a row a day and key): the sessions list comes
    before that table; by month, the table first, as before."""
    href = drill_href(get(demo, "/costs", by="model", **YEAR), "2026-10")
    october = demo.get(href).get_data(as_text=True)
    assert len(costly_rows(october)) > 1
    assert october.index('id="costly-sessions"') < october.index("costs-table costs-spend")
    year = get(demo, "/costs", **YEAR)
    assert year.index("costs-table costs-spend") < year.index('id="costly-sessions"')
    assert year.count('id="costly-sessions"') == october.count('id="costly-sessions"') == 1


def drill_href(html: str, label: str) -> str:
    """The link under the chart that opens the period ``label``."""
    nav = html[html.index('class="costs-drill"') :]
    nav = nav[: nav.index("</nav>")].replace("&amp;", "&")
    links = re.findall(r'<a href="([^"]+)" data-index="(\d+)">([^<]+)', nav)
    return next(h for h, _, text in links if text.strip() == label)


def test_the_form_keeps_the_sessions_order(demo: FlaskClient) -> None:
    html = get(demo, "/costs", sort="tokens", dir="asc", **YEAR)
    form = html[html.index('<form id="costs-form"') : html.index("</form>")]
    assert '<input type="hidden" name="sort" value="tokens">' in form
    assert '<input type="hidden" name="dir" value="asc">' in form
    assert 'type="hidden"' not in get(demo, "/costs", **YEAR).split("</form>")[0]


def test_a_costly_session_gone_from_hermes_carries_its_badge(tmp_path: Path) -> None:
    from tests.support.pages import GONE_BADGE

    ids = shapes.build_gone_home(tmp_path / "home")
    with SessionStore(tmp_path / "home" / "state.db") as store:
        for name in ("gone", "kept"):
            usage = Usage(
                model="m",
                input_tokens=10,
                estimated_cost_usd=0.5,
                cost_status="estimated",
                at=shapes.GONE_AT - 9e6,
            )
            store.record_usage(ids[name], usage)
    client = make_app(tmp_path / "home", tmp_path / "data").test_client()
    html = get(client, "/costs", **YEAR)
    table = html[html.index('<table class="grid costs-sessions">') :]
    table = table[: table.index("</table>")]
    assert ids["gone"] in table and ids["kept"] in table
    assert table.count(GONE_BADGE) == 1


# --- Profiles (issue 17): a dimension and headline cards with 2+ profiles ------------------


@pytest.fixture(params=["rollup", "raw"])
def profiles_client(request: pytest.FixtureRequest, tmp_path: Path) -> FlaskClient:
    """The three-profile home's costs, from the rollup (built first) and from the raw rows."""
    facts = profiles_home(tmp_path / "profiles-home")  # not hermes_home's folder
    if request.param == "raw":
        return client_for(facts.root, tmp_path / "data", now=SHAPES_NOW, COST_ROLLUP="off")
    client = client_for(facts.root, tmp_path / "data", now=SHAPES_NOW)
    get(client, "/api/costs", **YEAR)  # starts the background build
    client.application.extensions["recall.cost_rollup"].wait_until_built(timeout=60)
    return client


def test_profile_is_a_dimension_and_a_card_only_with_several_profiles(
    profiles_client: FlaskClient, hermes_home: Path, tmp_path: Path
) -> None:
    client = profiles_client
    db = read_path(client)
    truth = repository_spend(
        db, period="month", by="profile", start=date(2026, 1, 1), end=date(2027, 1, 1)
    )
    assert {c.key for c in truth.rows} == {"default", "legacy"}
    html = get(client, "/costs", by="profile", **YEAR)
    assert '<option value="profile" selected>profile</option>' in html
    rows = shown_tables(html)["spend"]["rows"]
    assert shown_tables(html)["spend"]["head"][1] == "Profile"
    assert [texts(r) for r in rows] == [
        *(expected_spend_row(c, c.period, c.key) for c in truth.rows),
        expected_spend_row(truth.totals, "Total", "all"),
    ]
    # The CSV has a profile column when asked for one, and only then.
    header, *lines = list(csv.reader(io.StringIO(get(client, "/costs.csv", by="profile", **YEAR))))
    assert header[:2] == ["period", "profile"] and header.count("profile") == 1
    assert [line[1] for line in lines] == [*(c.key for c in truth.rows), "all"]
    plain = next(csv.reader(io.StringIO(get(client, "/costs.csv", by="model", **YEAR))))
    assert "profile" not in plain
    # Each profile's row is what that profile's own page says; the total is their sum.
    body = json.loads(get(client, "/api/costs", by="profile", **YEAR))
    assert body.pop("verdicts") == json.loads(json.dumps([v.to_json() for v in verdicts(truth)]))
    assert body == json.loads(json.dumps(truth.to_json()))
    for name in ("default", "empty", "legacy"):
        own = json.loads(get(client, "/api/costs", by="profile", profile=name, **YEAR))
        assert own["rows"] == [r for r in body["rows"] if r["key"] == name], name
    assert sum(r["effective_usd"] for r in body["rows"]) == pytest.approx(
        body["totals"]["effective_usd"]
    )

    # The cards of all profiles: the total, then each profile's month so far.
    shown = cards(get(client, "/costs", profile="all"))
    july = {
        "period": "month",
        "by": "provider",
        "start": date(2026, 7, 1),
        "end": date(2026, 7, 26),
    }
    assert shown["spent so far"] == _with_unknown(repository_spend(db, **july))
    for name in ("default", "empty", "legacy"):
        own = json.loads(
            get(client, "/api/costs", profile=name, **{"from": "2026-07-01", "to": "2026-07-26"})
        )
        mine = repository_spend(db, **july, profiles=(name,))
        assert own["totals"] == json.loads(json.dumps(mine.totals.to_json())), name
        # A profile without calls this month spent $0, as an empty month does.
        assert shown[f"{name} · spent so far"] == (
            _with_unknown(mine) if mine.rows else usd(0.0)
        ), name
    one = cards(get(client, "/costs", profile="legacy"))
    assert not [label for label in one if "·" in label and "spent so far" in label]

    # The costliest sessions of all profiles name each one's profile; one profile's do not.
    listed = costly_rows(get(client, "/costs", profile="all", **YEAR))
    assert listed[0][:2] == ["Session", "Profile"]
    with closing(open_readonly(db)) as conn:
        owner = dict(conn.execute("SELECT id, profile FROM sessions"))
    shown_profiles = {sid: row[1] for sid, row in listed[1:]}
    assert set(shown_profiles.values()) >= {"default", "legacy"}
    assert shown_profiles == {sid: owner[sid] for sid in shown_profiles}
    assert costly_rows(get(client, "/costs", profile="legacy", **YEAR))[0][1] == "Started"

    # One profile: no profile dimension anywhere, the page as it always was.
    single = client_for(hermes_home, tmp_path / "single", now=SHAPES_NOW)
    page = get(single, "/costs", **YEAR)
    assert 'value="profile"' not in page and "profile" not in page.split('id="costs"')[1]
    assert not [label for label in cards(page) if "·" in label and "spent so far" in label]
    for path in ("/costs", "/costs.csv", "/api/costs"):
        assert "by must be one of provider, model, source, task" in get(
            single, path, 400, by="profile", **YEAR
        )


# --- One report, one snapshot ----------------------------------------------------------


def record_reports(monkeypatch: pytest.MonkeyPatch) -> list[CostsReport]:
    """Every report the reader returns, in order."""
    made: list[CostsReport] = []
    original = StateReader.costs_report

    def recorded(self: StateReader, *args: object, **kwargs: object) -> CostsReport:
        report = original(self, *args, **kwargs)  # type: ignore[arg-type]
        made.append(report)
        return report

    monkeypatch.setattr(StateReader, "costs_report", recorded)
    return made


def test_page_csv_and_json_render_the_one_report_of_one_snapshot(
    demo: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = count_snapshots(monkeypatch)
    made = record_reports(monkeypatch)
    params = {"by": "model", "sort": "calls"}
    html = get(demo, "/costs", **params)
    assert len(opened) == 1 and len(made) == 1  # one reader call, one snapshot
    report = made[0]
    assert report.spend is not None and report.headlines is not None and report.sessions
    total = texts(shown_tables(html)["spend"]["rows"][-1])
    assert total == expected_spend_row(report.spend.totals, "Total", "all")
    assert cards(html)["spent so far"].startswith(usd(report.headlines.spend_so_far))
    listed = re.findall(r'<td class="text session-cell"><a href="/sessions/([^"?]+)', html)
    assert listed == [s.session_id for s in report.sessions.sessions]

    del opened[:], made[:]
    lines = list(csv.reader(io.StringIO(get(demo, "/costs.csv", **params))))
    assert len(opened) == 1 and len(made) == 1
    row = dict(zip(lines[0], lines[-1], strict=True))
    assert made[0].spend is not None
    assert row["effective_usd"] == repr(made[0].spend.totals.effective_usd)
    assert len(lines) == len(made[0].spend.rows) + 2  # the header, the rows, the total

    del opened[:], made[:]
    body = demo.get("/api/costs", query_string=params).get_json()
    assert len(opened) == 1 and len(made) == 1
    assert made[0].spend is not None
    assert body.pop("verdicts") == [v.to_json() for v in verdicts(made[0].spend)]
    assert body == json.loads(json.dumps(made[0].spend.to_json()))
    assert made[0].spend.to_json() == report.spend.to_json()  # the same figures each time


def test_a_malformed_request_still_reads_one_snapshot(
    demo: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = count_snapshots(monkeypatch)
    html = get(demo, "/costs", 400, period="fortnight")
    assert len(opened) == 1 and "period must be one of" in html
    assert "This month" in html  # the form's shortcuts, from that snapshot
    del opened[:]
    get(demo, "/costs", 400, **{"from": "2026-05-01", "to": "2026-04-01"})  # refused by plan
    assert len(opened) == 1
    assert demo.get("/api/costs", query_string={"period": "fortnight"}).status_code == 400
    backwards = {"from": "2026-05-01", "to": "2026-04-01"}
    assert demo.get("/costs.csv", query_string=backwards).status_code == 400


# --- Issue 28: three figures, and where they part ---------------------------------------

NOVEMBER = {"from": "2026-11-01", "to": "2026-12-01"}


def flat(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


@pytest.mark.parametrize("rollup", ["on", "off"])
def test_the_page_says_where_hermes_and_recall_part(tmp_path: Path, rollup: str) -> None:
    from tests.support.cost_homes import long_context_home

    home = tmp_path / "home"
    long_context_home(home)
    client = client_for(home, tmp_path / "data", COST_ROLLUP=rollup)
    if rollup == "on":
        get(client, "/api/costs", **NOVEMBER)
        client.application.extensions["recall.cost_rollup"].wait_until_built(timeout=60)
    body = json.loads(get(client, "/api/costs", **NOVEMBER))
    (said,) = body["verdicts"]
    page = flat(get(client, "/costs", **NOVEMBER))
    assert html.unescape(said["sentence"]) in html.unescape(page)
    assert said["sentence"].startswith("Hermes under-estimated November 2026 by ")
    assert f"from {body['price_table']} at the prices of its day" in page
    rows = shown_tables(get(client, "/costs", **NOVEMBER))["spend"]
    assert rows["head"][3] == "Recomputed" and rows["head"][7] == "Estimate vs recomputed"
    total = texts(rows["rows"][-1])
    assert total[3] == usd(body["totals"]["recomputed"]["usd"])
    assert total[7].startswith("−") and total[7].endswith("%")


def test_a_broken_prices_yaml_is_said_and_the_table_prices_alone(tmp_path: Path) -> None:
    from tests.support.cost_homes import long_context_home

    home = tmp_path / "home"
    long_context_home(home)
    data = tmp_path / "data"
    client = client_for(home, data, COST_ROLLUP="off")
    before = json.loads(get(client, "/api/costs", **NOVEMBER))
    (data / "prices.yaml").write_text("prices:\n  - model: x\n    input: cheap\n")
    body = json.loads(get(client, "/api/costs", **NOVEMBER))
    assert "entry 1 (x): input must be a number" in body["price_problem"]
    assert body["totals"]["recomputed"] == before["totals"]["recomputed"]
    page = flat(get(client, "/costs", **NOVEMBER))
    assert "prices.yaml: prices.yaml, entry 1 (x): input must be a number" in page


def test_a_session_page_shows_recall_s_price_beside_hermes_s(tmp_path: Path) -> None:
    from tests.support.cost_homes import long_context_home

    home = tmp_path / "home"
    long_context_home(home)
    client = client_for(home, tmp_path / "data")
    body = json.loads(get(client, "/api/costs", **NOVEMBER))
    page = flat(get(client, "/sessions/long"))
    assert f"recomputed {usd(body['totals']['recomputed']['usd'])}" in page


def test_each_costly_session_shows_recall_s_price_of_its_calls(demo: FlaskClient) -> None:
    from dashboard.costs.costly import raw_session_sums
    from dashboard.costs.spend import cell_from_sums, plan

    rows = session_rows(get(demo, "/costs", **YEAR))
    question = plan(
        period="month", by="provider", start=date(2026, 1, 1), end=date(2027, 1, 1), timezone="UTC"
    )
    with closing(open_readonly(read_path(demo))) as conn:
        sums = raw_session_sums(conn, question)
    assert rows and any(r["recomputed"] not in ("unknown", "included") for r in rows)
    for r in rows:
        again = cell_from_sums("range", r["session"], sums[r["session"]], 1).recomputed
        assert r["recomputed"] == usd(again.usd), r["session"]
