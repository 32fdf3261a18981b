"""End to end as the user runs it: the paper sweep through ``dnnframe run``, this checkout
side by side with another (the previous ``main``), alternating, warm caches.

The paper workload (iris, 1-4 hidden layers of 16, tanh/relu, five SGD learning rates, 20
epochs, batch 32; seeds make up the count: 10,000 trials by default) is run by each
checkout's own CLI (``python -m dnnframe.cli run SPEC -w 2 --store sqlite:///... -q``) in a
fresh SQLite store per run. Each checkout runs once untimed first (its compile and dataset
caches warm), then the rounds alternate the checkouts. With ``--celery`` the same sweep goes
through RabbitMQ to each checkout's Celery worker (its start not timed). Printed per run: wall time,
configurations per second, and the ``dnnframe run`` process's own share of the run's CPU
(its CPU time apart from its worker processes', over all of it: the CLI must stay quiet
while the workers need the cores), and how the workers' time on packs splits between
compiled calls and the rest (per-member Python, the runner, the store).

    git worktree add /tmp/base <previous main>
    python bench/e2e.py --base /tmp/base                 # 10,000 trials, 3 rounds
    python bench/e2e.py --base /tmp/base --trials 2000 --rounds 2
    python bench/e2e.py --base /tmp/base --celery        # through RabbitMQ and Celery
    python bench/e2e.py                                   # this checkout alone

The goal: at least 4x the configurations per second of the main before the speed work
(d52fbda), 3x through Celery, the parent under 5 % of the CPU; the paper's headline is
10,000 configurations per second.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BROKER_URL = os.environ.get("DNNFRAME_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
TICKS = os.sysconf("SC_CLK_TCK")
CONFIGS = 4 * 2 * 5  # depths x activations x learning rates


def paper_spec(trials: int, epochs: int) -> dict:
    """The paper workload with enough seeds for ``trials`` trials (a multiple of 40)."""
    return {
        "name": f"paper-e2e-{trials}",
        "dataset": {"name": "iris"},
        "model": {
            "hidden_layers": {"grid": [1, 2, 3, 4]},
            "width": 16,
            "activation": {"grid": ["tanh", "relu"]},
        },
        "training": {
            "optimizer": "sgd",
            "learning_rate": {"grid": [0.001, 0.003, 0.01, 0.03, 0.1]},
            "batch_size": 32,
            "max_epochs": epochs,
            "early_stopping": None,
        },
        "search": {"seeds": max(1, trials // CONFIGS)},
    }


def _own_and_children_cpu(pid: int) -> tuple[float, float] | None:
    """(the process's own CPU seconds, its waited-for children's), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) / TICKS, (cutime + cstime) / TICKS


@contextlib.contextmanager
def celery_workers(checkout: Path, store_url: str, concurrency: int, root: Path) -> Iterator[str]:
    """``checkout``'s Celery worker (``concurrency`` processes) on a queue of its own, ready;
    yields the queue. Its start is not timed: a deployment's workers are up before a sweep."""
    queue = f"e2e-{uuid.uuid4().hex[:8]}"
    log = root / f"{queue}.log"
    env = {
        **os.environ,
        "PYTHONPATH": str(checkout),
        "DNNFRAME_STORE_URL": store_url,
        "DNNFRAME_BROKER_URL": BROKER_URL,
        "PYTHONUNBUFFERED": "1",
    }
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
        f"{queue}@%h",
        "--prefetch-multiplier=1",
        "-O",
        "fair",
        "--loglevel=INFO",
        "--without-mingle",
        "--without-gossip",
    ]
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            cmd, cwd=checkout, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 120
        while b" ready." not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"celery worker did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield queue
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=20)
                break
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue


def run_once(
    checkout: Path, spec_path: Path, workers: int, root: Path, celery: bool = False
) -> dict:
    """One ``dnnframe run`` of the spec by ``checkout``'s code in a fresh store: on a local
    pool of ``workers`` processes, or with ``celery`` through RabbitMQ to a Celery worker of
    ``workers`` processes."""
    store = root / f"{checkout.name}-{time.monotonic_ns()}.db"
    url = f"sqlite:///{store}"
    if celery:
        with celery_workers(checkout, url, workers, root) as queue:
            out = _timed(
                checkout,
                [str(spec_path), "--broker", BROKER_URL, "--queue", queue, "--store", url, "-q"],
                store,
            )
        # the workers are not the CLI's children: only its own CPU is known here
        return {**out, "cpu": None, "parent_cpu": out["cpu"]}
    return _timed(checkout, [str(spec_path), "-w", str(workers), "--store", url, "-q"], store)


def _timed(checkout: Path, args: list[str], store: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    cmd = [sys.executable, "-m", "dnnframe.cli", "run", *args]
    before = _children_cpu()
    start = time.perf_counter()
    errors = store.with_suffix(".stderr")
    with errors.open("w") as err_file:
        proc = subprocess.Popen(
            cmd, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=err_file
        )
    children = 0.0
    while proc.poll() is None:
        # the workers are joined before the summary: their CPU is in the parent's
        # children's account by the last look
        seen = _own_and_children_cpu(proc.pid)
        if seen is not None:
            children = seen[1]
        time.sleep(0.05)
    wall = time.perf_counter() - start
    err = errors.read_text()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} (in {checkout}) exited {proc.returncode}:\n{err}")
    # the CLI and every worker it waited for, from this process's account of its children
    total = _children_cpu() - before
    split = worker_split(store)
    store.unlink(missing_ok=True)
    return {"wall": wall, "cpu": total, "parent_cpu": max(0.0, total - children), **split}


def worker_split(store: Path) -> dict:
    """How the workers' time on packs splits, from the stored trials: each pack's time from
    its claim to its members' finish, the seconds its engine spent inside compiled calls and
    building or loading its graph; the rest is the per-member Python of the epoch loop and
    the runner and the store's reads and writes (None for a checkout that does not record
    compiled seconds)."""
    with sqlite3.connect(store) as db:
        rows = db.execute(
            "SELECT max(finished_at) - min(started_at), "
            "max(json_extract(result, '$.pack.compute_seconds')), "
            "max(json_extract(result, '$.pack.compile_seconds')) FROM trials "
            "GROUP BY json_extract(result, '$.pack.id')"
        ).fetchall()
    on_packs = sum(r[0] for r in rows)
    if not rows or any(r[1] is None for r in rows) or not on_packs:
        return {"other_share": None}
    compute, build = sum(r[1] for r in rows), sum(r[2] for r in rows)
    return {
        "other_share": max(0.0, on_packs - compute - build) / on_packs,
        "compute_share": compute / on_packs,
    }


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, help="another checkout to run side by side")
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--celery",
        action="store_true",
        help="through RabbitMQ to a Celery worker of --workers processes",
    )
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    checkouts = [("this", REPO)] + ([("base", args.base.resolve())] if args.base else [])
    with tempfile.TemporaryDirectory(prefix="dnnframe-e2e-") as tmp:
        root = Path(tmp)
        spec_path = root / "paper.json"
        spec = paper_spec(args.trials, args.epochs)
        spec_path.write_text(json.dumps(spec))
        n = CONFIGS * spec["search"]["seeds"]
        how = f"Celery, -c {args.workers}" if args.celery else f"-w {args.workers}"
        print(
            f"paper sweep: {n} trials, {args.epochs} epochs, {how}; load "
            f"average {os.getloadavg()[0]:.2f} at start"
        )
        for _, path in checkouts:  # warm each checkout's caches, untimed
            run_once(path, spec_path, args.workers, root, args.celery)
        runs: dict[str, list[dict]] = {name: [] for name, _ in checkouts}
        for r in range(args.rounds):
            order = checkouts if r % 2 == 0 else checkouts[::-1]
            for name, path in order:
                out = run_once(path, spec_path, args.workers, root, args.celery)
                runs[name].append(out)
                share = (
                    f", parent {100 * out['parent_cpu'] / out['cpu']:.1f} % of "
                    f"{out['cpu']:.1f} CPU s"
                    if out["cpu"]
                    else f", the CLI {out['parent_cpu']:.1f} CPU s"
                )
                other = (
                    f", workers: compiled calls {100 * out['compute_share']:.0f} %, "
                    f"per-member Python and store {100 * out['other_share']:.0f} %"
                    if out.get("other_share") is not None
                    else ""
                )
                print(
                    f"  round {r + 1} {name:5s} {out['wall']:6.2f} s  "
                    f"{n / out['wall']:7.0f} configs/s{share}{other}",
                    flush=True,
                )
    print()
    summary = {}
    for name, _ in checkouts:
        walls = [x["wall"] for x in runs[name]]
        shares = [x["parent_cpu"] / x["cpu"] for x in runs[name] if x["cpu"]]
        summary[name] = {
            "walls": walls,
            "median_wall": statistics.median(walls),
            "configs_per_s": n / statistics.median(walls),
            "parent_share": statistics.median(shares) if shares else None,
        }
        share = summary[name]["parent_share"]
        print(
            f"{name:5s} median {summary[name]['median_wall']:.2f} s, "
            f"{summary[name]['configs_per_s']:.0f} configs/s"
            + (f", parent {100 * share:.1f} % of the CPU" if share is not None else "")
        )
    if args.base:
        ratio = summary["base"]["median_wall"] / summary["this"]["median_wall"]
        print(
            f"this / base: {ratio:.2f}x faster (goal >= {3 if args.celery else 4}x, against the "
            "main before the speed work); the paper's headline is "
            f"10,000 configs/s"
        )
        summary["ratio"] = ratio
    if args.json:
        args.json.write_text(json.dumps({"trials": n, **summary}, indent=2))


if __name__ == "__main__":
    main()
