"""The costs page in real Chromium: both charts drawn; without JavaScript, the tables."""

from __future__ import annotations

from datetime import date, timedelta

from tests.support.browser_support import SCREENSHOTS, PageWatch, Server

# The demo's sessions end on its anchor day (2026-11-30); ask for that year explicitly
# so the page does not depend on today's date.
RANGE = "from=2025-12-01&to=2026-12-01"

DRAWN = """(kind) => {
  const canvas = document.querySelector(`canvas[data-chart="${kind}"]`);
  const chart = window.Chart && window.Chart.getChart(canvas);
  return {chart: Boolean(chart), width: canvas.width, height: canvas.height,
          datasets: chart ? chart.data.datasets.length : 0};
}"""


def test_both_charts_are_drawn(demo_server: Server, page) -> None:
    watch = PageWatch()
    watch.attach(page)
    page.goto(f"{demo_server.url}/costs?{RANGE}")
    page.wait_for_function("() => document.documentElement.classList.contains('charts-on')")
    for canvas in ("spend", "tokens"):
        drawn = page.evaluate(DRAWN, canvas)
        assert drawn["chart"] and drawn["width"] > 300 and drawn["height"] > 100, (canvas, drawn)
        assert drawn["datasets"] > 0
        assert page.locator(f'canvas[data-chart="{canvas}"]').is_visible()
    assert page.locator("table.costs-spend").is_visible()
    assert page.locator("table.costs-tokens").is_visible()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "costs.png"), full_page=True)

    # A filter change swaps the section through HTMX and the charts are drawn again.
    page.select_option("#costs-by", "model")
    page.wait_for_url("**by=model**")
    page.wait_for_function(
        "() => window.Chart && Chart.getChart(document.querySelector('canvas[data-chart=spend]'))"
        " && document.querySelector('table.costs-spend th:nth-child(2)').textContent === 'Model'"
    )
    assert page.evaluate(DRAWN, "tokens")["chart"]
    assert watch.problems == []


def test_without_javascript_the_tables_are_the_page(demo_server: Server, nojs_page) -> None:
    page = nojs_page
    page.goto(f"{demo_server.url}/costs?{RANGE}")
    assert page.locator("table.costs-spend").is_visible()
    assert page.locator("table.costs-tokens").is_visible()
    assert page.locator("table.costs-spend tbody tr").count() > 1
    assert page.locator("canvas").count() == 2
    assert not page.locator('canvas[data-chart="spend"]').is_visible()
    assert not page.locator('canvas[data-chart="tokens"]').is_visible()
    # The form still works as a plain GET.
    page.select_option("#costs-by", "source")
    page.click(".costs-apply button")
    page.wait_for_url("**by=source**")
    assert page.locator("table.costs-spend th").nth(1).inner_text() == "Source"
    # The cheapest sessions (cron runs, delegations: untitled) are named, never by their id.
    page.goto(f"{demo_server.url}/costs?{RANGE}&sort=cost&dir=asc")
    links = page.locator("table.costs-sessions td.session-cell a")
    shown = [
        (links.nth(i).inner_text(), links.nth(i).get_attribute("title"))
        for i in range(links.count())
    ]
    assert len(shown) > 5 and all(text != session_id for text, session_id in shown), shown


SPEND = """() => {
  const chart = Chart.getChart(document.querySelector('canvas[data-chart="spend"]'));
  const data = JSON.parse(document.getElementById('costs-data').textContent);
  return {
    data: data,
    sets: chart.data.datasets.map((d) => ({
      label: d.label, stack: d.stack, part: d.part, values: d.data,
      pattern: d.backgroundColor instanceof CanvasPattern,
      fill: d.backgroundColor instanceof CanvasPattern ? d.patternColour : d.backgroundColor,
    })),
  };
}"""

TOOLTIP = """(index) => {
  const chart = Chart.getChart(document.querySelector('canvas[data-chart="spend"]'));
  const set = chart.data.datasets.findIndex((d) => d.data[index]);
  chart.tooltip.setActiveElements([{datasetIndex: set, index: index}], {x: 0, y: 0});
  chart.update();
  return {body: chart.tooltip.body.flatMap((b) => b.lines), footer: chart.tooltip.footer};
}"""


def test_the_chart_compares_like_with_like(demo_server: Server, page) -> None:
    # Item 6: one column per period, effective spend, its billed part solid and its
    # estimated part striped; every series looks different; tooltips give the total.
    page.goto(f"{demo_server.url}/costs?{RANGE}")
    page.wait_for_function("() => document.documentElement.classList.contains('charts-on')")
    found = page.evaluate(SPEND)
    sets, data = found["sets"], found["data"]
    assert {s["stack"] for s in sets} == {"spend"}  # one column: nothing compared unlike
    assert {s["part"] for s in sets} == {"billed", "estimated"}
    for i, _ in enumerate(data["periods"]):
        height = sum(s["values"][i] or 0 for s in sets)
        assert abs(height - (data["totals"]["effective"][i] or 0)) < 1e-6
        billed = sum(s["values"][i] or 0 for s in sets if s["part"] == "billed")
        assert abs(billed - (data["totals"]["billed"][i] or 0)) < 1e-6
    assert all(s["pattern"] == (s["part"] == "estimated") for s in sets)
    looks = [(s["fill"], s["pattern"]) for s in sets]
    assert len(set(looks)) == len(looks)  # pale/solid variants of different keys differ
    solid = [s["fill"] for s in sets if not s["pattern"]]
    assert len(set(solid)) == len(solid)
    busy = max(range(len(data["periods"])), key=lambda i: data["totals"]["effective"][i] or 0)
    tip = page.evaluate(TOOLTIP, busy)
    total = data["totals"]["effective"][busy]
    shown = f"${total:,.2f}" if total >= 1 else f"${total:.4f}"
    assert any(shown in line and data["periods"][busy] in line for line in tip["footer"]), tip
    assert any("billed" in line for line in tip["footer"])


def _months_back(first: date, months: int) -> date:
    index = first.year * 12 + first.month - 1 - months
    return date(index // 12, index % 12 + 1, 1)


def test_range_shortcuts_and_the_to_field(demo_server: Server, page) -> None:
    """Item 11: "Last month" is one click, the form says To, the header the last day."""
    watch = PageWatch()
    watch.attach(page)
    this_month = date.today().replace(day=1)
    page.goto(f"{demo_server.url}/costs")
    # The default range is 13 months: last December is always on the page.
    first_row = page.locator("table.costs-spend tbody tr td").first
    if first_row.count():
        assert first_row.inner_text() >= _months_back(this_month, 12).strftime("%Y-%m")
    assert (
        page.locator(".result-meta")
        .inner_text()
        .startswith(f"13 months from {_months_back(this_month, 12)}")
    )
    page.get_by_role("link", name="Last month", exact=True).click()
    last = _months_back(this_month, 1)
    page.wait_for_url(f"**from={last}**")
    assert f"to={this_month}" in page.url
    assert page.locator('input[name="to"]').input_value() == this_month.isoformat()
    assert (
        page.locator(".costs-last-day").inner_text() == (this_month - timedelta(days=1)).isoformat()
    )
    assert (
        page.get_by_role("link", name="Last month", exact=True).get_attribute("aria-current")
        == "true"
    )
    assert page.get_by_label("To (not included)").get_attribute("name") == "to"

    # The old name of to= is read, and the page says so (never silently ignored).
    page.goto(f"{demo_server.url}/costs?from=2026-10-01&before=2026-11-01")
    assert page.locator(".costs-last-day").inner_text() == "2026-10-31"
    assert page.get_by_role("status").filter(has_text="before= is the old name of to=").is_visible()
    assert page.locator('input[name="to"]').input_value() == "2026-11-01"
    assert watch.problems == []


def test_all_time_works_without_javascript(demo_server: Server, nojs_page) -> None:
    page = nojs_page
    page.goto(f"{demo_server.url}/costs?by=model")
    page.get_by_role("link", name="All time", exact=True).click()
    page.wait_for_url("**by=model**")
    assert "from=" in page.url and "to=" in page.url
    assert page.locator("table.costs-spend tbody tr").count() > 1


BAR = """() => {
  const chart = Chart.getChart(document.querySelector('canvas[data-chart="spend"]'));
  const box = chart.canvas.getBoundingClientRect();
  let best = null;
  chart.data.datasets.forEach((d, i) => {
    chart.getDatasetMeta(i).data.forEach((bar, j) => {
      const value = d.data[j];
      if (value && (!best || value > best.value) && bar.height > 6) {
        best = {value, index: j, x: box.left + bar.x, y: box.top + bar.y + bar.height / 2};
      }
    });
  });
  return {...best, label: chart.data.labels[best.index]};
}"""


def test_a_click_on_a_bar_opens_that_periods_sessions(demo_server: Server, page) -> None:
    """Item 13: the chart drills into a period; the costliest sessions are listed, sortable."""
    watch = PageWatch()
    watch.attach(page)
    page.goto(f"{demo_server.url}/costs?{RANGE}")
    page.wait_for_function("() => document.documentElement.classList.contains('charts-on')")
    bar = page.evaluate(BAR)
    link = page.locator(f'.costs-drill a[data-index="{bar["index"]}"]')
    assert link.inner_text().startswith(bar["label"])
    expected = link.get_attribute("href")
    page.mouse.click(bar["x"], bar["y"])
    page.wait_for_url(f"**from={bar['label']}-01**")
    assert page.url.endswith(expected)
    assert "period=day" in page.url
    page.wait_for_function("() => document.documentElement.classList.contains('charts-on')")
    rows = page.locator("table.costs-sessions tbody tr")
    assert rows.count() > 0
    heading = page.locator("#costly-sessions").inner_text()
    assert f"from {bar['label']}-01 through {bar['label']}-" in heading

    # Sort by tokens, then open the top session and come back to its chain.
    page.locator("table.costs-sessions th a", has_text="Tokens").click()
    page.wait_for_url("**sort=tokens**")
    header = page.locator("table.costs-sessions th", has_text="Tokens")
    assert header.get_attribute("aria-sort") == "descending"
    tokens = page.locator("table.costs-sessions tbody tr td:nth-child(7)").all_inner_texts()
    assert len(tokens) == rows.count()
    first = page.locator("table.costs-sessions tbody tr").first
    session_id = first.locator("a").first.get_attribute("href").rsplit("/", 1)[1]
    first.locator("a").first.click()
    page.wait_for_url(f"**/sessions/{session_id}")
    assert watch.problems == []


def test_periods_open_without_javascript(demo_server: Server, nojs_page) -> None:
    page = nojs_page
    page.goto(f"{demo_server.url}/costs?{RANGE}")
    page.locator(".costs-drill a", has_text="2026-11").click()
    page.wait_for_url("**from=2026-11-01**")
    assert "to=2026-12-01" in page.url
    assert page.locator("table.costs-sessions tbody tr").count() > 0
    chained = page.locator("table.costs-sessions tbody a", has_text="chain")
    assert chained.count() > 0
    chained.first.click()
    page.wait_for_url("**/chains/**")
    assert page.locator("svg.chain-svg").is_visible()


CARD_LINES = """(markup) => {
  const value = document.querySelector('.cost-cards .stat-value');
  value.innerHTML = markup;
  const figure = value.firstChild;  // the figure's own text, then the note's span
  const range = document.createRange();
  range.selectNodeContents(figure);
  const lineHeight = parseFloat(getComputedStyle(value).lineHeight)
    || parseFloat(getComputedStyle(value).fontSize) * 1.2;
  const note = value.querySelector('.unknown-calls').getBoundingClientRect();
  return {figureLines: Math.round(range.getBoundingClientRect().height / lineHeight),
          noteLines: Math.round(note.height / (parseFloat(getComputedStyle(
            value.querySelector('.unknown-calls')).fontSize) * 1.3)),
          cardWidth: value.getBoundingClientRect().width};
}"""


def test_a_card_with_calls_of_unknown_price_keeps_its_figure_on_one_line(
    demo_server: Server, page
) -> None:
    """Issue 28: "$0.00 + 3 calls of unknown price" wrapped over four lines of a card.
    The card's markup is the ``cost`` filter's own, put in a card of the real page."""
    from dashboard.web.costs_table import cost_html

    page.set_viewport_size({"width": 1100, "height": 900})
    page.goto(f"{demo_server.url}/costs?{RANGE}")
    shown = page.evaluate(CARD_LINES, str(cost_html(0.0, 3)))
    assert shown["figureLines"] == 1, shown
    assert shown["noteLines"] <= 2, shown
