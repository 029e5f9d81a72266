// Memory editor: a live "N / limit characters" counter under each memory textarea.
// Loaded only on the memory pages. Without JavaScript the server-rendered count stays.
(function () {
  "use strict";
  // Python's len() counts code points; String.length counts UTF-16 units.
  function codePoints(text) {
    return Array.from(text).length;
  }

  function wire(counter) {
    const area = document.getElementById(counter.getAttribute("data-memory-counter"));
    const number = counter.querySelector("[data-memory-count]");
    const limit = parseInt(counter.getAttribute("data-limit"), 10);
    if (!area || !number || !(limit > 0)) return;
    function update() {
      const used = codePoints(area.value);
      number.textContent = used.toLocaleString("en-US");
      const over = used > limit;
      counter.classList.toggle("over", over);
      area.classList.toggle("over", over);
    }
    area.addEventListener("input", update);
    update();
  }

  function init() {
    document.querySelectorAll("[data-memory-counter]").forEach(wire);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
