"""The overview in real Chromium: activity of the last 30 days first, diagnostics below."""

from __future__ import annotations

import httpx
from playwright.sync_api import expect

from tests.support.browser_support import SCREENSHOTS, PageWatch, Server


def test_overview_shows_activity_per_day_top_models_and_tools_above_the_diagnostics(
    demo_server: Server, page
) -> None:
    watch = PageWatch()
    watch.attach(page)
    page.goto(demo_server.url + "/overview")
    activity = page.locator("#overview .overview-activity")
    expect(activity.locator("h2").first).to_contain_text("last 30 days")
    days = activity.locator("table.activity-days tbody tr")
    expect(days).to_have_count(30)
    sessions = [int(t.replace(",", "")) for t in days.locator("td.sessions").all_text_contents()]
    assert sum(sessions) > 0  # the demo's last weeks hold sessions
    expect(activity.locator("svg.activity-chart rect.bar").first).to_be_attached()

    # The spend is the costs page's, for the same days (one money rule).
    start, end = activity.get_attribute("data-from"), activity.get_attribute("data-to")
    params = {"period": "day", "by": "source", "from": start, "to": end}
    costs = httpx.get(f"{demo_server.url}/api/costs", params=params).json()
    assert float(activity.get_attribute("data-spend") or "nan") == costs["totals"]["effective_usd"]

    models = activity.locator(".activity-models li")
    tools = activity.locator(".activity-tools li")
    expect(models.first).to_be_visible()
    expect(tools.first).to_be_visible()
    assert models.count() <= 5 and tools.count() <= 8

    # Today's diagnostics come after the activity.
    layout = page.get_by_role("heading", name="Detected layout")
    expect(layout).to_be_visible()
    assert activity.bounding_box()["y"] < layout.bounding_box()["y"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "overview.png"), full_page=True)
    assert watch.problems == []
