// Experiment page: follows GET /api/v1/experiments/<id>/trials?since=<cursor> and redraws the
// progress, the axes chooser, the sortable trial table and the charts (experiment-charts.js).
(function () {
  "use strict";
  const P = window.DnnPlot;
  const meta = JSON.parse(document.getElementById("experiment-data").textContent);
  const trials = new Map();
  let cursor = 0;
  const V = P.VOCAB, S = V.states;
  const DONE = new Set(V.done), FINISHED = new Set(V.finished);
  // parameters in the order a reader scans them: the layer design first, the seed last
  const ORDER = ["hidden_layers", "width", "activation", "residual", "residual_learnable", "normalization",
    "norm_position", "init", "dropout", "optimizer", "learning_rate", "momentum", "batch_size", "max_epochs",
    "l2", "grad_clip", "lr_schedule.kind", "lr_schedule.warmup_epochs", "dataset"];
  const EXTRA_VALUES = window.DnnTrialTable.EXTRA_VALUES;
  // what the reader picked; a control left alone follows what the sweep varies
  const chosen = {};
  const controls = {
    x: document.getElementById("x-param"), y: document.getElementById("y-metric"),
    group: document.getElementById("group-by"), curveMetric: document.getElementById("curve-metric"),
    mode: document.getElementById("curve-mode"), smoothing: document.getElementById("smoothing"),
    logY: document.getElementById("log-y"), evaluator: document.getElementById("evaluator"),
    rankColour: document.getElementById("rank-colour"), ecdfGroup: document.getElementById("ecdf-group"),
    timelineRows: document.getElementById("timeline-rows"),
  };

  function rank(p) {
    if (p === "seed") return 1000;
    const i = ORDER.indexOf(p);
    return i < 0 ? 500 : i;
  }

  function variedParams(all) {
    const keys = new Set();
    for (const t of all) for (const k of Object.keys(t.params)) keys.add(k);
    return P.varying(all, Array.from(keys)).sort(function (a, b) { return rank(a) - rank(b) || a.localeCompare(b); });
  }

  function metricNames(all) {
    const names = new Set();
    for (const t of all) for (const k of Object.keys(t.metrics || {})) if (t.state !== S.RUNNING) names.add(k);
    const objective = meta.objective && meta.objective.metric;
    const list = Array.from(names).sort(function (a, b) {
      return (b === objective) - (a === objective) || a.localeCompare(b);
    });
    return list.concat(EXTRA_VALUES.filter(function (k) {
      return all.some(function (t) { return typeof t[k] === "number"; });
    }));
  }

  function curveNames(all) {
    const names = new Set();
    for (const t of all) for (const h of t.history || []) for (const k of Object.keys(h)) {
      if (k !== "epoch" && typeof h[k] === "number") names.add(k);
    }
    return Array.from(names).sort();
  }

  function setOptions(select, values, labels, selected) {
    const current = Array.from(select.options).map(function (o) { return o.value; }).join("\n");
    if (current !== values.join("\n")) {
      select.innerHTML = "";
      values.forEach(function (v, i) {
        const o = document.createElement("option");
        o.value = v;
        o.textContent = labels[i];
        select.appendChild(o);
      });
    }
    select.value = selected;
  }

  // The axes: the reader's picks, else defaults that follow what the sweep varies.
  function choose(all) {
    const varied = variedParams(all);
    const notSeed = varied.filter(function (p) { return p !== "seed"; });
    const numeric = notSeed.filter(function (p) { return all.every(function (t) { return typeof t.params[p] === "number"; }); });
    const xOptions = varied.length ? varied : ["hidden_layers"];
    let x = chosen.x && xOptions.indexOf(chosen.x) >= 0 ? chosen.x
      : varied.indexOf("hidden_layers") >= 0 ? "hidden_layers" : (numeric[0] || notSeed[0] || xOptions[0]);
    const few = function (p) { return new Set(all.map(function (t) { return JSON.stringify(t.params[p]); })).size <= 24; };
    const groupable = varied.filter(function (p) { return p !== x && few(p); });
    const group = chosen.group !== undefined ? (groupable.indexOf(chosen.group) >= 0 ? chosen.group : "")
      : (groupable.filter(function (p) { return p !== "seed"; })[0] || "");
    setOptions(controls.x, xOptions, xOptions.map(P.label), x);
    setOptions(controls.group, [""].concat(groupable), ["(none)"].concat(groupable.map(P.label)), group);
    // the rank plot's colour and the distribution's lines: any varied parameter (a colour
    // scale takes many values), by default the grouping
    const pick = function (name, options) {
      return chosen[name] !== undefined ? (options.indexOf(chosen[name]) >= 0 ? chosen[name] : "") : group;
    };
    const rankColour = pick("rankColour", varied);
    setOptions(controls.rankColour, [""].concat(varied), ["(none)"].concat(varied.map(P.label)), rankColour);
    const ecdfOptions = varied.filter(few);
    const ecdfGroup = pick("ecdfGroup", ecdfOptions);
    setOptions(controls.ecdfGroup, [""].concat(ecdfOptions), ["(none)"].concat(ecdfOptions.map(P.label)), ecdfGroup);

    const metrics = metricNames(all);
    const objective = meta.objective && meta.objective.metric;
    const yOptions = metrics.length ? metrics : [objective || V.objective.metric];
    const y = chosen.y && yOptions.indexOf(chosen.y) >= 0 ? chosen.y
      : yOptions.indexOf(objective) >= 0 ? objective : yOptions[0];
    setOptions(controls.y, yOptions, yOptions.map(P.label), y);

    const search = meta.search || {};
    const curveOptions = curveNames(all);
    const counterpart = String(objective || "").replace(/^test_/, "val_");
    const curveMetric = chosen.curveMetric && curveOptions.indexOf(chosen.curveMetric) >= 0 ? chosen.curveMetric
      : [search.prunes ? search.rung_metric : null, counterpart, "val_accuracy", "val_loss"]
        .filter(function (m) { return m && curveOptions.indexOf(m) >= 0; })[0] || curveOptions[0] || "";
    setOptions(controls.curveMetric, curveOptions.length ? curveOptions : [""],
      curveOptions.length ? curveOptions.map(P.label) : ["(none yet)"], curveMetric);
    const withHistory = all.filter(function (t) { return t.history && t.history.length; }).length;
    const mode = chosen.mode || (withHistory > 12 ? "groups" : "trials");
    controls.mode.value = mode;
    return { x: x, y: y, group: group, varied: varied, curveMetric: curveMetric, mode: mode,
      smoothing: parseFloat(controls.smoothing.value) || 0, logY: controls.logY.checked,
      evaluator: controls.evaluator.value, rankColour: rankColour, ecdfGroup: ecdfGroup,
      timelineRows: controls.timelineRows.value };
  }

  // the reader's choices live in the URL (url-state.js): a reload or a shared link shows them
  const PICKS = ["x", "y", "group", "curveMetric", "mode", "evaluator", "rankColour", "ecdfGroup",
    "timelineRows"];
  const remember = window.DnnUrlState.restore(controls, chosen, PICKS);

  for (const name of PICKS) {
    controls[name].addEventListener("change", function () {
      chosen[name] = controls[name].value;
      remember(name, chosen[name], null);
      redraw();
    });
  }
  controls.smoothing.addEventListener("input", function () {
    document.getElementById("smoothing-value").textContent = controls.smoothing.value;
    remember("smoothing", controls.smoothing.value, "0");
    redraw();
  });
  controls.logY.addEventListener("change", function () {
    remember("log_y", controls.logY.checked ? "1" : "0", "0");
    redraw();
  });

  // ----------------------------------------------------------------- table
  const table = window.DnnTrialTable.create(meta, trials, remember);

  // brushes on the parallel coordinates and the table's column filters filter the table and
  // the charts (trial-filter.js), and live in the URL
  const F = window.DnnFilter;
  const query = new URLSearchParams(location.search);
  F.load(query.get("brush"), query.get("filter"));
  F.onChange(function () {
    remember("brush", F.brushText(), null);
    remember("filter", F.columnText(), null);
    redraw();
  });
  document.getElementById("clear-brush").addEventListener("click", function () { F.clear(); });

  // ----------------------------------------------------------------- progress
  const SEGMENTS = V.bar;

  function renderProgress(data, varied) {
    const counts = data.counts || {};
    const n = data.n_trials || 0;
    const inState = function (states) {
      return Object.keys(counts).reduce(function (a, k) { return a + (states.has(k) ? counts[k] : 0); }, 0);
    };
    // the text counts trials that ran to an end; polling stops once every trial is over
    const done = inState(DONE), over = inState(FINISHED);
    for (const s of SEGMENTS) {
      const el = document.getElementById("progress-" + s);
      if (el) el.style.width = (n ? 100 * (counts[s] || 0) / n : 0).toFixed(2) + "%";
    }
    const parts = SEGMENTS.concat([S.QUEUED]).filter(function (k) { return counts[k]; })
      .map(function (k) { return counts[k] + " " + k.toLowerCase(); });
    document.getElementById("progress-text").textContent = done + " of " + n + " trials done" +
      (parts.length ? ": " + parts.join(", ") : "");
    const status = document.getElementById("status");
    status.textContent = data.status_text || data.status;
    status.className = "state state-" + data.status;
    // Before its first epoch a pack compiles its graph (minutes on a fresh host): say so,
    // or the page looks hung while nothing moves.
    const graphs = document.getElementById("graphs");
    const building = data.graphs && data.graphs.ready < data.graphs.total;
    graphs.hidden = !building;
    graphs.textContent = building ? "building graphs " + data.graphs.ready + "/" + data.graphs.total +
      ": the first pack of each graph compiles its C code before its first epoch (seconds when " +
      "the compile cache has it, minutes on a fresh host)" : "";
    // over while the page was open: nothing is left to cancel (the server would refuse it)
    const cancel = document.getElementById("cancel");
    if (cancel && data.can_cancel === false) cancel.form.remove();
    const objective = meta.objective || V.objective;
    // the best configuration by its mean over seeds: one lucky seed does not make it best,
    // and the order does not depend on the order the trials arrived in
    // seeds count as the charts count them: a diverged one as the worst value
    const everything = Array.from(trials.values());
    const counted = window.DnnOutcomes.over(everything, function (key) {
      return key === objective.metric ? objective.mode : P.direction(key);
    });
    const ranked = P.rankConfigurations(everything, function (t) {
      return counted.value(t, objective.metric);
    }, objective.mode);
    if (ranked.length) {
      const el = document.getElementById("best");
      const told = P.describeBest(ranked, objective, varied);
      el.textContent = told.text;
      el.dataset.ties = String(told.ties);
      el.dataset.trial = ranked[0].bestTrialId;
      el.dataset.trials = ranked[0].trialIds.join(" ");
    }
    return over >= n;
  }

  // ----------------------------------------------------------------- polling
  let last = null;
  function redraw() {
    const all = Array.from(trials.values());
    const choice = choose(all);
    table.setColumns(choice.varied, choice.y);
    if (last) renderProgress(last, choice.varied);
    window.DnnCharts.prepare(all, meta); // the filters count trials as the charts do
    table.render(F.active() ? window.DnnCharts.keeps : null);
    window.DnnCharts.render(all, meta, choice);
  }

  // The plotly charts alone (the table and the parallel coordinates are drawn already), once
  // plotly.js has run, unless the first read's drawing drew them.
  function drawCharts() {
    const all = Array.from(trials.values());
    window.DnnCharts.render(all, meta, choose(all), true);
  }

  // A curve as the page-data read sends it (one list per metric) back into per-epoch records.
  function historyRows(columns) {
    const keys = Object.keys(columns);
    const n = keys.length ? columns[keys[0]].length : 0;
    const rows = [];
    for (let i = 0; i < n; i++) {
      const row = {};
      for (const k of keys) if (columns[k][i] !== null) row[k] = columns[k][i];
      rows.push(row);
    }
    return rows;
  }

  // The first read, one request: every trial (curves as columns) and the importance of the
  // metric the charts show first, so they are all drawn from it. Later reads are the API's.
  // The page's head preloads the read its URL asks for (meta.first_read): the same URL here.
  async function firstRead() {
    const y = chosen.y || (meta.objective && meta.objective.metric) || "";
    const ahead = meta.first_read;
    const res = await fetch(ahead && ahead.metric === y && ahead.evaluator === controls.evaluator.value ? ahead.url
      : meta.page_data_url + "?metric=" + encodeURIComponent(y) + "&evaluator=" + encodeURIComponent(controls.evaluator.value));
    if (!res.ok) throw new Error("HTTP " + res.status);
    const body = await res.json();
    let counted = 0; // the trials the charts and the importance count (outcomes.js)
    for (const t of body.trials) {
      t.history = historyRows(t.history);
      trials.set(t.id, t);
      if (window.DnnOutcomes.counts(t)) counted++;
    }
    if (body.importance) window.DnnImportance.seed(body.importance, counted);
    last = body;
    cursor = body.cursor;
    return body;
  }

  // Read every change since the cursor (the first time, the page-data read first); true
  // when the experiment is over.
  let fetching = null, again = false, readFirst = true;
  async function fetchChanges() {
    let more = true, changed = false;
    if (readFirst) {
      const body = await firstRead();
      readFirst = false;
      changed = body.trials.length > 0;
      more = body.more;
    }
    while (more) {
      const res = await fetch(meta.trials_url + "?history=1&since=" + cursor);
      if (!res.ok) throw new Error("HTTP " + res.status);
      last = await res.json();
      for (const t of last.trials) trials.set(t.id, t);
      changed = changed || last.trials.length > 0;
      cursor = last.cursor;
      more = last.more;
    }
    const all = Array.from(trials.values());
    const finished = renderProgress(last, variedParams(all));
    if (changed) redraw();
    return finished;
  }

  // One read at a time; an event that arrives during a read asks for one more after it.
  function refresh() {
    if (fetching) { again = true; return fetching; }
    fetching = fetchChanges().finally(function () {
      fetching = null;
      if (again) { again = false; refresh(); }
    });
    return fetching;
  }

  function lostContact(e) {
    document.getElementById("progress-text").textContent = "lost contact with the server (" + e.message + "), retrying…";
  }

  // Polling: every second while trials run.
  async function poll(until) {
    let finished = false;
    try {
      finished = await refresh();
    } catch (e) {
      lostContact(e);
    }
    if (finished) return rest();
    if (until && Date.now() > until) return follow();
    setTimeout(function () { poll(until); }, 1000);
  }

  // A finished experiment holds no connection open (a browser has six per host, shared by
  // every tab): one short read every 30 s notices it coming back to life (a resubmitted spec
  // requeues its failed trials), and the page follows it again.
  function rest() {
    document.body.dataset.live = "finished";
    setTimeout(async function () {
      let finished = true;
      try {
        finished = await refresh();
      } catch (e) {
        lostContact(e);
      }
      if (finished) rest(); else follow();
    }, 30000);
  }

  // Server-sent events: the server says when the experiment changed, the page reads the
  // changes then. Every tab of this site shares one stream (live.js), so however many are
  // open they hold one of the browser's six connections per host. Without a shared stream
  // (no SharedWorker), or when the server refuses it (too many pages open), the page polls,
  // and tries the stream again later.
  let following = false;
  function follow() {
    following = true;
    if (!window.DnnLive || !DnnLive.watch(meta.id, meta.live_url, meta.live_worker, onLive)) {
      document.body.dataset.live = "poll";
      return poll(null);
    }
  }

  function stopFollowing() {
    if (!following) return;
    following = false;
    DnnLive.unwatch(meta.id);
    rest();
  }

  function onLive(message) {
    if (!following) return;
    if (message.type === "note") {
      // the experiment's note saved elsewhere (the box waits while one is being typed here)
      if (window.DnnNotes && message.data.kind === "experiment") window.DnnNotes.receive(message.data);
    } else if (message.type === "change") {
      document.body.dataset.live = "stream";
      refresh().then(function (finished) { if (finished) stopFollowing(); }).catch(lostContact);
    } else if (message.type === "trials") {
      // the changed trials themselves: nothing to read back (a newer copy from a read wins)
      const update = message.data;
      for (const t of update.trials) {
        const held = trials.get(t.id);
        if (!held || held.seq <= t.seq) trials.set(t.id, t);
      }
      last = Object.assign({}, last, update);
      renderProgress(last, variedParams(Array.from(trials.values())));
      redraw();
      if (update.over) stopFollowing();
    } else if (message.type === "end") {
      // the experiment is over: the stream follows it no more
      refresh().catch(lostContact).finally(stopFollowing);
    } else if (message.type === "closed") {
      // refused or lost: poll a while, then ask for the stream again
      following = false;
      document.body.dataset.live = "poll";
      poll(Date.now() + 30000);
    }
  }

  // plotly.js loads deferred: the table shows once the trials are in, the charts once
  // plotly has run too (whichever comes last draws them)
  P.whenPlotly(function () { if (last) drawCharts(); });

  refresh().then(function (finished) {
    if (finished) rest(); else follow();
  }, function (e) {
    lostContact(e);
    follow();
  });
})();
