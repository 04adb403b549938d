/* The desk's reports page: its charts, drawn by Chart.js (vendored, see docs/dependencies.md)
   from the figures the page carries as JSON (#poppy-charts). Nothing is fetched. */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("poppy-charts").textContent);
  if (!window.Chart) {
    return; // the tables say it all without the charts
  }
  var colours = {
    joined: "#2f855a",
    missed: "#c53030",
    unavailable: "#dd6b20",
    cancelled: "#718096",
    waiting: "#3182ce",
  };
  var labels = {
    joined: "Joined",
    missed: "Missed",
    unavailable: "Unavailable",
    cancelled: "Cancelled by the customer",
    waiting: "Still waiting",
  };
  function canvas(name) {
    return document.querySelector('canvas[data-chart="' + name + '"]');
  }
  var common = { responsive: true, maintainAspectRatio: false, animation: false };

  new window.Chart(canvas("daily"), {
    type: "bar",
    data: {
      labels: data.days,
      datasets: Object.keys(data.outcomes).map(function (outcome) {
        return { label: labels[outcome] || outcome, data: data.outcomes[outcome], backgroundColor: colours[outcome] };
      }),
    },
    options: Object.assign({}, common, {
      scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true, ticks: { precision: 0 } } },
    }),
  });

  function minutes(values) {
    return values.map(function (seconds) {
      return seconds === null ? null : Math.round((seconds / 60) * 10) / 10;
    });
  }
  new window.Chart(canvas("staff"), {
    type: "bar",
    data: {
      labels: data.staff,
      datasets: [
        { label: "First response", data: minutes(data.first_response_median), backgroundColor: "#3182ce" },
        { label: "Resolution", data: minutes(data.resolution_median), backgroundColor: "#805ad5" },
      ],
    },
    options: Object.assign({}, common, { scales: { y: { beginAtZero: true } } }),
  });

  new window.Chart(canvas("ratings"), {
    type: "bar",
    data: {
      labels: ["1", "2", "3", "4", "5"],
      datasets: [
        {
          label: "Answers",
          data: data.ratings,
          backgroundColor: ["#c53030", "#dd6b20", "#d69e2e", "#68d391", "#2f855a"],
        },
      ],
    },
    options: Object.assign({}, common, {
      plugins: { legend: { display: false } },
      scales: { y: { beginAtZero: true, ticks: { precision: 0 } } },
    }),
  });
  document.getElementById("poppy-reports").setAttribute("data-charts", "drawn");
})();
