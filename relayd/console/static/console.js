// relayd console: live overview over server-sent events, closed while the page is hidden.
// Served as a file (the Content-Security-Policy allows no inline script); no build step.
(function () {
  "use strict";
  let source = null;

  function target() {
    return document.querySelector("[data-live]");
  }

  function open() {
    const element = target();
    if (!element || source || document.visibilityState !== "visible") return;
    source = new EventSource(element.getAttribute("data-live"));
    source.addEventListener("overview", function (event) {
      const live = target();
      if (live) live.innerHTML = event.data;
    });
  }

  function close() {
    if (source) {
      source.close();
      source = null;
    }
  }

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") open();
    else close();
  });
  window.addEventListener("pagehide", close);

  document.addEventListener("change", function (event) {
    const select = event.target;
    if (select instanceof HTMLSelectElement && select.hasAttribute("data-autosubmit")) select.form.submit();
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", open);
  else open();
})();
