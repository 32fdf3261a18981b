// Experiment list: creation times in the reader's own time zone, and while any experiment
// runs, its rows brought up to date every 5 s in place: a reload would clear the ticked
// compare boxes and the search box the reader is using.
(function () {
  "use strict";
  const REFRESH_MS = 5000;

  function localTimes(root) {
    for (const td of root.querySelectorAll("td.ts")) {
      td.textContent = new Date(parseFloat(td.dataset.ts) * 1000).toLocaleString();
    }
  }

  // The server's rows of this page, merged into the table: a row's compare box (its first
  // cell) stays as the reader left it, the other cells are the server's.
  function merge(body, fresh) {
    const held = new Map(Array.from(body.rows).map(function (r) { return [r.dataset.experiment, r]; }));
    const rows = Array.from(fresh.rows).map(function (row) {
      localTimes(row);
      const mine = held.get(row.dataset.experiment);
      if (!mine) return document.importNode(row, true);
      held.delete(row.dataset.experiment);
      for (let i = 1; i < row.cells.length && i < mine.cells.length; i++) {
        if (mine.cells[i].innerHTML !== row.cells[i].innerHTML) mine.cells[i].innerHTML = row.cells[i].innerHTML;
      }
      return mine;
    });
    for (const gone of held.values()) gone.remove();
    // only rows out of place move, so a focused compare box keeps its focus
    rows.forEach(function (row, i) {
      if (body.rows[i] !== row) body.insertBefore(row, body.rows[i] || null);
    });
  }

  async function refresh() {
    const table = document.getElementById("experiments");
    let next = false;
    try {
      const res = await fetch(window.location.href, { headers: { "Accept": "text/html" } });
      if (res.ok) {
        const page = new DOMParser().parseFromString(await res.text(), "text/html");
        const fresh = page.getElementById("experiments");
        if (fresh) {
          merge(table.tBodies[0], fresh.tBodies[0]);
          table.dataset.active = fresh.dataset.active;
        }
      }
      next = table.dataset.active === "1";
    } catch (e) {
      next = true; // the server is away for a moment: try again later
    }
    if (next) setTimeout(refresh, REFRESH_MS);
  }

  localTimes(document);
  const table = document.getElementById("experiments");
  if (table && table.dataset.active === "1") setTimeout(refresh, REFRESH_MS);
})();
