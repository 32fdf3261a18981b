"""How fast a 192-trial experiment page is ready in Chromium, and how many bytes it costs.

    .venv/bin/python bench/dashboard_192.py [--rounds 3] [--epochs 20]
    .venv/bin/python bench/dashboard_192.py --base /work/main    # side by side with another checkout

A fresh SQLite store gets a finished 192-trial classification grid, trained for real by
``dnnframe run`` (digits; depth x width x activation x optimizer x learning rate, 2 seeds).
Each checkout then serves it from its own process (Werkzeug, threaded), and a headless
Chromium with an empty cache (a new context per load) opens the experiment page. Measured
per load, from the navigation's start: DOMContentLoaded, the table ready (a row per trial),
every chart drawn (each ``.chart`` holds plotly's SVG), and the bytes sent over the wire
(Chromium's encoded length of every response, headers included, until the charts are
drawn), with the trial data's (``/trials``, ``/importance`` and the page's one ``/page-data``
read) and plotly.js's shares. Rounds alternate the checkouts; the medians are printed.
Numbers on a shared machine are noisy: run it twice.

Before its loads, a checkout that compresses its static files ahead (``dashboard.assets``)
has them compressed, as gunicorn's master does at start; each server then gets one untimed
load (its first-request costs), reported apart as ``first_load``. ``--second`` adds a load
in the same browser context after each timed one: what a reload sends when the browser's
cache holds the files.
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
from pathlib import Path

import requests
from idle_dashboard import SERVER

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def spec(epochs: int) -> dict:
    """4 depths x 2 widths x 2 activations x 2 optimizers x 3 learning rates x 2 seeds."""
    return {
        "name": "digits-192",
        "dataset": {"name": "digits"},
        "model": {
            "hidden_layers": {"grid": [1, 2, 3, 4]},
            "width": {"grid": [16, 64]},
            "activation": {"grid": ["relu", "tanh"]},
        },
        "training": {
            "optimizer": {"grid": ["sgd", "adam"]},
            "learning_rate": {"grid": [0.003, 0.01, 0.1]},
            "max_epochs": epochs,
            "batch_size": 64,
            "early_stopping": None,
        },
        "search": {"seeds": 2},
    }


def make_store(tmp: Path, epochs: int) -> tuple[str, str]:
    """The store URL and the experiment's id, its 192 trials trained by ``dnnframe run``."""
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
    if summary.get("n_trials") != 192 or any(
        counts.get(s) for s in ("QUEUED", "RUNNING", "FAILED")
    ):
        raise SystemExit(f"the sweep did not finish its 192 trials: {out.stdout[:500]}")
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


# Records, from before any page script runs, when the table holds every trial and when every
# chart holds plotly's drawing (performance.now(): ms since the navigation started).
WATCH = """
window.__marks = {};
new MutationObserver(function () {
  const m = window.__marks;
  if (m.table === undefined && document.querySelectorAll("#trials tbody tr").length >= %d) {
    m.table = performance.now();
  }
  const charts = document.querySelectorAll(".chart");
  if (m.charts === undefined && charts.length &&
      Array.from(charts).every(function (c) { return c.querySelector(".main-svg"); })) {
    m.charts = performance.now();
  }
}).observe(document, { childList: true, subtree: true });
"""


DATA = ("/trials", "/importance", "/page-data")


def load(
    browser, base: str, experiment_id: str, n_trials: int, second: bool = False
) -> dict[str, float]:
    """One cold load of the experiment page: its times (ms) and bytes; with ``second``, the
    bytes of a reload in the same context (its cache enabled) too."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.add_init_script(WATCH % n_trials)
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Network.setCacheDisabled", {"cacheDisabled": not second})
        urls: dict[str, str] = {}
        sizes: dict[str, int] = {}
        cdp.on(
            "Network.responseReceived",
            lambda e: urls.__setitem__(e["requestId"], e["response"]["url"]),
        )
        cdp.on(
            "Network.loadingFinished",
            lambda e: sizes.__setitem__(e["requestId"], int(e["encodedDataLength"])),
        )
        ready = "() => window.__marks.table !== undefined && window.__marks.charts !== undefined"
        page.goto(f"{base}/experiments/{experiment_id}")
        page.wait_for_function(ready, timeout=120_000)
        marks = page.evaluate("window.__marks")
        dcl = page.evaluate(
            "performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"
        )
        total = sum(sizes.values())
        trials = sum(n for rid, n in sizes.items() if any(d in urls.get(rid, "") for d in DATA))
        plotly = sum(n for rid, n in sizes.items() if "plotly" in urls.get(rid, ""))
        out = {
            "dom_content_loaded_ms": dcl,
            "table_ms": marks["table"],
            "charts_ms": marks["charts"],
            "bytes": total,
            "trial_bytes": trials,
            "plotly_bytes": plotly,
            "responses": len(sizes),
        }
        if second:
            sizes.clear()
            page.reload()
            page.wait_for_function(ready, timeout=120_000)
            out["reload_bytes"] = sum(sizes.values())
            out["reload_responses"] = len(sizes)
        return out
    finally:
        context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="another checkout to measure side by side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=20, help="epochs each trial trains")
    parser.add_argument(
        "--second",
        action="store_true",
        help="also reload each page in its context: the bytes a cached reload sends",
    )
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="dnnframe-192-"))
    t0 = time.monotonic()
    url, experiment_id = make_store(tmp, args.epochs)
    print(
        f"192 trials trained by dnnframe run in {time.monotonic() - t0:.0f} s ({url})",
        file=sys.stderr,
    )
    checkouts = [("this", REPO)] + ([("base", args.base.resolve())] if args.base else [])
    servers = {name: serve(path, url, tmp) for name, path in checkouts}
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in checkouts}
    first: dict[str, dict[str, float]] = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            for name, _ in checkouts:  # one untimed load each: the servers' first-request costs
                first[name] = load(browser, servers[name][1], experiment_id, 192)
            for _ in range(args.rounds):
                for name, _ in checkouts:
                    results[name].append(
                        load(browser, servers[name][1], experiment_id, 192, args.second)
                    )
            browser.close()
    finally:
        for server, _ in servers.values():
            server.terminate()
            server.wait(10)
    summary = {
        name: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        for name, runs in results.items()
    }
    print(json.dumps({"first_load": first, "runs": results, "median": summary}, indent=2))
    for name, m in summary.items():
        print(
            f"{name}: DOMContentLoaded {m['dom_content_loaded_ms']:.0f} ms, table {m['table_ms']:.0f} ms, "
            f"all charts {m['charts_ms']:.0f} ms; {m['bytes'] / 1e3:.0f} kB over the wire "
            f"(trial data {m['trial_bytes'] / 1e3:.0f} kB, plotly.js {m['plotly_bytes'] / 1e3:.0f} kB) "
            f"in {m['responses']:.0f} responses"
            + (
                f"; a reload sends {m['reload_bytes'] / 1e3:.1f} kB in {m['reload_responses']:.0f}"
                if "reload_bytes" in m
                else ""
            )
        )
        f = first[name]
        print(
            f"  its first load (server caches cold): all charts {f['charts_ms']:.0f} ms, "
            f"{f['bytes'] / 1e3:.0f} kB"
        )
    if args.base:
        this, base = summary["this"], summary["base"]
        print(
            f"this / base: bytes {this['bytes'] / base['bytes']:.2f}x, all charts "
            f"{this['charts_ms'] / base['charts_ms']:.2f}x the time"
        )


if __name__ == "__main__":
    main()
