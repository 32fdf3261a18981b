"""Bytes read from the store per second during a Celery sweep: before and after lean reads.

The same sweep runs twice, side by side: once on the code of a base commit (``--base``,
default: where this branch left ``main``; unpacked with ``git archive`` into a temporary folder) and once on this
checkout. Each run starts two real ``dnnframe worker`` nodes (``--concurrency`` pool
processes each, with their reapers) on a queue of their own on the shared RabbitMQ, a
SQLite store file of its own, and a submitter process that stores the sweep and waits for
it through ``CeleryExecutor`` (what ``dnnframe run --executor celery`` does). Trials train
with ``dnnframe.testing.hooks:sleepy_train`` (``--epochs`` epochs of ``--epoch-seconds``),
so every epoch is written to the store as on a real sweep, without the engine's cost.

Method: every process of a run (submitter, worker nodes, pool processes, reapers) gets a
``sitecustomize`` on its ``PYTHONPATH`` that wraps ``sqlite3.connect`` and sets a
``row_factory`` on each connection the store opens; it adds up, for every row any query
returns, the size of each value (UTF-8 bytes of text such as the JSON of configs, results
and learning curves; 8 for a number) and the row count, per process, in a file of its own.
Bytes read during the sweep are the sum over all processes from just before the submit
until every trial is finished (minus the idle reads before it); the rate is that over the
sweep's wall time. Writes are not counted, only what queries hand back to Python.

    .venv/bin/python bench/store_reads.py [--trials 2000] [--epochs 10] [--epoch-seconds 0.01]
        [--concurrency 2] [--base COMMIT]

Needs RabbitMQ at $DNNFRAME_BROKER_URL (default amqp://guest:guest@127.0.0.1:5672//).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from checkouts import base_tree  # noqa: E402  (bench/, the script's own folder)

BROKER = os.environ.get("DNNFRAME_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
COUNTER_ENV = "BENCH_STORE_READS_DIR"

# Installed as sitecustomize.py in every process of a run (see the module docstring).
SITECUSTOMIZE = """
import atexit, json, multiprocessing, os, sqlite3, time

_DIR = os.environ.get("BENCH_STORE_READS_DIR")
if _DIR:
    _real_connect = sqlite3.connect
    _state = {"bytes": 0, "rows": 0, "last": 0.0, "role": None}

    def _size(value):
        if isinstance(value, str):
            return len(value.encode("utf-8"))
        if isinstance(value, bytes):
            return len(value)
        return 0 if value is None else 8

    def _flush():
        role = (_state["role"] or os.environ.get("BENCH_STORE_READS_ROLE")
                or ("reaper" if multiprocessing.current_process().name == "dnnframe-reaper"
                    else "worker node"))
        path = os.path.join(_DIR, f"{os.getpid()}.json")
        with open(path + ".tmp", "w") as fh:
            json.dump({"role": role, "bytes": _state["bytes"], "rows": _state["rows"]}, fh)
        os.replace(path + ".tmp", path)

    def _count(cursor, row):
        _state["rows"] += 1
        _state["bytes"] += sum(map(_size, row))
        now = time.monotonic()
        if now - _state["last"] > 0.2:
            _state["last"] = now
            _flush()
        return row

    def _connect(*args, **kwargs):
        conn = _real_connect(*args, **kwargs)
        conn.row_factory = _count
        return conn

    def _forked():
        _state.update(bytes=0, rows=0, last=0.0, role="pool process")

    sqlite3.connect = _connect
    os.register_at_fork(after_in_child=_forked)
    atexit.register(_flush)
"""


def _spec(name: str, n: int) -> dict:
    return {
        "name": name,
        "dataset": {"name": "digits"},
        "model": {"hidden_layers": 1, "width": 16, "activation": "relu"},
        "training": {
            "optimizer": "adam",
            "learning_rate": 0.003,
            "batch_size": 64,
            "max_epochs": 3,
        },
        "search": {"seeds": n},
    }


def submit_and_wait(trials: int, queue: str, store_url: str) -> None:
    """The submitter process: store the sweep, send it, wait for it; print the seconds."""
    from dnnframe.executors import CeleryExecutor
    from dnnframe.spec import parse_spec
    from dnnframe.store import open_store
    from dnnframe.submit import submit_experiment

    store = open_store(store_url)
    executor = CeleryExecutor(BROKER, store_url, queue=queue)
    started = time.perf_counter()
    submit_experiment(parse_spec(_spec(f"reads-{queue}", trials)), store, executor)
    executor.wait()
    print(json.dumps({"seconds": time.perf_counter() - started}))
    executor.shutdown(wait=False)
    store.close()


def _counts(folder: Path) -> dict[str, dict[str, int]]:
    """Bytes and rows read so far, by process role (and in total)."""
    out: dict[str, dict[str, int]] = {}
    for path in folder.glob("*.json"):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being replaced right now; the next look sees it
        for role in (doc["role"], "total"):
            entry = out.setdefault(role, {"bytes": 0, "rows": 0})
            entry["bytes"] += doc["bytes"]
            entry["rows"] += doc["rows"]
    return out


def _minus(after: dict, before: dict) -> dict[str, dict[str, int]]:
    return {
        role: {k: v - before.get(role, {}).get(k, 0) for k, v in entry.items()}
        for role, entry in after.items()
    }


def run_sweep(tree: Path, tmp: Path, args: argparse.Namespace) -> dict:
    """One sweep on the code in ``tree``; the bytes and rows read during it, by role."""
    tmp.mkdir(parents=True)
    counter_dir, site_dir = tmp / "counts", tmp / "site"
    counter_dir.mkdir()
    site_dir.mkdir()
    (site_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    queue = f"bench-reads-{uuid.uuid4().hex[:8]}"
    store_url = f"sqlite:///{tmp / 'store.db'}"
    env = {
        **os.environ,
        "PYTHONPATH": f"{tree}{os.pathsep}{site_dir}",
        COUNTER_ENV: str(counter_dir),
        "DNNFRAME_STORE_URL": store_url,
        "DNNFRAME_BROKER_URL": BROKER,
        "PYTHONUNBUFFERED": "1",
        "DNNFRAME_TRAIN_FN": "dnnframe.testing.hooks:sleepy_train",
        "DNNFRAME_HOOK_EPOCHS": str(args.epochs),
        "DNNFRAME_HOOK_EPOCH_SECONDS": str(args.epoch_seconds),
    }
    workers = []
    try:
        for i in range(2):
            log = tmp / f"worker{i}.log"
            with open(log, "wb") as fh:
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "dnnframe.cli",
                        "worker",
                        "-Q",
                        queue,
                        "-c",
                        str(args.concurrency),
                        "-n",
                        f"reads{i}-{queue}@%h",
                        "--",
                        "--without-mingle",
                        "--without-gossip",
                    ],
                    cwd=tree,
                    env=env,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            workers.append(proc)
            deadline = time.monotonic() + 120
            while " ready." not in log.read_text(errors="replace"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(
                        f"worker {i} did not start:\n{log.read_text(errors='replace')[-3000:]}"
                    )
                time.sleep(0.2)
        time.sleep(1.0)  # let the idle reads so far reach their files
        before = _counts(counter_dir)
        done = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--submit",
                "--trials",
                str(args.trials),
                "--queue",
                queue,
                "--store",
                store_url,
            ],
            cwd=tree,
            env={**env, "BENCH_STORE_READS_ROLE": "submitter"},
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"submitter failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        seconds = json.loads(done.stdout.strip().splitlines()[-1])["seconds"]
        time.sleep(0.5)  # the last reads of the sweep reach their files (flushed every 0.2 s)
        read = _minus(_counts(counter_dir), before)
    finally:
        for proc in workers:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    return {"seconds": seconds, "read": read}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--epoch-seconds", type=float, default=0.01)
    ap.add_argument("--concurrency", type=int, default=2, help="pool processes per worker")
    ap.add_argument(
        "--base", help="the commit to compare with (default: the merge base of HEAD and main)"
    )
    ap.add_argument("--submit", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--queue", help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.submit:
        submit_and_wait(args.trials, args.queue, args.store)
        return
    git = ["git", "-C", str(REPO)]
    ref = (
        args.base
        or subprocess.run(
            [*git, "merge-base", "HEAD", "main"], check=True, capture_output=True, text=True
        ).stdout.strip()
    )
    base = subprocess.run(
        [*git, "rev-parse", "--short", ref], check=True, capture_output=True, text=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="dnnframe-reads-") as d:
        tmp = Path(d)
        results = {
            f"before ({base})": run_sweep(base_tree(base, tmp / "base-tree"), tmp / "before", args),
            "after (this tree)": run_sweep(REPO, tmp / "after", args),
        }
    print(
        f"\nStore reads during a sweep of {args.trials} trials ({args.epochs} epochs of "
        f"{args.epoch_seconds}s each, sleepy_train), 2 Celery workers x {args.concurrency} "
        "processes, SQLite store\n"
    )
    roles = sorted({r for res in results.values() for r in res["read"]} - {"total"}) + ["total"]
    header = f"{'':28}" + "".join(f"{label:>26}" for label in results)
    print(header)
    print(
        f"{'sweep wall time (s)':28}"
        + "".join(f"{res['seconds']:>26.1f}" for res in results.values())
    )
    for role in roles:
        print(
            f"{'MB read: ' + role:28}"
            + "".join(
                f"{res['read'].get(role, {}).get('bytes', 0) / 1e6:>26.2f}"
                for res in results.values()
            )
        )
    print(
        f"{'rows read: total':28}"
        + "".join(f"{res['read']['total']['rows']:>26,}" for res in results.values())
    )
    rates = [res["read"]["total"]["bytes"] / res["seconds"] for res in results.values()]
    print(f"{'MB/s read (total)':28}" + "".join(f"{r / 1e6:>26.3f}" for r in rates))
    if rates[1]:
        print(f"\nbefore/after bytes per second: {rates[0] / rates[1]:.1f}x")


if __name__ == "__main__":
    main()
