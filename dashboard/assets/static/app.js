// docker gordon dashboard: live updates and keyboard navigation.
// Hand-written, no library. The pages work without it; it swaps the live
// part of the page when the server says the state changed (server-sent
// events) and moves the focus between rows with j/k.
(function () {
  "use strict";
  var body = document.body;
  var conn = document.getElementById("conn");
  function live() { return document.getElementById("live"); }
  if (window.EventSource) {
    var q = body.getAttribute("data-query");
    var es = new EventSource("/events?page=" + encodeURIComponent(body.getAttribute("data-page")) + (q ? "&" + q : ""));
    es.addEventListener("live", function (e) {
      var m = live();
      var a = document.activeElement;
      var key = a && a.getAttribute && a.getAttribute("data-k");
      m.innerHTML = e.data;
      if (key) {
        var n = m.querySelector('[data-k="' + key.replace(/["\\]/g, "\\$&") + '"]');
        if (n) { n.focus(); }
      }
      body.setAttribute("data-seq", e.lastEventId);
      conn.textContent = "live";
      conn.className = "conn live";
    });
    es.onerror = function () { conn.textContent = "reconnecting"; conn.className = "conn off"; };
  }
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (t.matches && t.matches("input, select, textarea")) {
      if (e.key === "Escape") { t.blur(); }
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey) { return; }
    var rows = Array.prototype.slice.call(live().querySelectorAll("a.row"));
    var i = rows.indexOf(document.activeElement);
    if (e.key === "j" && rows.length) {
      rows[(i + 1) % rows.length].focus(); e.preventDefault();
    } else if (e.key === "k" && rows.length) {
      rows[i <= 0 ? rows.length - 1 : i - 1].focus(); e.preventDefault();
    } else if (e.key === "/") {
      var f = document.querySelector("form.filter input");
      if (f) { f.focus(); e.preventDefault(); }
    } else if (e.key === "g") {
      window.location.href = "/";
    } else if (e.key === "?") {
      var foot = document.querySelector("footer");
      if (foot) { foot.scrollIntoView(); }
    }
  });
})();
