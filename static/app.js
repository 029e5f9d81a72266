// Recall's only script besides vendored htmx. No inline scripts anywhere (CSP).
(function () {
  "use strict";
  const meta = document.querySelector('meta[name="csrf-token"]');
  const token = meta ? meta.getAttribute("content") : "";

  // Every HTMX request carries the CSRF token; forms carry it as a hidden field.
  document.addEventListener("htmx:configRequest", function (event) {
    event.detail.headers["X-CSRF-Token"] = token;
  });

  // Copy buttons: shown only when there is a script to run them (they start hidden).
  document.addEventListener("htmx:load", function (event) {
    event.detail.elt.querySelectorAll("[data-copy-target]").forEach(function (button) {
      button.hidden = !(navigator.clipboard && window.isSecureContext);
    });
  });
  document.addEventListener("click", function (event) {
    const button = event.target.closest("[data-copy-target]");
    if (!button) return;
    const source = document.getElementById(button.getAttribute("data-copy-target"));
    if (!source) return;
    const label = button.textContent;
    navigator.clipboard.writeText(source.textContent).then(
      function () { button.textContent = "Copied"; },
      function () { button.textContent = "Copy failed"; }
    ).finally(function () {
      setTimeout(function () { button.textContent = label; }, 1500);
    });
  });

  // Long transcripts come in pages. A link to "#m123" without "at=" (a bookmark, an old
  // link) may land on a page that does not hold message 123: ask for the page that does.
  function findMessage() {
    const wanted = /^#m(\d+)$/.exec(window.location.hash);
    if (!wanted || document.getElementById("m" + wanted[1])) return;
    if (!document.querySelector("[data-paged]")) return;
    const url = new URL(window.location.href);
    if (url.searchParams.get("at") === wanted[1]) return;  // no page shows it: stay here
    url.searchParams.set("at", wanted[1]);
    url.searchParams.delete("page");
    window.location.replace(url.toString());
  }
  findMessage();
  window.addEventListener("hashchange", findMessage);

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
