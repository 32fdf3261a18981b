"""Sweep throughput: dnnframe's LocalExecutor with 1 and 2 workers, side by side with Optuna.

The same sweep of tiny configurations (digits, hidden layers 1-3, a few epochs, several
seeds) is trained by the same function, :func:`dnnframe.engine.train`:

* ``dnnframe``: ``submit_experiment`` + ``LocalExecutor(workers=N)`` on a fresh SQLite store
  (claim, per-epoch metrics + heartbeat + cancel check, final write: the real per-trial cost).
* ``optuna``: N processes running ``study.optimize`` over a ``GridSampler`` of the same grid on
  a ``JournalStorage(JournalFileBackend)``; the objective reports every epoch
  (``trial.report``) and stores the timings as a user attribute. Skipped when Optuna is absent.

Printed per run: configs/second, speedup over the 1-worker run of the same driver, and
overhead = wall ÷ (Σ pure training time ÷ workers). Pure training time is measured first:
every trial's ``train(config)`` called in this one process with warm compile caches and no
callbacks. ``wall`` includes starting the worker processes (imports, loading compiled
modules from PyTensor's disk cache); ``after start`` excludes the pool start (dnnframe only).
``Σtrain()`` is the drivers' own sum of ``timings["total"]`` as seen inside the workers.

    python bench/sweep.py                    # 3 depths x 8 seeds x 40 epochs, 1 and 2 workers
    python bench/sweep.py --seeds 4 --epochs 5 --json
Targets (issue 5): speedup >= 1.8 on 2 cores; overhead <= 1.10; configs/s >= Optuna's.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dnnframe.executors import LocalExecutor, pinned_threads  # noqa: E402
from dnnframe.spec import TrialConfig, expand, parse_spec  # noqa: E402
from dnnframe.store import open_store  # noqa: E402
from dnnframe.submit import submit_experiment  # noqa: E402


def sweep_spec(
    depths: list[int], seeds: int, epochs: int, name: str, width: int = 64, batch_size: int = 16
) -> dict:
    return {
        "name": name,
        "dataset": {"name": "digits"},
        "model": {"hidden_layers": {"grid": depths}, "width": width},
        "training": {
            "optimizer": "adam",
            "learning_rate": 0.003,
            "batch_size": batch_size,
            "max_epochs": epochs,
        },
        "search": {"seeds": seeds},
    }


# --------------------------------------------------------------------------- dnnframe
def run_dnnframe(spec_doc: dict, workers: int, root: Path) -> dict:
    url = f"sqlite:///{root / f'dnnframe-{workers}.db'}"
    store = open_store(url)
    spec = parse_spec(spec_doc)
    t0 = time.perf_counter()
    executor = LocalExecutor(url, workers=workers)
    executor.wait_ready()
    t_ready = time.perf_counter()
    result = submit_experiment(spec, store, executor)
    executor.wait()
    t_end = time.perf_counter()
    executor.shutdown()
    trials = store.list_trials(result.experiment.id)
    store.close()
    assert all(t.state.value == "COMPLETE" for t in trials), [t.state for t in trials]
    pure = sum(t.result["timings"]["total"] for t in trials)
    return {
        "driver": "dnnframe",
        "workers": workers,
        "trials": len(trials),
        "wall": t_end - t0,
        "wall_after_start": t_end - t_ready,
        "pure": pure,
    }


# --------------------------------------------------------------------------- optuna
def _optuna_process(journal: str, study_name: str, spec_doc: dict) -> None:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from dnnframe.engine import train

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    depths = spec_doc["model"]["hidden_layers"]["grid"]
    seeds = list(range(spec_doc["search"]["seeds"]))
    storage = JournalStorage(JournalFileBackend(journal))
    sampler = optuna.samplers.GridSampler({"hidden_layers": depths, "seed": seeds}, seed=0)
    study = optuna.load_study(study_name=study_name, storage=storage, sampler=sampler)

    def objective(trial: optuna.Trial) -> float:
        doc = {
            "dataset": spec_doc["dataset"],
            "training": spec_doc["training"],
            "model": {
                **spec_doc["model"],
                "hidden_layers": trial.suggest_categorical("hidden_layers", depths),
            },
            "seed": trial.suggest_categorical("seed", seeds),
        }
        config = TrialConfig.model_validate(doc)

        def on_epoch(epoch: int, metrics: dict) -> bool:
            trial.report(metrics["val_accuracy"], epoch)  # per-epoch write, like dnnframe's
            return False

        result = train(config, on_epoch=on_epoch)
        trial.set_user_attr("timings", result.timings)
        return result.metrics["test_accuracy"]

    study.optimize(objective, n_trials=None)  # GridSampler stops the study when the grid is done


def run_optuna(spec_doc: dict, workers: int, root: Path) -> dict | None:
    try:
        import optuna
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend
    except ImportError:
        return None
    journal = str(root / f"optuna-{workers}.log")
    study_name = f"bench-{workers}"
    optuna.create_study(
        study_name=study_name,
        direction="maximize",
        storage=JournalStorage(JournalFileBackend(journal)),
    )
    ctx = multiprocessing.get_context("spawn")
    t0 = time.perf_counter()
    procs = [
        ctx.Process(target=_optuna_process, args=(journal, study_name, spec_doc))
        for _ in range(workers)
    ]
    with pinned_threads():  # the same one-thread pinning dnnframe's workers get
        for p in procs:
            p.start()
    for p in procs:
        p.join()
    wall = time.perf_counter() - t0
    study = optuna.load_study(
        study_name=study_name, storage=JournalStorage(JournalFileBackend(journal))
    )
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    pure = sum(t.user_attrs["timings"]["total"] for t in done)
    return {
        "driver": "optuna",
        "workers": workers,
        "trials": len(done),
        "wall": wall,
        "wall_after_start": None,
        "pure": pure,
    }


# --------------------------------------------------------------------------- machine ceiling
def _ceiling_process(spec_doc: dict, part: int, parts: int, barrier, out) -> None:
    from dnnframe.engine import train

    configs = list(expand(parse_spec(spec_doc)))[part::parts]
    seen = set()
    for config in configs:  # warm this process's compile cache, untimed
        if config.model.hidden_layers not in seen:
            seen.add(config.model.hidden_layers)
            train(config)
    barrier.wait()
    t0 = time.perf_counter()
    for config in configs:
        train(config)
    out.put(time.perf_counter() - t0)


def parallel_ceiling(spec_doc: dict, workers: int, pure: float) -> float:
    """The speedup this machine allows right now: ``workers`` bare processes (warm caches,
    no driver) each train a share of the sweep at the same moment; pure ÷ slowest share."""
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(workers), ctx.Queue()
    procs = [
        ctx.Process(target=_ceiling_process, args=(spec_doc, i, workers, barrier, out))
        for i in range(workers)
    ]
    with pinned_threads():
        for p in procs:
            p.start()
    times = [out.get() for _ in procs]
    for p in procs:
        p.join()
    return pure / max(times)


# --------------------------------------------------------------------------- main
def pure_training_time(spec_doc: dict) -> float:
    """Σ seconds of ``train(config)`` over the sweep, in this one process, no callbacks.

    One untimed trial per depth first fills the compile caches (on disk for the drivers'
    processes, in memory here), so this is training only: no process start, no imports, no
    compile, no store. Everything else the drivers spend is their overhead.
    """
    from dnnframe.engine import train

    configs = list(expand(parse_spec(spec_doc)))
    seen = set()
    for config in configs:
        if config.model.hidden_layers not in seen:
            seen.add(config.model.hidden_layers)
            train(config)
    total = 0.0
    for config in configs:
        t0 = time.perf_counter()
        train(config)
        total += time.perf_counter() - t0
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", default="1,2,3")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--no-optuna", action="store_true")
    ap.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = ap.parse_args(argv)
    depths = [int(d) for d in args.depths.split(",")]
    worker_counts = [int(w) for w in args.workers.split(",")]
    spec_doc = sweep_spec(
        depths, args.seeds, args.epochs, "bench-sweep", args.width, args.batch_size
    )
    n = len(depths) * args.seeds
    print(
        f"sweep: digits, hidden layers {depths}, width {args.width}, batch {args.batch_size}, "
        f"{args.epochs} epochs, {args.seeds} seeds "
        f"= {n} trials; workers {worker_counts}; cores available {len(os.sched_getaffinity(0))}"
    )
    pure = pure_training_time(spec_doc)
    print(
        f"pure training time (one process, warm caches, no callbacks): {pure:.2f}s for {n} trials"
    )
    ceilings = {w: parallel_ceiling(spec_doc, w, pure) for w in worker_counts if w > 1}
    for w, c in ceilings.items():
        print(
            f"machine ceiling now: {w} bare processes train {c:.2f}x as fast as one "
            f"(the best any driver can reach; load average {os.getloadavg()[0]:.1f})"
        )
    results = []
    with tempfile.TemporaryDirectory(prefix="dnnframe-bench-") as tmp:
        root = Path(tmp)
        for w in worker_counts:
            results.append(run_dnnframe(spec_doc, w, root))
            if not args.no_optuna:
                r = run_optuna(spec_doc, w, root)
                if r is None:
                    print("optuna is not installed: its column is skipped")
                    args.no_optuna = True
                else:
                    results.append(r)
    base = {r["driver"]: r for r in results if r["workers"] == worker_counts[0]}
    print(
        f"\n{'driver':9} {'workers':>7} {'trials':>6} {'wall s':>7} {'configs/s':>9} {'speedup':>7} "
        f"{'Σtrain()':>8} {'overhead':>8} {'after start':>11}"
    )
    for r in results:
        r["configs_per_s"] = r["trials"] / r["wall"]
        b = base[r["driver"]]
        r["speedup"] = (b["wall"] / r["wall"]) * (r["trials"] / b["trials"])
        ideal = pure * r["trials"] / n / r["workers"]  # perfect parallel split of pure time
        r["overhead"] = r["wall"] / ideal
        r["overhead_after_start"] = r["wall_after_start"] / ideal if r["wall_after_start"] else None
        after = f"{r['overhead_after_start']:.3f}" if r["overhead_after_start"] else "-"
        print(
            f"{r['driver']:9} {r['workers']:>7} {r['trials']:>6} {r['wall']:>7.2f} "
            f"{r['configs_per_s']:>9.2f} {r['speedup']:>7.2f} {r['pure']:>8.2f} "
            f"{r['overhead']:>8.3f} {after:>11}"
        )
    by = {(r["driver"], r["workers"]): r for r in results}
    for w in worker_counts:
        if ("optuna", w) in by:
            ratio = by[("dnnframe", w)]["configs_per_s"] / by[("optuna", w)]["configs_per_s"]
            print(f"{w} worker(s): dnnframe / optuna configs per second = {ratio:.2f}")
    if args.json:
        print(json.dumps({"pure": pure, "ceilings": ceilings, "runs": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
