// The trends page: records, dead-letter rate and phase durations over the window end time.
// The x axis is linear in epoch milliseconds (no date adapter needed), labelled in UTC.
(function () {
  "use strict";
  var source = document.getElementById("trend-data");
  if (!source || typeof Chart === "undefined") { return; }
  var runs = JSON.parse(source.textContent);
  var colours = {"passed": "#16a34a", "failed": "#dc2626"};
  function points(key) { return runs.map(function (r) { return {x: r.t, y: r[key]}; }); }
  function timeAxis() {
    return {type: "linear", ticks: {maxTicksLimit: 6, callback: function (v) {
      return new Date(v).toISOString().slice(0, 16).replace("T", " ");
    }}};
  }
  function tooltip() {
    return {callbacks: {title: function (items) {
      var r = runs[items[0].dataIndex];
      return r.run_id + " (" + r.verdict + ")";
    }}};
  }
  function draw(id, datasets, extra) {
    var canvas = document.getElementById(id);
    if (!canvas) { return; }
    new Chart(canvas, {type: "line", data: {datasets: datasets},
      options: Object.assign({animation: false, maintainAspectRatio: false, parsing: true,
        scales: {x: timeAxis(), y: {beginAtZero: true}}, plugins: {tooltip: tooltip()}}, extra || {})});
  }
  // Point colour = the run's validation result.
  var verdictColours = runs.map(function (r) { return colours[r.verdict] || "#9ca3af"; });
  draw("records-chart", [
    {label: "purchases read", data: points("records"), borderColor: "#3b82f6", pointBackgroundColor: verdictColours,
     pointRadius: 4},
    {label: "invoices", data: points("invoices"), borderColor: "#0ea5e9"},
    {label: "dead letters", data: points("dead_letters"), borderColor: "#f59e0b"}
  ]);
  draw("dead-letter-rate-chart", [
    {label: "dead letters / purchases (%)", data: points("dead_letter_rate"), borderColor: "#f59e0b",
     pointBackgroundColor: verdictColours, pointRadius: 4}
  ]);
  draw("validation-chart", [
    {label: "failed expectations", data: points("failed_checks"), borderColor: "#dc2626",
     pointBackgroundColor: verdictColours, pointRadius: 5, showLine: false}
  ]);
  draw("duration-chart", [
    {label: "plan", data: points("plan_s"), borderColor: "#8b5cf6"},
    {label: "read + publish", data: points("publish_s"), borderColor: "#3b82f6"},
    {label: "validate", data: points("validate_s"), borderColor: "#16a34a"}
  ]);
})();
