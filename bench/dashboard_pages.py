"""What open experiment pages cost the server: none, N polling pages, N streaming pages.

    .venv/bin/python bench/dashboard_pages.py [--pages 20] [--seconds 15] [--rate 40]

The dashboard runs in its own process (Werkzeug, threaded) over a fresh SQLite file with one
experiment of 2,000 queued trials. A writer process plays the workers: it claims trials and
writes epochs at ``--rate`` epochs a second, finishing a trial every 5 epochs. Each page is a
thread that does what experiment.js does: polling reads ``trials?since=`` every second;
streaming opens ``events``, takes the changed trials from its ``trials`` events and reads
``trials?since=`` only when a ``change`` event tells it to. Printed per
mode: the server's CPU seconds (user + system, from /proc) per wall second, the requests the
pages made, and the epochs the writer managed per second (the training throughput the pages
leave). Each page's first load (every trial) happens before the measured window, which
holds the steady state only. Numbers on a shared machine are noisy; run it twice.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests
from idle_dashboard import SERVER

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPEC = {
    "name": "pages-bench",
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": {"int_range": [1, 20]}, "width": {"grid": [4, 8, 16, 32, 64]}},
    "training": {"max_epochs": 5, "learning_rate": {"grid": [0.001, 0.01, 0.1, 0.3]}},
    "search": {"seeds": 5},
}


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _writer(
    url: str,
    experiment_id: str,
    rate: float,
    stop: multiprocessing.Event,
    done: multiprocessing.Value,
) -> None:
    from dnnframe.store import TrialState, open_store

    store = open_store(url)
    queued = [t.id for t in store.list_trials(experiment_id, state=TrialState.QUEUED)]
    running: dict[str, int] = {}
    next_at = time.monotonic()
    while not stop.is_set():
        if len(running) < 8 and queued:
            tid = queued.pop()
            if store.claim_trial(tid, "bench"):
                running[tid] = 0
        for tid in list(running):
            running[tid] += 1
            store.append_metrics(
                tid,
                {
                    "epoch": running[tid],
                    "val_loss": 1 / running[tid],
                    "val_accuracy": 0.1 * running[tid],
                },
                worker="bench",
            )
            with done.get_lock():
                done.value += 1
            if running[tid] == 5:
                result = {
                    "metrics": {"test_accuracy": 0.5, "test_loss": 0.5},
                    "timings": {"train": 0.1},
                    "epochs_run": 5,
                }
                store.finish_trial(tid, TrialState.COMPLETE, result=result, worker="bench")
                del running[tid]
            next_at += 1 / rate
            time.sleep(max(0.0, next_at - time.monotonic()))


def _page(
    base: str,
    experiment_id: str,
    mode: str,
    stop: threading.Event,
    counts: list[int],
    ready: threading.Barrier,
) -> None:
    try:
        _follow(base, experiment_id, mode, stop, counts, ready)
    except requests.RequestException:
        if not stop.is_set():  # the server going away at the end is expected
            raise


def _follow(
    base: str,
    experiment_id: str,
    mode: str,
    stop: threading.Event,
    counts: list[int],
    ready: threading.Barrier,
) -> None:
    session = requests.Session()
    cursor = 0
    trials = f"{base}/api/v1/experiments/{experiment_id}/trials"

    def read() -> None:
        nonlocal cursor
        more = True
        while more:
            body = session.get(trials, params={"history": 1, "since": cursor}, timeout=30).json()
            counts[0] += 1
            cursor, more = body["cursor"], body["more"]

    read()  # the page's first load: all trials, outside the measured window
    ready.wait()
    counts[0] = 0
    if mode == "poll":
        while not stop.wait(1.0):
            read()
        return
    events = f"{base}/api/v1/experiments/{experiment_id}/events"
    with session.get(events, params={"since": cursor}, stream=True, timeout=60) as r:
        if r.status_code != 200:
            raise SystemExit(f"the server refused a stream: {r.status_code} {r.text[:200]}")
        for line in r.iter_lines(decode_unicode=True):
            if stop.is_set():
                return
            if line.startswith("event: change"):
                read()  # catch up: a request
            # "event: trials" carries the changed trials: no request


def measure(mode: str, pages: int, seconds: float, rate: float) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="dnnframe-pages-"))
    url = f"sqlite:///{tmp / 'bench.db'}"
    port = _free_port()
    env = {
        **os.environ,
        "DNNFRAME_STORE_URL": url,
        "DNNFRAME_EVENT_STREAMS": str(pages + 4),
        "DNNFRAME_DATA_DIR": str(tmp),
        "PYTHONPATH": str(ROOT),
    }
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER.format(port=port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                requests.get(base + "/api/v1/health", timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        experiment_id = requests.post(base + "/api/v1/experiments", json=SPEC, timeout=120).json()[
            "id"
        ]
        stop_pages, stop_writer = threading.Event(), multiprocessing.Event()
        done = multiprocessing.Value("i", 0)
        counts = [0]
        n = pages if mode != "none" else 0
        ready = threading.Barrier(n + 1)
        threads = [
            threading.Thread(
                target=_page,
                daemon=True,
                args=(base, experiment_id, mode, stop_pages, counts, ready),
            )
            for _ in range(n)
        ]
        for t in threads:
            t.start()
        ready.wait()
        writer = multiprocessing.Process(
            target=_writer, args=(url, experiment_id, rate, stop_writer, done)
        )
        cpu0, t0 = _cpu_seconds(server.pid), time.monotonic()
        writer.start()
        time.sleep(seconds)
        cpu1, t1 = _cpu_seconds(server.pid), time.monotonic()
        stop_writer.set()
        writer.join(30)
        stop_pages.set()
        for t in threads:
            t.join(0.1)
        return {
            "server_cpu_per_s": (cpu1 - cpu0) / (t1 - t0),
            "page_requests": counts[0],
            "epochs_per_s": done.value / (t1 - t0),
        }
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--rate", type=float, default=40.0, help="epochs written per second")
    args = parser.parse_args()
    results = {
        mode: measure(mode, args.pages, args.seconds, args.rate)
        for mode in ("none", "poll", "stream")
    }
    print(json.dumps(results, indent=2))
    for mode in ("poll", "stream"):
        r = results[mode]
        print(
            f"{args.pages} {mode:6s} pages: server CPU {r['server_cpu_per_s']:.3f} s/s "
            f"(none open: {results['none']['server_cpu_per_s']:.3f}), "
            f"{r['page_requests']} page requests, writer {r['epochs_per_s']:.1f} epochs/s "
            f"(none open: {results['none']['epochs_per_s']:.1f})"
        )


if __name__ == "__main__":
    main()
