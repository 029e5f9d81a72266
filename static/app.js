// Recall's only script besides vendored htmx. No inline scripts anywhere (CSP).
(function () {
  "use strict";
  const meta = document.querySelector('meta[name="csrf-token"]');
  const token = meta ? meta.getAttribute("content") : "";

  // Every HTMX request carries the CSRF token; forms carry it as a hidden field.
  document.addEventListener("htmx:configRequest", function (event) {
    event.detail.headers["X-CSRF-Token"] = token;
  });

  // "/" focuses the page's main search or filter box, as in most search tools.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
    const active = document.activeElement;
    if (active && (active.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName))) return;
    const box = document.querySelector("[data-focus-key]");
    if (box) {
      event.preventDefault();
      box.focus();
      if (box.select) box.select();
    }
  });
})();
