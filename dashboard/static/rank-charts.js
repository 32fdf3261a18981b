// The experiment page's charts of the metric's spread over the trials: the rank plot and the
// empirical distribution. valueOf(t, key) is the value a trial counts with (outcomes.js: a
// diverged trial's is the worst), as the other charts count it.
window.DnnRankCharts = (function () {
  "use strict";
  const P = window.DnnPlot, O = window.DnnOutcomes;
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

  // Rank plot: the metric of every counted trial against its rank, best first, coloured by
  // a parameter. Complete trials are ranked first; pruned ones (stopped early, so their
  // value is not comparable) after them, marked x; diverged ones last, ✕ at the worst value.
  function rankPlot(list, y, mode, key, valueOf) {
    const order = function (a, b) {
      return (mode === "min" ? valueOf(a, y) - valueOf(b, y) : valueOf(b, y) - valueOf(a, y)) || P.compare(a.id, b.id);
    };
    const valued = list.filter(function (t) { return isNumber(valueOf(t, y)); });
    const complete = valued.filter(function (t) { return !O.pruned(t) && !O.diverged(t); }).sort(order);
    const pruned = valued.filter(O.pruned).sort(order);
    const diverged = valued.filter(O.diverged).sort(order);
    const rankOf = new Map(complete.concat(pruned, diverged).map(function (t, i) { return [t.id, i + 1]; }));
    const points = function (ts, extra) {
      return Object.assign({ type: "scatter", mode: "markers", x: ts.map(function (t) { return rankOf.get(t.id); }),
        y: ts.map(function (t) { return valueOf(t, y); }), customdata: ts.map(function (t) { return t.id; }),
        hovertemplate: "rank %{x}: %{y:.4g}<br>click: its trial<extra>%{fullData.name}</extra>" }, extra);
    };
    const traces = [];
    const colours = key && complete.length ? colourBy(complete, key) : null;
    if (colours && colours.discrete) {
      colours.discrete.forEach(function (entry, i) {
        traces.push(points(entry[1], { name: P.groupName(key, entry[1][0]), marker: { size: 7, color: P.colour(i) } }));
      });
    } else if (complete.length) {
      traces.push(points(complete, { name: "complete trial",
        marker: Object.assign({ size: 7, color: P.colour(0) }, colours ? colours.scale : {}) }));
    }
    if (pruned.length) {
      traces.push(points(pruned, { name: "pruned (" + pruned.length + ", ranked after the complete)",
        marker: { size: 8, symbol: "x", color: O.PRUNED_COLOUR } }));
    }
    if (diverged.length) {
      traces.push(points(diverged, { name: "diverged (" + diverged.length + ", the worst, ranked last)",
        marker: { size: 11, symbol: "x-thin-open", color: O.DIVERGED_COLOUR, line: { width: 2 } } }));
    }
    return { traces: traces, complete: complete.length, pruned: pruned.length,
      diverged: list.filter(O.diverged).length, last: valued.length };
  }

  // Empirical distribution of the metric: for each value of `group` the share of its counted
  // trials at or below each value (one step per trial; a diverged one at the worst value).
  function ecdfTraces(list, y, group, valueOf) {
    const rows = list.filter(function (t) { return isNumber(valueOf(t, y)); });
    const key = function (t) { return group ? t.params[group] : null; };
    return P.groupBy(rows, key).map(function (entry, i) {
      const vs = entry[1].map(function (t) { return valueOf(t, y); }).sort(function (a, b) { return a - b; });
      return { type: "scatter", mode: "lines+markers", line: { shape: "hv", color: P.colour(i), width: 2 },
        marker: { size: 4, color: P.colour(i) }, x: vs, y: vs.map(function (_, j) { return (j + 1) / vs.length; }),
        name: P.groupName(group, entry[1][0]) + " (" + vs.length + O.divergedText(entry[1], y, valueOf) + ")",
        hovertemplate: "%{x:.4g}: %{y:.0%} at or below<extra>%{fullData.name}</extra>" };
    });
  }

  return { rankPlot: rankPlot, ecdfTraces: ecdfTraces };
})();
