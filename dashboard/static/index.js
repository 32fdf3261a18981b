// Experiment list: creation times in the reader's own time zone.
for (const td of document.querySelectorAll("td.ts")) {
  td.textContent = new Date(parseFloat(td.dataset.ts) * 1000).toLocaleString();
}
