// What every chart of the dashboard shares: number formats, axes, colours, grouping and
// smoothing of series, and drawing a chart or saying why there is nothing to draw.
window.DnnPlot = (function () {
  "use strict";

  // 24 distinguishable colours (plotly's Dark24), so groups do not repeat colours after 10
  const PALETTE = ["#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#222A2A", "#B68100",
    "#750D86", "#EB663B", "#511CFB", "#00A08B", "#FB00D1", "#FC0080", "#B2828D", "#6C7C32",
    "#778AAE", "#862A16", "#A777F1", "#620042", "#1616A7", "#DA60CA", "#6C4516", "#0D2A63", "#AF0038"];
  // modebar only on hover, and without the tools a results chart does not need
  const CONFIG = { displaylogo: false, responsive: true,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"] };
  const LAYOUT = {
    margin: { l: 60, r: 20, t: 48, b: 70 }, height: 370,
    paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "#fbfbfd",
    font: { family: "system-ui, -apple-system, 'Segoe UI', sans-serif", size: 12, color: "#222" },
    legend: { orientation: "h", yanchor: "top", y: -0.3, x: 0, font: { size: 11 } },
  };
  // states, their groups, metrics and the default objective, served by the dashboard (base.html)
  const VOCAB = JSON.parse(document.getElementById("dnnframe-vocabulary").textContent);
  const LABELS = { hidden_layers: "hidden layers", learning_rate: "learning rate", batch_size: "batch size",
    max_epochs: "epochs", optimizer: "optimiser", total_seconds: "total time (s)", epochs_run: "epochs run",
    n_params: "parameters" };
  for (const name of Object.keys(VOCAB.metrics)) LABELS[name] = VOCAB.metrics[name].label;

  function label(key) { return LABELS[key] || String(key).replace(/_/g, " "); }

  // numbers with 4 significant digits: 0.8333, 0.05, 12.35, 1e-7
  function fmt(v) {
    if (v === null || v === undefined || Number.isNaN(v)) return "";
    if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4)));
    if (Array.isArray(v)) return v.join("/");
    return String(v);
  }

  // A title that starts at the left, so plotly's modebar (top right) never covers it.
  function title(text) { return { text: text, x: 0.01, xanchor: "left", font: { size: 14 } }; }

  function layout(extra) {
    const out = Object.assign({}, LAYOUT, extra || {});
    if (typeof out.title === "string") out.title = title(out.title);
    return out;
  }

  // An integer tick step that gives at most about `count` ticks over [0, span]: 1, 2, 5, 10, …
  function integerStep(span, count) {
    const raw = Math.max(1, span / (count || 8));
    const magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) {
      if (m * magnitude >= raw) return m * magnitude;
    }
    return 10 * magnitude;
  }

  function integerAxis(values, text) {
    const lo = Math.min.apply(null, values), hi = Math.max.apply(null, values);
    return { title: { text: text }, tickmode: "linear", tick0: 0, dtick: integerStep(hi - lo), tickformat: "d" };
  }

  // The axis a parameter's values want: integer ticks, log for positive values spanning more
  // than a decade, categories for text.
  function axisFor(key, values) {
    const nums = values.filter(function (v) { return typeof v === "number"; });
    if (nums.length !== values.length || !nums.length) return { title: { text: label(key) }, type: "category" };
    if (nums.every(Number.isInteger)) return integerAxis(nums, label(key));
    const lo = Math.min.apply(null, nums), hi = Math.max.apply(null, nums);
    // a log axis ticks each decade with its value (0.001, 0.01, …), never as 10^-3 or a bare "2"
    return lo > 0 && hi / lo > 10 ? { title: { text: label(key) }, type: "log", dtick: 1, tickformat: "~g" }
      : { title: { text: label(key) }, type: "linear" };
  }

  // [low, high] a metric can take (null: unbounded), from the dashboard's vocabulary;
  // unknown values (train seconds, epochs) are taken as non-negative
  function bounds(metric) {
    const m = VOCAB.metrics[metric];
    return m && m.bounds ? m.bounds : [0, null];
  }

  // Whether higher ("max") or lower ("min") is better for a metric.
  function direction(metric) {
    const m = VOCAB.metrics[metric];
    return m ? m.direction : /accuracy$/.test(metric) ? "max" : "min";
  }

  // The minus and plus lengths of a ± sd bar around `mean`, stopped at the metric's bounds:
  // an accuracy of 0.98 ± 0.05 reaches 1, not 1.03.
  function band(mean, sd, metric) {
    const b = bounds(metric);
    const plus = b[1] === null ? sd : Math.max(0, Math.min(sd, b[1] - mean));
    const minus = b[0] === null ? sd : Math.max(0, Math.min(sd, mean - b[0]));
    return [minus, plus];
  }

  // Ticks for values drawn as log10: one per decade, labelled with the real values.
  function logTicks(lo, hi) {
    const vals = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) vals.push(e);
    return { tickvals: vals, ticktext: vals.map(function (e) { return fmt(Math.pow(10, e)); }) };
  }

  // The categories a heatmap axis shows for a parameter's values: each value its own while
  // there are at most `most` of them (or they are not all numbers), else `most` bins of equal
  // width, on a log scale for positive values spanning more than a decade. Returns
  // { labels, index(value) → the label's position }.
  function bins(values, most) {
    most = most || 8;
    const key = function (v) { return JSON.stringify(v === undefined ? null : v); }; // a missing value is null
    const distinct = Array.from(new Set(values.map(key)))
      .map(function (k) { return JSON.parse(k); }).sort(compare);
    const numeric = distinct.every(function (v) { return typeof v === "number" && Number.isFinite(v); });
    if (!numeric || distinct.length <= most) {
      const keys = distinct.map(key);
      return { labels: distinct.map(fmt), index: function (v) { return keys.indexOf(key(v)); } };
    }
    const lo = distinct[0], hi = distinct[distinct.length - 1];
    const log = lo > 0 && hi / lo > 10;
    const to = log ? Math.log10 : Number, from = log ? function (u) { return Math.pow(10, u); } : Number;
    const width = (to(hi) - to(lo)) / most;
    const edges = [];
    for (let i = 0; i <= most; i++) edges.push(from(to(lo) + i * width));
    const labels = [];
    for (let i = 0; i < most; i++) labels.push(fmt(edges[i]) + "–" + fmt(edges[i + 1]));
    return { labels: labels, index: function (v) {
      return Math.min(most - 1, Math.max(0, Math.floor((to(v) - to(lo)) / width)));
    } };
  }

  function meanStd(values) {
    const n = values.length;
    const mean = values.reduce(function (a, b) { return a + b; }, 0) / n;
    const variance = n > 1 ? values.reduce(function (a, b) { return a + (b - mean) * (b - mean); }, 0) / (n - 1) : 0;
    return [mean, Math.sqrt(variance)];
  }

  // Trials that differ only in their seed are one configuration, ranked by its mean over
  // seeds: a better mean, then more seeds, then a smaller spread, then the smallest trial id
  // (dashboard/ranking.py ranks the same way; sums run over the values in ascending order so
  // both give the same mean). `value(t)` is the number a trial counts with by outcomes.js'
  // rule (a diverged seed as the worst value), or null to leave it out; how many seeds
  // diverged or were pruned is counted beside.
  function rankConfigurations(trialList, value, mode) {
    const S = VOCAB.states;
    const groups = new Map();
    for (const t of trialList) {
      const v = value(t);
      if (typeof v !== "number" || !Number.isFinite(v)) continue;
      const params = Object.assign({}, t.params);
      delete params.seed;
      const key = JSON.stringify(Object.keys(params).sort().map(function (k) { return [k, params[k]]; }));
      if (!groups.has(key)) groups.set(key, { params: params, members: [] });
      groups.get(key).members.push([t.id, v, t.state === S.DIVERGED ? 1 : 0, t.state === S.PRUNED ? 1 : 0]);
    }
    const sign = mode === "max" ? -1 : 1;
    const byId = function (a, b) { return a < b ? -1 : a > b ? 1 : 0; };
    const sum = function (ms, i) { return ms.reduce(function (a, m) { return a + m[i]; }, 0); };
    const ranked = Array.from(groups.values()).map(function (g) {
      const values = g.members.map(function (m) { return m[1]; }).sort(function (a, b) { return a - b; });
      let total = 0;
      for (const v of values) total += v;
      const mean = total / values.length;
      let squares = 0;
      for (const v of values) squares += (v - mean) * (v - mean);
      // a trained seed is the one to show before a diverged equal
      const best = g.members.slice().sort(function (a, b) {
        return sign * a[1] - sign * b[1] || a[2] - b[2] || byId(a[0], b[0]);
      })[0];
      return { params: g.params, mean: mean, n: values.length,
        sd: values.length > 1 ? Math.sqrt(squares / (values.length - 1)) : 0,
        diverged: sum(g.members, 2), pruned: sum(g.members, 3),
        trialIds: g.members.map(function (m) { return m[0]; }).sort(byId), bestTrialId: best[0] };
    });
    ranked.sort(function (a, b) {
      return (sign * a.mean - sign * b.mean) || (b.n - a.n) || (a.sd - b.sd) || byId(a.trialIds[0], b.trialIds[0]);
    });
    return ranked;
  }

  // The best configuration in words (rankConfigurations' first): its mean, spread, seeds and
  // parameters, and the configurations tied with it on the mean, which only the order's rule
  // puts after it. Returns { text, ties: how many tie }.
  function describeBest(ranked, objective, varied) {
    const best = ranked[0], min = objective.mode === "min";
    const shown = varied.filter(function (p) { return p !== "seed"; });
    const params = function (c) {
      return shown.map(function (p) { return label(p) + " " + fmt(c.params[p]); }).join(", ");
    };
    const lost = (best.diverged ? ", " + best.diverged + " diverged" : "") +
      (best.pruned ? ", " + best.pruned + " pruned" : "");
    const spread = best.n > 1 ? " ± " + fmt(best.sd) + " (" + (min ? "lowest" : "highest") +
      " mean of " + best.n + " seeds" + lost + ")" : " (" + (min ? "lowest" : "highest") + lost + ")";
    let text = "best " + label(objective.metric) + " " + fmt(best.mean) + spread + " — " +
      (params(best) || "the only configuration");
    const ties = ranked.slice(1).filter(function (c) {
      return Math.abs(c.mean - best.mean) <= 1e-12 * Math.max(1, Math.abs(best.mean));
    });
    if (ties.length) {
      text += "; tied on the mean with " + ties.length + " other configuration" + (ties.length > 1 ? "s" : "") +
        " (" + ties.map(function (c) { return params(c) + " over " + c.n + " seed" + (c.n > 1 ? "s" : ""); }).join("; ") +
        "), which only the rule orders: more seeds, a smaller sd, the smaller trial id";
    }
    return { text: text, ties: ties.length };
  }

  function compare(x, y) {
    const xm = x === null || x === undefined, ym = y === null || y === undefined;
    if (xm || ym) return xm === ym ? 0 : (xm ? 1 : -1); // blanks last
    return typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
  }

  // A series' name for the trials whose `group` parameter has t's value ("all" ungrouped).
  function groupName(group, t) { return group ? label(group) + " " + fmt(t.params[group]) : "all"; }

  // The parameters whose value differs between the given trials (the ones a sweep varies).
  function varying(list, keys) {
    return keys.filter(function (p) {
      return new Set(list.map(function (t) { return JSON.stringify(t.params[p]); })).size > 1;
    });
  }

  // Exponential moving average as TensorBoard smooths: weight in [0, 1), 0 = raw values.
  function smooth(values, weight) {
    if (!weight) return values;
    let last = null;
    return values.map(function (v) {
      if (v === null || v === undefined || !Number.isFinite(v)) return v;
      last = last === null ? v : last * weight + (1 - weight) * v;
      return last;
    });
  }

  // Group items by a key, groups in a stable order (numbers ascending, text alphabetical).
  function groupBy(items, keyOf) {
    const groups = new Map();
    for (const item of items) {
      const k = keyOf(item);
      if (!groups.has(k)) groups.set(k, []);
      groups.get(k).push(item);
    }
    return Array.from(groups.entries()).sort(function (a, b) { return compare(a[0], b[0]); });
  }

  function colour(i) { return PALETTE[i % PALETTE.length]; }

  function rgba(hex, alpha) {
    const n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + alpha + ")";
  }

  // A title wider than its chart (a phone) is broken into lines, with room made above the plot.
  function fitTitle(chartLayout, width) {
    const text = chartLayout.title && chartLayout.title.text;
    const perLine = Math.max(20, Math.floor((width - 30) / 7.5));
    if (!text || text.length <= perLine) return chartLayout;
    const lines = [];
    let line = "";
    for (const word of text.split(" ")) {
      if (line && (line + " " + word).length > perLine) { lines.push(line); line = word; }
      else line = line ? line + " " + word : word;
    }
    lines.push(line);
    const margin = Object.assign({}, chartLayout.margin);
    margin.t = (margin.t || 48) + 17 * (lines.length - 1);
    return Object.assign({}, chartLayout, { title: Object.assign({}, chartLayout.title, { text: lines.join("<br>") }),
      margin: margin, height: (chartLayout.height || 340) + 17 * (lines.length - 1) });
  }

  // A text alternative for a chart: what it shows (its title) and how much (its series and
  // points), for a screen reader, which cannot read the drawing.
  function describe(el, chartLayout, traces) {
    const title = String((chartLayout.title && chartLayout.title.text) || "chart").replace(/<br>/g, " ");
    const named = traces.filter(function (t) { return t.name && t.showlegend !== false; }).map(function (t) { return t.name; });
    const points = traces.reduce(function (n, t) { return n + ((t.y || t.x || []).length || 0); }, 0);
    el.setAttribute("role", "img");
    el.setAttribute("aria-label", title + ": " + points + " values" +
      (named.length ? " in " + named.length + " series (" + named.slice(0, 8).join("; ") + (named.length > 8 ? "; …" : "") + ")" : ""));
  }

  // A chart with nothing to draw says why instead of showing empty default axes; clear(el)
  // first takes its drawing away; emptyText null: there is one to draw, and the note goes.
  // Returns whether the element is to hold a drawing.
  function note(el, emptyText, clear) {
    if (emptyText === null) {
      if (el.dataset.waiting !== undefined) {
        el.textContent = "";
        delete el.dataset.waiting;
      }
      return true;
    }
    if (el.dataset.waiting !== emptyText) {
      clear(el);
      el.removeAttribute("role"); // the note below is text a screen reader reads
      el.removeAttribute("aria-label");
      el.style.height = "";
      el.classList.remove("drawn");
      el.textContent = "";
      const text = document.createElement("div");
      text.className = "chart-waiting";
      text.textContent = emptyText;
      el.appendChild(text);
      el.dataset.waiting = emptyText;
    }
    return false;
  }

  // Charts in view first: while `deferring`, a chart out of the window's view is kept in
  // `pending` (its latest drawing), and drawn after the next paint by inViewFirst().
  let deferring = false;
  const pending = new Map();
  function outOfView(el) {
    const box = el.getBoundingClientRect();
    return box.top >= window.innerHeight || box.bottom <= 0;
  }

  function draw(id, traces, chartLayout, emptyText) {
    const el = document.getElementById(id);
    if (!el) return;
    if (deferring && outOfView(el)) { pending.set(id, [id, traces, chartLayout, emptyText]); return; }
    pending.delete(id);
    if (!note(el, traces.length ? null : emptyText, Plotly.purge)) return;
    const laid = fitTitle(chartLayout, el.clientWidth);
    // On a window resize plotly's responsive mode drops the layout's height and takes the
    // container's in both directions, so the container holds the chart's height: otherwise
    // it collapses to the card's minimum and stays there until the next redraw.
    el.style.height = (laid.height || LAYOUT.height) + "px";
    el.classList.add("drawn");
    Plotly.react(el, traces, laid, CONFIG);
    describe(el, laid, traces);
  }

  // Runs fn, which draws charts: those in view are drawn at once, the others in a task after
  // the next frame is painted (the reader sees the charts in view a few hundred ms sooner);
  // then done() runs. A chart drawn again meanwhile is drawn as it was last asked for.
  function inViewFirst(fn, done) {
    deferring = !document.hidden; // a hidden tab paints no frame
    try { fn(); } finally { deferring = false; }
    if (!pending.size) { done(); return; }
    requestAnimationFrame(function () {
      setTimeout(function () {
        for (const args of Array.from(pending.values())) draw.apply(null, args);
        done();
      }, 0);
    });
  }

  // Calls fn once plotly.js has run: now, or when its deferred script (id plotly-js) has.
  // A page loads plotly deferred so its own scripts read the data meanwhile; fn runs in a
  // task of its own then, so DOMContentLoaded does not wait for the charts.
  function whenPlotly(fn) {
    if (typeof Plotly !== "undefined") { fn(); return; }
    const script = document.getElementById("plotly-js");
    if (script) script.addEventListener("load", function () { setTimeout(fn, 0); }, { once: true });
  }

  return { VOCAB: VOCAB, PALETTE: PALETTE, CONFIG: CONFIG, whenPlotly: whenPlotly, label: label, fmt: fmt, title: title, layout: layout,
    integerStep: integerStep, integerAxis: integerAxis, axisFor: axisFor, meanStd: meanStd,
    bounds: bounds, direction: direction, band: band, logTicks: logTicks, bins: bins,
    rankConfigurations: rankConfigurations, describeBest: describeBest,
    compare: compare, groupName: groupName, varying: varying, smooth: smooth, groupBy: groupBy, colour: colour,
    rgba: rgba, note: note, draw: draw, inViewFirst: inViewFirst };
})();
