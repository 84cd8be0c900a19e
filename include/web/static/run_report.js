// Dead letters by reason, as a horizontal bar chart (data: the JSON block the page carries).
(function () {
  "use strict";
  var source = document.getElementById("dead-letter-data");
  var canvas = document.getElementById("dead-letter-chart");
  if (!source || !canvas || typeof Chart === "undefined") { return; }
  var pairs = JSON.parse(source.textContent);  // [[reason, count], ...], most frequent first
  var reasons = pairs.map(function (p) { return p[0]; });
  new Chart(canvas, {
    type: "bar",
    data: {labels: reasons, datasets: [{label: "dead letters", data: pairs.map(function (p) { return p[1]; }),
                                        backgroundColor: "#dc2626"}]},
    options: {indexAxis: "y", animation: false, maintainAspectRatio: false, plugins: {legend: {display: false}}}
  });
})();
