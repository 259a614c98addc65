/* Draws the portal's charts from <canvas data-chart=...> elements whose data sits in a
   json_script tag (data-source). Runs on page load and after every htmx swap. */
(function () {
  "use strict";
  var COLORS = {
    allocated: "#2563eb", requested: "#94a3b8", deserved: "#16a34a",
    fair_share: "#f59e0b", decayed: "#9333ea", capacity: "#64748b"
  };
  var NAMES = {
    allocated: "Allocated", requested: "Requested", deserved: "Deserved",
    fair_share: "Fair share", decayed: "Decayed usage (time-based fair share)", capacity: "Capacity"
  };

  function line(key, data, extra) {
    return Object.assign({
      label: NAMES[key], data: data, borderColor: COLORS[key], backgroundColor: COLORS[key],
      borderWidth: 2, pointRadius: 0, tension: 0.2, spanGaps: true
    }, extra || {});
  }

  // Stacked bars, one colour per series (showback: GPU-hours per team and period).
  var PALETTE = ["#2563eb", "#15803d", "#f59e0b", "#9333ea", "#c81e1e", "#0891b2", "#64748b", "#db2777"];
  function stacked(canvas, d) {
    var datasets = Object.keys(d.series).map(function (name, i) {
      var c = PALETTE[i % PALETTE.length];
      return { label: name, data: d.series[name], backgroundColor: c, borderColor: c, stack: "all" };
    });
    return new Chart(canvas, {
      type: "bar",
      data: { labels: d.labels, datasets: datasets },
      options: {
        animation: false, maintainAspectRatio: false, interaction: { mode: "index", intersect: false },
        scales: { x: { stacked: true, ticks: { maxTicksLimit: 16 } },
                  y: { stacked: true, beginAtZero: true, title: { display: !!canvas.dataset.unit, text: canvas.dataset.unit } } },
        plugins: { legend: { position: "bottom", labels: { boxWidth: 12 } } }
      }
    });
  }

  function draw(canvas) {
    if (canvas._chart) { canvas._chart.destroy(); }
    var source = document.getElementById(canvas.dataset.source);
    if (!source || typeof Chart === "undefined") { return; }
    var d = JSON.parse(source.textContent);
    if (canvas.dataset.chart === "stacked") { canvas._chart = stacked(canvas, d); return; }
    var datasets;
    if (canvas.dataset.chart === "overview") {
      datasets = [
        line("allocated", d.allocated, { fill: true, backgroundColor: "rgba(37,99,235,0.15)" }),
        line("requested", d.requested, { borderDash: [4, 4] })
      ];
      var cap = parseFloat(canvas.dataset.capacity || "0");
      if (cap > 0) { datasets.push(line("capacity", d.labels.map(function () { return cap; }), { borderDash: [2, 2], borderWidth: 1 })); }
    } else {
      datasets = [
        line("allocated", d.series.allocated, { fill: true, backgroundColor: "rgba(37,99,235,0.12)" }),
        line("fair_share", d.series.fair_share, { stepped: true }),
        line("deserved", d.series.deserved, { stepped: true, borderDash: [6, 3] }),
        line("requested", d.series.requested, { borderDash: [4, 4] }),
        line("decayed", d.series.decayed, { borderWidth: 2.5 })
      ];
    }
    canvas._chart = new Chart(canvas, {
      type: "line",
      data: { labels: d.labels, datasets: datasets },
      options: {
        animation: false, maintainAspectRatio: false, interaction: { mode: "index", intersect: false },
        scales: { y: { beginAtZero: true, title: { display: !!canvas.dataset.unit, text: canvas.dataset.unit } },
                  x: { ticks: { maxTicksLimit: 12 } } },
        plugins: { legend: { position: "bottom", labels: { boxWidth: 12 } } }
      }
    });
  }

  function drawAll(root) {
    (root || document).querySelectorAll("canvas[data-chart]").forEach(draw);
  }

  document.addEventListener("DOMContentLoaded", function () { drawAll(document); });
  document.addEventListener("htmx:afterSettle", function (e) { drawAll(e.target); });
})();
