// The experiment page's timeline of the trials: a bar per trial from its start to its end,
// coloured by state, a row per trial or per worker.
window.DnnTimeline = (function () {
  "use strict";
  const P = window.DnnPlot;
  const isNumber = function (v) { return typeof v === "number" && Number.isFinite(v); };

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

  // The chart of `all` trials, a row per trial or per worker (`rowsBy`, the reader's choice);
  // `emptyText` says why when no trial started.
  function draw(all, rowsBy, emptyText) {
    const lanes = rowsBy === "workers" ? "workers" : "trials";
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
    emptyText);
  }

  return { draw: draw };
})();
