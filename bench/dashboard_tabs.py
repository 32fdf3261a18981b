"""How long one more tab takes to load while N tabs follow a live experiment, in one browser.

    .venv/bin/python bench/dashboard_tabs.py [--tabs 8] [--base /path/to/other/checkout]

A browser keeps six HTTP/1.1 connections per host for all its tabs, and a live-update stream
holds one for as long as it is open. This opens ``--tabs`` tabs of one live experiment (its
trials queued, so every page keeps following it) in one Chromium context, then times a new
tab loading the experiment list and the last tab's call to the REST API. With a stream per
tab, past six tabs neither completes (reported as timed out after ``--timeout`` seconds);
with one stream shared by the tabs both answer in milliseconds. ``--base`` runs the same on
another checkout (its own server process) for a side-by-side figure.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
from idle_dashboard import SERVER

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
SPEC = {
    "name": "tabs-bench",
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": {"grid": [1, 2, 3, 4]}, "width": 8},
    "training": {"max_epochs": 5, "learning_rate": {"grid": [0.01, 0.1]}},
    "search": {"seeds": 3},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(checkout: Path, tmp: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(checkout),
        "DNNFRAME_STORE_URL": f"sqlite:///{tmp}/store.db",
        "DNNFRAME_DATA_DIR": f"{tmp}/data",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER.format(port=port)],
        cwd=checkout,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if requests.get(base + "/api/v1/health", timeout=1).ok:
                return proc, base
        except requests.RequestException:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"the server of {checkout} did not start")


def _timed(fn, timeout: float) -> str:
    started = time.perf_counter()
    try:
        fn()
    except Exception:  # noqa: BLE001 - a hung request is the figure, not an error
        return f"timed out after {timeout:.0f} s"
    return f"{1000 * (time.perf_counter() - started):.0f} ms"


def measure(checkout: Path, tabs: int, timeout: float) -> dict[str, str]:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        proc, base = _serve(checkout, tmp)
        try:
            exp_id = requests.post(base + "/api/v1/experiments", json=SPEC, timeout=30).json()["id"]
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
                )
                try:
                    context = browser.new_context()
                    pages = []
                    opened = time.perf_counter()
                    for _ in range(tabs):
                        page = context.new_page()
                        try:
                            page.goto(f"{base}/experiments/{exp_id}", timeout=timeout * 1000)
                            page.wait_for_function(
                                "() => document.body.dataset.live", timeout=timeout * 1000
                            )
                        except Exception:  # noqa: BLE001
                            pass  # a tab that cannot load is what the next figures show
                        pages.append(page)
                    out = {"tabs opened in": f"{time.perf_counter() - opened:.1f} s"}
                    extra = context.new_page()
                    out["one more tab's list page"] = _timed(
                        lambda: extra.goto(base + "/", timeout=timeout * 1000), timeout
                    )
                    out["the last tab's API call"] = _timed(
                        lambda: pages[-1].evaluate(
                            """async ([url, ms]) => {
                            const c = new AbortController(); setTimeout(() => c.abort(), ms);
                            return (await fetch(url, {signal: c.signal})).status; }""",
                            [f"/api/v1/experiments/{exp_id}", timeout * 1000],
                        ),
                        timeout,
                    )
                    out["tabs live"] = str(
                        sum(
                            1
                            for pg in pages
                            if pg.evaluate("document.body && document.body.dataset.live || ''")
                        )
                    )
                    return out
                finally:
                    browser.close()
        finally:
            proc.terminate()
            proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tabs", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds a load may take")
    parser.add_argument("--base", type=Path, help="another checkout to measure the same way")
    args = parser.parse_args()
    runs = [("this checkout", ROOT)] + ([(f"base {args.base}", args.base)] if args.base else [])
    for name, checkout in runs:
        print(f"{name}: {args.tabs} live tabs")
        for key, value in measure(checkout.resolve(), args.tabs, args.timeout).items():
            print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
