// The experiment page's chart choices in its URL (?x=learning_rate&group=activation&log_y=1):
// a reload or a shared link shows the same charts. The URL is replaced, not pushed, so Back
// leaves the page instead of stepping through choices.
window.DnnUrlState = (function () {
  "use strict";
  // the picks whose select holds its options from the start (the others fill with the data)
  const FIXED = ["mode", "evaluator", "timelineRows"];

  // Puts the URL's choices into `chosen` and the controls, and returns remember(name, value,
  // fallback), which writes one choice back (a value equal to `fallback` is left out). A
  // pick the sweep cannot take (an axis it does not vary) falls back to the page's default,
  // as any pick does.
  function restore(controls, chosen, picks) {
    const url = new URLSearchParams(location.search);
    for (const name of picks) {
      if (!url.has(name)) continue;
      const value = url.get(name);
      const select = controls[name];
      // selects whose options are fixed take only those; the others are filled as data comes
      const fixed = FIXED.indexOf(name) >= 0;
      if (fixed && !Array.from(select.options).some(function (o) { return o.value === value; })) continue;
      chosen[name] = value;
      if (fixed) select.value = value;
    }
    const smoothing = parseFloat(url.get("smoothing"));
    if (smoothing >= 0 && smoothing <= 0.95) {
      controls.smoothing.value = String(smoothing);
      document.getElementById("smoothing-value").textContent = controls.smoothing.value;
    }
    controls.logY.checked = url.get("log_y") === "1";
    return remember;
  }

  function remember(name, value, fallback) {
    const q = new URLSearchParams(location.search);
    if (value === fallback) q.delete(name); else q.set(name, value);
    const text = q.toString();
    history.replaceState(history.state, "", location.pathname + (text ? "?" + text : "") + location.hash);
  }

  return { restore: restore, remember: remember };
})();
