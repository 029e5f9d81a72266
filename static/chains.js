// Chain page: each bar of the timeline shows its figures in an HTML panel on hover,
// keyboard focus and tap (the first tap on a bar shows them, a second follows the link).
// Without this script the bars keep their native <title> tooltips and the segments table
// below holds the same figures.
(function () {
  "use strict";

  let open = null; // the panel shown
  let lastPointer = "mouse";
  let openAtPointer = null; // the panel shown when the pointer went down (a tap also focuses)

  function panelFor(bar) {
    const id = bar.getAttribute("aria-describedby");
    return id ? document.getElementById(id) : null;
  }

  function hide() {
    if (open) open.hidden = true;
    open = null;
  }

  function show(bar) {
    const panel = panelFor(bar);
    if (!panel) return;
    if (open && open !== panel) open.hidden = true;
    panel.hidden = false;
    open = panel;
    // Under the bar, kept inside the figure (the picture may be scrolled sideways).
    const figure = panel.closest(".chain-figure");
    const target = bar.querySelector("rect.bar") || bar;
    const f = figure.getBoundingClientRect();
    const b = target.getBoundingClientRect();
    const width = panel.offsetWidth;
    const left = Math.max(0, Math.min(b.left - f.left, figure.clientWidth - width));
    panel.style.left = left + "px";
    panel.style.top = (b.bottom - f.top + 6) + "px";
  }

  function barOf(event) {
    const node = event.target;
    return node && node.closest ? node.closest("svg.chain-svg a.seg, svg.chain-svg a.epoch") : null;
  }

  function init() {
    // The HTML panels replace the native tooltips (which would show twice).
    document.querySelectorAll("svg.chain-svg a.seg > title, svg.chain-svg a.epoch > title").forEach(function (t) { t.remove(); });
  }

  document.addEventListener("pointerdown", function (event) {
    lastPointer = event.pointerType || "mouse";
    openAtPointer = open;
  }, true);
  document.addEventListener("mouseover", function (event) {
    const bar = barOf(event);
    if (bar && lastPointer === "mouse") show(bar);
  });
  document.addEventListener("mouseout", function (event) {
    const bar = barOf(event);
    if (bar && lastPointer === "mouse" && !bar.contains(event.relatedTarget) && document.activeElement !== bar) hide();
  });
  document.addEventListener("focusin", function (event) {
    const bar = barOf(event);
    if (bar) show(bar);
    else if (open && !open.contains(event.target)) hide();
  });
  document.addEventListener("click", function (event) {
    const bar = barOf(event);
    if (bar && lastPointer !== "mouse" && openAtPointer !== panelFor(bar)) {
      event.preventDefault(); // a tap shows the figures first
      show(bar);
      openAtPointer = open;
      return;
    }
    if (!bar && open && !open.contains(event.target)) hide();
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") hide();
  });
  document.addEventListener("htmx:afterSettle", init);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
