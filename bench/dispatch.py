"""Per-trial dispatch overhead: local process pool vs Celery over RabbitMQ, side by side.

Every trial is a no-op (``dnnframe.testing.hooks.noop_train``), so what is timed is the
machinery: storing the sweep, handing ids to the executor, claim, final write (and for
Celery: publish with confirms, broker, worker, ack, worker-state writes). Two numbers per executor:

* throughput: N trials submitted at once, wall time from ``submit_experiment`` until every
  result is stored; overhead = wall / N (with one worker process this is the serial cost
  of one trial's dispatch).
* latency: one trial at a time, submit → result stored, median and p90.

Target (issue 6): <= 5 ms per trial end to end through Celery with results stored.

    .venv/bin/python bench/dispatch.py [--trials 300] [--latency-trials 30] [--workers 1]

Needs RabbitMQ at $DNNFRAME_BROKER_URL (default amqp://guest:guest@127.0.0.1:5672//).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dnnframe.executors import CeleryExecutor, LocalExecutor  # noqa: E402
from dnnframe.spec import parse_spec  # noqa: E402
from dnnframe.store import open_store  # noqa: E402
from dnnframe.submit import submit_experiment  # noqa: E402
from dnnframe.testing.hooks import noop_train  # noqa: E402

BROKER = os.environ.get("DNNFRAME_BROKER_URL") or "amqp://guest:guest@127.0.0.1:5672//"


_made = 0


def _spec(name: str, n: int):
    # Trial ids hash the configuration, not the name: give every spec its own learning rate
    # so no trial is already COMPLETE from an earlier spec (that would skip the work).
    global _made
    _made += 1
    return parse_spec(
        {
            "name": name,
            "dataset": {"name": "digits"},
            "model": {"hidden_layers": 1, "width": 8, "activation": "relu"},
            "training": {"optimizer": "sgd", "learning_rate": 0.1 + _made * 1e-6, "max_epochs": 1},
            "search": {"seeds": n},
        }
    )


def _wait_finished(
    store, experiment_id: str, n: int, timeout: float = 300.0, poll: float = 0.001
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        counts = store.counts_by_state(experiment_id)
        if sum(v for k, v in counts.items() if k not in ("QUEUED", "RUNNING")) >= n:
            if counts["COMPLETE"] != n:
                raise SystemExit(f"expected {n} COMPLETE trials, got {counts}")
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out; counts {counts}")
        time.sleep(poll)


def measure(executor, store, label: str, n: int, n_latency: int) -> dict[str, float]:
    """Warm up, then time a burst of ``n`` trials and ``n_latency`` one-at-a-time trials."""
    warm = _spec(f"{label}-warmup", 4)
    submit_experiment(warm, store, executor)
    _wait_finished(store, warm.experiment_id, 4)

    burst = _spec(f"{label}-burst", n)
    t0 = time.perf_counter()
    assert len(submit_experiment(burst, store, executor).submitted_trial_ids) == n
    _wait_finished(store, burst.experiment_id, n)
    wall = time.perf_counter() - t0

    lat = []
    for i in range(n_latency):
        one = _spec(f"{label}-latency-{i}", 1)
        t = time.perf_counter()
        assert len(submit_experiment(one, store, executor).submitted_trial_ids) == 1
        _wait_finished(store, one.experiment_id, 1)
        lat.append(time.perf_counter() - t)
    lat.sort()
    return {
        "wall_s": wall,
        "per_trial_ms": wall / n * 1e3,
        "throughput": n / wall,
        "latency_p50_ms": statistics.median(lat) * 1e3,
        "latency_p90_ms": lat[int(0.9 * (len(lat) - 1))] * 1e3,
    }


def run_local(tmp: Path, n: int, n_latency: int, workers: int) -> dict[str, float]:
    url = f"sqlite:///{tmp / 'local.db'}"
    store = open_store(url)
    ex = LocalExecutor(url, workers=workers, train_fn=noop_train)
    try:
        return measure(ex, store, "local", n, n_latency)
    finally:
        ex.shutdown(wait=True)
        store.close()


def run_celery(tmp: Path, n: int, n_latency: int, workers: int) -> dict[str, float]:
    url = f"sqlite:///{tmp / 'celery.db'}"
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    env = dict(
        os.environ,
        DNNFRAME_STORE_URL=url,
        DNNFRAME_BROKER_URL=BROKER,
        DNNFRAME_TRAIN_FN="dnnframe.testing.hooks:noop_train",
        PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    )
    log = tmp / "worker.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "tasks",
                "worker",
                "-Q",
                queue,
                "-c",
                str(workers),
                "-n",
                f"bench-{queue}@%h",
                "--prefetch-multiplier=1",
                "-O",
                "fair",
                "--without-mingle",
                "--without-gossip",
                "--loglevel=WARNING",
            ],
            cwd=REPO,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    store = open_store(url)
    ex = CeleryExecutor(BROKER, url, queue=queue)
    try:
        return measure(ex, store, "celery", n, n_latency)
    except BaseException:
        print(log.read_text(errors="replace")[-3000:], file=sys.stderr)
        raise
    finally:
        ex.shutdown(wait=False)
        store.close()
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        from kombu import Connection

        with Connection(BROKER) as conn:
            conn.default_channel.queue_delete(queue)


def main() -> None:
    """Run both executors and print one side-by-side table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--latency-trials", type=int, default=30)
    ap.add_argument("--workers", type=int, default=1, help="worker processes per executor")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dnnframe-bench-") as d:
        tmp = Path(d)
        local = run_local(tmp, args.trials, args.latency_trials, args.workers)
        celery = run_celery(tmp, args.trials, args.latency_trials, args.workers)
    print(
        f"dispatch of no-op trials: {args.trials} per burst, {args.latency_trials} one at a "
        f"time, {args.workers} worker process(es), SQLite store"
    )
    print(f"{'':24}{'local':>12}{'celery':>12}{'celery/local':>14}")
    rows = [
        ("per-trial overhead ms", "per_trial_ms"),
        ("throughput trials/s", "throughput"),
        ("latency p50 ms", "latency_p50_ms"),
        ("latency p90 ms", "latency_p90_ms"),
    ]
    for title, key in rows:
        print(f"{title:24}{local[key]:12.2f}{celery[key]:12.2f}{celery[key] / local[key]:14.2f}")
    verdict = "meets" if celery["per_trial_ms"] <= 5.0 else "MISSES"
    print(
        f"target <= 5 ms/trial through Celery (burst overhead): {verdict} "
        f"({celery['per_trial_ms']:.2f} ms)"
    )


if __name__ == "__main__":
    main()
