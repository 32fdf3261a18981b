// Trial page: its learning curves (loss, and accuracy when the task has one) by epoch.
(function () {
  const history = JSON.parse(document.getElementById("trial-data").textContent);
  // integer epoch ticks, about eight of them: a step of 1, 2, 5, 10, 20, …
  const raw = Math.max(1, history.length / 8), magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(function (m) { return m * magnitude; }).find(function (s) { return s >= raw; });
  const layout = { margin: { l: 60, r: 20, t: 40, b: 50 }, height: 300, paper_bgcolor: "rgba(0,0,0,0)",
                   xaxis: { title: { text: "epoch" }, tickmode: "linear", tick0: 0, dtick: step, tickformat: "d" } };
  const line = function (key) {
    return { type: "scatter", mode: "lines+markers", name: key.replace("_", " "),
             x: history.map(function (h) { return h.epoch; }), y: history.map(function (h) { return h[key]; }) };
  };
  Plotly.newPlot("chart-loss", [line("train_loss"), line("val_loss")], Object.assign({ title: { text: "Loss" } }, layout), { displaylogo: false });
  if (history.some(function (h) { return h.val_accuracy !== undefined && h.val_accuracy !== null; })) {
    Plotly.newPlot("chart-acc", [line("train_accuracy"), line("val_accuracy")], Object.assign({ title: { text: "Accuracy" } }, layout), { displaylogo: false });
  } else {
    document.getElementById("chart-acc").remove();
  }
})();
