// Which trials the experiment page shows: those inside the brushes on the parallel
// coordinates and passing the trial table's column filters. The table and every chart but
// the parallel coordinates (which draw every trial, brushes on) show only those: one test,
// keeps(), for all of them.
//
// A brush is kept in real terms, so it survives redraws and new trials: a number
// parameter's (or the metric's) ranges of values, a text parameter's chosen values. Each
// parallel axis (parallel-chart.js's dimension) is { key, log, categories, brush }: the axis
// holds log10 of the values when `log`, a category's position when `categories` is a list,
// and `brush` is its brushed ranges in those units.
//
// A column filter is the text the reader typed: against a number "a..b", "a..", "..b" or
// "a" (equal); against text "=value" (equal) or anything else (contains, any case).
window.DnnFilter = (function () {
  "use strict";
  let brushes = {}; // key → { ranges: [[lo, hi], …] } or { values: [text, …] }
  let columns = {}; // key → { text: what was typed, range: [lo, hi] or null when not one }
  let listener = function () {};

  function parseJson(text) {
    if (!text) return {};
    try {
      const given = JSON.parse(text);
      return given && typeof given === "object" && !Array.isArray(given) ? given : {};
    } catch (e) { return {}; } // a hand-edited URL: no filter
  }

  function load(brushText, columnText) {
    brushes = {};
    const given = parseJson(brushText);
    for (const key of Object.keys(given)) {
      const b = given[key];
      if (b && Array.isArray(b.values)) brushes[key] = { values: b.values.map(String) };
      else if (b && Array.isArray(b.ranges)) brushes[key] = { ranges: b.ranges.filter(function (r) {
        return Array.isArray(r) && r.length === 2 && r.every(Number.isFinite);
      }) };
    }
    columns = {};
    const typed = parseJson(columnText);
    for (const key of Object.keys(typed)) if (typeof typed[key] === "string") setText(key, typed[key]);
  }

  // "a..b", "a..", "..b" or a number: [lo, hi] (a number is [a, a]); null when it is none.
  const NUMBER = "\\s*(-?(?:\\d+\\.?\\d*|\\.\\d+)(?:e[-+]?\\d+)?)?\\s*";
  const RANGE = new RegExp("^" + NUMBER + "(\\.\\.)?" + NUMBER + "$", "i");
  function parseRange(text) {
    const m = RANGE.exec(text);
    if (!m || (m[1] === undefined && m[3] === undefined)) return null;
    if (!m[2]) return m[3] === undefined ? [Number(m[1]), Number(m[1])] : null;
    return [m[1] === undefined ? -Infinity : Number(m[1]), m[3] === undefined ? Infinity : Number(m[3])];
  }

  function setText(key, text) {
    const t = String(text).trim();
    if (t) columns[key] = { text: t, range: parseRange(t) }; else delete columns[key];
  }

  function brushText() { return Object.keys(brushes).length ? JSON.stringify(brushes) : null; }
  function columnText() {
    const keys = Object.keys(columns);
    if (!keys.length) return null;
    const out = {};
    for (const k of keys) out[k] = columns[k].text;
    return JSON.stringify(out);
  }
  function brushed() { return Object.keys(brushes).length > 0; }
  function active() { return brushed() || Object.keys(columns).length > 0; }
  function onChange(fn) { listener = fn; }
  function clear() { brushes = {}; columns = {}; listener(); }

  // A column's filter text ("" for none), and the reader typing a new one.
  function column(key) { return columns[key] ? columns[key].text : ""; }
  function setColumn(key, text) {
    if (column(key) === String(text).trim()) return;
    setText(key, text);
    listener();
  }
  // The column filters in force, as [key, text] pairs (the table names them, shown or not).
  function columnFilters() { return Object.keys(columns).map(function (k) { return [k, columns[k].text]; }); }

  // The brush of one axis in its own units, or undefined.
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
  function read(dimensions) {
    const next = {};
    dimensions.forEach(function (info) {
      const ranges = info.brush;
      if (!ranges || !ranges.length) return;
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

  function passesColumn(f, v) {
    if (v === undefined || v === null) return false;
    if (typeof v === "number") return f.range !== null && v >= f.range[0] && v <= f.range[1];
    const text = String(v).toLowerCase(), want = f.text.toLowerCase();
    return want.charAt(0) === "=" ? text === want.slice(1).trim() : text.indexOf(want) >= 0;
  }

  // Whether a trial passes every brush and column filter; valueOf(t, key) is its parameter's,
  // metric's or field's value. A trial without a value there (queued, diverged) does not.
  function keeps(t, valueOf) {
    for (const key of Object.keys(brushes)) {
      const b = brushes[key], v = valueOf(t, key);
      if (b.values) {
        if (v === undefined || b.values.indexOf(String(v)) < 0) return false;
      } else if (typeof v !== "number" || !b.ranges.some(function (r) { return v >= r[0] && v <= r[1]; })) {
        return false;
      }
    }
    for (const key of Object.keys(columns)) if (!passesColumn(columns[key], valueOf(t, key))) return false;
    return true;
  }

  return { load: load, brushText: brushText, columnText: columnText, brushed: brushed, active: active,
    onChange: onChange, clear: clear, column: column, setColumn: setColumn, columnFilters: columnFilters,
    parseRange: parseRange, constraint: constraint, read: read, keeps: keeps };
})();
