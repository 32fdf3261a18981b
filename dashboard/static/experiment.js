// Experiment page: follows GET /api/v1/experiments/<id>/trials?since=<cursor> every second
// and redraws the progress, the sortable trial table and the plotly charts.
(function () {
  "use strict";
  const meta = JSON.parse(document.getElementById("experiment-data").textContent);
  const trials = new Map();
  let cursor = 0;
  let sortKey = null, sortDesc = false; // null: the sweep's own order (parameters, then id)
  let finishedPolls = 0;
  const FINISHED = new Set(["COMPLETE", "FAILED", "DIVERGED", "PRUNED", "CANCELLED"]);
  const PLOT_CONFIG = { displaylogo: false, responsive: true };
  const LAYOUT = {
    margin: { l: 60, r: 20, t: 40, b: 50 }, height: 320,
    paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "#fbfbfd",
    font: { family: "system-ui, -apple-system, 'Segoe UI', sans-serif", size: 12, color: "#222" },
  };

  // numbers with 4 significant digits: 0.8333, 0.05, 12.35, 1e-7
  function fmt(v) {
    if (v === null || v === undefined || Number.isNaN(v)) return "";
    if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4)));
    if (Array.isArray(v)) return v.join("/");
    return String(v);
  }

  function row(t) {
    return {
      id: t.id, seq: t.seq, state: t.state, hidden_layers: t.params.hidden_layers,
      width: t.params.width, activation: t.params.activation, optimizer: t.params.optimizer,
      learning_rate: t.params.learning_rate, seed: t.params.seed, epoch: t.epoch,
      test_accuracy: t.metrics.test_accuracy, val_accuracy: t.metrics.val_accuracy,
      train_seconds: t.train_seconds, error: t.error,
    };
  }

  // ----------------------------------------------------------------- table
  const tbody = document.querySelector("#trials tbody");
  for (const th of document.querySelectorAll("#trials th[data-key]")) {
    th.addEventListener("click", function () {
      const key = th.dataset.key;
      sortDesc = sortKey === key ? !sortDesc : th.hasAttribute("data-num");
      sortKey = key;
      for (const o of document.querySelectorAll("#trials th")) o.classList.remove("asc", "desc");
      th.classList.add(sortDesc ? "desc" : "asc");
      renderTable();
    });
  }

  function compareValues(x, y) {
    const xm = x === null || x === undefined, ym = y === null || y === undefined;
    if (xm || ym) return xm === ym ? 0 : (xm ? 1 : -1); // blanks last
    return typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
  }

  // A trial's place never depends on its state or change number, so rows stay put while
  // trials move from QUEUED to RUNNING to COMPLETE.
  const STABLE_KEYS = ["hidden_layers", "width", "activation", "optimizer", "learning_rate", "seed", "id"];
  function stableOrder(a, b) {
    for (const k of STABLE_KEYS) {
      const c = compareValues(a[k], b[k]);
      if (c) return c;
    }
    return 0;
  }

  function renderTable() {
    const rows = Array.from(trials.values()).map(row);
    rows.sort(function (a, b) {
      if (sortKey !== null) {
        const x = a[sortKey], y = b[sortKey];
        const blank = (x === null || x === undefined) !== (y === null || y === undefined);
        const c = compareValues(x, y);
        if (c) return blank || !sortDesc ? c : -c;
      }
      return stableOrder(a, b);
    });
    const html = rows.map(function (r) {
      const title = r.error ? ' title="' + escapeHtml(r.error) + '"' : "";
      return '<tr data-trial="' + r.id + '" data-state="' + r.state + '">' +
        '<td><span class="state state-' + r.state + '"' + title + ">" + r.state + "</span></td>" +
        "<td>" + fmt(r.hidden_layers) + "</td><td>" + fmt(r.width) + "</td><td>" + fmt(r.activation) +
        "</td><td>" + fmt(r.optimizer) + "</td><td>" + fmt(r.learning_rate) + "</td><td>" + fmt(r.seed) +
        "</td><td>" + fmt(r.epoch) + '</td><td class="num">' + fmt(r.test_accuracy) + '</td><td class="num">' +
        fmt(r.val_accuracy) + '</td><td class="num">' + fmt(r.train_seconds) + "</td>" +
        '<td><a href="' + meta.trial_page.replace("TRIAL_ID", r.id) + '"><code>' + r.id.slice(0, 10) + "…</code></a></td></tr>";
    }).join("");
    tbody.innerHTML = html;
  }

  function escapeHtml(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  // ----------------------------------------------------------------- charts
  // Every parameter a trial has; a chart's series are named by the ones that vary.
  const PARAMS = ["hidden_layers", "width", "activation", "optimizer", "learning_rate", "batch_size",
    "max_epochs", "dataset", "seed"];
  const PARAM_LABELS = { hidden_layers: "layers", learning_rate: "lr", batch_size: "batch",
    max_epochs: "epochs", optimizer: "optimiser" };

  function varyingParams(list, candidates) {
    return candidates.filter(function (p) {
      return new Set(list.map(function (t) { return JSON.stringify(t.params[p]); })).size > 1;
    });
  }

  function seriesLabeler(list, candidates) {
    const varying = varyingParams(list, candidates);
    return function (t) {
      if (!varying.length) return "all";
      return varying.map(function (p) { return (PARAM_LABELS[p] || p) + " " + fmt(t.params[p]); }).join(", ");
    };
  }

  // An integer tick step that gives at most about `count` ticks over [0, span]: 1, 2, 5, 10, 20, …
  function integerStep(span, count) {
    const raw = Math.max(1, span / (count || 8));
    const magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) {
      if (m * magnitude >= raw) return m * magnitude;
    }
    return 10 * magnitude;
  }

  function integerAxis(values, title) {
    const lo = Math.min.apply(null, values), hi = Math.max.apply(null, values);
    return { title: { text: title }, tickmode: "linear", tick0: 0, dtick: integerStep(hi - lo), tickformat: "d" };
  }

  function meanStd(values) {
    const n = values.length;
    const mean = values.reduce(function (a, b) { return a + b; }, 0) / n;
    const variance = n > 1 ? values.reduce(function (a, b) { return a + (b - mean) * (b - mean); }, 0) / (n - 1) : 0;
    return [mean, Math.sqrt(variance)];
  }

  // Hidden layers (x) vs a per-trial value (y): mean and ± one standard deviation over seeds.
  const SERIES_PARAMS = PARAMS.filter(function (p) { return p !== "hidden_layers" && p !== "seed"; });
  function depthTraces(list, value, collapse) {
    const label = collapse ? function () { return "all"; } : seriesLabeler(list, SERIES_PARAMS);
    const groups = new Map();
    for (const t of list) {
      const y = value(t);
      if (y === null || y === undefined) continue;
      const key = label(t);
      if (!groups.has(key)) groups.set(key, new Map());
      const byDepth = groups.get(key);
      const d = t.params.hidden_layers;
      if (!byDepth.has(d)) byDepth.set(d, []);
      byDepth.get(d).push(y);
    }
    if (groups.size > 12) return depthTraces(list, value, true); // too many series to read
    return Array.from(groups.entries()).map(function ([name, byDepth]) {
      const depths = Array.from(byDepth.keys()).sort(function (a, b) { return a - b; });
      const stats = depths.map(function (d) { return meanStd(byDepth.get(d)); });
      return {
        type: "scatter", mode: "lines+markers", name: name, x: depths,
        y: stats.map(function (s) { return s[0]; }),
        error_y: { type: "data", array: stats.map(function (s) { return s[1]; }), visible: true },
        text: depths.map(function (d) { return byDepth.get(d).length + " seed(s)"; }),
      };
    });
  }

  // A chart with nothing to draw says why instead of showing empty default axes.
  function draw(id, traces, layout, emptyText) {
    const el = document.getElementById(id);
    if (!traces.length) {
      if (el.dataset.waiting !== emptyText) {
        Plotly.purge(el);
        el.textContent = "";
        const note = document.createElement("div");
        note.className = "chart-waiting";
        note.textContent = emptyText;
        el.appendChild(note);
        el.dataset.waiting = emptyText;
      }
      return;
    }
    if (el.dataset.waiting !== undefined) {
      el.textContent = "";
      delete el.dataset.waiting;
    }
    Plotly.react(el, traces, layout, PLOT_CONFIG);
  }

  function renderCharts() {
    if (typeof Plotly === "undefined") return;
    const all = Array.from(trials.values());
    const done = all.filter(function (t) { return t.state === "COMPLETE"; });
    const over = all.length > 0 && all.every(function (t) { return FINISHED.has(t.state); });
    const waiting = over ? "No trial completed: nothing to plot" : "Waiting for the first trial to finish…";
    let objective = meta.objective && meta.objective.metric && meta.objective.metric.indexOf("test_") === 0
      ? meta.objective.metric : "test_accuracy";
    if (done.length && !done.some(function (t) { return t.metrics[objective] !== undefined; })) {
      objective = "test_loss"; // regression trials have no accuracy
    }
    const depths = done.map(function (t) { return t.params.hidden_layers; });
    draw("chart-accuracy", depthTraces(done, function (t) { return t.metrics[objective]; }),
      Object.assign({}, LAYOUT, { title: { text: "Hidden layers vs " + objective.replace("_", " ") + " (mean ± sd over seeds)" },
        xaxis: integerAxis(depths, "hidden layers"), yaxis: { title: { text: objective.replace("_", " ") } } }), waiting);
    draw("chart-time", depthTraces(done, function (t) { return t.train_seconds; }),
      Object.assign({}, LAYOUT, { title: { text: "Hidden layers vs training time (mean ± sd over seeds)" },
        xaxis: integerAxis(depths, "hidden layers"), yaxis: { title: { text: "seconds" }, rangemode: "tozero" } }), waiting);

    // Learning curves; with ASHA pruning, the rung chart: the metric ASHA compares against
    // the epoch, the rungs marked, pruned trials faded and dotted where they stopped.
    const search = meta.search || { prunes: false, rungs: [] };
    const hasMetric = function (m) {
      return all.some(function (t) { return (t.history || []).some(function (h) { return h[m] !== undefined && h[m] !== null; }); });
    };
    const curveMetric = search.prunes && search.rung_metric && hasMetric(search.rung_metric) ? search.rung_metric
      : hasMetric("val_accuracy") ? "val_accuracy" : "val_loss";
    const withHistory = all.filter(function (t) { return t.history && t.history.length; })
      .sort(function (a, b) { return stableOrder(row(a), row(b)); }).slice(0, search.prunes ? 300 : 80);
    const curveLabel = seriesLabeler(withHistory, PARAMS);
    const curves = withHistory.map(function (t) {
      return {
        type: "scatter", mode: "lines", name: curveLabel(t),
        x: t.history.map(function (h) { return h.epoch; }), y: t.history.map(function (h) { return h[curveMetric]; }),
        line: { width: t.state === "PRUNED" ? 1 : 1.5, dash: t.state === "PRUNED" ? "dot" : "solid" },
        opacity: t.state === "RUNNING" ? 1 : t.state === "PRUNED" ? 0.3 : 0.75,
        meta: t.state,
      };
    });
    const epochs = withHistory.reduce(function (a, t) { return a.concat(t.history.map(function (h) { return h.epoch; })); }, []);
    const rungLines = (search.rungs || []).map(function (r) {
      return { type: "line", xref: "x", yref: "paper", x0: r, x1: r, y0: 0, y1: 1,
        line: { color: "#999", width: 1, dash: "dash" } };
    });
    const nPruned = all.filter(function (t) { return t.state === "PRUNED"; }).length;
    const curveTitle = search.prunes
      ? "Rung chart: " + curveMetric.replace("_", " ") + " by epoch (rungs dashed; " + nPruned + " pruned, faded)"
      : "Learning curves (" + curveMetric.replace("_", " ") + ")";
    draw("chart-curves", curves, Object.assign({}, LAYOUT, {
      title: { text: curveTitle }, showlegend: curves.length <= 12, shapes: rungLines,
      xaxis: integerAxis(epochs.concat(search.rungs || []), "epoch"), yaxis: { title: { text: curveMetric.replace("_", " ") } } }),
      over ? "No learning curve was recorded" : "Waiting for the first epoch…");

    // Best so far against time: the best objective among the trials completed by then.
    const better = meta.objective && meta.objective.mode === "min"
      ? function (a, b) { return a < b; } : function (a, b) { return a > b; };
    const t0 = meta.created_at || 0;
    const finishedIn = done.filter(function (t) { return t.finished_at && t.metrics[objective] !== undefined; })
      .sort(function (a, b) { return a.finished_at - b.finished_at; });
    const stepX = [], stepY = [];
    let bestSoFar = null;
    for (const t of finishedIn) {
      const v = t.metrics[objective];
      if (bestSoFar === null || better(v, bestSoFar)) bestSoFar = v;
      stepX.push(t.finished_at - t0);
      stepY.push(bestSoFar);
    }
    draw("chart-best", finishedIn.length ? [
      { type: "scatter", mode: "markers", name: "completed trial", marker: { size: 5, color: "#bbb" },
        x: finishedIn.map(function (t) { return t.finished_at - t0; }), y: finishedIn.map(function (t) { return t.metrics[objective]; }) },
      { type: "scatter", mode: "lines", name: "best so far", line: { shape: "hv", width: 2 }, x: stepX, y: stepY },
    ] : [], Object.assign({}, LAYOUT, { title: { text: "Best " + objective.replace("_", " ") + " so far" },
      xaxis: { title: { text: "seconds since submission" }, rangemode: "tozero" },
      yaxis: { title: { text: objective.replace("_", " ") } } }), waiting);

    const pts = done.filter(function (t) { return t.metrics[objective] !== undefined; });
    const cat = function (key) {
      const values = Array.from(new Set(all.map(function (t) { return String(t.params[key]); }))).sort();
      return { label: key, values: pts.map(function (t) { return values.indexOf(String(t.params[key])); }),
        tickvals: values.map(function (_, i) { return i; }), ticktext: values };
    };
    // numeric parameters: a few distinct values are the ticks themselves (integers, or the
    // learning rates on a log axis); many integers get integer steps; one value sits mid-axis
    const numeric = function (key, label, transform) {
      const raw = pts.map(function (t) { return t.params[key]; });
      const distinct = Array.from(new Set(raw)).sort(function (a, b) { return a - b; });
      const values = raw.map(transform || Number);
      let ticks = distinct;
      if (distinct.length > 10 && !transform) {
        const step = integerStep(distinct[distinct.length - 1] - distinct[0]);
        ticks = [];
        for (let v = Math.ceil(distinct[0] / step) * step; v <= distinct[distinct.length - 1]; v += step) ticks.push(v);
      }
      const dim = { label: label, values: values };
      if (ticks.length <= 10) {
        dim.tickvals = ticks.map(transform || Number);
        dim.ticktext = ticks.map(function (v) { return fmt(v); });
      }
      if (distinct.length === 1) {
        const v = values[0];
        dim.range = [v - 1, v + 1];
      }
      return dim;
    };
    const dims = [
      numeric("hidden_layers", "hidden layers"),
      Object.assign(cat("width"), { label: "width" }),
      numeric("learning_rate", "lr (log)", Math.log10),
      cat("activation"), Object.assign(cat("optimizer"), { label: "optimiser" }),
      numeric("seed", "seed"),
      { label: objective.replace("_", " "), values: pts.map(function (t) { return t.metrics[objective]; }) },
    ];
    draw("chart-parallel", pts.length ? [{
      type: "parcoords", dimensions: dims, labelangle: 0, labelside: "top",
      // a halo behind the tick labels keeps them readable where lines cross them
      tickfont: { size: 11, shadow: "auto" },
      line: { color: pts.map(function (t) { return t.metrics[objective]; }), colorscale: "Viridis", showscale: true },
    }] : [], Object.assign({}, LAYOUT, { title: { text: "Hyperparameters → " + objective.replace("_", " "), y: 0.98 },
      margin: { l: 60, r: 60, t: 90, b: 30 } }), waiting);
  }

  // ----------------------------------------------------------------- progress + polling
  function renderProgress(data) {
    const counts = data.counts || {};
    const finished = Object.keys(counts).reduce(function (a, k) { return a + (FINISHED.has(k) ? counts[k] : 0); }, 0);
    const pct = data.n_trials ? (100 * finished / data.n_trials) : 100;
    document.getElementById("progress-fill").style.width = pct.toFixed(1) + "%";
    document.getElementById("progress-text").textContent = finished + " / " + data.n_trials + " trials finished";
    document.getElementById("counts").innerHTML = Object.keys(counts).filter(function (k) { return counts[k]; })
      .map(function (k) { return '<span class="state state-' + k + '">' + k + " " + counts[k] + "</span>"; }).join(" ");
    const status = document.getElementById("status");
    status.textContent = data.status_text || data.status;
    status.className = "state state-" + data.status;
    const done = Array.from(trials.values()).filter(function (t) { return t.metrics.test_accuracy !== undefined; });
    if (done.length) {
      const best = done.reduce(function (a, b) { return b.metrics.test_accuracy > a.metrics.test_accuracy ? b : a; });
      document.getElementById("best").textContent = "best test accuracy " + fmt(best.metrics.test_accuracy) + " — " +
        best.params.hidden_layers + " hidden layer(s) × " + fmt(best.params.width) + ", " + best.params.activation + ", " +
        best.params.optimizer + " lr " + fmt(best.params.learning_rate);
    }
    return finished >= data.n_trials;
  }

  async function poll() {
    let more = true, changed = false, last = null;
    try {
      while (more) {
        const res = await fetch(meta.trials_url + "?history=1&since=" + cursor);
        if (!res.ok) throw new Error("HTTP " + res.status);
        last = await res.json();
        for (const t of last.trials) trials.set(t.id, t);
        changed = changed || last.trials.length > 0;
        cursor = last.cursor;
        more = last.more;
      }
    } catch (e) {
      document.getElementById("progress-text").textContent = "lost contact with the server (" + e.message + "), retrying…";
      setTimeout(poll, 2000);
      return;
    }
    const finished = renderProgress(last);
    if (changed) { renderTable(); renderCharts(); }
    finishedPolls = finished ? finishedPolls + 1 : 0;
    if (finishedPolls < 3) setTimeout(poll, 1000);
    else setTimeout(poll, 10000); // finished: keep an eye out for a resubmission, slowly
  }
  poll();
})();
