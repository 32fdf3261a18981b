// The experiment page's importance chart (from GET …/importance: the trials counted as every
// chart counts them, a diverged one as the worst value; the seed no parameter but the noise
// floor, a dashed line) and the mean of the metric over the two most important parameters.
window.DnnImportance = (function () {
  "use strict";
  const P = window.DnnPlot, O = window.DnnOutcomes;

  // Mean of the metric over every pair of values of the two most important parameters, a
  // diverged trial counted as the worst value. A continuous parameter (a sampled learning
  // rate takes as many values as trials) is cut into bins, so each cell averages several
  // trials instead of one column per trial.
  function pairTraces(done, a, b, y) {
    const rows = done.filter(function (t) { return typeof value(t, y) === "number"; });
    const binA = P.bins(rows.map(function (t) { return t.params[a]; }));
    const binB = P.bins(rows.map(function (t) { return t.params[b]; }));
    const z = binB.labels.map(function () { return binA.labels.map(function () { return []; }); });
    for (const t of rows) z[binB.index(t.params[b])][binA.index(t.params[a])].push(t);
    const mean = z.map(function (row) { return row.map(function (ts) {
      return ts.length ? P.meanStd(ts.map(function (t) { return value(t, y); }))[0] : null;
    }); });
    const counts = z.map(function (row) { return row.map(function (ts) { return ts.length; }); });
    const lost = z.map(function (row) { return row.map(function (ts) { return O.divergedText(ts, y, value); }); });
    // bright is better whichever way the metric goes: a loss's lowest cell is the bright one
    return rows.length ? [{ type: "heatmap", x: binA.labels, y: binB.labels, z: mean, customdata: counts, text: lost,
      colorscale: "Viridis", reversescale: P.direction(y) === "min", colorbar: { thickness: 12 },
      hovertemplate: P.label(a) + " %{x}<br>" + P.label(b) + " %{y}<br>mean %{z:.4g} of %{customdata} trial(s)%{text}<extra></extra>" }] : [];
  }

  // What the ranking counted besides complete trials, for its title.
  function counted(body) {
    const parts = [];
    if (body.n_diverged) {
      parts.push(body.n_diverged + " diverged" + (typeof body.worst === "number" ? ", counted as the worst (" + P.fmt(body.worst) + ")" : ""));
    }
    if (body.n_pruned) parts.push(body.n_pruned + " pruned, at the value they stopped at");
    return parts.length ? "; " + parts.join("; ") : "";
  }

  let importanceKey = null, importanceBusy = false, importanceNext = null, lastDone = [], value = null;
  // the answer the page's first read brought (page-data: the metric it shows first), with the
  // key it answers; drawn at once instead of asking the server again
  let seeded = null;

  function seed(body, nDone) {
    seeded = { key: [body.metric, body.evaluator, nDone].join("|"), body: body };
  }

  // Both charts from the server's answer `body` (`ok`: false for an error's message).
  function drawAnswer(body, ok, y) {
    if (!ok) {
      P.draw("chart-importance", [], null, "Importance unavailable: " + body.message);
      return;
    }
    const ranked = body.ranking.slice().reverse(); // the most important on top
    // the seed changes only the draw: it is no bar but the noise floor (a dashed line), and
    // what matters no more than it is drawn pale
    const below = new Set(body.below_noise || []);
    const hasFloor = typeof body.noise_floor === "number";
    const floor = hasFloor ? [{ type: "line", xref: "x", yref: "paper",
      x0: body.noise_floor, x1: body.noise_floor, y0: 0, y1: 1, line: { color: "#6b7280", width: 1, dash: "dash" } }] : [];
    const floorText = hasFloor ? [{ x: body.noise_floor, xref: "x", y: 1, yref: "paper", yanchor: "bottom", xanchor: "left",
      showarrow: false, text: "seed: noise floor " + (100 * body.noise_floor).toFixed(1) + "%", font: { size: 11, color: "#4b5563" } }] : [];
    P.draw("chart-importance", ranked.length ? [{ type: "bar", orientation: "h",
      x: ranked.map(function (p) { return body.importances[p]; }),
      y: ranked.map(P.label),
      text: ranked.map(function (p) { return (100 * body.importances[p]).toFixed(1) + "%"; }), textposition: "auto",
      marker: { color: ranked.map(function (p) { return below.has(p) ? "#a9bdf0" : "#2f5bd3"; }) },
      hovertemplate: "%{y}: %{x:.3f}<extra></extra>" }] : [],
      P.layout({ title: "Parameter importance for " + P.label(y) + " (" + body.evaluator.replace("_", "-") + ", " + body.n_trials + " trials" +
        (body.few_trials ? ", too few: a rough guide" : "") + counted(body) + ")",
        shapes: floor, annotations: floorText, margin: { l: 140, r: 20, t: 64, b: 40 },
        xaxis: { title: { text: "importance" + (hasFloor ? " (with the seed's, dashed, sums to 1)" : " (sums to 1)") },
          rangemode: "tozero" },
        height: Math.max(240, 96 + 28 * ranked.length) }),
      body.note ? "Importance: " + body.note : "Waiting for the first trials to finish…");
    const top = body.ranking.slice(0, 2);
    P.draw("chart-contour", top.length === 2 ? pairTraces(lastDone, top[0], top[1], y) : [],
      P.layout({ title: "Mean " + P.label(y) + " over the two most important parameters (brighter is better" +
        (body.n_diverged ? "; diverged trials count as the worst" : "") + ")",
        xaxis: { title: { text: P.label(top[0] || "") }, type: "category" },
        yaxis: { title: { text: P.label(top[1] || "") }, type: "category", automargin: true },
        margin: { l: 110, r: 20, t: 48, b: 60 } }),
      "Needs two parameters that matter" + (top.length === 1 ? ": the sweep varies one besides the seed, " + P.label(top[0])
        : body.note ? " (" + body.note + ")" : ": the sweep varies fewer than two besides the seed"));
  }

  async function importance(meta, y, evaluator, nDone) {
    const key = [y, evaluator, nDone].join("|");
    // a choice made while an answer is on its way is asked for once that answer is in
    if (importanceBusy) { importanceNext = [meta, y, evaluator, nDone]; return; }
    if (key === importanceKey) return;
    if (seeded && seeded.key === key) {
      importanceKey = key;
      drawAnswer(seeded.body, true, y);
      seeded = null;
      return;
    }
    seeded = null; // the page moved on from the first read's answer
    importanceBusy = true;
    try {
      const res = await fetch(meta.importance_url + "?metric=" + encodeURIComponent(y) + "&evaluator=" + encodeURIComponent(evaluator));
      const body = await res.json();
      importanceKey = key;
      drawAnswer(body, res.ok, y);
    } catch (e) {
      importanceKey = null; // try again on the next redraw
    } finally {
      importanceBusy = false;
      const next = importanceNext;
      importanceNext = null;
      if (next) importance.apply(null, next);
    }
  }

  // Draw both for metric `y` (asking the server once per change of the counted trials, `done`);
  // valueOf(t, key) reads a trial's value as the other charts do.
  function show(meta, y, evaluator, done, valueOf) {
    lastDone = done;
    value = valueOf;
    importance(meta, y, evaluator, done.length);
  }

  return { show: show, seed: seed };
})();
