"""Sweep throughput (paper RQ3 and RQ4): how many configurations per second, at each stage.

McLeod (2015) claims 10,000-50,000 configurations per second for a pure-Python modular
system, and that process-based parallelism gets past the GIL. This benchmark measures the
platform at every stage a configuration goes through, each figure with its setting:

1. ``spec``   validate + expand + trial id (pure Python, no I/O): 1 process; then the same
              work split in 2 threads vs 2 processes (the GIL question, RQ3).
2. ``store``  ``submit_experiment`` into a fresh SQLite file: expansion, ids and the
              QUEUED rows written (what "submitting a sweep" costs per configuration).
3. ``local``  trials run end to end by ``LocalExecutor`` with 1 and 2 worker processes:
              (a) a no-op ``train_fn`` (claim → one epoch of metrics → finish: the platform's
              per-trial overhead), (b) real training of a tiny network (iris, 1 hidden layer
              of 4 units, 1 epoch), (c) compute-bound training (digits, 8 x 128 ReLU, 4
              epochs), where 2 processes can show their parallelism.
4. ``celery`` the same two through RabbitMQ and real ``celery -A tasks worker`` processes
              with concurrency 1 and 2 (the broker must run at $DNNFRAME_BROKER_URL or
              amqp://guest:guest@127.0.0.1:5672//).
5. ``packs``  the paper workload (iris, 1-4 hidden layers of 16, tanh/relu, five SGD
              learning rates, 20 epochs, batch 32; 10,000 trials by default) submitted,
              trained and stored with every learning curve: packed (automatic pack size)
              vs unpacked (pack size 1) on 2 local workers, packed through Celery with
              concurrency 2, beside the workload's FLOP limit on this machine (its FLOPs
              divided by one core's measured 64x128x128 matrix-product rate, times 2
              cores) and each worker's peak memory.

Usage::

    python bench/throughput.py                    # everything, ~3-5 minutes on 2 cores
    python bench/throughput.py --only spec store  # the fast, pure-Python part
    python bench/throughput.py --only packs --paper-trials 10000
    python bench/throughput.py --json docs/paper/throughput.json

Every rate is configurations (or trials) per second of wall time; the paper's claim is
printed beside each as a ratio. The load average at start is printed: on a shared machine
the 2-worker figures are only as good as the idle cores.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kombu import Connection  # noqa: E402

from dnnframe.executors.dispatch import with_retry_queues  # noqa: E402
from dnnframe.spec import count_trials, expand, expand_with_ids, parse_spec  # noqa: E402
from dnnframe.testing.hooks import one_epoch_train  # noqa: E402

PAPER_LOW, PAPER_HIGH = 10_000, 50_000
BROKER_URL = os.environ.get("DNNFRAME_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")


# --------------------------------------------------------------------------- specs
def big_spec(n_lr: int = 40, tag: int = 0) -> dict[str, Any]:
    """A grid of 100 depths x 5 activations x ``n_lr`` learning rates (20,000 for n_lr=40)."""
    return {
        "name": f"throughput-{tag}",
        "dataset": {"name": "iris"},
        "model": {
            "hidden_layers": {"int_range": [1, 100]},
            "width": 8,
            "activation": {"grid": ["relu", "tanh", "sigmoid", "elu", "selu"]},
        },
        "training": {
            "optimizer": "adam",
            "learning_rate": {"grid": [round(1e-4 * (1 + i + 1000 * tag), 8) for i in range(n_lr)]},
            "max_epochs": 1,
        },
    }


def tiny_spec(n: int, name: str) -> dict[str, Any]:
    """``n`` tiny trials (iris, 1 hidden layer of 4 units, 1 epoch, one batch), differing by seed."""
    return {
        "name": name,
        "dataset": {"name": "iris"},
        "model": {"hidden_layers": 1, "width": 4, "activation": "tanh"},
        "training": {"optimizer": "sgd", "learning_rate": 0.1, "batch_size": 128, "max_epochs": 1},
        "search": {"seeds": n},
    }


def medium_spec(n: int, name: str) -> dict[str, Any]:
    """``n`` compute-bound trials (digits, 8 hidden layers of 128 ReLU units, 4 epochs of Adam):
    where the time goes into numerics, so worker processes can show their parallelism."""
    return {
        "name": name,
        "dataset": {"name": "digits"},
        "model": {"hidden_layers": 8, "width": 128, "activation": "relu", "init": "he"},
        "training": {
            "optimizer": "adam",
            "learning_rate": 0.001,
            "batch_size": 32,
            "max_epochs": 4,
        },
        "search": {"seeds": n},
    }


# --------------------------------------------------------------------------- 1. spec
def _expand_ids(spec_doc: dict[str, Any]) -> int:
    return sum(1 for _ in expand_with_ids(parse_spec(spec_doc)))


def bench_spec(results: list[dict[str, Any]], repeats: int = 3) -> None:
    # Best of ``repeats``, interleaved: on a shared machine the best run is the one least
    # disturbed by others, and interleaving keeps a burst of load from hitting one setting only.
    doc = big_spec()
    halves = [big_spec(n_lr=20, tag=1), big_spec(n_lr=20, tag=2)]
    n_half = sum(count_trials(parse_spec(h)) for h in halves)
    best: dict[str, float] = {}

    def keep(key: str, seconds: float) -> None:
        best[key] = min(best.get(key, float("inf")), seconds)

    with cf.ThreadPoolExecutor(2) as threads, cf.ProcessPoolExecutor(2) as procs:
        list(procs.map(_expand_ids, [big_spec(n_lr=1, tag=3)] * 2))  # start + import, not timed
        for _ in range(repeats):
            t = time.perf_counter()
            spec = parse_spec(doc)
            n = sum(1 for _ in expand(spec))
            keep("expand", time.perf_counter() - t)
            t = time.perf_counter()
            assert _expand_ids(doc) == n
            keep("ids", time.perf_counter() - t)
            t, c = time.perf_counter(), time.process_time()
            assert sum(threads.map(_expand_ids, halves)) == n_half
            wall = time.perf_counter() - t
            if wall < best.get("threads", float("inf")):
                best["threads_cpu"] = (time.process_time() - c) / wall  # ≈1.0: one core at a time
            keep("threads", wall)
            t = time.perf_counter()
            assert sum(procs.map(_expand_ids, halves)) == n_half
            keep("procs", time.perf_counter() - t)
    setting = f"best of {repeats}"
    record(
        results,
        "spec",
        "validate spec + expand to TrialConfig",
        f"1 process, {setting}",
        n,
        best["expand"],
    )
    record(
        results,
        "spec",
        "validate spec + expand + trial id (sha256 of config+data+engine)",
        f"1 process, {setting}",
        n,
        best["ids"],
    )
    # RQ3: the same pure-Python work in 2 halves, on 2 threads vs 2 processes.
    record(
        results,
        "spec",
        "validate spec + expand + trial id",
        f"2 threads (GIL; CPU/wall {best['threads_cpu']:.2f}), {setting}",
        n_half,
        best["threads"],
    )
    record(
        results,
        "spec",
        "validate spec + expand + trial id",
        f"2 processes, {setting}",
        n_half,
        best["procs"],
    )


# --------------------------------------------------------------------------- 2. store
def bench_store(results: list[dict[str, Any]], tmp: Path) -> None:
    from dnnframe.store import open_store
    from dnnframe.submit import submit_experiment

    spec = parse_spec(big_spec(n_lr=10))  # 5,000 configurations
    store = open_store(f"sqlite:///{tmp / 'submit.db'}")
    t = time.perf_counter()
    res = submit_experiment(spec, store, executor=None)
    s = time.perf_counter() - t
    assert len(res.new_trial_ids) == count_trials(spec)
    record(
        results,
        "store",
        "submit_experiment: expand + ids + QUEUED rows (one transaction)",
        "1 process, SQLite file",
        len(res.new_trial_ids),
        s,
    )
    store.close()


# --------------------------------------------------------------------------- 3. local
def _warm_up(store: Any, executor: Any, workers: int, name: str, make_spec: Any = None) -> None:
    """Run 2 trials per worker first (other seeds, so other trial ids): each worker process
    compiles the graph once, a one-off cost the timed sweep must not include."""
    from dnnframe.submit import submit_experiment

    doc = (make_spec or tiny_spec)(2 * workers, name + "-warm-up")
    doc["search"]["seeds"] = list(range(10_000, 10_000 + 2 * workers))
    submit_experiment(parse_spec(doc), store, executor)
    executor.wait()


def _finished_rate(store: Any, experiment_id: str) -> tuple[int, float | None, int]:
    """Trials finished, the steady rate between the first and the last finish, and how many
    timed trials paid a cold compile (should be 0 after the warm-up)."""
    trials = store.list_trials(experiment_id)
    done = sorted(t.finished_at for t in trials if t.finished_at)
    cold = sum(1 for t in trials if ((t.result or {}).get("timings") or {}).get("compile", 0) > 0.5)
    if len(done) < 2 or done[-1] <= done[0]:
        return len(done), None, cold
    return len(done), (len(done) - 1) / (done[-1] - done[0]), cold


def bench_local(
    results: list[dict[str, Any]], tmp: Path, n_noop: int, n_train: int, n_medium: int
) -> None:
    from dnnframe.executors import LocalExecutor
    from dnnframe.store import open_store
    from dnnframe.submit import submit_experiment

    for workers in (1, 2):
        for kind, n, train_fn, make in (
            ("no-op train_fn", n_noop, one_epoch_train, tiny_spec),
            ("tiny real training", n_train, None, tiny_spec),
            ("compute-bound training", n_medium, None, medium_spec),
        ):
            url = f"sqlite:///{tmp / f'local-{workers}-{kind[:4]}.db'}"
            store = open_store(url)
            spec = parse_spec(make(n, f"local-{workers}-{kind}"))
            ex = LocalExecutor(url, workers=workers, train_fn=train_fn)
            ex.wait_ready()  # process start + imports are a one-off, not per trial
            _warm_up(store, ex, workers, f"local-{workers}-{kind}", make)
            t = time.perf_counter()
            res = submit_experiment(spec, store, ex)
            ex.wait()
            s = time.perf_counter() - t
            ex.shutdown()
            finished, steady, cold = _finished_rate(store, res.experiment.id)
            assert finished == n, f"{finished} of {n} trials finished"
            record(
                results,
                "local",
                f"submit + run to COMPLETE, {kind}",
                f"LocalExecutor, {workers} worker(s)",
                n,
                s,
                steady=steady,
                cold=cold,
            )
            store.close()


# --------------------------------------------------------------------------- 4. celery
def _start_celery(
    store_url: str, queue: str, concurrency: int, log: Path, noop: bool
) -> subprocess.Popen:
    env = dict(os.environ)
    env.update(
        {
            "PYTHONPATH": f"{REPO}{os.pathsep}{env.get('PYTHONPATH', '')}",
            "DNNFRAME_STORE_URL": store_url,
            "DNNFRAME_BROKER_URL": BROKER_URL,
            "PYTHONUNBUFFERED": "1",
        }
    )
    if noop:
        env["DNNFRAME_TRAIN_FN"] = "dnnframe.testing.hooks:one_epoch_train"
    cmd = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "tasks",
        "worker",
        "-Q",
        queue,
        "-c",
        str(concurrency),
        "-n",
        f"bench-{uuid.uuid4().hex[:6]}@%h",
        "--prefetch-multiplier=1",
        "-O",
        "fair",
        "--loglevel=INFO",
        "--without-mingle",
        "--without-gossip",
    ]
    fh = open(log, "wb")
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
    )
    fh.close()
    return proc


def _stop(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            continue


@contextlib.contextmanager
def _celery_worker(store_url: str, concurrency: int, log: Path, noop: bool) -> Iterator[str]:
    """A ready ``celery -A tasks worker`` on a queue of its own; yields the queue's name.
    Start-up is a one-off, so this waits until the worker consumes; the worker is stopped
    and its queue deleted after."""
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    proc = _start_celery(store_url, queue, concurrency, log, noop)
    try:
        deadline = time.monotonic() + 90
        while b" ready." not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"celery worker did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield queue
    finally:
        _stop(proc)
        try:  # the worker declared the queue's retry queue too
            with Connection(BROKER_URL, connect_timeout=3) as conn:
                for name in with_retry_queues([queue]):
                    conn.default_channel.queue_delete(name)
        except Exception:
            pass


def bench_celery(
    results: list[dict[str, Any]], tmp: Path, n_noop: int, n_train: int, n_medium: int
) -> None:
    from dnnframe.executors import CeleryExecutor
    from dnnframe.store import open_store
    from dnnframe.submit import submit_experiment

    try:
        with Connection(BROKER_URL, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as exc:
        raise SystemExit(
            f"RabbitMQ is not reachable at {BROKER_URL} ({exc}); start it with "
            "`rabbitmq-server -detached` or run with --only spec store local"
        ) from None
    for concurrency in (1, 2):
        for kind, n, noop, make in (
            ("no-op train_fn", n_noop, True, tiny_spec),
            ("tiny real training", n_train, False, tiny_spec),
            ("compute-bound training", n_medium, False, medium_spec),
        ):
            url = f"sqlite:///{tmp / f'celery-{concurrency}-{kind[:4]}.db'}"
            store = open_store(url)
            spec = parse_spec(make(n, f"celery-{concurrency}-{kind}"))
            log = tmp / f"celery-{concurrency}-{kind[:4]}.log"
            with _celery_worker(url, concurrency, log, noop) as queue:
                ex = CeleryExecutor(BROKER_URL, url, queue=queue)
                _warm_up(store, ex, concurrency, f"celery-{concurrency}-{kind}", make)
                ex = CeleryExecutor(
                    BROKER_URL, url, queue=queue
                )  # wait() covers only the timed trials
                t = time.perf_counter()
                res = submit_experiment(spec, store, ex)
                if not ex.wait(timeout=600):
                    raise SystemExit(
                        f"celery run did not finish in 600 s:\n{log.read_text()[-3000:]}"
                    )
                s = time.perf_counter() - t
                ex.shutdown(wait=False)
            finished, steady, cold = _finished_rate(store, res.experiment.id)
            assert finished == n, f"{finished} of {n} trials finished"
            record(
                results,
                "celery",
                f"submit + run to COMPLETE, {kind}",
                f"Celery + RabbitMQ, 1 worker, concurrency {concurrency}",
                n,
                s,
                steady=steady,
                cold=cold,
            )
            store.close()


# --------------------------------------------------------------------------- 5. packs
PAPER_LRS = (0.001, 0.003, 0.01, 0.03, 0.1)


def paper_spec(n: int, name: str, first_seed: int = 0) -> dict[str, Any]:
    """The paper workload: 4 depths x 2 activations x 5 learning rates x n/40 seeds."""
    return {
        "name": name,
        "dataset": {"name": "iris"},
        "model": {
            "hidden_layers": {"grid": [1, 2, 3, 4]},
            "width": 16,
            "activation": {"grid": ["tanh", "relu"]},
        },
        "training": {
            "optimizer": "sgd",
            "learning_rate": {"grid": list(PAPER_LRS)},
            "batch_size": 32,
            "max_epochs": 20,
            "early_stopping": None,
        },
        "search": {"seeds": list(range(first_seed, first_seed + max(1, n // 40)))},
    }


def _flop_limit(cores: int) -> tuple[float, float, float]:
    """(FLOPs per paper trial, one core's 64x128x128 float64 matmul FLOP/s, trials/s limit
    on ``cores`` cores)."""
    import numpy as np

    from dnnframe.datasets import DatasetConfig, load_dataset

    data = load_dataset(DatasetConfig(name="iris"))
    n_train, n_val = len(data.X_train), len(data.X_val)
    n_all = n_train + n_val + len(data.X_test)
    flops = 0.0
    for depth in (1, 2, 3, 4):
        dims = [data.n_features] + [16] * depth + [data.n_outputs]
        macs = sum(a * b for a, b in zip(dims[:-1], dims[1:]))
        # forward, weight gradient and input gradient per training row; forward only for
        # the per-epoch validation and the final evaluation
        flops += 2 * macs * (3 * n_train * 20 + n_val * 20 + n_all)
    flops /= 4
    a = np.random.default_rng(0).normal(size=(64, 128))
    b = np.random.default_rng(1).normal(size=(128, 128))
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(2000):
            a @ b
        best = min(best, time.perf_counter() - t)
    rate = 2 * 64 * 128 * 128 * 2000 / best
    return flops, rate, cores * rate / flops


def _peak_rss_mb(store: Any, experiment_id: str) -> float | None:
    """The largest peak resident memory any worker process reported with its trials."""
    peaks = [
        ((t.result or {}).get("environment") or {}).get("peak_rss_mb")
        for t in store.list_trials(experiment_id)
    ]
    peaks = [p for p in peaks if p]
    return max(peaks) if peaks else None


def _curves_complete(store: Any, experiment_id: str) -> int:
    """Trials COMPLETE with all 20 epochs of their learning curve stored."""
    return sum(
        1
        for t in store.list_trials(experiment_id)
        if t.state.value == "COMPLETE" and len(t.metrics) == 20
    )


def bench_packs(
    results: list[dict[str, Any]], tmp: Path, n: int, n_unpacked: int, celery: bool
) -> None:
    from dnnframe.executors import CeleryExecutor, LocalExecutor
    from dnnframe.store import open_store
    from dnnframe.submit import submit_experiment

    flops, rate, limit = _flop_limit(2)
    print(
        f"packs   paper workload {flops / 1e6:.2f} MFLOP per trial; one core "
        f"{rate / 1e9:.1f} GFLOP/s (64x128x128 float64): FLOP limit {limit:,.0f} trials/s "
        f"on 2 cores",
        flush=True,
    )
    rows: dict[str, float] = {}
    for label, size, count in (
        ("packed (automatic size)", None, n),
        ("unpacked (pack size 1)", 1, n_unpacked),
    ):
        url = f"sqlite:///{tmp / f'packs-{size}.db'}"
        store = open_store(url)
        ex = LocalExecutor(url, workers=2)
        ex.wait_ready()
        # the first build of each graph is a one-off per host (then cached on disk)
        submit_experiment(
            parse_spec(paper_spec(80, f"packs-warm-{size}")), store, ex, pack_size=size
        )
        ex.wait()
        spec = parse_spec(paper_spec(count, f"packs-{size}", first_seed=1000))
        t = time.perf_counter()
        res = submit_experiment(spec, store, ex, pack_size=size)
        ex.wait()
        s = time.perf_counter() - t
        ex.shutdown()
        done = _curves_complete(store, res.experiment.id)
        assert done == len(res.trial_ids), f"{done} of {len(res.trial_ids)} complete with curves"
        rows[label] = done / s
        peak = _peak_rss_mb(store, res.experiment.id)
        record(
            results,
            "packs",
            f"paper workload submitted + trained + stored, {label}",
            f"LocalExecutor, 2 workers, {len(res.packs)} packs"
            + (f", peak RSS {peak:.0f} MB/worker" if peak else ""),
            done,
            s,
        )
        store.close()
    print(
        f"packs   packed / unpacked: {rows['packed (automatic size)'] / rows['unpacked (pack size 1)']:.1f}x; "
        f"packed = {rows['packed (automatic size)'] / limit:.1%} of the FLOP limit",
        flush=True,
    )
    if not celery:
        return
    url = f"sqlite:///{tmp / 'packs-celery.db'}"
    store = open_store(url)
    log = tmp / "packs-celery.log"
    with _celery_worker(url, 2, log, noop=False) as queue:
        ex = CeleryExecutor(BROKER_URL, url, queue=queue)
        submit_experiment(parse_spec(paper_spec(80, "packs-celery-warm")), store, ex)
        ex.wait(timeout=600)
        ex = CeleryExecutor(BROKER_URL, url, queue=queue)
        spec = parse_spec(paper_spec(n, "packs-celery", first_seed=1000))
        t = time.perf_counter()
        res = submit_experiment(spec, store, ex)
        if not ex.wait(timeout=900):
            raise SystemExit(f"celery run did not finish:\n{log.read_text()[-3000:]}")
        s = time.perf_counter() - t
        ex.shutdown(wait=False)
    done = _curves_complete(store, res.experiment.id)
    assert done == len(res.trial_ids), f"{done} of {len(res.trial_ids)} complete with curves"
    record(
        results,
        "packs",
        "paper workload submitted + trained + stored, packed",
        f"Celery + RabbitMQ, 1 worker, concurrency 2, {len(res.packs)} packs",
        done,
        s,
    )
    store.close()


# --------------------------------------------------------------------------- output
def record(
    results: list[dict[str, Any]],
    stage: str,
    what: str,
    setting: str,
    n: int,
    seconds: float,
    steady: float | None = None,
    cold: int | None = None,
) -> None:
    """Append one measurement and print it beside the paper's claimed range."""
    rate = n / seconds if seconds > 0 else float("inf")
    row = {
        "stage": stage,
        "what": what,
        "setting": setting,
        "n": n,
        "seconds": seconds,
        "per_s": rate,
        "steady_per_s": steady,
        "cold_compiles": cold,
        "vs_paper_low": rate / PAPER_LOW,
        "vs_paper_high": rate / PAPER_HIGH,
    }
    results.append(row)
    extra = f"  (steady {steady:,.1f}/s)" if steady else ""
    extra += f" ({cold} cold compiles in the timed trials)" if cold else ""
    print(
        f"{stage:7s} {rate:12,.1f}/s  {n:6d} in {seconds:7.2f}s  x{rate / PAPER_LOW:8.4f} of 10k, "
        f"x{rate / PAPER_HIGH:8.4f} of 50k  | {what} [{setting}]{extra}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    """Run the selected stages and print (and optionally save) configurations per second."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--only",
        nargs="+",
        choices=["spec", "store", "local", "celery", "packs"],
        default=["spec", "store", "local", "celery", "packs"],
    )
    ap.add_argument("--noop-trials", type=int, default=1000)
    ap.add_argument("--train-trials", type=int, default=500)
    ap.add_argument("--medium-trials", type=int, default=40)
    ap.add_argument(
        "--paper-trials",
        type=int,
        default=10_000,
        help="trials of the paper workload, packed (stage packs)",
    )
    ap.add_argument(
        "--unpacked-trials",
        type=int,
        default=2_000,
        help="trials of the paper workload trained unpacked, for the ratio",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args(argv)
    load = os.getloadavg()
    print(
        f"# dnnframe throughput, {platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at start; paper claim "
        f"{PAPER_LOW:,}-{PAPER_HIGH:,} configurations/s",
        flush=True,
    )
    results: list[dict[str, Any]] = []
    tmp = Path(tempfile.mkdtemp(prefix="dnnframe-throughput-"))
    try:
        if "spec" in args.only:
            bench_spec(results)
        if "store" in args.only:
            bench_store(results, tmp)
        if "local" in args.only:
            bench_local(results, tmp, args.noop_trials, args.train_trials, args.medium_trials)
        if "celery" in args.only:
            bench_celery(results, tmp, args.noop_trials, args.train_trials, args.medium_trials)
        if "packs" in args.only:
            bench_packs(
                results,
                tmp,
                args.paper_trials,
                args.unpacked_trials,
                celery="celery" in args.only or args.only == ["packs"],
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    best = max(results, key=lambda r: r["per_s"])
    print(
        f"# highest: {best['per_s']:,.0f} configurations/s — {best['what']} [{best['setting']}] = "
        f"{best['per_s'] / PAPER_LOW:.2f}x the paper's low claim, {best['per_s'] / PAPER_HIGH:.2f}x its high claim"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "host": platform.node(),
                    "cores": os.cpu_count(),
                    "load_average": load,
                    "python": platform.python_version(),
                    "results": results,
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
