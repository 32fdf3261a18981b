// One live stream for every tab of this site (a SharedWorker: one per browser and origin).
//
// A browser keeps six HTTP/1.1 connections per host for all its tabs, and an EventSource
// holds one for as long as it is open: six experiment pages each with their own stream
// would leave none for a seventh tab's page or API calls. Here every tab's page says which
// experiment it follows, and this worker holds one EventSource on /api/v1/events for all
// of them, passing each event to the tabs of the experiment it names.
//
// Tab → worker: {type: "watch"|"unwatch", experiment_id, events_url}.
// Worker → tab: {type: "change"|"trials"|"end"|"closed", experiment_id, data}; "closed"
// says the stream was refused or lost for good (503, the server gone): the tab reads and
// polls for itself, and may watch again later.
"use strict";

const tabs = new Map(); // experiment id → the ports of the tabs that follow it
let eventsUrl = null;
let source = null; // the one EventSource, or null
let streamed = new Set(); // the experiments it follows
let reopenTimer = null;

function send(id, message) {
  for (const port of tabs.get(id) || []) port.postMessage(message);
}

function forget(port, id) {
  const ports = tabs.get(id);
  if (!ports) return;
  ports.delete(port);
  if (!ports.size) tabs.delete(id);
}

function watch(port, id) {
  if (!tabs.has(id)) tabs.set(id, new Set());
  tabs.get(id).add(port);
  if (source && streamed.has(id)) {
    // the stream already follows it: the tab catches up with what changed since its read
    port.postMessage({ type: "change", experiment_id: id, data: {} });
  } else if (!reopenTimer) {
    // tabs opened together join one new stream, not one each
    reopenTimer = setTimeout(reopen, 50);
  }
}

function close() {
  if (source) source.close();
  source = null;
  streamed = new Set();
}

// A new stream for every experiment some tab follows; its first events tell every tab to
// catch up, so nothing that changed while streams were swapped is missed.
function reopen() {
  reopenTimer = null;
  close();
  const ids = Array.from(tabs.keys()).sort();
  if (!ids.length || !eventsUrl) return;
  const query = ids.map(function (id) { return "experiment=" + encodeURIComponent(id); }).join("&");
  const es = new EventSource(eventsUrl + "?" + query);
  source = es;
  streamed = new Set(ids);
  for (const name of ["change", "trials", "end"]) {
    es.addEventListener(name, function (event) {
      if (es !== source) return;
      const data = JSON.parse(event.data);
      const id = data.experiment_id;
      send(id, { type: name, experiment_id: id, data: data });
      if (name !== "end") return;
      // over: its tabs stop listening; the stream closes once it follows nothing
      tabs.delete(id);
      streamed.delete(id);
      if (!streamed.size) close();
    });
  }
  es.addEventListener("error", function () {
    // CONNECTING: it reconnects by itself (its first events then tell the tabs to catch up)
    if (es !== source || es.readyState !== EventSource.CLOSED) return;
    close();
    const gone = Array.from(tabs.keys());
    for (const id of gone) send(id, { type: "closed", experiment_id: id, data: {} });
    tabs.clear();
  });
}

self.onconnect = function (event) {
  const port = event.ports[0];
  port.onmessage = function (message) {
    const m = message.data || {};
    if (typeof m.experiment_id !== "string") return;
    if (m.type === "watch") {
      eventsUrl = m.events_url || eventsUrl;
      watch(port, m.experiment_id);
    } else if (m.type === "unwatch") {
      // the stream keeps following it until it ends or the stream is swapped: swapping it
      // now would make every other tab read again for nothing
      forget(port, m.experiment_id);
    }
  };
  port.start();
};
