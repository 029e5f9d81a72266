// Costs page charts (Chart.js, vendored). The tables under each chart hold the same
// numbers and are the page without JavaScript; the canvases show only once this
// script marks <html> with "charts-on". Data comes from the JSON block #costs-data.
(function () {
  "use strict";

  // Colour-blind-friendly (Okabe-Ito order), readable on light and dark backgrounds.
  const PALETTE = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#8c6bb1", "#999999"];
  const TOKEN_COLOURS = ["#0072b2", "#e69f00", "#56b4e9", "#009e73", "#cc79a7"];
  const scheme = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;

  function cssVar(name, fallback) {
    const value = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return value || fallback;
  }

  function alpha(hex, a) {
    const n = parseInt(hex.slice(1), 16);
    return "rgba(" + ((n >> 16) & 255) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a + ")";
  }

  // Money text comes from the server (data.texts), shown by the page's one money rule.
  function shown(text) {
    return text === null || text === undefined ? "unknown" : text;
  }

  function compact(value) {
    return Intl.NumberFormat("en-US", { notation: "compact", maximumSignificantDigits: 3 }).format(value);
  }

  function baseOptions(text, grid) {
    return {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      interaction: { mode: "nearest", axis: "x", intersect: true },
      plugins: { legend: { position: "bottom", labels: { color: text, boxWidth: 14 } } },
      scales: {
        x: { stacked: true, ticks: { color: text }, grid: { display: false } },
        y: { stacked: true, beginAtZero: true, ticks: { color: text }, grid: { color: grid } },
      },
    };
  }

  // The estimated part of a key's slice: its colour in stripes, so it can never be
  // mistaken for another key's solid (billed) colour.
  function stripes(colour) {
    const tile = document.createElement("canvas");
    tile.width = tile.height = 8;
    const g = tile.getContext("2d");
    g.fillStyle = alpha(colour, 0.22);
    g.fillRect(0, 0, 8, 8);
    g.strokeStyle = colour;
    g.lineWidth = 2;
    g.beginPath();
    g.moveTo(-2, 10); g.lineTo(10, -2);
    g.moveTo(-2, 2); g.lineTo(2, -2);
    g.moveTo(6, 10); g.lineTo(10, 6);
    g.stroke();
    return g.createPattern(tile, "repeat");
  }

  function spendChart(canvas, data, text, grid) {
    // One column per period, as high as its effective spend: each key's slice is its
    // billed part (solid) under its estimated part (striped).
    const datasets = [];
    data.keys.forEach(function (key, i) {
      const colour = PALETTE[i % PALETTE.length];
      datasets.push({
        label: key, part: "billed", stack: "spend", data: data.spend.billed[key],
        backgroundColor: colour, borderColor: colour, borderWidth: 1,
      });
      datasets.push({
        label: key, part: "estimated", stack: "spend", data: data.spend.estimated[key],
        backgroundColor: stripes(colour), patternColour: colour, borderColor: colour, borderWidth: 1,
      });
    });
    const options = baseOptions(text, grid);
    options.scales.y.ticks.callback = function (v) {
      return "$" + Intl.NumberFormat("en-US", { maximumSignificantDigits: 3 }).format(v);
    };
    // One legend entry per key; clicking it hides both parts of that key's slice.
    options.plugins.legend.labels.filter = function (item, chartData) {
      return chartData.datasets[item.datasetIndex].part === "billed";
    };
    options.plugins.legend.onClick = function (event, item, legend) {
      const chart = legend.chart;
      const key = chart.data.datasets[item.datasetIndex].label;
      const visible = chart.isDatasetVisible(item.datasetIndex);
      chart.data.datasets.forEach(function (d, i) {
        if (d.label === key) chart.setDatasetVisibility(i, !visible);
      });
      chart.update();
    };
    // A click on a column opens that period: the same link as under the chart.
    options.onClick = function (event, elements) {
      if (!elements.length) return;
      const link = document.querySelector('#costs .costs-drill a[data-index="' + elements[0].index + '"]');
      if (link) link.click();
    };
    options.onHover = function (event, elements) {
      canvas.classList.toggle("drillable", elements.length > 0);
    };
    options.plugins.tooltip = {
      callbacks: {
        label: function (ctx) {
          return ctx.dataset.label + " · " + ctx.dataset.part + ": " +
            shown(data.texts.spend[ctx.dataset.part][ctx.dataset.label][ctx.dataIndex]);
        },
        footer: function (items) {
          if (!items.length) return "";
          const i = items[0].dataIndex;
          const lines = [
            "Total " + data.periods[i] + ": " + shown(data.texts.totals.effective[i]) +
              " (billed " + shown(data.texts.totals.billed[i]) + ")",
          ];
          const unknown = data.totals.unknown_calls[i];
          if (unknown) lines.push("+ " + unknown.toLocaleString("en-US") + " calls of unknown price");
          lines.push("Click to open this " + data.period + "'s sessions");
          return lines;
        },
      },
    };
    return new window.Chart(canvas, { type: "bar", data: { labels: data.periods, datasets: datasets }, options: options });
  }

  function tokensChart(canvas, data, text, grid) {
    const datasets = data.token_kinds.map(function (kind, i) {
      return { label: data.token_labels[i], data: data.tokens[kind], backgroundColor: TOKEN_COLOURS[i % TOKEN_COLOURS.length] };
    });
    const options = baseOptions(text, grid);
    options.scales.y.ticks.callback = function (v) { return compact(v); };
    options.plugins.tooltip = {
      callbacks: {
        label: function (ctx) { return ctx.dataset.label + ": " + ctx.raw.toLocaleString("en-US") + " tokens"; },
      },
    };
    return new window.Chart(canvas, { type: "bar", data: { labels: data.periods, datasets: datasets }, options: options });
  }

  function draw() {
    if (typeof window.Chart === "undefined") return; // tables only
    const node = document.getElementById("costs-data");
    // No ids on the canvases: HTMX would copy the old canvas's style attribute (set by
    // Chart.js) onto the new one while settling, which the CSP blocks.
    const spendCanvas = document.querySelector('#costs canvas[data-chart="spend"]');
    const tokensCanvas = document.querySelector('#costs canvas[data-chart="tokens"]');
    if (!node || !spendCanvas || !tokensCanvas) return;
    let data;
    try {
      data = JSON.parse(node.textContent);
    } catch (error) {
      return;
    }
    document.documentElement.classList.add("charts-on");
    const text = cssVar("--muted", "#656d76");
    const grid = cssVar("--line", "#d0d7de");
    [spendCanvas, tokensCanvas].forEach(function (canvas) {
      const old = window.Chart.getChart(canvas);
      if (old) old.destroy();
    });
    spendChart(spendCanvas, data, text, grid);
    tokensChart(tokensCanvas, data, text, grid);
  }

  // A filter change swaps #costs (outerHTML): draw the new canvases.
  document.addEventListener("htmx:afterSettle", function (event) {
    const target = event.detail && event.detail.target;
    if (target && target.id === "costs") draw();
  });
  if (scheme && scheme.addEventListener) scheme.addEventListener("change", draw);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
