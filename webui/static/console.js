// hoodie console: charts and live job pages (a static file: the CSP allows no inline script).
(function () {
  "use strict";

  function charts() {
    if (typeof Chart === "undefined") return;
    document.querySelectorAll("canvas.js-chart").forEach(function (canvas) {
      var data = JSON.parse(canvas.dataset.chart || "null");
      if (!data) return;
      var common = { responsive: true, maintainAspectRatio: false, animation: false,
                     plugins: { legend: { position: "bottom" } } };
      if (canvas.dataset.kind === "commits") {
        new Chart(canvas, {
          type: "bar",
          data: {
            labels: data.map(function (d) { return d.instant; }),
            datasets: [
              { label: "inserts", data: data.map(function (d) { return d.inserts; }), backgroundColor: "#2e9d62" },
              { label: "updates", data: data.map(function (d) { return d.updates; }), backgroundColor: "#3b7dd8" },
              { label: "deletes", data: data.map(function (d) { return d.deletes; }), backgroundColor: "#d0453a" }
            ]
          },
          options: Object.assign({}, common, { scales: { x: { stacked: true, ticks: { maxRotation: 60, autoSkip: true } },
                                                         y: { stacked: true, beginAtZero: true } } })
        });
      } else if (canvas.dataset.kind === "sizes") {
        var small = data.small_below_bucket;
        new Chart(canvas, {
          type: "bar",
          data: { labels: data.labels, datasets: [{
            label: "latest base files", data: data.counts,
            backgroundColor: data.counts.map(function (_c, i) { return i < small ? "#e0a526" : "#2e9d62"; })
          }] },
          options: Object.assign({}, common, { plugins: { legend: { display: false }, subtitle: { display: true,
            text: "amber: under the small-file limit (upserts pack new records into them)" } },
            scales: { y: { beginAtZero: true, ticks: { precision: 0 } } } })
        });
      }
    });
  }

  function liveJob() {
    var box = document.querySelector(".job-live");
    if (!box) return;
    var url = box.dataset.statusUrl;
    var running = function (s) { return s === "queued" || s === "running"; };
    if (!running(box.dataset.state)) return;
    var q = function (sel) { return box.querySelector(sel); };
    function render(doc) {
      var p = doc.progress || {};
      q(".js-step").textContent = p.step || "waiting for the job runner";
      q(".js-elapsed").textContent = p.elapsed_s || 0;
      q(".js-log").textContent = doc.log_tail || "";
      q(".js-log").scrollTop = q(".js-log").scrollHeight;
      var spark = p.spark || {};
      if (spark.tasks) {
        var pct = Math.round(100 * spark.tasks_done / spark.tasks);
        q(".js-bar").style.width = pct + "%";
        q(".js-tasks").textContent = spark.tasks_done + " / " + spark.tasks + " tasks in " +
          (spark.stages || []).length + " active stage(s), " + spark.active_jobs + " Spark job(s)";
      }
      var badge = document.querySelector("[data-testid=job-state]");
      if (badge) { badge.textContent = doc.state; badge.className = "badge state state-" + doc.state; }
      if (!running(doc.state)) { window.location.reload(); return false; }
      return true;
    }
    function poll() {
      fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (r) { return r.json(); })
        .then(function (doc) { if (render(doc)) setTimeout(poll, 1000); })
        .catch(function () { setTimeout(poll, 3000); });
    }
    setTimeout(poll, 500);
  }

  document.addEventListener("DOMContentLoaded", function () { charts(); liveJob(); });
})();
