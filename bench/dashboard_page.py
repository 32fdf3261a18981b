"""How fast a 192-trial experiment page is drawn in Chromium, chart by chart, and its bytes.

    .venv/bin/python bench/dashboard_page.py [--rounds 5] [--epochs 20]
    .venv/bin/python bench/dashboard_page.py --base /work/main    # side by side with another checkout
    .venv/bin/python bench/dashboard_page.py --keep /tmp/page-store   # train once, reuse after
    .venv/bin/python bench/dashboard_page.py --trace /tmp/page.json   # where one load's time goes

A fresh SQLite store gets a finished 192-trial classification grid, trained for real by
``dnnframe run`` (digits; depth x width x activation x learning rate, 2 seeds, plain SGD,
ASHA pruning at half the epochs): the largest learning rate diverges, about half the trials
are pruned. Each checkout serves it from its own process (Werkzeug, threaded), and a
headless Chromium with an empty cache (a new context per load) opens the experiment page.
Measured per load, from the navigation's start: DOMContentLoaded, the table ready (a row per
trial), each chart drawn (its element holds plotly's SVG, or the parallel coordinates' own),
all charts drawn, the next frame
after that (painted), and the bytes sent over the wire (Chromium's encoded length of every
response, headers included), with the trial data's (``/trials``, ``/importance`` and the
page's ``/page-data`` read) and plotly.js's shares. ``--cached`` adds a second visit in the
same browser context after each timed load: what a returning reader waits, the files (and
V8's code cache of them) in the browser's cache. Rounds alternate the checkouts; the medians
are printed, and with ``--base`` the ratios. Numbers on a shared machine are noisy: run it
twice and compare ratios.

Before its loads, a checkout that compresses its static files ahead (``dashboard.assets``)
has them compressed, as gunicorn's master does at start; each server then gets one untimed
load (its first-request costs: the warm server the figures are for).

``--trace FILE`` records one more load of this checkout with Chromium's tracing (open it in
Perfetto or chrome://tracing) and prints the renderer main thread's busiest kinds of work
and the scripts that took longest to compile and run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import requests
from idle_dashboard import SERVER

from dnnframe.testing.chromium import ARGS, CHROMIUM

REPO = Path(__file__).resolve().parents[1]
N_TRIALS = 192


def spec(epochs: int) -> dict:
    """4 depths x 2 widths x 2 activations x 6 learning rates x 2 seeds; 30 diverges."""
    return {
        "name": "digits-192",
        "dataset": {"name": "digits"},
        "model": {
            "hidden_layers": {"grid": [1, 2, 3, 4]},
            "width": {"grid": [16, 64]},
            "activation": {"grid": ["relu", "tanh"]},
        },
        "training": {
            "optimizer": "sgd",
            "learning_rate": {"grid": [0.003, 0.01, 0.03, 0.1, 0.3, 30]},
            "max_epochs": epochs,
            "batch_size": 64,
            "early_stopping": None,
        },
        "search": {"seeds": 2, "pruner": "asha", "min_epochs": max(1, epochs // 2), "eta": 2},
    }


def make_store(tmp: Path, epochs: int) -> tuple[str, str]:
    """The store URL and the experiment's id, its 192 trials trained by ``dnnframe run``
    (a store ``tmp`` holds already, from an earlier run, is used as it is)."""
    spec_path = tmp / "spec.json"
    spec_path.write_text(json.dumps(spec(epochs)))
    url = f"sqlite:///{tmp / 'store.db'}"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dnnframe.cli",
            "run",
            str(spec_path),
            "-w",
            str(os.cpu_count() or 2),
            "--store",
            url,
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    summary = json.loads(out.stdout)
    counts = summary.get("counts", {})
    if summary.get("n_trials") != N_TRIALS or any(
        counts.get(s) for s in ("QUEUED", "RUNNING", "FAILED")
    ):
        raise SystemExit(f"the sweep did not finish its 192 trials: {out.stdout[:500]}")
    print(f"trials: {counts}", file=sys.stderr)
    return url, summary["experiment_id"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(checkout: Path, url: str, tmp: Path) -> tuple[subprocess.Popen, str]:
    """``checkout``'s dashboard over the store, in a process of its own."""
    port = _free_port()
    env = {
        **os.environ,
        "DNNFRAME_STORE_URL": url,
        "DNNFRAME_DATA_DIR": str(tmp),
        "PYTHONPATH": str(checkout),
    }
    if (checkout / "dashboard" / "assets.py").is_file():
        subprocess.run(
            [sys.executable, "-c", "from dashboard.assets import precompress; precompress()"],
            env=env,
            cwd=checkout,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER.format(port=port)],
        env=env,
        cwd=checkout,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            requests.get(base + "/api/v1/health", timeout=1)
            return server, base
        except requests.ConnectionError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{checkout}'s dashboard did not start") from None
            time.sleep(0.1)


# Records, from before any page script runs, when the table holds every trial and when each
# chart first holds plotly's drawing (performance.now(): ms since the navigation started);
# the same rule for every checkout, whatever markers its page sets. A mutation observer's
# callback runs once the task that drew has finished: a chart is counted drawn no earlier
# than the end of its drawing. "painted" is the frame after the last chart; "marked" when
# the page says every chart is drawn (``<body data-charts="drawn">``, where it says so).
WATCH = """
window.__marks = { charts: {} };
new MutationObserver(function () {
  const m = window.__marks;
  if (m.table === undefined && document.querySelectorAll("#trials tbody tr").length >= %d) {
    m.table = performance.now();
  }
  const charts = document.querySelectorAll(".chart");
  for (const c of charts) {
    if (m.charts[c.id] === undefined && c.querySelector(".main-svg, .parallel-svg")) m.charts[c.id] = performance.now();
  }
  if (m.all === undefined && charts.length && Object.keys(m.charts).length === charts.length) {
    m.all = performance.now();
    requestAnimationFrame(function () { setTimeout(function () { m.painted = performance.now(); }, 0); });
  }
  if (m.marked === undefined && document.body && document.body.dataset.charts === "drawn") {
    m.marked = performance.now();
  }
}).observe(document, { childList: true, subtree: true, attributes: true, attributeFilter: ["data-charts"] });
"""
READY = (
    "() => window.__marks.table !== undefined && window.__marks.painted !== undefined"
    " && document.querySelectorAll('#trials tbody tr').length > 0"
)
DATA = ("/trials", "/importance", "/page-data")


def _visit(page, cdp, url: str | None) -> dict[str, float]:
    """Open ``url`` (None: reload) in ``page`` and wait for every chart: times and bytes."""
    urls: dict[str, str] = {}
    sizes: dict[str, int] = {}
    on_response = lambda e: urls.__setitem__(e["requestId"], e["response"]["url"])  # noqa: E731
    on_finished = lambda e: sizes.__setitem__(e["requestId"], int(e["encodedDataLength"]))  # noqa: E731
    cdp.on("Network.responseReceived", on_response)
    cdp.on("Network.loadingFinished", on_finished)
    try:
        if url is None:
            page.reload()
        else:
            page.goto(url)
        page.wait_for_function(READY, timeout=120_000)
        marks = page.evaluate("window.__marks")
        dcl = page.evaluate(
            "performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"
        )
    finally:
        cdp.remove_listener("Network.responseReceived", on_response)
        cdp.remove_listener("Network.loadingFinished", on_finished)
    out = {
        "dom_content_loaded_ms": dcl,
        "table_ms": marks["table"],
        "charts_ms": marks["all"],
        "painted_ms": marks["painted"],
        "bytes": sum(sizes.values()),
        "trial_bytes": sum(
            n for rid, n in sizes.items() if any(d in urls.get(rid, "") for d in DATA)
        ),
        "plotly_bytes": sum(n for rid, n in sizes.items() if "plotly" in urls.get(rid, "")),
        "responses": len(sizes),
    }
    if "marked" in marks:
        out["marked_ms"] = marks["marked"]
    out.update({f"chart:{k}": v for k, v in marks["charts"].items()})
    return out


def load(browser, base: str, experiment_id: str, cached: bool = False) -> dict[str, float]:
    """One load of the experiment page with an empty cache: its times (ms) and bytes; with
    ``cached``, a second visit in the same context too (``cached:`` keys)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.add_init_script(WATCH % N_TRIALS)
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable")
        out = _visit(page, cdp, f"{base}/experiments/{experiment_id}")
        if cached:
            # a visit as a returning reader makes it: a navigation, not a reload (a reload
            # revalidates every file, ignoring their lifetimes)
            page.goto("about:blank")
            again = _visit(page, cdp, f"{base}/experiments/{experiment_id}")
            out.update({f"cached:{k}": v for k, v in again.items() if not k.startswith("chart:")})
        return out
    finally:
        context.close()


def trace(browser, base: str, experiment_id: str, path: Path) -> None:
    """One load under Chromium's tracing, written to ``path``; prints where the renderer's
    main thread spent it."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.add_init_script(WATCH % N_TRIALS)
        browser.start_tracing(page=page, path=str(path), screenshots=False)
        page.goto(f"{base}/experiments/{experiment_id}")
        page.wait_for_function(READY, timeout=120_000)
        marks = page.evaluate("window.__marks")
        browser.stop_tracing()
    finally:
        context.close()
    print(f"trace of one load written to {path}; all charts at {marks['all']:.0f} ms")
    summarize(json.loads(path.read_text()))


def summarize(data: dict | list) -> None:
    """The renderer main thread's top-level tasks by kind, and the longest scripts."""
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    main = {key for key, name in names.items() if name == "CrRendererMain"}
    by_kind: dict[str, float] = defaultdict(float)
    scripts: dict[str, float] = defaultdict(float)
    for e in events:
        if (e.get("pid"), e.get("tid")) not in main or e.get("ph") != "X":
            continue
        ms = e.get("dur", 0) / 1000
        name = e["name"]
        if name in (
            "EvaluateScript",
            "v8.compile",
            "v8.compileModule",
            "FunctionCall",
            "TimerFire",
            "FireAnimationFrame",
            "EventDispatch",
            "ParseHTML",
            "Layout",
            "UpdateLayoutTree",
            "Paint",
            "PrePaint",
            "Layerize",
            "v8.parseOnBackground",
            "XHRLoad",
            "MajorGC",
            "MinorGC",
            "V8.GCScavenger",
            "V8.GCFinalizeMC",
            "RunMicrotasks",
        ):
            by_kind[name] += ms
        data_ = e.get("args", {}).get("data", {})
        if name in ("EvaluateScript", "v8.compile") and data_.get("url"):
            scripts[f"{name} {data_['url'].rsplit('/', 1)[-1].split('?')[0]}"] += ms
    print("renderer main thread (top-level and nested events overlap):")
    for name, ms in sorted(by_kind.items(), key=lambda kv: -kv[1])[:14]:
        print(f"  {name:22s} {ms:7.0f} ms")
    for name, ms in sorted(scripts.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {name:44s} {ms:7.0f} ms")


def report(name: str, m: dict[str, float]) -> None:
    charts = sorted((k for k in m if k.startswith("chart:")), key=lambda k: m[k])
    print(
        f"{name}: DOMContentLoaded {m['dom_content_loaded_ms']:.0f} ms, table {m['table_ms']:.0f} ms, "
        f"all charts {m['charts_ms']:.0f} ms, painted {m['painted_ms']:.0f} ms; "
        f"{m['bytes'] / 1e3:.0f} kB over the wire (trial data {m['trial_bytes'] / 1e3:.0f} kB, "
        f"plotly.js {m['plotly_bytes'] / 1e3:.0f} kB) in {m['responses']:.0f} responses"
    )
    print(
        "  charts: "
        + ", ".join(f"{k[6:].removeprefix('chart-')} {m[k]:.0f}" for k in charts)
        + (f"; the page marks them drawn at {m['marked_ms']:.0f}" if "marked_ms" in m else "")
    )
    if "cached:charts_ms" in m:
        print(
            f"  a second visit (files cached): DOMContentLoaded "
            f"{m['cached:dom_content_loaded_ms']:.0f} ms, table {m['cached:table_ms']:.0f} ms, "
            f"all charts {m['cached:charts_ms']:.0f} ms; {m['cached:bytes'] / 1e3:.1f} kB "
            f"in {m['cached:responses']:.0f} responses"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="another checkout to measure side by side")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=20, help="epochs each trial trains")
    parser.add_argument("--keep", type=Path, help="keep the store here and reuse it next time")
    parser.add_argument(
        "--cached", action="store_true", help="also time a second visit with the files cached"
    )
    parser.add_argument("--trace", type=Path, help="trace one more load of this checkout here")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    tmp = args.keep or Path(tempfile.mkdtemp(prefix="dnnframe-page-"))
    tmp.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    url, experiment_id = make_store(tmp, args.epochs)
    print(f"192 trials in {time.monotonic() - t0:.0f} s ({url})", file=sys.stderr)
    checkouts = [("this", REPO)] + ([("base", args.base.resolve())] if args.base else [])
    servers = {name: serve(path, url, tmp) for name, path in checkouts}
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in checkouts}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            for name, _ in checkouts:  # one untimed load each: the servers' first-request costs
                load(browser, servers[name][1], experiment_id)
            for _ in range(args.rounds):
                for name, _ in checkouts:
                    results[name].append(
                        load(browser, servers[name][1], experiment_id, args.cached)
                    )
            if args.trace:
                trace(browser, servers["this"][1], experiment_id, args.trace)
            browser.close()
    finally:
        for server, _ in servers.values():
            server.terminate()
            server.wait(10)
    summary = {
        name: {k: statistics.median(r[k] for r in runs if k in r) for k in runs[0]}
        for name, runs in results.items()
    }
    print(json.dumps({"runs": results, "median": summary}, indent=1), file=sys.stderr)
    print(f"medians of {args.rounds} loads each, empty cache, warm server:")
    for name, m in summary.items():
        report(name, m)
    if args.base:
        this, base = summary["this"], summary["base"]
        ratios = [
            f"{label} {this[key] / base[key]:.2f}x"
            for label, key in (
                ("DOMContentLoaded", "dom_content_loaded_ms"),
                ("table", "table_ms"),
                ("all charts", "charts_ms"),
                ("bytes", "bytes"),
            )
        ]
        if args.cached:
            ratios.append(
                f"second visit's charts {this['cached:charts_ms'] / base['cached:charts_ms']:.2f}x"
            )
        print("this / base: " + ", ".join(ratios))


if __name__ == "__main__":
    main()
