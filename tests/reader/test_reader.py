"""The reader's screens: each one object, read in one snapshot."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from werkzeug.datastructures import MultiDict

from dashboard.costs.request import CostsRequest
from dashboard.costs.rollup import CostRollup
from dashboard.hermes.home import HermesHome
from dashboard.reader import costs_report as costs_report_module
from dashboard.reader.opening import reading_for
from dashboard.reader.reader import StateReader
from dashboard.search.sessions import SearchRequest
from dashboard.sessions.transcript import TranscriptRequest
from dashboard.store.recalldb import RecallData
from dashboard.store.session_store import SessionStore, Usage
from tests.support import hermes_shapes as shapes
from tests.support.snapshots import count_snapshots

# --- One snapshot per screen ----------------------------------------------------------

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SHAPES_NOW = datetime(2026, 7, 25, 12, 0, tzinfo=UTC)  # the shapes' sessions are in July 2026


def shapes_reader(tmp_path: Path) -> StateReader:
    """A reader of a current-form home's archive, as the pages read it (synced inline)."""
    home = tmp_path / "hermes"
    shapes.build_current_views(home / "state.db")
    return reading_for(
        HermesHome(home), tmp_path / "data" / "archive.db", inline=True, folder=tmp_path / "data"
    ).reader


def test_each_screen_reads_one_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reader = shapes_reader(tmp_path)
    opened = count_snapshots(monkeypatch)
    july = CostsRequest.from_params(MultiDict(), today=SHAPES_NOW.date(), timezone="UTC")
    screens = {
        "costs": lambda: reader.costs_report(july, now=SHAPES_NOW),
        "costs form": lambda: reader.costs_report(None, now=SHAPES_NOW),
        "costs csv": lambda: reader.costs_report(july, now=SHAPES_NOW, cards=False),
        "search": lambda: reader.search_page(SearchRequest(query="pool")),
        "search form": lambda: reader.search_page(None),
        "session": lambda: reader.session_page(shapes.S_CONT1, TranscriptRequest(query="pool")),
        "overview": lambda: reader.overview_page(today=SHAPES_NOW.date(), timezone="UTC"),
        "chain": lambda: reader.chain_page(shapes.S_CONT1),
        "chains": lambda: reader.chains_index(),
        "stitched": lambda: reader.stitched_page(shapes.S_CONT1, TranscriptRequest(query="pool")),
    }
    for name, screen in screens.items():
        del opened[:]
        shown = screen()
        assert len(opened) == 1, name
        assert shown is not None
    costs = reader.costs_report(july, now=SHAPES_NOW)
    assert costs.spend is not None and costs.spend.rows  # the figures are there, not skipped
    assert costs.headlines is not None and costs.sessions is not None
    figures = reader.costs_report(july, now=SHAPES_NOW, cards=False)  # the CSV's and JSON's
    assert figures.spend == costs.spend and figures.headlines is figures.sessions is None
    found = reader.search_page(SearchRequest(query="pool"), facets=False)  # the JSON's
    assert found.facets == {} and found.result is not None and found.result.results
    session = reader.session_page(shapes.S_CONT1, TranscriptRequest(query="pool"))
    assert session.chain is not None and session.chain_part == (2, 3)
    assert session.match_count is not None and session.match_count >= 1


@pytest.mark.parametrize("answered_by", ["raw rows", "rollup"])
def test_a_sync_landing_mid_report_is_not_seen_by_the_rest_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answered_by: str
) -> None:
    # /costs used to read its cards and its table through separate snapshots: a sync
    # landing between them made this month's card and the table disagree.
    home = tmp_path / "home"
    at = NOW.timestamp() - 3600
    with SessionStore(home / "state.db") as store:
        sid = store.create_session("cli", started_at=at)
        store.record_usage(
            sid,
            Usage(
                model="m",
                billing_provider="p",
                estimated_cost_usd=1.25,
                cost_status="estimated",
                at=at,
            ),
        )
    reading = reading_for(
        HermesHome(home), tmp_path / "data" / "archive.db", inline=True, folder=tmp_path / "data"
    )
    assert reading.syncer is not None
    data = RecallData(tmp_path / "recall" / "recall.db")
    rollup = CostRollup(data.core, str(reading.reader.path)) if answered_by == "rollup" else None
    landed: list[bool] = []
    facets = costs_report_module.session_facets

    def sync_in_between(conn: sqlite3.Connection) -> dict[str, object]:
        """After the report's first read: a call recorded and synced into the archive."""
        if not landed:
            with SessionStore(home / "state.db") as store:
                store.record_usage(
                    sid,
                    Usage(
                        model="m",
                        billing_provider="p",
                        estimated_cost_usd=0.5,
                        cost_status="estimated",
                        at=NOW.timestamp() - 60,
                    ),
                )
            reading.syncer.poll()
            landed.append(True)
        return facets(conn)

    monkeypatch.setattr(costs_report_module, "session_facets", sync_in_between)
    november = CostsRequest.from_params(
        MultiDict({"from": "2026-11-01", "to": "2026-12-01"}), today=NOW.date(), timezone="UTC"
    )
    report = reading.reader.costs_report(november, now=NOW, rollup=rollup)
    assert landed  # the sync did land in the middle of the report
    assert report.spend is not None and report.headlines is not None
    assert report.spend.totals.estimated_usd == 1.25  # the state the report began with
    assert report.headlines.spend_so_far == 1.25  # the cards agree with the table
    assert report.sessions is not None
    assert [s.spend.estimated_usd for s in report.sessions.sessions] == [1.25]
    after = reading.reader.costs_report(november, now=NOW, rollup=rollup)  # the next one sees it
    assert after.spend is not None and after.headlines is not None
    assert after.spend.totals.estimated_usd == after.headlines.spend_so_far == 1.75
    if rollup is not None:
        assert rollup.last_refresh.get("changed") == 0  # answered by the rollup, brought level
    data.close()
