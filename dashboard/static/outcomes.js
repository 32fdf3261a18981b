// Which trials the experiment page's analysis charts count, and the value each counts with:
// the rule of dashboard/params.py's outcomes(), by which the server ranks importance, so the
// charts and the ranking count the same trials. Complete and pruned trials count with the
// value they recorded. A diverged trial's scores mean nothing, so it counts as the worst
// value of the metric (its bound on the worse side, an accuracy's 0, else the worst any
// trial reached) and is marked ✕; its timings, epochs and size are measurements, and stand.
window.DnnOutcomes = (function () {
  "use strict";
  const P = window.DnnPlot;
  const V = P.VOCAB, S = V.states;
  const ANALYSED = new Set(V.analysed);
  const MEASURED = new Set(V.measured);
  const DIVERGED_COLOUR = "#c0392b", PRUNED_COLOUR = "#d9a441";

  function isNumber(v) { return typeof v === "number" && Number.isFinite(v); }

  // The finite number a trial recorded for `key` (a metric, else a measurement), or null.
  function recorded(t, key) {
    if (t.metrics && isNumber(t.metrics[key])) return t.metrics[key];
    return MEASURED.has(key) && isNumber(t[key]) ? t[key] : null;
  }

  // dnnframe.metrics.worst_value: the bound on the worse side of `mode`, else the worst of
  // `values`, else null.
  function worst(key, mode, values) {
    const m = V.metrics[key];
    const bound = m && m.bounds ? m.bounds[mode === "max" ? 0 : 1] : null;
    if (bound !== null && bound !== undefined) return bound;
    const finite = values.filter(isNumber);
    if (!finite.length) return null;
    return mode === "max" ? Math.min.apply(null, finite) : Math.max.apply(null, finite);
  }

  function counts(t) { return ANALYSED.has(t.state); }
  function diverged(t) { return t.state === S.DIVERGED; }
  function pruned(t) { return t.state === S.PRUNED; }
  // whether `key` is a measurement (a time, the epochs run, the size), which a divergence
  // leaves standing, unlike a score
  function measured(key) { return MEASURED.has(key); }
  function voids(key) { return !MEASURED.has(key); }

  // The rule over `everything` the page holds: the worst value is what any of those trials
  // reached, so brushing a chart does not move it. modeOf(key): "max" or "min".
  // value(t, key): the number `t` counts with, null when it is not counted there.
  function over(everything, modeOf) {
    const trained = everything.filter(function (t) { return counts(t) && !diverged(t); });
    const worstOf = new Map();
    function value(t, key) {
      if (!counts(t)) return null;
      if (!diverged(t) || !voids(key)) return recorded(t, key);
      if (!worstOf.has(key)) {
        worstOf.set(key, worst(key, modeOf(key), trained.map(function (u) { return recorded(u, key); })));
      }
      return worstOf.get(key);
    }
    return { value: value };
  }

  // A marker per trial: ✕ in red for a diverged one, x in amber for a pruned one, else `base`.
  function symbol(t, base) { return diverged(t) ? "x-thin-open" : pruned(t) ? "x" : base || "circle"; }
  function colour(t, base) { return diverged(t) ? DIVERGED_COLOUR : pruned(t) ? PRUNED_COLOUR : base; }

  // ", k diverged: counted as 0, the worst" for the diverged among `list`, else "".
  function divergedText(list, key, valueOf) {
    const lost = list.filter(diverged);
    if (!lost.length) return "";
    const v = voids(key) ? valueOf(lost[0], key) : null;
    return ", " + lost.length + " diverged" + (isNumber(v) ? ": counted as " + P.fmt(v) + ", the worst" : "");
  }

  return { over: over, worst: worst, counts: counts, diverged: diverged, pruned: pruned, measured: measured, voids: voids, symbol: symbol,
    colour: colour, divergedText: divergedText, DIVERGED_COLOUR: DIVERGED_COLOUR, PRUNED_COLOUR: PRUNED_COLOUR };
})();
