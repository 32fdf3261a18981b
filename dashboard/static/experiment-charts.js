// The experiment page's charts, drawn from the trials the page holds and the axes the reader
// chose: a metric against a parameter grouped by another, training time, learning curves
// (grouped, smoothed), best so far, parameter importance, slices, parallel coordinates, the
// depth profile, the rank plot, the metric's distribution and the timeline of the trials.
window.DnnCharts = (function () {
  "use strict";
  const P = window.DnnPlot;
  const V = P.VOCAB, S = V.states;
  const FINISHED = new Set(V.finished);
  // the settings that make a layer design (what the depth profile draws one line for)
  const DESIGN = ["width", "activation", "residual", "residual_learnable", "normalization", "norm_position",
    "init", "dropout"];
  const MAX_GROUPS = 24;
  const DIVERGED_COLOUR = "#c0392b";

  function value(t, key) {
    if (t.metrics && t.metrics[key] !== undefined) return t.metrics[key];
    if (key in t && key !== "params" && key !== "metrics") return t[key];
    return t.params[key];
  }

  function groupName(group, t) { return group ? P.label(group) + " " + P.fmt(t.params[group]) : "all"; }

  // Mean ± sd of `y` at each value of `x`, one series per group.
  function byXTraces(done, x, y, group) {
    const rows = done.filter(function (t) {
      const v = value(t, y);
      return typeof v === "number" && Number.isFinite(v) && t.params[x] !== undefined;
    });
    const groups = P.groupBy(rows, function (t) { return group ? t.params[group] : null; });
    return groups.map(function (entry, i) {
      const byX = P.groupBy(entry[1], function (t) { return t.params[x]; });
      const stats = byX.map(function (e) { return P.meanStd(e[1].map(function (t) { return value(t, y); })); });
      return {
        type: "scatter", mode: "lines+markers", name: groupName(group, entry[1][0]),
        x: byX.map(function (e) { return e[0]; }), y: stats.map(function (s) { return s[0]; }),
        error_y: { type: "data", symmetric: false, visible: true,
          array: stats.map(function (s) { return P.band(s[0], s[1], y)[1]; }),
          arrayminus: stats.map(function (s) { return P.band(s[0], s[1], y)[0]; }) },
        text: byX.map(function (e) { return e[1].length + " trial(s)"; }),
        line: { color: P.colour(i) }, marker: { color: P.colour(i) }, legendgroup: String(entry[0]),
      };
    });
  }

  // Diverged trials have no value to plot: each x where some diverged gets a red mark at the
  // foot of the chart with their count (by group on hover), rather than the trials vanishing.
  // `axis` is the x axis (a log axis places annotations by log10), `ref` its name ("x2").
  function divergedMarks(diverged, x, group, axis, ref) {
    const byX = P.groupBy(diverged.filter(function (t) { return t.params[x] !== undefined; }),
      function (t) { return t.params[x]; });
    const suffix = (ref || "x").slice(1);
    return byX.map(function (entry) {
      const v = entry[0];
      const at = axis.type === "log" ? Math.log10(v) : typeof v === "number" ? v : P.fmt(v);
      const groups = P.groupBy(entry[1], function (t) { return group ? t.params[group] : null; });
      return { x: at, xref: ref || "x", yref: "y" + suffix + " domain", y: 0, yanchor: "bottom", showarrow: false,
        text: "✕ " + entry[1].length + " diverged", font: { color: DIVERGED_COLOUR, size: 11 }, captureevents: true,
        hovertext: groups.map(function (g) { return groupName(group, g[1][0]) + ": " + g[1].length; }).join("<br>") };
    });
  }

  // Learning curves: per group the mean over its trials at each epoch with a ± sd band, or
  // every trial as a thin line coloured by its group; clicking a legend entry hides a group.
  // Few trials and no grouping: each trial is its own series, named by what varies.
  function curveTraces(list, metric, group, opts) {
    const traces = [];
    const alone = !group && opts.mode === "trials" && list.length <= MAX_GROUPS;
    const named = function (t) {
      const keys = opts.varied.filter(function (p) { return p !== group; });
      return keys.map(function (p) { return P.label(p) + " " + P.fmt(t.params[p]); }).join(", ") || "trial";
    };
    const groups = P.groupBy(list, alone ? named : function (t) { return group ? t.params[group] : null; });
    groups.forEach(function (entry, i) {
      const col = P.colour(i), key = "g" + i;
      const name = alone ? entry[0] : groupName(group, entry[1][0]);
      if (opts.mode === "trials") {
        entry[1].forEach(function (t, j) {
          const pruned = t.state === S.PRUNED, diverged = t.state === S.DIVERGED;
          // a trial pruned at the first rung has one point: a line alone would not show it
          const marked = pruned || t.history.length < 2;
          traces.push({ type: "scatter", mode: marked ? "lines+markers" : "lines", name: name, legendgroup: key,
            showlegend: j === 0, marker: { size: pruned ? 5 : 4, symbol: pruned ? "x" : "circle" },
            x: t.history.map(function (h) { return h.epoch; }),
            y: P.smooth(t.history.map(function (h) { return h[metric]; }), opts.smoothing),
            line: { color: diverged ? DIVERGED_COLOUR : col, width: pruned ? 1 : 1.3,
              dash: pruned || diverged ? "dot" : "solid" },
            opacity: t.state === S.RUNNING ? 1 : pruned ? 0.5 : 0.6, meta: t.state,
            hovertemplate: named(t) + " (" + t.state.toLowerCase() + ")<br>epoch %{x}: %{y:.4g}<extra></extra>" });
        });
        return;
      }
      // a diverged trial's losses (1e9 and up) would be the mean: it is counted, not averaged
      const nDiverged = entry[1].filter(function (t) { return t.state === S.DIVERGED; }).length;
      const byEpoch = new Map();
      for (const t of entry[1]) {
        if (t.state === S.DIVERGED) continue;
        const ys = P.smooth(t.history.map(function (h) { return h[metric]; }), opts.smoothing);
        t.history.forEach(function (h, k) {
          if (typeof ys[k] !== "number" || !Number.isFinite(ys[k])) return;
          if (!byEpoch.has(h.epoch)) byEpoch.set(h.epoch, []);
          byEpoch.get(h.epoch).push(ys[k]);
        });
      }
      const epochs = Array.from(byEpoch.keys()).sort(function (a, b) { return a - b; });
      const stats = epochs.map(function (e) { return P.meanStd(byEpoch.get(e)); });
      const lower = stats.map(function (s) { return s[0] - P.band(s[0], s[1], metric)[0]; });
      const upper = stats.map(function (s) { return s[0] + P.band(s[0], s[1], metric)[1]; });
      traces.push({ type: "scatter", mode: "lines", x: epochs.concat(epochs.slice().reverse()),
        y: upper.concat(lower.slice().reverse()), fill: "toself", fillcolor: P.rgba(col, 0.15),
        line: { width: 0 }, hoverinfo: "skip", legendgroup: key, showlegend: false, name: name + " ± sd" });
      traces.push({ type: "scatter", mode: "lines", legendgroup: key,
        name: name + " (" + (entry[1].length - nDiverged) + (nDiverged ? ", " + nDiverged + " diverged not in the mean" : "") + ")",
        x: epochs, y: stats.map(function (s) { return s[0]; }), line: { color: col, width: 2 } });
    });
    return traces;
  }

  // The y range of the curves of every trial but those in `state` (a diverged trial's 1e9
  // would flatten every other curve to a line), or {} to let plotly choose when none is.
  function rangeWithout(list, metric, state) {
    if (!list.some(function (t) { return t.state === state; })) return {};
    const ys = [];
    for (const t of list) {
      if (t.state === state) continue;
      for (const h of t.history) if (typeof h[metric] === "number" && Number.isFinite(h[metric])) ys.push(h[metric]);
    }
    if (!ys.length) return {};
    const lo = Math.min.apply(null, ys), hi = Math.max.apply(null, ys), pad = (hi - lo) * 0.05 || Math.abs(hi) * 0.05 || 1;
    return { range: [lo - pad, hi + pad], autorange: false };
  }

  // Best so far against the trials in the order they finished (1, 2, …): reused trials
  // finished before this experiment began, so time since submission would run negative.
  // Diverged trials take their place in the order, marked at the foot, with no value.
  function bestSoFar(finished, metric, mode) {
    const better = mode === "min" ? function (a, b) { return a < b; } : function (a, b) { return a > b; };
    const inOrder = finished.filter(function (t) {
      return t.state === S.DIVERGED || (t.state === V.scored && typeof t.metrics[metric] === "number");
    }).sort(function (a, b) { return (a.finished_at || 0) - (b.finished_at || 0) || P.compare(a.id, b.id); });
    const stepX = [], stepY = [], doneX = [], doneY = [], doneIds = [], marks = [];
    let best = null;
    inOrder.forEach(function (t, i) {
      if (t.state === S.DIVERGED) {
        marks.push({ x: i + 1, xref: "x", yref: "paper", y: 0, yanchor: "bottom", showarrow: false, text: "✕",
          font: { color: DIVERGED_COLOUR, size: 12 }, captureevents: true, hovertext: "trial " + (i + 1) + " diverged" });
        return;
      }
      const v = t.metrics[metric];
      if (best === null || better(v, best)) best = v;
      doneX.push(i + 1); doneY.push(v); doneIds.push(t.id);
      stepX.push(i + 1); stepY.push(best);
    });
    return { marks: marks, traces: doneX.length ? [
      { type: "scatter", mode: "markers", name: "completed trial", marker: { size: 5, color: "#bbb" }, x: doneX, y: doneY,
        customdata: doneIds, hovertemplate: "trial %{x}: %{y:.4g}<br>click: its trial<extra></extra>" },
      { type: "scatter", mode: "lines", name: "best so far", line: { shape: "hv", width: 2 }, x: stepX, y: stepY },
    ] : [] };
  }

  // One small chart per varied parameter: the metric of every complete trial against it, and
  // where trials diverged a count at the foot of the panel (the values that decide divergence
  // show even when no trial at them trained).
  function sliceTraces(done, varied, y, diverged) {
    const pts = done.filter(function (t) { return typeof value(t, y) === "number"; });
    const axes = {};
    let marks = [];
    const traces = varied.map(function (p, i) {
      const suffix = i ? String(i + 1) : "";
      const all = pts.concat(diverged).map(function (t) { return t.params[p]; });
      const axis = diverged.length ? P.spanAxis(P.axisFor(p, all), all) : P.axisFor(p, all);
      axes["xaxis" + suffix] = Object.assign(axis, { title: { text: P.label(p), standoff: 2 } });
      axes["yaxis" + suffix] = { title: { text: i ? "" : P.label(y) } };
      marks = marks.concat(divergedMarks(diverged, p, null, axis, "x" + suffix).map(function (m) {
        return Object.assign(m, { text: "✕ " + m.text.split(" ")[1] });
      }));
      return { type: "scatter", mode: "markers", name: P.label(p), xaxis: "x" + suffix, yaxis: "y" + suffix,
        x: pts.map(function (t) { return typeof t.params[p] === "boolean" || t.params[p] === null ? String(t.params[p]) : t.params[p]; }),
        y: pts.map(function (t) { return value(t, y); }), customdata: pts.map(function (t) { return t.id; }),
        hovertemplate: "%{x}: %{y:.4g}<br>click: its trial<extra></extra>",
        marker: { size: 6, opacity: 0.6, color: P.colour(i) }, showlegend: false };
    });
    return { traces: pts.length ? traces : [], axes: axes, marks: marks };
  }

  // The parallel coordinates of every complete trial; brushing an axis filters the table and
  // the other charts (trial-filter.js), so each axis is described in `parallelInfos` for it.
  let parallelInfos = [];
  function parallelTraces(done, varied, y) {
    const pts = done.filter(function (t) { return typeof value(t, y) === "number"; });
    const infos = [];
    const dims = varied.map(function (p) {
      const raw = pts.map(function (t) { return t.params[p]; });
      if (raw.every(function (v) { return typeof v === "number"; })) {
        const distinct = Array.from(new Set(raw)).sort(function (a, b) { return a - b; });
        const lo = distinct[0], hi = distinct[distinct.length - 1];
        const log = lo > 0 && hi / lo > 10;
        const dim = { label: P.label(p) + (log ? " (log)" : ""), values: raw.map(log ? Math.log10 : Number) };
        if (distinct.length <= 10) {
          dim.tickvals = distinct.map(log ? Math.log10 : Number);
          dim.ticktext = distinct.map(P.fmt);
        } else if (log) { // the axis holds log10 values: label its decades with real ones
          Object.assign(dim, P.logTicks(lo, hi));
        }
        infos.push({ key: p, log: log, categories: null });
        return dim;
      }
      const values = Array.from(new Set(raw.map(String))).sort();
      infos.push({ key: p, log: false, categories: values });
      return { label: P.label(p), values: raw.map(function (v) { return values.indexOf(String(v)); }),
        tickvals: values.map(function (_, i) { return i; }), ticktext: values };
    });
    dims.push({ label: P.label(y), values: pts.map(function (t) { return value(t, y); }) });
    infos.push({ key: y, log: false, categories: null });
    dims.forEach(function (d, i) {
      const range = window.DnnFilter.constraint(infos[i]);
      if (range) d.constraintrange = range;
    });
    parallelInfos = infos;
    return pts.length ? [{ type: "parcoords", dimensions: dims, labelangle: 0, labelside: "top",
      tickfont: { size: 11, shadow: "auto" },
      line: { color: pts.map(function (t) { return value(t, y); }), colorscale: "Viridis", showscale: true,
        reversescale: P.direction(y) === "min", // the better end is the bright one
        colorbar: { thickness: 12, x: 1.04 } } }] : [];
  }

  // A drag on an axis restyles the chart: read the brushes back from it.
  function listenForBrushes() {
    const el = document.getElementById("chart-parallel");
    if (!el || typeof el.on !== "function") return;
    el.removeAllListeners("plotly_restyle");
    el.on("plotly_restyle", function () { window.DnnFilter.read(el.data[0].dimensions, parallelInfos); });
  }

  // Depth profile: for each layer design the best and the mean of the metric against depth
  // (left), and the mean compile and training time per trial against depth (right).
  function depthProfile(done, metric, mode, varied) {
    const designKeys = DESIGN.filter(function (k) { return varied.indexOf(k) >= 0; });
    const rows = done.filter(function (t) { return typeof value(t, metric) === "number"; });
    const designOf = function (t) {
      return designKeys.length ? designKeys.map(function (k) { return P.label(k) + " " + P.fmt(t.params[k]); }).join(", ") : "all";
    };
    const traces = [];
    P.groupBy(rows, designOf).forEach(function (entry, i) {
      const col = P.colour(i), key = "d" + i;
      const byDepth = P.groupBy(entry[1], function (t) { return t.params.hidden_layers; });
      const depths = byDepth.map(function (e) { return e[0]; });
      const pick = mode === "min" ? Math.min : Math.max;
      const of = function (fn, k) { return byDepth.map(function (e) { return fn(e[1].map(function (t) { return value(t, k); }).filter(function (v) { return typeof v === "number"; })); }); };
      const mean = function (vs) { return vs.length ? P.meanStd(vs)[0] : null; };
      traces.push({ type: "scatter", mode: "lines+markers", name: entry[0] + " · mean", legendgroup: key,
        x: depths, y: of(mean, metric), line: { color: col, width: 2 }, marker: { color: col } });
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

  const isNumber = function (v) { return typeof v === "number" && Number.isFinite(v); };

  // Colours for a parameter's values: a legend entry per value while there are few, else
  // one colour scale (log10 for positive values spanning more than a decade). Returns
  // { discrete: [[value, trials], …] } or { scale: marker fields for one trace }.
  function colourBy(list, key) {
    const values = list.map(function (t) { return t.params[key]; });
    const distinct = new Set(values.map(function (v) { return JSON.stringify(v); }));
    if (distinct.size <= 10 || !values.every(isNumber)) {
      return { discrete: P.groupBy(list, function (t) { return t.params[key]; }) };
    }
    const lo = Math.min.apply(null, values), hi = Math.max.apply(null, values);
    const log = lo > 0 && hi / lo > 10;
    const bar = Object.assign({ thickness: 12, title: { text: P.label(key), side: "right" } },
      log ? P.logTicks(lo, hi) : {});
    return { scale: { color: values.map(log ? Math.log10 : Number), colorscale: "Viridis", showscale: true,
      colorbar: bar } };
  }

  // Rank plot: the metric of every finished trial against its rank, best first, coloured by
  // a parameter. Complete trials are ranked first; pruned ones (stopped early, so their
  // value is not comparable) after them, marked x; diverged ones (no value) last, marked ✕
  // at the foot as the other charts mark them.
  function rankPlot(all, y, mode, key) {
    const order = function (a, b) {
      return (mode === "min" ? value(a, y) - value(b, y) : value(b, y) - value(a, y)) || P.compare(a.id, b.id);
    };
    const complete = all.filter(function (t) { return t.state === V.scored && isNumber(value(t, y)); }).sort(order);
    const pruned = all.filter(function (t) { return t.state === S.PRUNED && isNumber(value(t, y)); }).sort(order);
    const diverged = all.filter(function (t) { return t.state === S.DIVERGED; });
    const rankOf = new Map(complete.concat(pruned).map(function (t, i) { return [t.id, i + 1]; }));
    const points = function (list, extra) {
      return Object.assign({ type: "scatter", mode: "markers", x: list.map(function (t) { return rankOf.get(t.id); }),
        y: list.map(function (t) { return value(t, y); }), customdata: list.map(function (t) { return t.id; }),
        hovertemplate: "rank %{x}: %{y:.4g}<br>click: its trial<extra>%{fullData.name}</extra>" }, extra);
    };
    const traces = [];
    const colours = key && complete.length ? colourBy(complete, key) : null;
    if (colours && colours.discrete) {
      colours.discrete.forEach(function (entry, i) {
        traces.push(points(entry[1], { name: groupName(key, entry[1][0]), marker: { size: 7, color: P.colour(i) } }));
      });
    } else if (complete.length) {
      traces.push(points(complete, { name: "complete trial",
        marker: Object.assign({ size: 7, color: P.colour(0) }, colours ? colours.scale : {}) }));
    }
    if (pruned.length) {
      traces.push(points(pruned, { name: "pruned (" + pruned.length + ", ranked after the complete)",
        marker: { size: 8, symbol: "x", color: "#d9a441" } }));
    }
    const last = complete.length + pruned.length;
    const marks = diverged.map(function (t, i) {
      return { x: last + i + 1, xref: "x", yref: "paper", y: 0, yanchor: "bottom", showarrow: false, text: "✕",
        font: { color: DIVERGED_COLOUR, size: 12 }, captureevents: true, hovertext: "diverged: no " + P.label(y) };
    });
    return { traces: traces, marks: marks, complete: complete.length, pruned: pruned.length,
      diverged: diverged.length, last: last + diverged.length };
  }

  // Empirical distribution of the metric: for each value of `group` the share of its complete
  // trials at or below each value (one step per trial); diverged trials are counted by name.
  function ecdfTraces(done, y, group, diverged) {
    const rows = done.filter(function (t) { return isNumber(value(t, y)); });
    const key = function (t) { return group ? t.params[group] : null; };
    const lost = new Map(P.groupBy(diverged, key));
    return P.groupBy(rows, key).map(function (entry, i) {
      const vs = entry[1].map(function (t) { return value(t, y); }).sort(function (a, b) { return a - b; });
      const k = (lost.get(entry[0]) || []).length;
      return { type: "scatter", mode: "lines+markers", line: { shape: "hv", color: P.colour(i), width: 2 },
        marker: { size: 4, color: P.colour(i) }, x: vs, y: vs.map(function (_, j) { return (j + 1) / vs.length; }),
        name: groupName(group, entry[1][0]) + " (" + vs.length + (k ? ", " + k + " diverged not drawn" : "") + ")",
        hovertemplate: "%{x:.4g}: %{y:.0%} at or below<extra>%{fullData.name}</extra>" };
    });
  }

  // Timeline colours: the progress bar's (style.css .seg-*), a failure darker than a divergence.
  const STATE_COLOURS = { COMPLETE: "#2fa862", PRUNED: "#d9a441", DIVERGED: "#d0493a", FAILED: "#7b241c",
    CANCELLED: "#b8bdc8", RUNNING: "#4b8df8", QUEUED: "#e8ebf2" };

  // A time as plotly's date axis reads it, in the reader's time zone (plotly shows it as given).
  function localDate(ms) {
    const d = new Date(ms), two = function (n) { return String(n).padStart(2, "0"); };
    return d.getFullYear() + "-" + two(d.getMonth() + 1) + "-" + two(d.getDate()) + " " + two(d.getHours()) + ":" +
      two(d.getMinutes()) + ":" + two(d.getSeconds()) + "." + String(d.getMilliseconds()).padStart(3, "0");
  }

  // Timeline: a bar per trial from its start to its end (a running trial's to now), coloured
  // by state, a row per trial in the order they started or a row per worker (bars of one
  // pack overlap there): the workers' parallelism, the gaps and the reruns (outlined).
  function timeline(all, rowsBy, now) {
    const started = all.filter(function (t) { return isNumber(t.started_at); }).sort(function (a, b) {
      return a.started_at - b.started_at || P.compare(a.id, b.id);
    });
    const endOf = function (t) { return isNumber(t.finished_at) ? t.finished_at : Math.max(now, t.started_at); };
    const row = new Map(started.map(function (t, i) { return [t.id, rowsBy === "workers" ? String(t.worker || "?") : i + 1]; }));
    const traces = P.groupBy(started, function (t) { return t.state; }).map(function (entry) {
      const list = entry[1];
      return { type: "bar", orientation: "h", name: entry[0].toLowerCase() + " (" + list.length + ")",
        base: list.map(function (t) { return localDate(t.started_at * 1000); }),
        x: list.map(function (t) { return Math.max(1, (endOf(t) - t.started_at) * 1000); }),
        y: list.map(function (t) { return row.get(t.id); }), customdata: list.map(function (t) { return t.id; }),
        text: list.map(function (t) {
          return (t.worker || "?") + ", " + P.fmt(endOf(t) - t.started_at) + " s" + (t.attempts > 1 ? ", attempt " + t.attempts : "");
        }),
        textposition: "none", opacity: rowsBy === "workers" ? 0.6 : 1,
        marker: { color: STATE_COLOURS[entry[0]] || "#999",
          line: { color: "#222", width: list.map(function (t) { return t.attempts > 1 ? 1.5 : 0; }) } },
        hovertemplate: "%{customdata}<br>%{text}<br>click: its trial<extra>%{fullData.name}</extra>" };
    });
    // the most trials running at once: +1 at each start, -1 at each end, ends first on a tie
    const events = [];
    for (const t of started) { events.push([t.started_at, 1]); events.push([endOf(t), -1]); }
    events.sort(function (a, b) { return a[0] - b[0] || a[1] - b[1]; });
    let running = 0, most = 0;
    for (const e of events) { running += e[1]; most = Math.max(most, running); }
    return { traces: traces, rows: rowsBy === "workers" ? new Set(row.values()).size : started.length, most: most,
      workers: new Set(started.map(function (t) { return t.worker; })).size,
      reruns: started.filter(function (t) { return t.attempts > 1; }).length,
      waiting: all.length - started.length };
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
  function keeps(t) { return window.DnnFilter.keeps(t, value); }

  // Every chart from `everything` the page holds; while the parallel coordinates are brushed
  // or the table's columns filtered, the others show only the trials that pass (the parallel
  // chart shows them all, with its brushes on).
  function render(everything, meta, choice) {
    if (typeof Plotly === "undefined") return;
    const brushed = window.DnnFilter.active();
    const all = brushed ? everything.filter(keeps) : everything;
    const done = all.filter(function (t) { return t.state === V.scored; });
    const over = everything.length > 0 && everything.every(function (t) { return FINISHED.has(t.state); });
    const waiting = brushed ? "No trial passes the filters (the parallel coordinates' brushes, the table's column filters)"
      : over ? "No trial completed: nothing to plot" : "Waiting for the first trial to finish…";
    const x = choice.x, y = choice.y, group = choice.group || null;
    const xs = done.map(function (t) { return t.params[x]; });
    const diverged = all.filter(function (t) { return t.state === S.DIVERGED; });
    // the x axis spans the values where trials diverged too, so their marks show
    const spanned = xs.concat(diverged.map(function (t) { return t.params[x]; }).filter(function (v) { return v !== undefined; }));
    const xAxis = diverged.length ? P.spanAxis(P.axisFor(x, spanned), spanned) : P.axisFor(x, xs);
    const grouped = group ? " by " + P.label(group) : "";

    // The parallel coordinates first: they are WebGL on three canvases, and plotly waits for
    // the first two to draw; without a GPU the last one's shaders compile in the GPU process
    // for a few hundred ms, while the SVG charts after it are drawn.
    const varied = choice.varied;
    const dims = varied.filter(function (p) { return p !== "seed"; });
    const allDone = everything.filter(function (t) { return t.state === V.scored; });
    P.draw("chart-parallel", parallelTraces(allDone, dims.length ? dims : varied, y),
      P.layout({ title: "Parameters → " + P.label(y) + " (drag along an axis to filter the table and charts)" + (diverged.length ? " (" + diverged.length +
        " diverged trials have no value to draw: the slices mark them)" : ""), margin: { l: 60, r: 90, t: 90, b: 30 } }), waiting);

    const divergedText = diverged.length ? "; " + diverged.length + " diverged, marked ✕" : "";
    P.draw("chart-accuracy", byXTraces(done, x, y, group), P.layout({
      title: P.label(y) + " vs " + P.label(x) + grouped + " (mean ± sd" + divergedText + ")", xaxis: xAxis,
      annotations: divergedMarks(diverged, x, group, xAxis, "x"),
      yaxis: { title: { text: P.label(y) }, type: choice.logY ? "log" : "linear" } }), waiting);
    P.draw("chart-time", byXTraces(done, x, "train_seconds", group), P.layout({
      title: "Training time per trial vs " + P.label(x) + grouped, xaxis: xAxis,
      yaxis: { title: { text: "seconds" }, rangemode: "tozero" } }), waiting);

    // learning curves; with ASHA pruning the rungs are marked and pruned trials dotted
    const search = meta.search || { prunes: false, rungs: [] };
    const withHistory = all.filter(function (t) { return t.history && t.history.length; });
    const curveMetric = choice.curveMetric;
    const curves = curveMetric ? curveTraces(withHistory, curveMetric, group, choice) : [];
    const epochs = withHistory.reduce(function (a, t) { return a.concat(t.history.map(function (h) { return h.epoch; })); }, []);
    const rungLines = (search.rungs || []).map(function (r) {
      return { type: "line", xref: "x", yref: "paper", x0: r, x1: r, y0: 0, y1: 1, line: { color: "#999", width: 1, dash: "dash" } };
    });
    const nPruned = all.filter(function (t) { return t.state === S.PRUNED; }).length;
    const what = choice.mode === "trials" ? withHistory.length + " trials" : "mean ± sd of " + withHistory.length + " trials";
    const curveTitle = (search.prunes ? "Rung chart: " : "Learning curves: ") + P.label(curveMetric || "") +
      (search.prunes ? " by epoch" : "") + grouped +
      " (" + what + (search.prunes ? "; rungs dashed, " + nPruned + " pruned" : "") + ")";
    P.draw("chart-curves", curves, P.layout({ title: curveTitle, shapes: rungLines,
      xaxis: epochs.length ? P.integerAxis(epochs.concat(search.rungs || []), "epoch") : {},
      yaxis: Object.assign({ title: { text: P.label(curveMetric || "") }, type: choice.logY ? "log" : "linear" },
        choice.logY ? {} : rangeWithout(withHistory, curveMetric, S.DIVERGED)) }),
    over ? "No learning curve was recorded" : "Waiting for the first epoch…");

    const objective = meta.objective || { metric: y, mode: "max" };
    const best = bestSoFar(all, objective.metric, objective.mode);
    P.draw("chart-best", best.traces, P.layout({
      title: (objective.mode === "min" ? "Lowest " : "Highest ") + P.label(objective.metric) + " so far" +
        (best.marks.length ? " (" + best.marks.length + " diverged, marked ✕)" : ""),
      xaxis: { title: { text: "trials in the order they finished" }, rangemode: "tozero" }, annotations: best.marks,
      yaxis: { title: { text: P.label(objective.metric) } } }), waiting);

    const slices = sliceTraces(done, varied, y, diverged);
    const cols = Math.min(3, Math.max(1, varied.length));
    const rows = Math.ceil(varied.length / cols);
    P.draw("chart-slice", slices.traces, P.layout(Object.assign({
      title: "Slices: " + P.label(y) + " against each varied parameter" + (diverged.length ? " (✕: trials diverged there)" : ""),
      annotations: slices.marks,
      grid: { rows: rows, columns: cols, pattern: "independent", xgap: 0.12, ygap: 0.35 },
      height: 120 + 220 * rows, margin: { l: 60, r: 20, t: 48, b: 50 } }, slices.axes)),
    varied.length ? waiting : "The sweep varies no parameter");

    if (varied.indexOf("hidden_layers") >= 0) {
      const mode = y === objective.metric ? objective.mode : (/accuracy$/.test(y) ? "max" : "min");
      const profile = depthProfile(done, y, mode, varied);
      P.draw("chart-depth", profile, P.layout({
        title: "Depth profile: " + P.label(y) + " (mean solid, best dashed) and time per trial (train solid, compile dotted)",
        grid: { rows: 1, columns: 2, pattern: "independent", xgap: 0.12 }, height: 380,
        xaxis: P.integerAxis(xs.length ? done.map(function (t) { return t.params.hidden_layers; }) : [1], "hidden layers"),
        xaxis2: P.integerAxis(xs.length ? done.map(function (t) { return t.params.hidden_layers; }) : [1], "hidden layers"),
        yaxis: { title: { text: P.label(y) } }, yaxis2: { title: { text: "seconds per trial" }, rangemode: "tozero" } }), waiting);
    } else {
      P.draw("chart-depth", [], null, "Depth profile: this sweep does not vary the number of hidden layers");
    }
    // the metric's direction: the objective's for it, else the vocabulary's
    const yMode = y === objective.metric ? objective.mode : P.direction(y);
    const better = yMode === "min" ? "lowest" : "highest";
    const ranked = rankPlot(all, y, yMode, choice.rankColour || null);
    const rankNotes = [];
    if (ranked.pruned) rankNotes.push(ranked.pruned + " pruned, marked x");
    if (ranked.diverged) rankNotes.push(ranked.diverged + " diverged, marked ✕");
    P.draw("chart-rank", ranked.traces, P.layout({
      title: "Rank: " + P.label(y) + " of " + ranked.complete + " complete trials, " + better + " first" +
        (choice.rankColour ? ", coloured by " + P.label(choice.rankColour) : "") +
        (rankNotes.length ? " (" + rankNotes.join("; ") + ")" : ""),
      annotations: ranked.marks,
      xaxis: Object.assign(P.integerAxis([1, Math.max(1, ranked.last)], "rank (1 = best)"),
        { range: [0, ranked.last + 1], autorange: false }),
      yaxis: { title: { text: P.label(y) }, type: choice.logY ? "log" : "linear" } }), waiting);

    const ecdfGroup = choice.ecdfGroup || null;
    P.draw("chart-ecdf", ecdfTraces(done, y, ecdfGroup, diverged), P.layout({
      title: "Distribution of " + P.label(y) + (ecdfGroup ? " by " + P.label(ecdfGroup) : "") +
        " (share of complete trials at or below; " + better + " is better)",
      xaxis: { title: { text: P.label(y) }, type: choice.logY ? "log" : "linear" },
      yaxis: { title: { text: "share of trials" }, range: [0, 1.05], tickformat: ".0%" } }), waiting);

    const lanes = choice.timelineRows === "workers" ? "workers" : "trials";
    const times = timeline(all, lanes, Date.now() / 1000);
    P.draw("chart-timeline", times.traces, P.layout({
      title: "Timeline: " + (times.rows === 1 && lanes === "trials" ? "1 trial" : times.rows + " " + lanes) +
        " from start to end by state (" + times.workers + " worker" + (times.workers === 1 ? "" : "s") + ", at most " +
        times.most + " trials at once" + (times.reruns ? "; " + times.reruns + " rerun, outlined" : "") +
        (times.waiting ? "; " + times.waiting + " not started" : "") + ")",
      barmode: "overlay", height: Math.min(900, Math.max(370, 140 + (lanes === "workers" ? 40 : 8) * times.rows)),
      xaxis: { type: "date", title: { text: "time" } },
      yaxis: lanes === "workers" ? { title: { text: "worker" }, type: "category" }
        : { title: { text: "trials in the order they started" }, autorange: "reversed", type: "linear" } }),
    brushed ? waiting : over ? "No trial started" : "Waiting for the first trial to start…");

    for (const id of ["chart-slice", "chart-best", "chart-rank", "chart-timeline"]) linkPoints(id, meta);
    listenForBrushes();
    window.DnnImportance.show(meta, y, choice.evaluator, done, value);
  }

  return { render: render, value: value, keeps: keeps };
})();
