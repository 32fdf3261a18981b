// Parallel coordinates without WebGL: a vertical axis per dimension and a line per trial
// across them. The lines are drawn on a 2D canvas, one path per colour, so 10,000 trials
// draw in a few tens of milliseconds and a page without a GPU compiles no shaders; the axes,
// ticks, brushes and colour bar are SVG over it.
//
// Dragging along an axis brushes a range of it (a drag inside a brush moves it, a click on the
// axis clears its brush, Shift adds a range); an axis takes the keyboard focus, where the
// arrow keys step a brush through its values and Escape (or Delete) clears it. Hovering a line
// names its trial; clicking it opens the trial.
//
// draw(el, spec, opts) with spec = { title, summary, dimensions, colour, ids, kinds }: each
// dimension { key, label, log, categories, values, tickvals, ticktext, brush } holds its values
// in the axis' units (log10 of the value on a log axis, a category's position on a text one),
// and brush its ranges in those units (absent: none); colour { label, values, reversescale }
// colours the lines by the metric (reversescale: the lowest value is the bright end); kinds[i]
// is "diverged", "pruned" or "". opts.brushed(dimensions) hears a brush drawn or cleared,
// opts.open(id) a line clicked. The element keeps the spec as `el.parallel` (tests read it).
window.DnnParallel = (function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const HEIGHT = 360, TOP = 64, BOTTOM = 24, LEFT = 70, RIGHT = 110, HIT = 24;
  // plotly's Viridis, dark (worse) to bright (better)
  const VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58",
    "#b5de2b", "#fde725"];
  const BUCKETS = 32;
  const DIVERGED = "#c0392b";
  const DOTTED = 1000; // the most pruned lines drawn dotted (dashes are slow to draw)

  function svg(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const k of Object.keys(attrs || {})) node.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(node);
    return node;
  }

  function rgb(hex) { const n = parseInt(hex.slice(1), 16); return [n >> 16, (n >> 8) & 255, n & 255]; }
  // the colour at f in [0, 1] along the scale
  function viridis(f) {
    const x = Math.min(1, Math.max(0, f)) * (VIRIDIS.length - 1), i = Math.min(VIRIDIS.length - 2, Math.floor(x));
    const a = rgb(VIRIDIS[i]), b = rgb(VIRIDIS[i + 1]), k = x - i;
    return "rgb(" + a.map(function (c, j) { return Math.round(c + (b[j] - c) * k); }).join(",") + ")";
  }

  // [lo, hi] of an axis: its values' extent, a lone value in the middle
  function domain(d) {
    if (d.categories) return d.categories.length > 1 ? [0, d.categories.length - 1] : [-1, 1];
    let lo = Infinity, hi = -Infinity;
    for (const v of d.values) { if (v < lo) lo = v; if (v > hi) hi = v; }
    if (!(lo <= hi)) return [0, 1];
    return lo === hi ? [lo - 1, hi + 1] : [lo, hi];
  }

  // "Nice" ticks (steps of 1, 2 or 5 × 10^k) for a continuous axis without ticks of its own.
  function niceTicks(lo, hi) {
    const raw = (hi - lo) / 5, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map(function (m) { return m * mag; }).find(function (s) { return s >= raw; });
    const vals = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) vals.push(Number(v.toPrecision(12)));
    return vals;
  }

  // Where each axis stands and how it maps its units to pixels.
  function geometry(el, spec) {
    const width = Math.max(200, el.clientWidth), n = spec.dimensions.length;
    const span = width - LEFT - RIGHT;
    return { width: width, height: HEIGHT, axes: spec.dimensions.map(function (d, i) {
      const dom = domain(d);
      const x = n > 1 ? LEFT + span * i / (n - 1) : LEFT + span / 2;
      return { x: x, lo: dom[0], hi: dom[1],
        y: function (u) { return TOP + (HEIGHT - TOP - BOTTOM) * (1 - (u - dom[0]) / (dom[1] - dom[0])); },
        u: function (py) { return dom[0] + (dom[1] - dom[0]) * (1 - (py - TOP) / (HEIGHT - TOP - BOTTOM)); } };
    }) };
  }

  function dots(spec) { return spec.kinds.filter(function (k) { return k === "pruned"; }).length <= DOTTED; }

  function inBrush(d, u) { return !d.brush || d.brush.some(function (r) { return u >= r[0] && u <= r[1]; }); }

  // Whether each trial passes every brush (the lines drawn in colour).
  function selection(spec) {
    const n = spec.ids.length, keep = new Uint8Array(n).fill(1);
    for (const d of spec.dimensions) {
      if (!d.brush) continue;
      for (let i = 0; i < n; i++) if (keep[i] && !inBrush(d, d.values[i])) keep[i] = 0;
    }
    return keep;
  }

  // The lines: those outside the brushes faint grey, then per colour the trained trials', the
  // pruned ones' fainter (dotted while they are few), the diverged ones' red. One pixel wide:
  // software rendering strokes such hairlines tens of times faster than wider or dashed
  // lines (10,000 trials in about 0.1 s on one core, against seconds).
  function paint(state) {
    const spec = state.spec, g = state.geo, ctx = state.canvas.getContext("2d");
    const ratio = window.devicePixelRatio || 1;
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, g.width, g.height);
    const n = spec.ids.length, keep = selection(spec), c = spec.colour;
    let lo = Infinity, hi = -Infinity;
    for (const v of c.values) { if (v < lo) lo = v; if (v > hi) hi = v; }
    const paths = new Map();
    const path = function (key) { if (!paths.has(key)) paths.set(key, new Path2D()); return paths.get(key); };
    for (let i = 0; i < n; i++) {
      let f = hi > lo ? (c.values[i] - lo) / (hi - lo) : 1;
      if (c.reversescale) f = 1 - f;
      const kind = spec.kinds[i];
      const key = !keep[i] ? "out" : kind === "diverged" ? "diverged" : kind + ":" + Math.round(f * (BUCKETS - 1));
      const p = path(key);
      spec.dimensions.forEach(function (d, k) {
        const x = g.axes[k].x, y = g.axes[k].y(d.values[i]);
        if (k) p.lineTo(x, y); else p.moveTo(x, y);
      });
    }
    const alpha = n > 2000 ? 0.3 : n > 300 ? 0.55 : 0.8;
    const dotted = dots(spec);
    ctx.lineWidth = 1;
    const order = Array.from(paths.keys()).sort(function (a, b) { return (a === "out" ? -1 : 0) - (b === "out" ? -1 : 0); });
    for (const key of order) {
      const kind = key.split(":")[0];
      ctx.globalAlpha = key === "out" ? 0.25 : kind === "pruned" ? alpha * 0.6 : alpha;
      ctx.strokeStyle = key === "out" ? "#bbb" : key === "diverged" ? DIVERGED : viridis(Number(key.split(":")[1]) / (BUCKETS - 1));
      ctx.setLineDash(kind === "pruned" && dotted ? [2, 2] : []);
      ctx.stroke(paths.get(key));
    }
    ctx.globalAlpha = 1;
    ctx.setLineDash([]);
  }

  // An axis: its line, ticks, title and brushes, and the strip a drag or the keyboard brushes.
  function drawAxis(state, k) {
    const d = state.spec.dimensions[k], a = state.geo.axes[k];
    const g = svg("g", { "class": "parallel-axis", "data-key": d.key, tabindex: "0", role: "group",
      "aria-label": d.label + " axis" + (d.brush ? ", brushed" : "") +
        ": drag along it or press the arrow keys to brush a range, Escape to clear" });
    svg("line", { x1: a.x, x2: a.x, y1: a.y(a.hi), y2: a.y(a.lo), stroke: "#444" }, g);
    const vals = d.tickvals || niceTicks(a.lo, a.hi);
    vals.forEach(function (v, i) {
      if (v < a.lo - 1e-9 * (a.hi - a.lo) || v > a.hi + 1e-9 * (a.hi - a.lo)) return;
      const y = a.y(v);
      svg("line", { x1: a.x - 4, x2: a.x, y1: y, y2: y, stroke: "#444" }, g);
      svg("text", { x: a.x - 6, y: y + 4, "text-anchor": "end", "class": "parallel-tick" }, g).textContent =
        d.ticktext ? d.ticktext[i] : window.DnnPlot.fmt(v);
    });
    svg("text", { x: a.x, y: TOP - 14, "text-anchor": "middle", "class": "parallel-label" }, g).textContent = d.label;
    for (const r of d.brush || []) {
      const y0 = a.y(Math.min(a.hi, r[1])), y1 = a.y(Math.max(a.lo, r[0]));
      svg("rect", { "class": "parallel-brush", x: a.x - 6, width: 12, y: y0, height: Math.max(2, y1 - y0) }, g);
    }
    const hit = svg("rect", { "class": "parallel-hit", x: a.x - HIT / 2, width: HIT, y: a.y(a.hi),
      height: a.y(a.lo) - a.y(a.hi), fill: "transparent" }, g);
    hit.addEventListener("pointerdown", function (e) { startDrag(state, k, e); });
    g.addEventListener("keydown", function (e) { key(state, k, e); });
    return g;
  }

  // The colour bar: the scale from the metric's lowest (bottom) to its highest (top), and
  // what the dashed and dotted lines are (above it).
  function drawScale(state, root) {
    const c = state.spec.colour, x = state.geo.width - RIGHT + 46;
    const vals = c.values.filter(Number.isFinite);
    if (!vals.length) return;
    const lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
    const grad = svg("linearGradient", { id: state.id + "-scale", x1: 0, y1: 1, x2: 0, y2: 0 }, svg("defs", {}, root));
    VIRIDIS.forEach(function (col, i) {
      svg("stop", { offset: i / (VIRIDIS.length - 1), "stop-color": c.reversescale ? VIRIDIS[VIRIDIS.length - 1 - i] : col }, grad);
    });
    svg("rect", { x: x, y: TOP, width: 12, height: HEIGHT - TOP - BOTTOM, fill: "url(#" + state.id + "-scale)" }, root);
    const scale = svg("g", { "class": "parallel-scale" }, root);
    [[hi, TOP + 4], [lo, HEIGHT - BOTTOM]].forEach(function (e) {
      svg("text", { x: x + 16, y: e[1], "class": "parallel-tick" }, scale).textContent = window.DnnPlot.fmt(e[0]);
    });
    const kinds = state.spec.kinds;
    [["diverged", "diverged", DIVERGED, ""], ["pruned", "pruned", "#999", dots(state.spec) ? "2 2" : ""]].forEach(function (k, i) {
      if (kinds.indexOf(k[0]) < 0) return;
      const y = 14 + 14 * i;
      svg("line", { x1: x - 30, x2: x - 8, y1: y - 4, y2: y - 4, stroke: k[2], "stroke-dasharray": k[3] }, scale);
      svg("text", { x: x - 4, y: y, "class": "parallel-tick" }, scale).textContent = k[1];
    });
  }

  // The SVG over the canvas, from the spec; the focused axis keeps the focus.
  function layOut(state) {
    const focused = document.activeElement && document.activeElement.closest &&
      document.activeElement.closest("#" + state.id + " .parallel-axis");
    const keyFocused = focused ? focused.getAttribute("data-key") : null;
    const g = state.geo = geometry(state.el, state.spec);
    const ratio = window.devicePixelRatio || 1;
    state.canvas.width = Math.round(g.width * ratio);
    state.canvas.height = Math.round(g.height * ratio);
    state.canvas.style.width = g.width + "px";
    state.canvas.style.height = g.height + "px";
    const root = state.svg;
    root.textContent = "";
    root.setAttribute("width", g.width);
    root.setAttribute("height", g.height);
    state.hover = svg("path", { "class": "parallel-hover", fill: "none", stroke: "#000", "stroke-width": 2.5 }, root);
    drawScale(state, root);
    state.spec.dimensions.forEach(function (_, k) {
      const axis = root.appendChild(drawAxis(state, k));
      if (keyFocused && axis.getAttribute("data-key") === keyFocused) axis.focus();
    });
    paint(state);
  }

  // Brush ranges snap to whole categories on a text axis: those inside, else the nearest.
  function snapped(d, r) {
    if (!d.categories) return r;
    const last = d.categories.length - 1;
    let lo = Math.max(0, Math.ceil(r[0])), hi = Math.min(last, Math.floor(r[1]));
    if (lo > hi) lo = hi = Math.min(last, Math.max(0, Math.round((r[0] + r[1]) / 2)));
    return [lo - 0.5, hi + 0.5];
  }

  function commit(state) { if (state.opts.brushed) state.opts.brushed(state.spec.dimensions); }

  function setBrush(state, k, ranges) {
    const d = state.spec.dimensions[k];
    if (ranges && ranges.length) d.brush = ranges; else delete d.brush;
  }

  // A drag along axis k: a new range (Shift: added to the axis's others), or, started inside
  // a range, that range moved; a click without a drag clears the axis.
  function startDrag(state, k, e) {
    e.preventDefault();
    state.dragging = true;
    const d = state.spec.dimensions[k], a = state.geo.axes[k];
    const box = state.svg.getBoundingClientRect();
    const unit = function (ev) { return Math.min(a.hi, Math.max(a.lo, a.u(ev.clientY - box.top))); };
    const start = unit(e), startY = e.clientY;
    const before = (d.brush || []).slice();
    const inside = before.findIndex(function (r) { return start >= r[0] && start <= r[1]; });
    let moved = false, frame = 0;
    const move = function (ev) {
      if (Math.abs(ev.clientY - startY) > 2) moved = true;
      if (!moved) return;
      const u = unit(ev);
      let ranges;
      if (inside >= 0 && !e.shiftKey) {
        const pad = d.categories ? 0.5 : 0; // a category's range reaches half a step past it
        const r = before[inside], shift = Math.min(a.hi + pad - r[1], Math.max(a.lo - pad - r[0], u - start));
        ranges = before.map(function (q, i) { return i === inside ? [q[0] + shift, q[1] + shift] : q; });
      } else {
        ranges = (e.shiftKey ? before : []).concat([[Math.min(start, u), Math.max(start, u)]]);
      }
      setBrush(state, k, ranges);
      if (!frame) frame = requestAnimationFrame(function () { frame = 0; layOut(state); });
    };
    // on the window: the redraws while dragging replace the axis under the pointer
    const up = function () {
      window.removeEventListener("pointermove", move);
      window.removeEventListener("pointerup", up);
      window.removeEventListener("pointercancel", up);
      state.dragging = false;
      if (frame) cancelAnimationFrame(frame);
      if (moved) setBrush(state, k, d.brush.map(function (r) { return snapped(d, r); }));
      else setBrush(state, k, null);
      layOut(state);
      commit(state);
    };
    window.addEventListener("pointermove", move);
    window.addEventListener("pointerup", up);
    window.addEventListener("pointercancel", up);
  }

  // The values the keyboard steps through: a text axis's categories, a number axis's own
  // values while there are at most 20, else ten bands of its extent; each as [lo, hi].
  function stops(d, a) {
    const distinct = d.categories ? d.categories.map(function (_, i) { return i; })
      : Array.from(new Set(d.values)).sort(function (x, y) { return x - y; });
    if (distinct.length <= 20) {
      return distinct.map(function (v, i) {
        const below = i ? (v + distinct[i - 1]) / 2 : v - 0.5 * ((distinct[1] - v) || 1);
        const above = i < distinct.length - 1 ? (v + distinct[i + 1]) / 2 : v + 0.5 * ((v - distinct[i - 1]) || 1);
        return d.categories ? [v - 0.5, v + 0.5] : [below, above];
      });
    }
    const out = [], w = (a.hi - a.lo) / 10;
    for (let i = 0; i < 10; i++) out.push([a.lo + i * w, a.lo + (i + 1) * w]);
    return out;
  }

  function key(state, k, e) {
    const d = state.spec.dimensions[k];
    if (e.key === "Escape" || e.key === "Delete" || e.key === "Backspace") {
      if (!d.brush) return;
      setBrush(state, k, null);
    } else if (e.key === "ArrowUp" || e.key === "ArrowDown") {
      const all = stops(d, state.geo.axes[k]);
      const mid = d.brush ? (d.brush[0][0] + d.brush[0][1]) / 2 : null;
      let at = mid === null ? -1 : all.findIndex(function (r) { return mid >= r[0] && mid <= r[1]; });
      if (mid === null) at = e.key === "ArrowUp" ? 0 : all.length - 1;
      else at = Math.min(all.length - 1, Math.max(0, at + (e.key === "ArrowUp" ? 1 : -1)));
      setBrush(state, k, [all[at]]);
    } else {
      return;
    }
    e.preventDefault();
    layOut(state);
    commit(state);
  }

  // The trial whose line passes nearest (within 6 px) to the pointer, or -1.
  function nearest(state, px, py) {
    const axes = state.geo.axes, dims = state.spec.dimensions;
    let k = 0;
    while (k < axes.length - 2 && px > axes[k + 1].x) k++;
    const a = axes[k], b = axes[Math.min(k + 1, axes.length - 1)];
    const f = b.x > a.x ? Math.min(1, Math.max(0, (px - a.x) / (b.x - a.x))) : 0;
    let best = -1, gap = 6;
    for (let i = 0; i < state.spec.ids.length; i++) {
      const y = a.y(dims[k].values[i]) * (1 - f) + b.y(dims[Math.min(k + 1, dims.length - 1)].values[i]) * f;
      if (Math.abs(y - py) < gap) { gap = Math.abs(y - py); best = i; }
    }
    return best;
  }

  function describeTrial(spec, i, clickable) {
    const parts = spec.dimensions.map(function (d) {
      const u = d.values[i];
      return d.label + " " + (d.categories ? d.categories[u] : window.DnnPlot.fmt(d.log ? Math.pow(10, u) : u));
    });
    return "trial " + spec.ids[i] + (spec.kinds[i] ? " (" + spec.kinds[i] + ")" : "") + ": " + parts.join(", ") +
      (clickable ? " — click: its trial" : "");
  }

  function hover(state, e) {
    if (state.dragging || e.target.classList.contains("parallel-hit")) return;
    const box = state.svg.getBoundingClientRect();
    const i = nearest(state, e.clientX - box.left, e.clientY - box.top);
    state.hovered = i;
    state.el.dataset.hovered = i >= 0 ? state.spec.ids[i] : "";
    if (i < 0) { state.hover.setAttribute("d", ""); state.tip.hidden = true; state.svg.style.cursor = ""; return; }
    state.hover.setAttribute("d", state.spec.dimensions.map(function (d, k) {
      return (k ? "L" : "M") + state.geo.axes[k].x + "," + state.geo.axes[k].y(d.values[i]);
    }).join(""));
    state.tip.textContent = describeTrial(state.spec, i, Boolean(state.opts.open));
    state.tip.hidden = false;
    state.tip.style.left = Math.min(e.clientX - box.left + 12, state.geo.width - 260) + "px";
    state.tip.style.top = (e.clientY - box.top + 14) + "px";
    state.svg.style.cursor = state.opts.open ? "pointer" : "";
  }

  // Draws (or redraws in place) the chart in `el` from `spec`.
  function draw(el, spec, opts) {
    let state = el.parallelState;
    if (!state || !el.contains(state.svg)) {
      el.textContent = "";
      state = { el: el, id: el.id, hovered: -1 };
      state.titleEl = el.appendChild(document.createElement("div"));
      state.titleEl.className = "parallel-title";
      const plot = el.appendChild(document.createElement("div"));
      plot.className = "parallel-plot";
      state.canvas = plot.appendChild(document.createElement("canvas"));
      state.svg = svg("svg", { "class": "parallel-svg" }, plot);
      state.tip = plot.appendChild(document.createElement("div"));
      state.tip.className = "parallel-tip";
      state.tip.hidden = true;
      state.svg.addEventListener("pointermove", function (e) { hover(state, e); });
      state.svg.addEventListener("pointerleave", function () { state.tip.hidden = true; state.hover.setAttribute("d", ""); });
      state.svg.addEventListener("click", function (e) {
        if (e.target.classList.contains("parallel-hit") || state.hovered < 0 || !state.opts.open) return;
        state.opts.open(state.spec.ids[state.hovered]);
      });
      // a new width redraws the lines (a canvas stretches rather than reflows)
      let width = el.clientWidth;
      state.resized = new ResizeObserver(function () {
        if (el.clientWidth !== width) { width = el.clientWidth; layOut(state); }
      });
      state.resized.observe(el);
      el.parallelState = state;
    }
    state.spec = spec;
    state.opts = opts;
    el.parallel = spec;
    state.titleEl.textContent = spec.title;
    el.classList.add("drawn");
    el.setAttribute("role", "figure");
    el.setAttribute("aria-label", spec.title + ": " + spec.summary);
    layOut(state);
  }

  // The chart leaves the element (which is about to say why there is nothing to draw).
  function clear(el) {
    if (el.parallelState) el.parallelState.resized.disconnect();
    delete el.parallelState;
    delete el.parallel;
  }

  return { draw: draw, clear: clear, niceTicks: niceTicks };
})();
