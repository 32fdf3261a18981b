// Brushing the parallel coordinates filters the trial table and the other charts.
//
// A brush is kept in real terms, so it survives redraws and new trials: a number
// parameter's (or the metric's) ranges of values, a text parameter's chosen values. Each
// parallel axis is described by an info { key, log, categories }: the axis holds log10 of the
// values when `log`, a category's position when `categories` is a list.
window.DnnBrush = (function () {
  "use strict";
  let brushes = {}; // key → { ranges: [[lo, hi], …] } or { values: [text, …] }
  let listener = function () {};

  function load(text) {
    brushes = {};
    if (!text) return;
    try {
      const given = JSON.parse(text);
      for (const key of Object.keys(given || {})) {
        const b = given[key];
        if (b && Array.isArray(b.values)) brushes[key] = { values: b.values.map(String) };
        else if (b && Array.isArray(b.ranges)) brushes[key] = { ranges: b.ranges.filter(function (r) {
          return Array.isArray(r) && r.length === 2 && r.every(Number.isFinite);
        }) };
      }
    } catch (e) { /* a hand-edited URL: no brush */ }
  }

  function text() { return Object.keys(brushes).length ? JSON.stringify(brushes) : null; }
  function active() { return Object.keys(brushes).length > 0; }
  function onChange(fn) { listener = fn; }
  function clear() { brushes = {}; listener(); }

  // The brush of one axis in its own units (plotly's constraintrange), or undefined.
  function constraint(info) {
    const b = brushes[info.key];
    if (!b) return undefined;
    if (b.values) {
      const ranges = (info.categories || []).map(function (c, i) { return b.values.indexOf(c) >= 0 ? [i - 0.5, i + 0.5] : null; })
        .filter(Boolean);
      return ranges.length ? ranges : undefined;
    }
    const to = info.log ? Math.log10 : Number;
    return b.ranges.map(function (r) { return [to(r[0]), to(r[1])]; });
  }

  // The brushes as the reader left them on the chart's axes (after a drag).
  function read(dimensions, infos) {
    const next = {};
    dimensions.forEach(function (d, i) {
      const info = infos[i];
      let ranges = d.constraintrange;
      if (!info || !ranges || !ranges.length) return;
      if (!Array.isArray(ranges[0])) ranges = [ranges];
      if (info.categories) {
        next[info.key] = { values: info.categories.filter(function (_, k) {
          return ranges.some(function (r) { return k >= r[0] && k <= r[1]; });
        }) };
      } else {
        const from = info.log ? function (u) { return Math.pow(10, u); } : Number;
        next[info.key] = { ranges: ranges.map(function (r) { return [from(r[0]), from(r[1])]; }) };
      }
    });
    if (JSON.stringify(next) === JSON.stringify(brushes)) return;
    brushes = next;
    listener();
  }

  // Whether a trial passes every brush; valueOf(t, key) is its parameter's or metric's value.
  // A trial without a value on a brushed axis (queued, diverged) does not.
  function keeps(t, valueOf) {
    for (const key of Object.keys(brushes)) {
      const b = brushes[key], v = valueOf(t, key);
      if (b.values) {
        if (v === undefined || b.values.indexOf(String(v)) < 0) return false;
      } else if (typeof v !== "number" || !b.ranges.some(function (r) { return v >= r[0] && v <= r[1]; })) {
        return false;
      }
    }
    return true;
  }

  return { load: load, text: text, active: active, onChange: onChange, clear: clear,
    constraint: constraint, read: read, keeps: keeps };
})();
