"""Overview page, health, error pages and HTMX partials, over real state.db files."""

from __future__ import annotations

import hashlib
import html
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from dashboard.reader.reader import StateReader
from dashboard.reader.screens import OverviewPage
from tests.support import hermes_shapes as shapes
from tests.support.app import make_app
from tests.support.snapshots import count_snapshots

LAYOUT_TEXT = {
    "inline": "inline FTS5 (seed form)",
    "external_messages": "external content over messages",
    "external_views": "external content through views",
}


EVERY_PAGE = (
    "/",
    "/?q=pool",
    "/?q=部署",
    "/?q=pool&sort=newest&group=session",
    "/overview",
    "/sessions/{root}",
    "/sessions/{cont}?q=pool&all=1",
    "/chains",
    "/chains/{cont}",
    "/chains/{cont}/transcript?all=1",
    "/costs",
    "/costs?period=day&by=source",
    "/costs.csv",
    "/summaries/{root}?q=pool",
    "/api/search?q=pool",
    "/api/sessions/{root}/messages",
    "/api/chains/{cont}",
    "/api/costs",
    "/api/session_search?query=pool",
    "/healthz",
    "/memory",
    "/memory/MEMORY.md",
    "/static/app.css",
    "/nope",
)


def _digest(db: Path) -> tuple[str, str | None]:
    wal = Path(f"{db}-wal")
    return (
        hashlib.sha256(db.read_bytes()).hexdigest(),
        hashlib.sha256(wal.read_bytes()).hexdigest()
        if wal.exists() and wal.stat().st_size
        else None,
    )


@pytest.mark.parametrize("shape", sorted(shapes.SHAPES))
def test_overview_shows_each_shape_and_leaves_it_unchanged(tmp_path: Path, shape: str) -> None:
    home = tmp_path / "home"
    db = shapes.SHAPES[shape](home / "state.db")
    facts = shapes.EXPECTED[shape]
    before = _digest(db)
    client = make_app(home, tmp_path / "data").test_client()

    page = client.get("/overview")
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    # The pages read the archive; the source's layout (and what it lacks) is shown as such.
    source = html[html.index('class="overview-source"') :]
    assert str(db) in source
    assert LAYOUT_TEXT[facts.fts_layout] in source
    assert facts.journal_mode.upper() in source
    assert f">{facts.visible_messages:,}<" in html[: html.index('class="overview-source"')]
    assert ("stale (rows missing from its index)" in source) == facts.fts_stale
    assert "stale — search falls back" not in html  # the archive's index is Recall's own
    if facts.has_cjk:
        assert "unusable: no such tokenizer" in source
    for path in EVERY_PAGE:  # every page there is, and its partials and JSON
        response = client.get(path.format(root=shapes.S_ROOT, cont=shapes.S_CONT1))
        assert response.status_code < 500, (path, response.status_code)
        response.close()
    assert _digest(db) == before


def test_htmx_request_for_the_overview_gets_only_the_partial(client: FlaskClient) -> None:
    full = client.get("/overview")
    part = client.get("/overview", headers={"HX-Request": "true", "HX-Target": "overview"})
    assert "<html" in full.get_data(as_text=True)
    body = part.get_data(as_text=True)
    assert "<html" not in body and body.lstrip().startswith('<section id="overview"')
    assert "HX-Request" in part.headers["Vary"]
    restore = client.get(
        "/overview",
        headers={
            "HX-Request": "true",
            "HX-Target": "overview",
            "HX-History-Restore-Request": "true",
        },
    )
    assert "<html" in restore.get_data(as_text=True)


def test_healthz(client: FlaskClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json["status"] == "ok"


def test_unknown_page_is_a_clear_404(client: FlaskClient) -> None:
    response = client.get("/does/not/exist")
    assert response.status_code == 404
    assert b"Not Found" in response.data and b"Traceback" not in response.data


def test_missing_database_gets_a_clear_page(tmp_path: Path) -> None:
    client = make_app(tmp_path / "empty-home", tmp_path / "data").test_client()
    response = client.get("/overview")
    assert response.status_code == 500
    html = response.get_data(as_text=True)
    assert "cannot be read (missing)" in html and "--home" in html
    assert client.get("/healthz").json["reason"] == "missing"
    assert not (tmp_path / "empty-home").exists()


def test_corrupt_database_gets_a_clear_page(tmp_path: Path) -> None:
    home = tmp_path / "home"
    db = shapes.build_seed_inline(home / "state.db")
    db.write_bytes(db.read_bytes()[:100] + b"\x13" * 8192)
    response = make_app(home, tmp_path / "data").test_client().get("/overview")
    assert response.status_code == 500
    assert "cannot be read (corrupt)" in response.get_data(as_text=True)


LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(20)
"""


def _locked(db: Path) -> subprocess.Popen[str]:
    """A process holding an EXCLUSIVE lock on ``db`` until killed."""
    p = subprocess.Popen([sys.executable, "-c", LOCKER, str(db)], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "locked"
    return p


def test_a_home_locked_before_anything_was_archived_gets_a_retry_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dashboard.store import readonly

    monkeypatch.setattr(readonly, "BUSY_TIMEOUT_S", 0.2)
    home = tmp_path / "home"
    db = shapes.build_delete_journal(home / "state.db")
    with _locked(db) as p:
        try:
            client = make_app(home, tmp_path / "data").test_client()
            response = client.get("/overview")
        finally:
            p.kill()
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "2"
    assert "cannot be read (locked)" in response.get_data(as_text=True)


def test_a_home_locked_after_its_import_shows_the_archive_and_says_so(tmp_path: Path) -> None:
    home = tmp_path / "home"
    db = shapes.build_delete_journal(home / "state.db")
    client = make_app(home, tmp_path / "data").test_client()
    with _locked(db) as p:
        try:
            response = client.get("/overview")
            search = client.get("/api/search?q=pool")
        finally:
            p.kill()
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "cannot be read (locked)" in html and "the archive as of the last sync" in html
    assert search.status_code == 200 and search.json["results"]


def test_demo_banner_only_on_demo_homes(tmp_path: Path, client: FlaskClient) -> None:
    from dashboard.demo.build import build_demo_home

    assert b"Demo data." not in client.get("/overview").data
    report = build_demo_home(tmp_path / "demo", sessions=8, messages=100, anchor_day="2026-11-30")
    demo = make_app(report.home, tmp_path / "d2").test_client()
    assert b"Demo data." in demo.get("/overview").data
    assert b"Demo data." in demo.get("/nope").data  # on every page, errors included


def test_the_demo_banner_names_commands_that_work_after_make_run(tmp_path: Path) -> None:
    from dashboard.cli import build_parser
    from dashboard.demo.build import build_demo_home

    report = build_demo_home(tmp_path / "demo", sessions=8, messages=100, anchor_day="2026-11-30")
    banner = make_app(report.home, tmp_path / "d").test_client().get("/overview").get_data(True)
    commands = [
        html.unescape(c)
        for c in re.findall(
            r"<code>([^<]*)</code>", banner.split('class="banner demo"')[1].split("</div>")[0]
        )
    ]
    assert "HERMES_HOME=~/.hermes make run" in commands
    serve = next(c for c in commands if c.startswith(".venv/bin/recall "))
    args = build_parser().parse_args(serve.split()[1:])  # what `make run` installed parses it
    assert args.command == "serve" and args.home == ["~/.hermes"]  # --home repeats: a list
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    first_section = readme.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    opening = [c for c in commands if c != "recall demo"]  # how this home was made
    assert all(c in first_section for c in opening)  # the README says the same


def _activity_home(root: Path) -> Path:
    """Three sessions in the last days (two models, tool calls, priced usage), one long ago."""
    from dashboard.store.records import NewMessage, Usage
    from dashboard.store.session_store import SessionStore

    noon = datetime(2026, 11, 29, 12, tzinfo=UTC).timestamp()
    with SessionStore(root / "state.db") as store:
        for sid, model, at, cost in (
            ("a", "model-a", noon, 0.5),
            ("b", "model-a", noon + 60, None),
            ("c", "model-b", noon - 86400, 1.25),
            ("old", "model-old", noon - 90 * 86400, 9.0),
        ):
            store.create_session("cli", session_id=sid, model=model, started_at=at)
            store.append_messages(
                sid,
                [
                    NewMessage("user", "run it", timestamp=at),
                    NewMessage("assistant", "ok", timestamp=at + 1, token_count=10),
                    NewMessage("tool", "done", tool_name="terminal", timestamp=at + 2),
                    NewMessage(
                        "tool",
                        "found",
                        tool_name="web_search" if sid == "a" else "terminal",
                        timestamp=at + 3,
                    ),
                ],
            )
            store.record_usage(
                sid,
                Usage(
                    model=model,
                    billing_provider="p",
                    input_tokens=100,
                    output_tokens=20,
                    estimated_cost_usd=cost,
                    cost_status="estimated" if cost else "unknown",
                    at=at + 1,
                ),
            )
    return root


def test_the_overview_starts_with_the_last_30_days(tmp_path: Path) -> None:
    home = _activity_home(tmp_path / "home")
    now = datetime(2026, 11, 30, 9, tzinfo=UTC).timestamp()
    client = make_app(home, tmp_path / "data", TIMEZONE="UTC", COSTS_NOW=now).test_client()
    page = client.get("/overview").get_data(as_text=True)
    activity = page.split('class="overview-activity"')[1].split("</section>\n  {%")[0]
    assert 'data-from="2026-11-01" data-to="2026-12-01"' in page
    rows = dict(re.findall(r"<tr><td>(2026-\d\d-\d\d)</td><td class=\"num sessions\">(\d+)<", page))
    assert len(rows) == 30 and rows["2026-11-29"] == "2" and rows["2026-11-28"] == "1"
    assert sum(int(n) for n in rows.values()) == 3  # the session 90 days ago is not in it
    models = re.findall(
        r'<li><span class="activity-name">([^<]+)</span> <span class="muted">'
        r"(\d+) sessions",
        activity,
    )
    assert models == [("model-a", "2"), ("model-b", "1")]
    tools = re.findall(
        r'<span class="activity-name">([^<]+)</span> <span class="muted">(\d+) '
        r"calls",
        activity,
    )
    assert tools == [("terminal", "5"), ("web_search", "1")]
    # The spend is the costs API's for the same days; the unknown call is named, not $0.
    costs = client.get("/api/costs?period=day&by=source&from=2026-11-01&to=2026-12-01").json
    assert costs["totals"]["effective_usd"] == 1.75
    assert 'data-spend="1.75"' in page and "1 call of unknown price" in activity
    assert page.index("overview-activity") < page.index("Detected layout")


def test_the_overview_of_a_home_without_sessions_in_the_range(client: FlaskClient) -> None:
    page = client.get("/overview").get_data(as_text=True)
    assert "Activity, last 30 days" in page and "Detected layout" in page


def test_one_model_under_two_spellings_is_one_top_model(tmp_path: Path) -> None:
    """OpenRouter's ``vendor/model-4.5`` and the vendor's ``model-4-5`` are one model."""
    from dashboard.store.records import NewMessage, Usage
    from dashboard.store.session_store import SessionStore

    noon = datetime(2026, 11, 29, 12, tzinfo=UTC).timestamp()
    home = tmp_path / "home"
    with SessionStore(home / "state.db") as store:
        for sid, model, cost in (
            ("a", "vendor/model-4.5", 0.5),
            ("b", "model-4-5", 0.25),
            ("c", "model-4-5-20250929", 0.25),
            ("d", "other", 2.0),
            ("e", "other", 1.0),
        ):
            store.create_session("cli", session_id=sid, model=model, started_at=noon)
            store.append_messages(sid, [NewMessage("user", "hi", timestamp=noon)])
            store.record_usage(
                sid,
                Usage(
                    model=model,
                    billing_provider="p",
                    input_tokens=10,
                    estimated_cost_usd=cost,
                    cost_status="estimated",
                    at=noon + 1,
                ),
            )
    now = datetime(2026, 11, 30, 9, tzinfo=UTC).timestamp()
    client = make_app(home, tmp_path / "data", TIMEZONE="UTC", COSTS_NOW=now).test_client()
    activity = client.get("/overview").get_data(as_text=True).split('class="overview-activity"')[1]
    models = re.findall(
        r'<li><span class="activity-name">([^<]+)</span> <span class="muted">'
        r"(\d+) sessions · ([^<]+)</span>",
        activity,
    )
    assert models == [("model-4-5", "3", "$1.00"), ("other", "2", "$3.00")]


def test_a_model_on_a_plan_is_included_not_free(tmp_path: Path) -> None:
    """Calls covered by a subscription say "included"; a model with a priced call beside
    them shows its spend."""
    from dashboard.store.records import NewMessage, Usage
    from dashboard.store.session_store import SessionStore

    noon = datetime(2026, 11, 29, 12, tzinfo=UTC).timestamp()
    home = tmp_path / "home"
    with SessionStore(home / "state.db") as store:
        for sid, model, cost, status in (
            ("a", "plan-model", 0.0, "included"),
            ("b", "plan-model", 0.0, "included"),
            ("c", "mixed", 0.0, "included"),
            ("d", "mixed", 0.75, "estimated"),
        ):
            store.create_session("cli", session_id=sid, model=model, started_at=noon)
            store.append_messages(sid, [NewMessage("user", "hi", timestamp=noon)])
            usage = Usage(
                model=model,
                billing_provider="p",
                input_tokens=10,
                estimated_cost_usd=cost,
                actual_cost_usd=0.0 if status == "included" else None,  # as Hermes: $0 billed
                cost_status=status,
                at=noon + 1,
            )
            store.record_usage(sid, usage)
    now = datetime(2026, 11, 30, 9, tzinfo=UTC).timestamp()
    client = make_app(home, tmp_path / "data", TIMEZONE="UTC", COSTS_NOW=now).test_client()
    activity = client.get("/overview").get_data(as_text=True).split('class="overview-activity"')[1]
    items = re.findall(r'<li><span class="activity-name">([^<]+)</span>(.*?)</li>', activity)
    shown = {name: " ".join(re.sub(r"<[^>]+>", " ", rest).split()) for name, rest in items}
    assert shown == {"plan-model": "2 sessions · included", "mixed": "2 sessions · $0.75"}


# -- profiles (issue 17) ---------------------------------------------------------------------


def _flat(client: FlaskClient, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return " ".join(response.get_data(as_text=True).split())


def _source_sessions(db: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
    finally:
        conn.close()


def test_the_overview_of_every_profile_has_a_row_per_profile_and_the_total(
    tmp_path: Path,
) -> None:
    facts = shapes.build_profiles_home(tmp_path / "hermes")
    client = make_app(facts.root, tmp_path / "data").test_client()
    page = _flat(client, "/overview?profile=all")
    table = re.search(r'<table class="grid profiles-table">.*?</table>', page)
    assert table is not None
    rows = {
        m.group(1): m.group(0)
        for m in re.finditer(r'<tr data-profile="([^"]+)">.*?</tr>', table.group(0))
    }
    assert set(rows) == {"default", "legacy", "empty"}
    counts = {name: _source_sessions(db) for name, db in facts.dbs.items()}
    for name, row in rows.items():
        assert f'<td class="num sessions">{counts[name]:,}</td>' in row, name
        assert f"?profile={name}" in row  # the row switches to that profile
        assert str(facts.dbs[name]) in row or "reachable" in row
        assert '<td class="last-sync"><time' in row, name  # its own sync, done
    total = re.search(r'<tr class="total">.*?</tr>', table.group(0)).group(0)
    assert f'<td class="num sessions">{sum(counts.values()):,}</td>' in total
    messages = [
        int(n.replace(",", ""))
        for n in re.findall(r'<td class="num messages">([\d,]+)</td>', table.group(0))
    ]
    assert messages[-1] == sum(messages[:-1]) > 0
    # One profile's overview: its own figures and its own source, no table.
    legacy = _flat(client, "/overview?profile=legacy")
    assert "profiles-table" not in legacy
    assert str(facts.dbs["legacy"]) in legacy and str(facts.dbs["default"]) not in legacy
    assert f"{counts['legacy']:,} sessions" in legacy


def test_the_overview_of_one_profile_homes_has_no_profile_table(client: FlaskClient) -> None:
    assert "profiles-table" not in _flat(client, "/overview")


def test_the_overview_reads_its_activity_and_its_counts_in_one_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The activity used to read through three snapshots beside the counts' own.
    home = _activity_home(tmp_path / "home")
    now = datetime(2026, 11, 30, 9, tzinfo=UTC).timestamp()
    client = make_app(home, tmp_path / "data", TIMEZONE="UTC", COSTS_NOW=now).test_client()
    opened = count_snapshots(monkeypatch)
    made: list[OverviewPage] = []
    original = StateReader.overview_page

    def recorded(self: StateReader, **kwargs: object) -> OverviewPage:
        shown = original(self, **kwargs)  # type: ignore[arg-type]
        made.append(shown)
        return shown

    monkeypatch.setattr(StateReader, "overview_page", recorded)
    page = client.get("/overview").get_data(as_text=True)
    assert len(opened) == 1 and len(made) == 1
    (shown,) = made
    assert shown.activity is not None and shown.activity.sessions == 3
    assert f'data-spend="{shown.activity.spend:g}"' in page
    assert shown.info["sessions"] == 4  # the counts, from the same snapshot


def test_the_overview_says_how_far_the_meaning_index_got(tmp_path: Path) -> None:
    """Not built (a home only read), under way, complete: each said in words."""
    from dashboard.meaning.builder import MeaningBuilder

    home = tmp_path / "home"
    shapes.build_current_views(home / "state.db")
    client = make_app(home, tmp_path / "data").test_client()

    def said() -> str:
        html = client.get("/overview").get_data(as_text=True)
        start = html.index('class="meaning-index"')
        return html[start : html.index("</dd>", start)]

    assert "not built" in said()
    archive = tmp_path / "data" / "archive.db"
    MeaningBuilder(archive, batch=3).step()
    assert "being built" in said() and "%" in said()
    MeaningBuilder(archive).build()
    assert "complete" in said()


def test_the_overview_s_spend_stands_beside_recall_s_price(tmp_path: Path) -> None:
    from dashboard.web.format import usd
    from tests.support.cost_homes import long_context_home

    home = tmp_path / "home"
    long_context_home(home)
    now = datetime(2026, 11, 30, 9, tzinfo=UTC).timestamp()
    client = make_app(home, tmp_path / "data", TIMEZONE="UTC", COSTS_NOW=now).test_client()
    page = client.get("/overview").get_data(as_text=True)
    costs = client.get("/api/costs?period=day&by=source&from=2026-11-01&to=2026-12-01").json
    again = costs["totals"]["recomputed"]["usd"]
    assert again and again > costs["totals"]["estimated_usd"]  # the tier Hermes missed
    stats = re.findall(
        r'<div class="stat-value">(.*?)</div>\s*<div class="stat-label">(.*?)</div>', page
    )
    shown = {html.unescape(label): re.sub(r"<[^>]+>", "", value) for value, label in stats}
    assert shown["recomputed (Recall's prices)"] == usd(again)
