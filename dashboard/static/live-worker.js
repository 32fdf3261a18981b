// One live stream for every tab of this site (a SharedWorker: one per browser and origin).
//
// A browser keeps six HTTP/1.1 connections per host for all its tabs, and an EventSource
// holds one for as long as it is open: six experiment pages each with their own stream
// would leave none for a seventh tab's page or API calls. Here every tab's page says which
// experiment it follows, and this worker holds one EventSource on /api/v1/events for all
// of them, passing each event to the tabs of the experiment it names.
//
// Tab → worker: {type: "watch"|"unwatch", experiment_id, events_url, trial_id}: a trial page
// names its trial too, whose note the stream then follows (a "note" event of kind "trial").
// Worker → tab: {type: "watching"} at once (this worker runs), then {type: "change"|"trials"|
// "note"|"end"|"closed", experiment_id, data}; "closed"
// says the stream was refused or lost for good (503, the server gone): the tab reads and
// polls for itself, and may watch again later.
"use strict";

const tabs = new Map(); // experiment id → the ports of the tabs that follow it
const trialTabs = new Map(); // trial id → (port → the experiment id it follows the trial by)
let eventsUrl = null;
let source = null; // the one EventSource, or null
let streamed = new Set(); // the experiments it follows
let streamedTrials = new Set(); // the trials whose notes it follows
let reopenTimer = null;

function send(id, message) {
  for (const port of tabs.get(id) || []) port.postMessage(message);
}

// The tabs that show a trial's note, each told under the experiment it follows.
function sendTrial(trialId, message) {
  for (const [port, id] of trialTabs.get(trialId) || []) {
    port.postMessage(Object.assign({}, message, { experiment_id: id }));
  }
}

// Forget the trials `port` follows by experiment `id` (every tab's, when port is null).
function forgetTrials(port, id) {
  for (const [trialId, ports] of trialTabs) {
    for (const [p, e] of Array.from(ports)) if (e === id && (!port || p === port)) ports.delete(p);
    if (!ports.size) trialTabs.delete(trialId);
  }
}

function forget(port, id) {
  forgetTrials(port, id);
  const ports = tabs.get(id);
  if (!ports) return;
  ports.delete(port);
  if (!ports.size) tabs.delete(id);
}

function watch(port, id, trialId) {
  if (!tabs.has(id)) tabs.set(id, new Set());
  tabs.get(id).add(port);
  if (trialId) {
    if (!trialTabs.has(trialId)) trialTabs.set(trialId, new Map());
    trialTabs.get(trialId).set(port, id);
  }
  // a trial whose note the stream does not follow yet needs a new stream, as an experiment
  if (source && streamed.has(id) && (!trialId || streamedTrials.has(trialId))) {
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
  streamedTrials = new Set();
}

// A new stream for every experiment some tab follows; its first events tell every tab to
// catch up, so nothing that changed while streams were swapped is missed.
function reopen() {
  reopenTimer = null;
  close();
  const ids = Array.from(tabs.keys()).sort();
  if (!ids.length || !eventsUrl) return;
  const trialIds = Array.from(trialTabs.keys()).sort();
  const query = ids.map(function (id) { return "experiment=" + encodeURIComponent(id); })
    .concat(trialIds.map(function (id) { return "trial=" + encodeURIComponent(id); })).join("&");
  const es = new EventSource(eventsUrl + "?" + query);
  source = es;
  streamed = new Set(ids);
  streamedTrials = new Set(trialIds);
  for (const name of ["change", "trials", "note", "end"]) {
    es.addEventListener(name, function (event) {
      if (es !== source) return;
      const data = JSON.parse(event.data);
      if (name === "note" && data.kind === "trial") return sendTrial(data.id, { type: name, data: data });
      const id = data.experiment_id;
      send(id, { type: name, experiment_id: id, data: data });
      if (name !== "end") return;
      // over: its tabs stop listening; the stream closes once it follows nothing
      tabs.delete(id);
      forgetTrials(null, id);
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
    trialTabs.clear();
  });
}

self.onconnect = function (event) {
  const port = event.ports[0];
  port.onmessage = function (message) {
    const m = message.data || {};
    if (typeof m.experiment_id !== "string") return;
    if (m.type === "watch") {
      eventsUrl = m.events_url || eventsUrl;
      // at once, before any stream answers: the tab knows this worker runs (live.js)
      port.postMessage({ type: "watching", experiment_id: m.experiment_id });
      watch(port, m.experiment_id, typeof m.trial_id === "string" ? m.trial_id : null);
    } else if (m.type === "unwatch") {
      // the stream keeps following it until it ends or the stream is swapped: swapping it
      // now would make every other tab read again for nothing
      forget(port, m.experiment_id);
    }
  };
  port.start();
};
