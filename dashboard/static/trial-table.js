// The experiment page's trial table: a column per varied parameter and per metric of note,
// sortable by any column (a header is a button: Tab reaches it, Enter or Space sorts, and
// aria-sort says the order), the sort kept in the URL; rows never jump as trials change state.
// Under the headers a row of filters, one per column (trial-filter.js keeps and applies them).
window.DnnTrialTable = (function () {
  "use strict";
  const P = window.DnnPlot, V = P.VOCAB, F = window.DnnFilter;
  const EXTRA_VALUES = ["train_seconds", "compile_seconds", "total_seconds", "epochs_run", "n_params"];

  // meta: the page's experiment data; trials: id → trial, kept by the page; remember: writes
  // a choice into the URL (url-state.js)
  function create(meta, trials, remember) {
    const url = new URLSearchParams(location.search);
    let sortKey = url.get("sort") || null; // null: the sweep's own order (parameters, then id)
    let sortDesc = url.get("desc") === "1";
    const el = document.getElementById("trials");
    const thead = el.querySelector("thead");
    const tbody = el.querySelector("tbody");
    let columnsKey = "";
    let columns = [];

    function cell(t, key) {
      if (key === "state" || key === "id" || key === "epoch") return t[key];
      return window.DnnCharts.value(t, key);
    }

    function setColumns(varied, y) {
      const objective = (meta.objective && meta.objective.metric) || V.objective.metric;
      const metricCols = [objective, objective.replace(/^test_/, "val_")];
      if (metricCols.indexOf(y) < 0 && EXTRA_VALUES.indexOf(y) < 0) metricCols.push(y);
      const next = [{ key: "state", label: "State" }]
        .concat(varied.map(function (p) { return { key: p, label: P.label(p), num: true }; }))
        .concat([{ key: "epoch", label: "Epochs", num: true }])
        .concat(metricCols.map(function (m) { return { key: m, label: P.label(m), num: true, metric: true }; }))
        .concat([{ key: "train_seconds", label: "Train s", num: true, metric: true }, { key: "id", label: "Trial" }]);
      const key = next.map(function (c) { return c.key; }).join(",");
      if (key === columnsKey) return;
      columnsKey = key;
      columns = next;
      const tr = document.createElement("tr");
      for (const c of columns) {
        const th = document.createElement("th");
        th.dataset.key = c.key;
        if (c.num) th.dataset.num = "";
        // a button inside the header: reachable with Tab, sorted with Enter or Space
        const button = document.createElement("button");
        button.type = "button";
        button.className = "sort";
        button.textContent = c.label;
        th.appendChild(button);
        th.addEventListener("click", function () {
          sortDesc = sortKey === c.key ? !sortDesc : th.hasAttribute("data-num");
          sortKey = c.key;
          remember("sort", sortKey, null);
          remember("desc", sortDesc ? "1" : "0", "0");
          markSorted();
          renderTable(lastKeep);
        });
        tr.appendChild(th);
      }
      thead.innerHTML = "";
      thead.appendChild(tr);
      thead.appendChild(filterRow());
      markSorted();
    }

    // One labelled input per column; a filter reaches the table and the charts when the
    // reader stops typing, not on every key (a redraw of every chart takes a while).
    function filterRow() {
      const tr = document.createElement("tr");
      tr.className = "column-filters";
      for (const c of columns) {
        const td = document.createElement("td");
        const input = document.createElement("input");
        input.type = "search";
        input.dataset.key = c.key;
        input.setAttribute("aria-label", "Filter " + c.label);
        input.value = F.column(c.key);
        let wait = null;
        const apply = function () { clearTimeout(wait); F.setColumn(c.key, input.value); };
        input.addEventListener("input", function () { clearTimeout(wait); wait = setTimeout(apply, 300); });
        input.addEventListener("change", apply);
        td.appendChild(input);
        tr.appendChild(td);
      }
      return tr;
    }

    // Each filter input as the trials now are: a number column asks for a range and says
    // when the text is none; the inputs follow the filters (a reload, "show every trial").
    function updateFilters(every) {
      for (const input of thead.querySelectorAll("tr.column-filters input")) {
        const key = input.dataset.key;
        const values = every.map(function (t) { return cell(t, key); })
          .filter(function (v) { return v !== undefined && v !== null; });
        const numeric = values.length > 0 && values.every(function (v) { return typeof v === "number"; });
        if (document.activeElement !== input) input.value = F.column(key);
        input.placeholder = numeric ? "a..b" : "contains, =equals";
        const bad = numeric && F.column(key) !== "" && F.parseRange(F.column(key)) === null;
        input.classList.toggle("invalid", bad);
        input.setAttribute("aria-invalid", bad ? "true" : "false");
        input.title = bad ? "'" + F.column(key) + "' is not a number or a range a..b (a.. or ..b leave a side open)" : "";
      }
    }

    // The sorted column says so, to the eye (▲/▼) and to a screen reader (aria-sort).
    function markSorted() {
      for (const th of thead.querySelectorAll("th")) {
        const on = th.dataset.key === sortKey;
        th.classList.toggle("asc", on && !sortDesc);
        th.classList.toggle("desc", on && sortDesc);
        th.setAttribute("aria-sort", on ? (sortDesc ? "descending" : "ascending") : "none");
      }
    }

    // A trial's place never depends on its state or change number, so rows stay put while
    // trials move from QUEUED to RUNNING to COMPLETE.
    function stableOrder(a, b) {
      for (const c of columns) {
        if (c.key === "state" || c.key === "epoch" || c.metric || c.key === "id") continue;
        const d = P.compare(a.params[c.key], b.params[c.key]);
        if (d) return d;
      }
      return P.compare(a.id, b.id);
    }

    // keep: null for every trial, else the trials to show (trial-filter.js)
    function renderTable(keep) {
      const every = Array.from(trials.values());
      const rows = keep ? every.filter(keep) : every;
      updateFilters(every);
      const note = document.getElementById("brushed");
      note.hidden = !keep;
      document.getElementById("brushed-text").textContent = keep ? "Showing " + rows.length + " of " +
        every.length + " trials: " + filtersSaid() + "." : "";
      rows.sort(function (a, b) {
        if (sortKey !== null) {
          const x = cell(a, sortKey), y = cell(b, sortKey);
          const blank = (x === null || x === undefined) !== (y === null || y === undefined);
          const c = P.compare(x, y);
          if (c) return blank || !sortDesc ? c : -c;
        }
        return stableOrder(a, b);
      });
      tbody.innerHTML = rows.map(function (t) {
        return '<tr data-trial="' + t.id + '" data-state="' + t.state + '">' + columns.map(function (c) {
          if (c.key === "state") {
            const title = t.error ? ' title="' + escapeHtml(t.error) + '"' : "";
            return '<td><span class="state state-' + t.state + '"' + title + ">" + t.state + "</span></td>";
          }
          if (c.key === "id") {
            return '<td><a href="' + meta.trial_page.replace("TRIAL_ID", t.id) + '"><code>' + t.id.slice(0, 10) + "…</code></a></td>";
          }
          return "<td" + (c.num ? ' class="num"' : "") + ">" + escapeHtml(P.fmt(cell(t, c.key))) + "</td>";
        }).join("") + "</tr>";
      }).join("");
    }

    // What filters the table, every column filter named (one on a column not shown too).
    function filtersSaid() {
      const parts = [];
      if (F.brushed()) parts.push("those inside the brushed ranges of the parallel coordinates");
      const typed = F.columnFilters().map(function (f) { return P.label(f[0]) + " " + f[1]; });
      if (typed.length) parts.push("filtered by " + typed.join(", "));
      return parts.join("; ");
    }

    function escapeHtml(s) {
      return String(s).replace(/[&<>"']/g, function (c) {
        return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
      });
    }

    let lastKeep = null;
    function render(keep) {
      lastKeep = keep || null;
      renderTable(lastKeep);
    }

    return { setColumns: setColumns, render: render };
  }

  return { create: create, EXTRA_VALUES: EXTRA_VALUES };
})();
