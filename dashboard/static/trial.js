// Trial page: its learning curves (loss, and accuracy when the task has one) by epoch, kept
// live while the trial waits or trains: the page follows its experiment's share of the
// browser's one stream (live.js) and redraws from the trial's own copy in each update.
(function () {
  "use strict";
  const meta = JSON.parse(document.getElementById("trial-data").textContent);
  const ACTIVE = new Set(JSON.parse(document.getElementById("dnnframe-vocabulary").textContent).active);
  const POLL_MS = 2000;
  let history = meta.history, drawn = -1;

  function layout(title) {
    // integer epoch ticks, about eight of them: a step of 1, 2, 5, 10, 20, …
    const raw = Math.max(1, history.length / 8), magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map(function (m) { return m * magnitude; }).find(function (s) { return s >= raw; });
    return { title: { text: title }, margin: { l: 60, r: 20, t: 40, b: 50 }, height: 300,
      paper_bgcolor: "rgba(0,0,0,0)",
      xaxis: { title: { text: "epoch" }, tickmode: "linear", tick0: 0, dtick: step, tickformat: "d" } };
  }

  function line(key) {
    return { type: "scatter", mode: "lines+markers", name: key.replace("_", " "),
      x: history.map(function (h) { return h.epoch; }), y: history.map(function (h) { return h[key]; }) };
  }

  function draw() {
    if (history.length === drawn) return;
    drawn = history.length;
    const config = { displaylogo: false };
    Plotly.react("chart-loss", [line("train_loss"), line("val_loss")], layout("Loss"), config);
    const acc = document.getElementById("chart-acc");
    const hasAccuracy = history.some(function (h) { return h.val_accuracy !== undefined && h.val_accuracy !== null; });
    if (hasAccuracy) Plotly.react(acc, [line("train_accuracy"), line("val_accuracy")], layout("Accuracy"), config);
    acc.hidden = !hasAccuracy;
    document.body.dataset.epochs = String(history.length);
  }

  // A newer copy of the trial: redraw; once it is over, the page is read again for its
  // final metrics, timings and error (after the note being typed, if any, is saved).
  function take(trial) {
    if (trial.history) history = trial.history;
    draw();
    document.getElementById("state").textContent = trial.state;
    if (!ACTIVE.has(trial.state)) {
      stop();
      const reload = function () { window.location.reload(); };
      if (window.DnnNotes) {
        DnnNotes.whenIdle(reload, "The trial is over: the page shows its results once you save or cancel the note.");
      } else {
        reload();
      }
    }
  }

  let following = false, timer = null;
  async function read() {
    const res = await fetch(meta.trial_url);
    if (res.ok) take(await res.json());
  }

  function poll() {
    timer = setTimeout(function () {
      read().catch(function () { /* the server is away for a moment */ }).finally(function () {
        if (following) poll();
      });
    }, POLL_MS);
  }

  function stop() {
    following = false;
    clearTimeout(timer);
    if (window.DnnLive) DnnLive.unwatch(meta.experiment_id);
  }

  function onLive(message) {
    if (!following) return;
    if (message.type === "note") { // this trial's note saved elsewhere (not its experiment's)
      if (message.data.kind === "trial" && message.data.id === meta.id && window.DnnNotes) DnnNotes.receive(message.data);
      return;
    }
    if (message.type === "trials") {
      const mine = message.data.trials.filter(function (t) { return t.id === meta.id; });
      if (mine.length) take(mine[0]);
    } else if (message.type === "closed") { // refused or lost: poll instead
      document.body.dataset.live = "poll";
      poll();
    } else { // change (catch up) or end (its experiment is over)
      document.body.dataset.live = "stream";
      read().catch(function () { poll(); });
    }
  }

  draw();
  if (ACTIVE.has(meta.state) && meta.experiment_id) {
    following = true;
    if (!window.DnnLive || !DnnLive.watch(meta.experiment_id, meta.live_url, meta.live_worker, onLive, meta.id)) {
      document.body.dataset.live = "poll";
      poll();
    }
  }
})();
