// Recall's only script besides vendored htmx. No inline scripts anywhere (CSP).
(function () {
  "use strict";
  // Parts that only a script can bring to life (a summary's spinner) show only with one.
  document.documentElement.classList.add("js");
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

  // Typing at 3 keys a second would leave an entry per key, so Back walked through
  // "kubernetes ingre"… A burst of typing keeps one history entry (its first result
  // pushes, the rest replace it); a keystroke after a pause of a second starts the next
  // entry, and so do Enter and a filter change. Keystrokes, not answers, are timed, so a
  // slow server cannot split a burst. The URL already shown is never pushed again.
  const TYPING_PAUSE_MS = 1000;
  let lastTyped = 0;
  let burstHasEntry = false;
  document.addEventListener("input", function (event) {
    if (event.target.id !== "q") return;
    const now = Date.now();
    if (now - lastTyped > TYPING_PAUSE_MS) burstHasEntry = false;
    lastTyped = now;
  });
  document.addEventListener("htmx:beforeHistoryUpdate", function (event) {
    const update = event.detail.history;
    if (update.type !== "push") return;
    const next = new URL(update.path, window.location.href);
    const config = event.detail.requestConfig || {};
    const cause = config.triggeringEvent ? config.triggeringEvent.type : "";
    const typed = config.elt && config.elt.id === "search-form" && cause === "input";
    if (next.pathname + next.search === window.location.pathname + window.location.search) {
      update.type = "replace";
    } else if (typed && burstHasEntry) {
      update.type = "replace";
    }
    burstHasEntry = typed;  // anything else (Enter, a filter, a page) ends the burst
  });

  // Back and Forward between the entries live search made are moves within one document:
  // htmx hears them (popstate) and reloads the page of the URL they land on (no history
  // cache). It listens only from DOMContentLoaded on, after this script. A Back landing
  // while a page is still loading (two Backs in a row: the first reloads, the second
  // comes before the reloaded page's scripts have run) moves the URL with no one to
  // hear it, and one query's results stayed under another's URL. So a page whose URL
  // was moved before htmx listened reloads, as htmx would have.
  function movedByHistory() {
    return Boolean(history.state && history.state.htmx);  // an entry htmx's history made
  }
  const loaded = performance.getEntriesByType("navigation")[0];
  if (loaded && movedByHistory()) {
    const loadedAt = new URL(loaded.name);
    if (loadedAt.pathname + loadedAt.search !== window.location.pathname + window.location.search) {
      window.location.reload();
    }
  }
  let htmxListens = false;  // htmx's own DOMContentLoaded listener was added before this one
  document.addEventListener("DOMContentLoaded", function () { htmxListens = true; });
  window.addEventListener("popstate", function () {
    if (!htmxListens && movedByHistory()) window.location.reload();
  });

  // Live search sends only the fields that say something: no "model=&days=&…", and no
  // field left at its default (the form's data-defaults), so URLs stay short to share.
  document.addEventListener("htmx:configRequest", function (event) {
    const form = event.detail.elt;
    if (!form || form.id !== "search-form" || !event.detail.formData) return;
    const data = event.detail.formData;
    const defaults = JSON.parse(form.getAttribute("data-defaults") || "{}");
    Array.from(new Set(data.keys())).forEach(function (name) {
      const values = data.getAll(name);
      if (values.every(function (v) { return v === "" || v === defaults[name]; })) data.delete(name);
    });
  });

  // The caret goes after the query, where a person goes on typing (autofocus puts it first).
  const searchBox = document.getElementById("q");
  if (searchBox && searchBox.setSelectionRange) {
    const end = searchBox.value.length;
    searchBox.setSelectionRange(end, end);
  }

  // Back from a session lands on the card it was opened from, where it was on screen.
  function openedKey() { return "recall:opened:" + window.location.href; }
  document.addEventListener("click", function (event) {
    const link = event.target.closest ? event.target.closest("#results .card a[href]") : null;
    if (!link) return;
    const card = link.closest(".card");
    try {
      sessionStorage.setItem(openedKey(), JSON.stringify({
        card: card.id, top: card.getBoundingClientRect().top,
      }));
    } catch (e) { /* storage refused (private mode): Back lands at the top */ }
  });
  function restoreOpenedCard() {
    const navigation = performance.getEntriesByType("navigation")[0];
    if (!navigation || navigation.type === "navigate") return;  // a fresh visit starts at the top
    let saved = null;
    try { saved = JSON.parse(sessionStorage.getItem(openedKey()) || "null"); } catch (e) { return; }
    const card = saved && document.getElementById(saved.card);
    if (!card) return;
    window.scrollTo(0, window.scrollY + card.getBoundingClientRect().top - saved.top);
    const title = card.querySelector("h3 a");
    if (title) title.focus({ preventScroll: true });
  }
  if (document.readyState === "complete") restoreOpenedCard();
  else window.addEventListener("load", restoreOpenedCard);

  // Not typing: a key is a command (j/k, n/N), as in most mail and search tools.
  function typing() {
    const active = document.activeElement;
    return active && (active.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName));
  }

  // j / k (and the arrow keys once a card has focus) move between result cards.
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing()) return;
    const titles = Array.from(document.querySelectorAll("#results .card h3 a"));
    if (!titles.length) return;
    const current = titles.findIndex(function (a) { return a.closest(".card").contains(document.activeElement); });
    const arrows = { ArrowDown: 1, ArrowUp: -1 };
    const step = { j: 1, k: -1 }[event.key] || (current >= 0 ? arrows[event.key] : undefined);
    if (!step) return;
    event.preventDefault();
    const next = current < 0 ? (step > 0 ? 0 : titles.length - 1)
      : Math.min(titles.length - 1, Math.max(0, current + step));
    titles[next].focus({ preventScroll: true });
    titles[next].closest(".card").scrollIntoView({ block: "nearest" });
  });

  // The session page's find bar: "match 3 of 92", n / N or its arrows step through the
  // listed matches, on this page by scrolling, on another page by opening it (at=).
  function matchTargets() {
    return Array.from(document.querySelectorAll("#transcript .match-list a")).map(function (a) {
      const href = a.getAttribute("href");
      const id = /#m(\d+)$/.exec(href);
      return { href: href, id: id ? id[1] : null };
    }).filter(function (t) { return t.id; });
  }
  function currentMatch(targets) {
    const wanted = /^#m(\d+)$/.exec(window.location.hash);
    return wanted ? targets.findIndex(function (t) { return t.id === wanted[1]; }) : -1;
  }
  function showMatch(targets, index) {
    const label = document.querySelector("[data-stepper-label]");
    if (label && index >= 0) {
      const total = Number(label.getAttribute("data-total")) || targets.length;
      label.textContent = "match " + (index + 1) + " of " + targets.length.toLocaleString("en")
        + (total > targets.length ? " listed (of " + total.toLocaleString("en") + ")" : "");
    }
    document.querySelectorAll(".msg.current-match").forEach(function (el) { el.classList.remove("current-match"); });
    const el = index >= 0 ? document.getElementById("m" + targets[index].id) : null;
    if (el) el.classList.add("current-match");
    return el;
  }
  function stepMatch(direction) {
    const targets = matchTargets();
    if (!targets.length) return;
    const at = currentMatch(targets);
    const index = at < 0 ? (direction > 0 ? 0 : targets.length - 1)
      : (at + direction + targets.length) % targets.length;
    const el = document.getElementById("m" + targets[index].id);
    if (!el) {  // on another page of the transcript
      window.location.assign(new URL(targets[index].href, window.location.href).toString());
      return;
    }
    history.replaceState(history.state, "", "#m" + targets[index].id);  // a find bar adds no history
    showMatch(targets, index);
    el.scrollIntoView({ block: "center" });
  }
  function syncStepper() {
    const targets = matchTargets();
    if (targets.length) showMatch(targets, currentMatch(targets));
  }
  syncStepper();
  document.addEventListener("htmx:afterSettle", syncStepper);
  document.addEventListener("click", function (event) {
    const arrow = event.target.closest ? event.target.closest("[data-match-stepper] [data-step]") : null;
    if (!arrow) return;
    event.preventDefault();
    stepMatch(Number(arrow.getAttribute("data-step")));
  });
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing()) return;
    if (event.key !== "n" && event.key !== "N") return;
    if (!document.querySelector("[data-match-stepper]")) return;
    event.preventDefault();
    stepMatch(event.key === "n" ? 1 : -1);
  });

  // Expand all / collapse all: every tool call, result and reasoning of the transcript.
  document.addEventListener("htmx:load", function (event) {
    event.detail.elt.querySelectorAll("[data-fold-all]").forEach(function (el) { el.hidden = false; });
  });
  document.addEventListener("click", function (event) {
    const button = event.target.closest ? event.target.closest("[data-fold]") : null;
    if (!button) return;
    const open = button.getAttribute("data-fold") === "open";
    const section = button.closest("section") || document;
    section.querySelectorAll("details.tool-call, details.tool-result, details.reasoning").forEach(function (d) {
      d.open = open;
    });
  });

  // A menu of links in a <details data-menu> (the header's profile switcher): Escape
  // closes it, giving the focus back to its button when it was inside; a click
  // elsewhere closes it, as any menu. Without JavaScript it opens and closes on its button.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    document.querySelectorAll("details[data-menu][open]").forEach(function (menu) {
      const inside = menu.contains(document.activeElement);
      menu.open = false;
      if (inside) menu.querySelector("summary").focus();
    });
  });
  document.addEventListener("click", function (event) {
    document.querySelectorAll("details[data-menu][open]").forEach(function (menu) {
      if (!menu.contains(event.target)) menu.open = false;
    });
  });

  // "/" focuses the page's main search or filter box, as in most search tools.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey || typing()) return;
    const box = document.querySelector("[data-focus-key]");
    if (box) {
      event.preventDefault();
      box.focus();
      if (box.select) box.select();
    }
  });
})();
