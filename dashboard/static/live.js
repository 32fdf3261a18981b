// A page's side of the live stream every tab of this site shares (live-worker.js).
//
// DnnLive.watch(id, eventsUrl, workerUrl, onMessage, trialId) → true when the shared stream
// will deliver the experiment's events (and, with trialId, that trial's note) to onMessage, false when this browser has no SharedWorker
// (the page then polls: a poll holds no connection between reads, so it never starves
// other tabs as a stream per tab would). DnnLive.unwatch(id) stops them.
window.DnnLive = (function () {
  "use strict";
  let port = null, broken = false, heard = false;
  const watched = new Map(); // experiment id → { eventsUrl, onMessage, trialId }
  // A worker whose script never ran need not raise an error (seen in Chromium with a failed
  // script fetch): one that has not acknowledged a watch this long after it (it does at
  // once, whatever the server does) is taken for lost. Tests may shorten it.
  const SILENCE_MS = window.DNN_LIVE_SILENCE_MS || 10000;

  // The worker did not start (its script failed to load or run): every page that counted
  // on it is told its stream is closed, and polls; later watches answer false.
  function lost() {
    broken = true;
    port = null;
    const held = Array.from(watched.entries());
    watched.clear();
    for (const [id, h] of held) h.onMessage({ type: "closed", experiment_id: id, data: {} });
  }

  function connect(workerUrl) {
    if (port) return port;
    if (broken || !window.SharedWorker) return null;
    try {
      const worker = new SharedWorker(workerUrl, { name: "dnnframe-live" });
      worker.addEventListener("error", lost);
      port = worker.port;
    } catch (e) { // a browser or policy that refuses it
      return null;
    }
    port.onmessage = function (event) {
      heard = true;
      const m = event.data || {};
      if (m.type === "watching") return; // the acknowledgement alone
      const held = watched.get(m.experiment_id);
      // the stream is over for it (ended, refused or lost): the page decides what next
      if (m.type === "end" || m.type === "closed") watched.delete(m.experiment_id);
      if (held) held.onMessage(m);
    };
    port.start();
    return port;
  }

  function watch(id, eventsUrl, workerUrl, onMessage, trialId) {
    if (!eventsUrl || !window.EventSource || !connect(workerUrl)) return false;
    watched.set(id, { eventsUrl: eventsUrl, onMessage: onMessage, trialId: trialId });
    port.postMessage({ type: "watch", experiment_id: id, events_url: eventsUrl, trial_id: trialId });
    const asked = port;
    setTimeout(function () { if (!heard && port === asked) lost(); }, SILENCE_MS);
    return true;
  }

  function unwatch(id) {
    if (!watched.delete(id) || !port) return;
    port.postMessage({ type: "unwatch", experiment_id: id });
  }

  // A tab that closes or goes into the back-forward cache stops counting as a follower;
  // one that comes back follows again (its first message tells it to catch up).
  window.addEventListener("pagehide", function () {
    if (!port) return;
    for (const id of watched.keys()) port.postMessage({ type: "unwatch", experiment_id: id });
  });
  window.addEventListener("pageshow", function (event) {
    if (!event.persisted || !port) return;
    for (const [id, held] of watched) {
      port.postMessage({ type: "watch", experiment_id: id, events_url: held.eventsUrl, trial_id: held.trialId });
    }
  });

  return { watch: watch, unwatch: unwatch };
})();
