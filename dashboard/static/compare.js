// Compare page: reads every trial of each experiment through the API, then overlays them:
// a metric against a parameter, mean learning curves, best so far and training time, one
// colour per experiment.
(function () {
  "use strict";
  const P = window.DnnPlot, O = window.DnnOutcomes;
  const ids = JSON.parse(document.getElementById("compare-data").textContent);
  const meta = JSON.parse(document.getElementById("compare-meta").textContent);
  const byExperiment = ids.map(function () { return []; });
  const controls = { x: document.getElementById("x-param"), y: document.getElementById("y-metric"),
    curve: document.getElementById("curve-metric") };
  const chosen = {};

  async function load(i) {
    let offset = 0, more = true;
    while (more) {
      const url = meta.trials_url.replace("EXPERIMENT_ID", ids[i]) + "?history=1&limit=1000&offset=" + offset;
      const res = await fetch(url);
      if (!res.ok) throw new Error("HTTP " + res.status + " for " + ids[i]);
      const page = await res.json();
      byExperiment[i] = byExperiment[i].concat(page.trials);
      offset += page.trials.length;
      more = page.more;
    }
  }

  function options(select, values, selected) {
    select.innerHTML = "";
    for (const v of values) {
      const o = document.createElement("option");
      o.value = v;
      o.textContent = P.label(v);
      select.appendChild(o);
    }
    select.value = selected;
  }

  function numbers(list) { return list.filter(function (v) { return typeof v === "number" && Number.isFinite(v); }); }

  function render() {
    const all = [].concat.apply([], byExperiment);
    const done = function (i) { return byExperiment[i].filter(function (t) { return t.state === P.VOCAB.scored; }); };
    const paramKeys = new Set(), metricKeys = new Set(), curveKeys = new Set();
    for (const t of all) {
      Object.keys(t.params).forEach(function (k) { paramKeys.add(k); });
      if (O.counts(t)) Object.keys(t.metrics).forEach(function (k) { metricKeys.add(k); });
      for (const h of t.history || []) Object.keys(h).forEach(function (k) { if (k !== "epoch") curveKeys.add(k); });
    }
    const varied = P.varying(all, Array.from(paramKeys)).filter(function (p) { return p !== "seed"; });
    const xs = varied.length ? varied : ["hidden_layers"];
    // by default x is what the sweeps themselves vary (not what tells them apart), numbers first
    const within = varied.filter(function (p) {
      return byExperiment.some(function (list) { return P.varying(list, [p]).length; });
    });
    const numeric = within.filter(function (p) {
      return all.every(function (t) { return typeof t.params[p] === "number"; });
    });
    const x = chosen.x || (within.indexOf("hidden_layers") >= 0 ? "hidden_layers" : numeric[0] || within[0] || xs[0]);
    const objective = (meta.objectives[0] || {}).metric;
    const ys = Array.from(metricKeys).sort().concat(["train_seconds"]);
    const y = chosen.y || (ys.indexOf(objective) >= 0 ? objective : ys[0]);
    const curves = Array.from(curveKeys).sort();
    const counterpart = String(objective || "").replace(/^test_/, "val_");
    const curve = chosen.curve || (curves.indexOf(counterpart) >= 0 ? counterpart : curves[0] || "");
    options(controls.x, xs, x);
    options(controls.y, ys, y);
    options(controls.curve, curves, curve);

    // every chart's rule (outcomes.js): complete and pruned trials with their value, a
    // diverged one as the worst value any compared trial reached, drawn apart as a red ✕
    const outcome = O.over(all, function (key) { return key === objective ? (meta.objectives[0] || {}).mode : P.direction(key); });
    const value = outcome.value;
    const metricTraces = [], curveTraces = [], bestTraces = [], timeTraces = [];
    ids.forEach(function (id, i) {
      const col = P.colour(i), name = meta.experiments[i], rows = done(i);
      const counted = byExperiment[i].filter(function (t) { return typeof value(t, y) === "number"; });
      const groups = P.groupBy(counted, function (t) { return t.params[x]; });
      const stats = groups.map(function (g) { return P.meanStd(g[1].map(function (t) { return value(t, y); })); });
      metricTraces.push({ type: "scatter", mode: "lines+markers", name: name, x: groups.map(function (g) { return g[0]; }),
        y: stats.map(function (s) { return s[0]; }),
        text: groups.map(function (g) { return g[1].length + " trial(s)" + O.divergedText(g[1], y, value); }),
        error_y: { type: "data", symmetric: false, array: stats.map(function (s) { return P.band(s[0], s[1], y)[1]; }),
          arrayminus: stats.map(function (s) { return P.band(s[0], s[1], y)[0]; }) },
        line: { color: col }, marker: { color: col } });
      const lost = counted.filter(O.diverged);
      if (lost.length && O.voids(y)) {
        metricTraces.push({ type: "scatter", mode: "markers", name: name + ": " + lost.length + " diverged, counted as " +
          P.fmt(value(lost[0], y)) + ", the worst", x: lost.map(function (t) { return t.params[x]; }),
          y: lost.map(function (t) { return value(t, y); }), text: lost.map(function (t) { return t.id; }),
          marker: { symbol: lost.map(function (t) { return O.symbol(t); }), color: O.DIVERGED_COLOUR, size: 11, line: { width: 2 } } });
      }
      // a diverged trial's training time is a measurement, and stands
      const times = P.groupBy(byExperiment[i].filter(O.counts), function (t) { return t.params[x]; });
      timeTraces.push({ type: "scatter", mode: "lines+markers", name: name, x: times.map(function (g) { return g[0]; }),
        y: times.map(function (g) { const v = numbers(g[1].map(function (t) { return value(t, "train_seconds"); })); return v.length ? P.meanStd(v)[0] : null; }),
        line: { color: col }, marker: { color: col } });
      const perEpoch = new Map();
      // a diverged trial's losses (1e9 and up) would be the mean: it is left out of it
      const diverged = byExperiment[i].filter(function (t) { return t.state === P.VOCAB.states.DIVERGED; });
      for (const t of byExperiment[i]) for (const h of t.history || []) {
        if (typeof h[curve] !== "number" || t.state === P.VOCAB.states.DIVERGED) continue;
        if (!perEpoch.has(h.epoch)) perEpoch.set(h.epoch, []);
        perEpoch.get(h.epoch).push(h[curve]);
      }
      const epochs = Array.from(perEpoch.keys()).sort(function (a, b) { return a - b; });
      curveTraces.push({ type: "scatter", mode: "lines", x: epochs,
        name: name + (diverged.length ? " (" + diverged.length + " diverged, not in the mean)" : ""),
        y: epochs.map(function (e) { return P.meanStd(perEpoch.get(e))[0]; }), line: { color: col, width: 2 } });
      const mode = (meta.objectives[i] || {}).mode === "min" ? Math.min : Math.max;
      // over the trials in the order they finished: reused trials finished before the experiment
      const finished = rows.filter(function (t) { return typeof t.metrics[objective] === "number"; })
        .sort(function (a, b) { return (a.finished_at || 0) - (b.finished_at || 0) || P.compare(a.id, b.id); });
      let best = null;
      bestTraces.push({ type: "scatter", mode: "lines", name: name, line: { shape: "hv", color: col, width: 2 },
        x: finished.map(function (_, k) { return k + 1; }),
        y: finished.map(function (t) { best = best === null ? t.metrics[objective] : mode(best, t.metrics[objective]); return best; }) });
    });
    const any = all.some(O.counts);
    const allEpochs = [].concat.apply([], curveTraces.map(function (c) { return c.x; }));
    const xAxis = P.axisFor(x, all.map(function (t) { return t.params[x]; }));
    P.draw("chart-compare-metric", any ? metricTraces : [], P.layout({ title: P.label(y) + " vs " + P.label(x) + " (mean ± sd)",
      xaxis: xAxis, yaxis: { title: { text: P.label(y) } } }), "No trial completed yet");
    P.draw("chart-compare-curves", curve ? curveTraces : [], P.layout({ title: "Mean learning curve: " + P.label(curve),
      xaxis: P.integerAxis(allEpochs.length ? allEpochs : [1], "epoch"), yaxis: { title: { text: P.label(curve) } } }),
    "No learning curve yet");
    P.draw("chart-compare-best", any ? bestTraces : [], P.layout({ title: "Best " + P.label(objective) + " so far",
      xaxis: { title: { text: "completed trials in the order they finished" }, rangemode: "tozero" },
      yaxis: { title: { text: P.label(objective) } } }), "No trial completed yet");
    P.draw("chart-compare-time", any ? timeTraces : [], P.layout({ title: "Training time per trial vs " + P.label(x),
      xaxis: xAxis, yaxis: { title: { text: "seconds" }, rangemode: "tozero" } }), "No trial completed yet");
  }

  for (const name of ["x", "y", "curve"]) {
    controls[name].addEventListener("change", function () { chosen[name] = controls[name].value; render(); });
  }
  Promise.all(ids.map(function (_, i) { return load(i); })).then(render).catch(function (e) {
    for (const el of document.querySelectorAll(".chart-waiting")) el.textContent = "Cannot load the trials: " + e.message;
  });
})();
