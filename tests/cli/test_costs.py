"""``recall costs``: the costs page's figures in the terminal, as a person runs it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.app import make_app
from tests.support.commands import recall
from tests.support.cost_homes import long_context_home

NOVEMBER = ("--from", "2026-11-01", "--to", "2026-12-01")


def home_with_spend(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    long_context_home(home)
    return home


def test_the_json_is_the_pages_json(tmp_path: Path) -> None:
    home = home_with_spend(tmp_path)
    out = recall("costs", "--home", str(home), "--by", "provider", "--json", *NOVEMBER)
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    app = make_app(home, tmp_path / "page-data", TIMEZONE="UTC")
    with app.test_client() as client:
        page = client.get(
            "/api/costs", query_string={"by": "provider", "from": "2026-11-01", "to": "2026-12-01"}
        ).get_json()
    # The CLI reads the machine's timezone; the fixture's calls are far from midnight.
    for body in (printed, page):
        body.pop("timezone")
    assert printed == page
    assert printed["verdicts"] and printed["totals"]["recomputed"]["usd"] > 0


def test_the_table_shows_three_figures_and_says_where_they_part(tmp_path: Path) -> None:
    home = home_with_spend(tmp_path)
    out = recall("costs", "--home", str(home), "--daily", *NOVEMBER)
    assert out.returncode == 0, out.stderr
    head = next(line for line in out.stdout.splitlines() if "Period" in line)
    for title in ("Estimated", "Recomputed", "Billed", "Est. vs recomp."):
        assert title in head
    assert "2026-11-10" in out.stdout  # by day: the day of the calls
    said = json.loads(recall("costs", "--home", str(home), "--daily", "--json", *NOVEMBER).stdout)
    assert said["verdicts"][0]["sentence"] in " ".join(out.stdout.split())
    assert f"Recomputed from {said['price_table']}" in out.stdout


def test_a_bad_option_is_a_clear_error(tmp_path: Path) -> None:
    home = home_with_spend(tmp_path)
    out = recall("costs", "--home", str(home), "--by", "colour")
    assert out.returncode == 2 and "by must be one of" in out.stderr
    out = recall("costs", "--home", str(home), "--from", "June")
    assert out.returncode == 2 and "from must be a date" in out.stderr
    assert "Traceback" not in out.stderr
