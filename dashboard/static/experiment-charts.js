// The experiment page's charts, drawn from the trials the page holds and the axes the reader
// chose: a metric against a parameter grouped by another, training time, learning curves
// (grouped, smoothed), best so far, parameter importance, slices, parallel coordinates, the
// depth profile, the rank plot, the metric's distribution and the timeline of the trials.
// Every chart of a metric counts the trials outcomes.js counts, with the value it gives them:
// a diverged trial is drawn ✕ at the worst value, a pruned one x at the value it stopped at.
window.DnnCharts = (function () {
  "use strict";
  const P = window.DnnPlot, O = window.DnnOutcomes;
  const V = P.VOCAB, S = V.states;
  const FINISHED = new Set(V.finished);
  // the settings that make a layer design (what the depth profile draws one line for)
  const DESIGN = ["width", "activation", "residual", "residual_learnable", "normalization", "norm_position",
    "init", "dropout"];
  const MAX_GROUPS = 24;
  const isNumber = function (v) { return typeof v === "number" && Number.isFinite(v); };
  // What a trial recorded (the table shows it): a metric, a field or a parameter.
  function value(t, key) {
    if (t.metrics && t.metrics[key] !== undefined) return t.metrics[key];
    if (key in t && key !== "params" && key !== "metrics") return t[key];
    return t.params[key];
  }

  // The value a chart counts a trial with for a metric or measurement (outcomes.js's rule
  // over the trials the page holds, set by prepare(); null: none), and for a parameter or a
  // field (state, epoch) what the trial has, as the table shows it.
  let outcome = null;
  function counted(t, key) {
    if (!outcome || !O.counts(t) || key in t.params || (key in t && !O.measured(key))) return value(t, key);
    return outcome.value(t, key);
  }

  function prepare(everything, meta) {
    const objective = meta.objective || V.objective;
    outcome = O.over(everything, function (key) { return key === objective.metric ? objective.mode : P.direction(key); });
  }

  const groupName = P.groupName;

  // Mean ± sd of `y` at each value of `x`, one series per group; a point where trials
  // diverged (counted as the worst) is a ✕ that says how many.
  function byXTraces(list, x, y, group) {
    const rows = list.filter(function (t) { return isNumber(counted(t, y)) && t.params[x] !== undefined; });
    const groups = P.groupBy(rows, function (t) { return group ? t.params[group] : null; });
    return groups.map(function (entry, i) {
      const byX = P.groupBy(entry[1], function (t) { return t.params[x]; });
      const stats = byX.map(function (e) { return P.meanStd(e[1].map(function (t) { return counted(t, y); })); });
      const lost = byX.map(function (e) { return e[1].some(O.diverged); });
      return {
        type: "scatter", mode: "lines+markers", name: groupName(group, entry[1][0]),
        x: byX.map(function (e) { return e[0]; }), y: stats.map(function (s) { return s[0]; }),
        error_y: { type: "data", symmetric: false, visible: true,
          array: stats.map(function (s) { return P.band(s[0], s[1], y)[1]; }),
          arrayminus: stats.map(function (s) { return P.band(s[0], s[1], y)[0]; }) },
        text: byX.map(function (e) { return e[1].length + " trial(s)" + O.divergedText(e[1], y, counted); }),
        line: { color: P.colour(i) }, legendgroup: String(entry[0]),
        marker: { color: P.colour(i), symbol: lost.map(function (d) { return d ? "x-thin-open" : "circle"; }),
          size: lost.map(function (d) { return d ? 12 : 6; }), line: { width: 2, color: P.colour(i) } },
      };
    });
  }

  // Learning curves: per group the mean over its trials at each epoch with a ± sd band, or
  // every trial as a thin line coloured by its group; clicking a legend entry hides a group.
  // Few trials and no grouping: each trial is its own series, named by what varies. A
  // diverged trial's curve (losses of 1e9 and up) is never in a mean: it is drawn on its
  // own, red, dotted, ending in ✕, in either mode, so a group where every trial diverged shows.
  function curveTraces(list, metric, group, opts) {
    const traces = [];
    // a curve's worst: the metric's bound, else the worst epoch of the trials that trained
    const floor = O.worst(metric, P.direction(metric), list.filter(function (t) { return !O.diverged(t); })
      .reduce(function (a, t) { return a.concat(t.history.map(function (h) { return h[metric]; })); }, []));
    const alone = !group && opts.mode === "trials" && list.length <= MAX_GROUPS;
    const named = function (t) {
      const keys = opts.varied.filter(function (p) { return p !== group; });
      return keys.map(function (p) { return P.label(p) + " " + P.fmt(t.params[p]); }).join(", ") || "trial";
    };
    const trialTrace = function (t, name, key, col, shown) {
      const pruned = O.pruned(t), diverged = O.diverged(t);
      let xs = t.history.map(function (h) { return h.epoch; });
      let ys = P.smooth(t.history.map(function (h) { return h[metric]; }), opts.smoothing);
      if (diverged) {
        // the epochs it trained, then ✕ at the epoch it diverged, at the worst value there is
        const at = Math.max(t.epochs_run || 1, 1);
        const keep = xs.map(function (x) { return x < at; });
        xs = xs.filter(function (_, k) { return keep[k]; }).concat([at]);
        ys = ys.filter(function (_, k) { return keep[k]; }).concat([floor]);
      }
      // a trial pruned at the first rung has one point: a line alone would not show it
      const marked = pruned || diverged || xs.length < 2;
      return { type: "scatter", mode: marked ? "lines+markers" : "lines", name: name, legendgroup: key,
        showlegend: shown, x: xs, y: ys,
        marker: { size: diverged ? xs.map(function (_, k) { return k === xs.length - 1 ? 11 : 0; }) : pruned ? 5 : 4,
          symbol: O.symbol(t), color: O.colour(t, col), line: { width: 2 } },
        line: { color: diverged ? O.DIVERGED_COLOUR : col, width: pruned ? 1 : 1.3, dash: pruned || diverged ? "dot" : "solid" },
        opacity: t.state === S.RUNNING ? 1 : pruned ? 0.5 : 0.6, meta: t.state,
        hovertemplate: named(t) + " (" + t.state.toLowerCase() + ")<br>epoch %{x}: %{y:.4g}<extra></extra>" };
    };
    const groups = P.groupBy(list, alone ? named : function (t) { return group ? t.params[group] : null; });
    groups.forEach(function (entry, i) {
      const col = P.colour(i), key = "g" + i;
      const name = alone ? entry[0] : groupName(group, entry[1][0]);
      if (opts.mode === "trials") {
        entry[1].forEach(function (t, j) { traces.push(trialTrace(t, name, key, col, j === 0)); });
        return;
      }
      const lost = entry[1].filter(O.diverged);
      const byEpoch = new Map();
      for (const t of entry[1]) {
        if (O.diverged(t)) continue;
        const ys = P.smooth(t.history.map(function (h) { return h[metric]; }), opts.smoothing);
        t.history.forEach(function (h, k) {
          if (!isNumber(ys[k])) return;
          if (!byEpoch.has(h.epoch)) byEpoch.set(h.epoch, []);
          byEpoch.get(h.epoch).push(ys[k]);
        });
      }
      const epochs = Array.from(byEpoch.keys()).sort(function (a, b) { return a - b; });
      const stats = epochs.map(function (e) { return P.meanStd(byEpoch.get(e)); });
      const lower = stats.map(function (s) { return s[0] - P.band(s[0], s[1], metric)[0]; });
      const upper = stats.map(function (s) { return s[0] + P.band(s[0], s[1], metric)[1]; });
      const told = name + " (" + (entry[1].length - lost.length) + (lost.length ? ", " + lost.length + " diverged: red, dotted" : "") + ")";
      if (epochs.length) {
        traces.push({ type: "scatter", mode: "lines", x: epochs.concat(epochs.slice().reverse()),
          y: upper.concat(lower.slice().reverse()), fill: "toself", fillcolor: P.rgba(col, 0.15),
          line: { width: 0 }, hoverinfo: "skip", legendgroup: key, showlegend: false, name: name + " ± sd" });
        traces.push({ type: "scatter", mode: "lines", legendgroup: key, name: told,
          x: epochs, y: stats.map(function (s) { return s[0]; }), line: { color: col, width: 2 } });
      }
      // a group where every trial diverged has no mean: its first curve carries the legend
      lost.forEach(function (t, j) { traces.push(trialTrace(t, epochs.length ? name : told, key, col, !epochs.length && j === 0)); });
    });
    return traces;
  }

  // The y range of the curves but a diverged trial's own values (its 1e9 would flatten every
  // other curve to a line), its ✕ at the worst value kept in; {} (plotly chooses) when no
  // trial diverged.
  function curveRange(traces) {
    const lost = traces.filter(function (t) { return t.meta === S.DIVERGED; });
    if (!lost.length) return {};
    const ys = [];
    for (const t of traces) {
      const own = t.meta === S.DIVERGED ? t.y.slice(-1) : t.y;
      for (const v of own) if (isNumber(v)) ys.push(v);
    }
    if (!ys.length) return {};
    const lo = Math.min.apply(null, ys), hi = Math.max.apply(null, ys), pad = (hi - lo) * 0.05 || Math.abs(hi) * 0.05 || 1;
    return { range: [lo - pad, hi + pad], autorange: false };
  }

  // Best so far against the trials in the order they finished (1, 2, …): reused trials
  // finished before this experiment began, so time since submission would run negative.
  // Diverged trials take their place in the order, ✕ at the worst value, and pruned ones x at
  // the value they stopped at; the line is the best complete trial so far (a pruned trial's
  // value, from fewer epochs, is not comparable: the rank plot ranks it after them too).
  function bestSoFar(list, metric, mode) {
    const better = mode === "min" ? function (a, b) { return a < b; } : function (a, b) { return a > b; };
    const inOrder = list.filter(function (t) { return isNumber(counted(t, metric)); })
      .sort(function (a, b) { return (a.finished_at || 0) - (b.finished_at || 0) || P.compare(a.id, b.id); });
    const stepX = [], stepY = [];
    let best = null;
    inOrder.forEach(function (t, i) {
      if (O.pruned(t) || O.diverged(t)) return;
      const v = counted(t, metric);
      if (best === null || better(v, best)) best = v;
      stepX.push(i + 1); stepY.push(best);
    });
    const order = new Map(inOrder.map(function (t, i) { return [t.id, i + 1]; }));
    const kinds = [["completed trial", function (t) { return !O.diverged(t) && !O.pruned(t); }, 5],
      ["pruned trial", O.pruned, 8], ["diverged trial (the worst)", O.diverged, 11]];
    const traces = kinds.map(function (kind) {
      const ts = inOrder.filter(kind[1]);
      return { type: "scatter", mode: "markers", name: kind[0], x: ts.map(function (t) { return order.get(t.id); }),
        y: ts.map(function (t) { return counted(t, metric); }), customdata: ts.map(function (t) { return t.id; }),
        marker: { size: kind[2], color: ts.map(function (t) { return O.colour(t, "#bbb"); }),
          symbol: ts.map(function (t) { return O.symbol(t); }), line: { width: 2 } },
        hovertemplate: "trial %{x}: %{y:.4g}<br>click: its trial<extra>%{fullData.name}</extra>" };
    }).filter(function (t) { return t.x.length; });
    return { diverged: inOrder.filter(O.diverged).length, traces: inOrder.length ? traces.concat(stepX.length ? [
      { type: "scatter", mode: "lines", name: "best so far", line: { shape: "hv", width: 2 }, x: stepX, y: stepY },
    ] : []) : [] };
  }

  // One small chart per varied parameter: the metric of every counted trial against it,
  // diverged ones ✕ at the worst value (the values that decide divergence show), pruned x.
  function sliceTraces(list, varied, y) {
    const pts = list.filter(function (t) { return isNumber(counted(t, y)); });
    const axes = {};
    const traces = varied.map(function (p, i) {
      const suffix = i ? String(i + 1) : "";
      axes["xaxis" + suffix] = Object.assign(P.axisFor(p, pts.map(function (t) { return t.params[p]; })),
        { title: { text: P.label(p), standoff: 2 } });
      axes["yaxis" + suffix] = { title: { text: i ? "" : P.label(y) } };
      return { type: "scatter", mode: "markers", name: P.label(p), xaxis: "x" + suffix, yaxis: "y" + suffix,
        x: pts.map(function (t) { return typeof t.params[p] === "boolean" || t.params[p] === null ? String(t.params[p]) : t.params[p]; }),
        y: pts.map(function (t) { return counted(t, y); }), customdata: pts.map(function (t) { return t.id; }),
        text: pts.map(function (t) { return t.state.toLowerCase(); }),
        hovertemplate: "%{x}: %{y:.4g} (%{text})<br>click: its trial<extra></extra>",
        marker: { size: pts.map(function (t) { return O.diverged(t) ? 11 : 6; }), opacity: 0.7, line: { width: 2 },
          color: pts.map(function (t) { return O.colour(t, P.colour(i)); }), symbol: pts.map(function (t) { return O.symbol(t); }) },
        showlegend: false };
    });
    return { traces: pts.length ? traces : [], axes: axes, diverged: pts.filter(O.diverged).length };
  }

  // The parallel coordinates of every counted trial (a diverged one at the worst value), for
  // parallel-chart.js: an axis per varied parameter (log for positive numbers spanning more
  // than a decade, labelled with real values; a text one's categories in order) and the
  // metric, each with its brush from trial-filter.js; the lines coloured by the metric.
  function parallelSpec(list, varied, y) {
    const pts = list.filter(function (t) { return isNumber(counted(t, y)); });
    const dims = varied.map(function (p) {
      const raw = pts.map(function (t) { return t.params[p]; });
      if (raw.every(function (v) { return typeof v === "number"; })) {
        const distinct = Array.from(new Set(raw)).sort(function (a, b) { return a - b; });
        const lo = distinct[0], hi = distinct[distinct.length - 1];
        const log = lo > 0 && hi / lo > 10;
        const dim = { key: p, label: P.label(p) + (log ? " (log)" : ""), log: log, categories: null,
          values: raw.map(log ? Math.log10 : Number) };
        if (distinct.length <= 10) {
          dim.tickvals = distinct.map(log ? Math.log10 : Number);
          dim.ticktext = distinct.map(P.fmt);
        } else if (log) { // the axis holds log10 values: label its decades with real ones
          Object.assign(dim, P.logTicks(lo, hi));
        }
        return dim;
      }
      const values = Array.from(new Set(raw.map(String))).sort();
      return { key: p, label: P.label(p), log: false, categories: values,
        values: raw.map(function (v) { return values.indexOf(String(v)); }),
        tickvals: values.map(function (_, i) { return i; }), ticktext: values };
    });
    const metric = pts.map(function (t) { return counted(t, y); });
    dims.push({ key: y, label: P.label(y), log: false, categories: null, values: metric });
    dims.forEach(function (d) {
      const range = window.DnnFilter.constraint(d);
      if (range) d.brush = range;
    });
    return { dimensions: dims, ids: pts.map(function (t) { return t.id; }),
      kinds: pts.map(function (t) { return O.diverged(t) ? "diverged" : O.pruned(t) ? "pruned" : ""; }),
      // the better end is the bright one
      colour: { label: P.label(y), values: metric, reversescale: P.direction(y) === "min" } };
  }

  // The parallel coordinates over every counted trial the page holds (brushed ones too).
  function drawParallel(everything, meta, varied, y, waiting) {
    const el = document.getElementById("chart-parallel");
    if (!el) return;
    const dims = varied.filter(function (p) { return p !== "seed"; });
    const allDone = everything.filter(O.counts);
    const spec = parallelSpec(allDone, dims.length ? dims : varied, y);
    if (!P.note(el, spec.ids.length ? null : waiting, window.DnnParallel.clear)) return;
    const lost = spec.kinds.filter(function (k) { return k === "diverged"; }).length;
    const pruned = spec.kinds.filter(function (k) { return k === "pruned"; }).length;
    spec.title = "Parameters → " + P.label(y) + " (drag along an axis to filter the table and charts" +
      (lost ? "; " + lost + " diverged, red, at the worst " + P.label(y) : "") +
      (pruned ? "; " + pruned + " pruned, fainter" : "") + ")";
    spec.summary = spec.ids.length + " trials over " + spec.dimensions.length + " axes (" +
      spec.dimensions.map(function (d) { return d.label; }).join(", ") + "), " +
      spec.ids.length * spec.dimensions.length + " values";
    el.style.height = "";
    window.DnnParallel.draw(el, spec, { brushed: window.DnnFilter.read, open: function (id) {
      window.location.href = meta.trial_page.replace("TRIAL_ID", encodeURIComponent(id));
    } });
  }

  // Depth profile: for each layer design the best and the mean of the metric against depth
  // (left; ✕ where trials diverged, counted as the worst), and the mean compile and training
  // time per trial against depth (right).
  function depthProfile(list, metric, mode, varied) {
    const designKeys = DESIGN.filter(function (k) { return varied.indexOf(k) >= 0; });
    const rows = list.filter(function (t) { return isNumber(counted(t, metric)); });
    const designOf = function (t) {
      return designKeys.length ? designKeys.map(function (k) { return P.label(k) + " " + P.fmt(t.params[k]); }).join(", ") : "all";
    };
    const traces = [];
    P.groupBy(rows, designOf).forEach(function (entry, i) {
      const col = P.colour(i), key = "d" + i;
      const byDepth = P.groupBy(entry[1], function (t) { return t.params.hidden_layers; });
      const depths = byDepth.map(function (e) { return e[0]; });
      const pick = mode === "min" ? Math.min : Math.max;
      const of = function (fn, k) { return byDepth.map(function (e) { return fn(e[1].map(function (t) { return counted(t, k); }).filter(isNumber)); }); };
      const mean = function (vs) { return vs.length ? P.meanStd(vs)[0] : null; };
      const lost = byDepth.map(function (e) { return e[1].some(O.diverged); });
      traces.push({ type: "scatter", mode: "lines+markers", name: entry[0] + " · mean", legendgroup: key,
        x: depths, y: of(mean, metric), line: { color: col, width: 2 },
        text: byDepth.map(function (e) { return e[1].length + " trial(s)" + O.divergedText(e[1], metric, counted); }),
        marker: { color: col, symbol: lost.map(function (d) { return d ? "x-thin-open" : "circle"; }),
          size: lost.map(function (d) { return d ? 12 : 6; }), line: { width: 2, color: col } } });
      traces.push({ type: "scatter", mode: "lines+markers", name: entry[0] + " · best", legendgroup: key,
        x: depths, y: of(function (vs) { return pick.apply(null, vs); }, metric),
        line: { color: col, width: 1.5, dash: "dash" }, marker: { color: col, symbol: "star" } });
      traces.push({ type: "scatter", mode: "lines+markers", name: entry[0] + " · train s", legendgroup: key,
        xaxis: "x2", yaxis: "y2", x: depths, y: of(mean, "train_seconds"), line: { color: col, width: 2 },
        marker: { color: col }, showlegend: false });
      traces.push({ type: "scatter", mode: "lines+markers", name: entry[0] + " · compile s", legendgroup: key,
        xaxis: "x2", yaxis: "y2", x: depths, y: of(mean, "compile_seconds"),
        line: { color: col, width: 1.5, dash: "dot" }, marker: { color: col, symbol: "diamond" }, showlegend: false });
    });
    return traces;
  }

  // A point that is one trial (its id in customdata) opens that trial's page when clicked.
  function linkPoints(id, meta) {
    const el = document.getElementById(id);
    if (!el || typeof el.on !== "function") return; // nothing drawn
    el.removeAllListeners("plotly_click"); // a redraw must not stack handlers
    el.on("plotly_click", function (event) {
      const point = event.points && event.points[0];
      if (point && typeof point.customdata === "string") {
        window.location.href = meta.trial_page.replace("TRIAL_ID", encodeURIComponent(point.customdata));
      }
    });
  }

  // ---------------------------------------------------------------- all charts
  let plotted = false; // whether render() has drawn the plotly charts yet
  // brushes and column filters see the value a chart draws (a diverged trial's worst)
  function keeps(t) { return window.DnnFilter.keeps(t, counted); }

  // Every chart from `everything` the page holds; while the parallel coordinates are brushed
  // or the table's columns filtered, the others show only the trials that pass (the parallel
  // chart shows them all, with its brushes on). `plotlyOnly`: the first drawing of the plotly
  // charts, once plotly.js has run (nothing when one drew them already); the parallel
  // coordinates, drawn from the same trials, are left as they are.
  function render(everything, meta, choice, plotlyOnly) {
    if (plotlyOnly && plotted) return;
    prepare(everything, meta);
    const brushed = window.DnnFilter.active();
    const all = brushed ? everything.filter(keeps) : everything;
    // the trials every analysis chart counts (outcomes.js): complete, pruned and diverged
    const done = all.filter(O.counts);
    const over = everything.length > 0 && everything.every(function (t) { return FINISHED.has(t.state); });
    const waiting = brushed ? "No trial passes the filters (the parallel coordinates' brushes, the table's column filters)"
      : over ? "No trial finished with a value: nothing to plot" : "Waiting for the first trial to finish…";
    const x = choice.x, y = choice.y, group = choice.group || null;
    const objective = meta.objective || { metric: y, mode: "max" };
    // the metric's direction: the objective's for it, else the vocabulary's
    const yMode = y === objective.metric ? objective.mode : P.direction(y);
    const xs = done.filter(function (t) { return isNumber(counted(t, y)); }).map(function (t) { return t.params[x]; });
    const xAxis = P.axisFor(x, xs);
    const grouped = group ? " by " + P.label(group) : "";
    const nDiverged = done.filter(O.diverged).length;
    const asWorst = nDiverged ? nDiverged + " diverged" + (O.voids(y) ? ", ✕ at the worst" : ", ✕") : "";

    // the parallel coordinates draw every trial, brushes on (no plotly.js needed)
    if (!plotlyOnly) drawParallel(everything, meta, choice.varied, y, waiting);
    if (typeof Plotly === "undefined") return;
    const varied = choice.varied;
    const charts = function () {
      P.draw("chart-accuracy", byXTraces(done, x, y, group), P.layout({
        title: P.label(y) + " vs " + P.label(x) + grouped + " (mean ± sd" + (asWorst ? "; " + asWorst : "") + ")", xaxis: xAxis,
        yaxis: { title: { text: P.label(y) }, type: choice.logY ? "log" : "linear" } }), waiting);
      P.draw("chart-time", byXTraces(done, x, "train_seconds", group), P.layout({
        title: "Training time per trial vs " + P.label(x) + grouped + (nDiverged ? " (" + nDiverged + " diverged, ✕)" : ""),
        xaxis: xAxis, yaxis: { title: { text: "seconds" }, rangemode: "tozero" } }), waiting);

      // learning curves; with ASHA pruning the rungs are marked and pruned trials dotted
      const search = meta.search || { prunes: false, rungs: [] };
      // a trial that diverged in its first epoch has no curve, and still its ✕
      const withHistory = all.filter(function (t) { return (t.history && t.history.length) || O.diverged(t); });
      const curveMetric = choice.curveMetric;
      const curves = curveMetric ? curveTraces(withHistory, curveMetric, group, choice) : [];
      const epochs = curves.reduce(function (a, trace) { return a.concat(trace.x); }, []);
      const rungLines = (search.rungs || []).map(function (r) {
        return { type: "line", xref: "x", yref: "paper", x0: r, x1: r, y0: 0, y1: 1, line: { color: "#999", width: 1, dash: "dash" } };
      });
      const nPruned = all.filter(O.pruned).length;
      const curvesDiverged = withHistory.filter(O.diverged).length;
      const what = choice.mode === "trials" ? withHistory.length + " trials" : "mean ± sd of " + withHistory.length + " trials";
      const curveTitle = (search.prunes ? "Rung chart: " : "Learning curves: ") + P.label(curveMetric || "") +
        (search.prunes ? " by epoch" : "") + grouped +
        " (" + what + (search.prunes ? "; rungs dashed, " + nPruned + " pruned" : "") +
        (curvesDiverged ? "; " + curvesDiverged + " diverged, red dotted, ending in ✕" : "") + ")";
      P.draw("chart-curves", curves, P.layout({ title: curveTitle, shapes: rungLines,
        xaxis: epochs.length ? P.integerAxis(epochs.concat(search.rungs || []), "epoch") : {},
        yaxis: Object.assign({ title: { text: P.label(curveMetric || "") }, type: choice.logY ? "log" : "linear" },
          choice.logY ? {} : curveRange(curves)) }),
      over ? "No learning curve was recorded" : "Waiting for the first epoch…");

      const best = bestSoFar(done, objective.metric, objective.mode);
      P.draw("chart-best", best.traces, P.layout({
        title: (objective.mode === "min" ? "Lowest " : "Highest ") + P.label(objective.metric) + " so far" +
          (best.diverged ? " (" + best.diverged + " diverged, ✕ at the worst)" : ""),
        xaxis: { title: { text: "trials in the order they finished" }, rangemode: "tozero" },
        yaxis: { title: { text: P.label(objective.metric) } } }), waiting);

      const slices = sliceTraces(done, varied, y);
      const cols = Math.min(3, Math.max(1, varied.length));
      const rows = Math.ceil(varied.length / cols);
      P.draw("chart-slice", slices.traces, P.layout(Object.assign({
        title: "Slices: " + P.label(y) + " against each varied parameter" + (asWorst ? " (" + asWorst + ")" : ""),
        grid: { rows: rows, columns: cols, pattern: "independent", xgap: 0.12, ygap: 0.35 },
        height: 120 + 220 * rows, margin: { l: 60, r: 20, t: 48, b: 50 } }, slices.axes)),
      varied.length ? waiting : "The sweep varies no parameter");

      if (varied.indexOf("hidden_layers") >= 0) {
        const depths = xs.length ? done.map(function (t) { return t.params.hidden_layers; }) : [1];
        P.draw("chart-depth", depthProfile(done, y, yMode, varied), P.layout({
          title: "Depth profile: " + P.label(y) + " (mean solid, best dashed" + (asWorst ? "; " + asWorst : "") +
            ") and time per trial (train solid, compile dotted)",
          grid: { rows: 1, columns: 2, pattern: "independent", xgap: 0.12 }, height: 380,
          xaxis: P.integerAxis(depths, "hidden layers"), xaxis2: P.integerAxis(depths, "hidden layers"),
          yaxis: { title: { text: P.label(y) } }, yaxis2: { title: { text: "seconds per trial" }, rangemode: "tozero" } }), waiting);
      } else {
        P.draw("chart-depth", [], null, "Depth profile: this sweep does not vary the number of hidden layers");
      }
      const better = yMode === "min" ? "lowest" : "highest";
      const ranked = window.DnnRankCharts.rankPlot(done, y, yMode, choice.rankColour || null, counted);
      const rankNotes = [];
      if (ranked.pruned) rankNotes.push(ranked.pruned + " pruned, marked x");
      if (ranked.diverged) rankNotes.push(ranked.diverged + " diverged, ✕ at the worst, ranked last");
      P.draw("chart-rank", ranked.traces, P.layout({
        title: "Rank: " + P.label(y) + " of " + ranked.last + " trials (" + ranked.complete + " complete), " + better + " first" +
          (choice.rankColour ? ", coloured by " + P.label(choice.rankColour) : "") +
          (rankNotes.length ? " (" + rankNotes.join("; ") + ")" : ""),
        xaxis: Object.assign(P.integerAxis([1, Math.max(1, ranked.last)], "rank (1 = best)"),
          { range: [0, ranked.last + 1], autorange: false }),
        yaxis: { title: { text: P.label(y) }, type: choice.logY ? "log" : "linear" } }), waiting);

      const ecdfGroup = choice.ecdfGroup || null;
      P.draw("chart-ecdf", window.DnnRankCharts.ecdfTraces(done, y, ecdfGroup, counted), P.layout({
        title: "Distribution of " + P.label(y) + (ecdfGroup ? " by " + P.label(ecdfGroup) : "") +
          " (share of trials at or below" + (nDiverged ? ", diverged ones at the worst" : "") + "; " + better + " is better)",
        xaxis: { title: { text: P.label(y) }, type: choice.logY ? "log" : "linear" },
        yaxis: { title: { text: "share of trials" }, range: [0, 1.05], tickformat: ".0%" } }), waiting);

      window.DnnTimeline.draw(all, choice.timelineRows, brushed ? waiting : over ? "No trial started"
        : "Waiting for the first trial to start…");

      window.DnnImportance.show(meta, y, choice.evaluator, done, counted);
    };
    // every chart drawn or saying why not (the importance of a metric the page's first read
    // did not bring is asked for apart): what a test or a benchmark waits for
    const drawn = function () {
      for (const id of ["chart-slice", "chart-best", "chart-rank", "chart-timeline"]) linkPoints(id, meta);
      document.body.dataset.charts = "drawn";
    };
    // the page's first drawing puts the charts in view first; a later one (a choice, a brush,
    // new trials) draws them all at once
    if (plotted) {
      charts();
      drawn();
    } else {
      plotted = true;
      P.inViewFirst(charts, drawn);
    }
  }

  return { render: render, prepare: prepare, value: value, keeps: keeps };
})();
