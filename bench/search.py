"""Adaptive search on a layer-design space for digits: how soon does each strategy find a
network within 0.5 percentage points of the full grid's best test accuracy?

Strategies, each on a fresh SQLite store, all training with :mod:`dnnframe.engine`:

* ``grid``: every point of the grid (``search.method: grid``), packed by graph.
* ``random``: ``--samples`` random configurations of the continuous space.
* ``asha``: the same random configurations, pruned by ASHA (``min_epochs``, ``eta``).
* ``tpe+asha``: ``--samples`` configurations from Optuna's TPE through dnnframe's driver,
  with ASHA pruning (``search.method: tpe, pruner: asha``).
* ``optuna``: Optuna's own ``study.optimize`` with TPESampler and SuccessiveHalvingPruner
  (same ``min_resource``/``reduction_factor``), ``--workers`` processes on a journal file,
  calling the same ``dnnframe.engine.train`` (no dnnframe store or executor).

Per strategy: trials trained, pruned, epochs trained in all, best test accuracy, the wall
time to reach ``grid best - 0.005`` (from the start of the strategy, worker start included;
"-" when never reached) and the total wall time. The grid runs first (it sets the target).
Times on a shared machine vary from run to run: compare the columns side by side. The grid
trains shallow networks first and on digits they are the best, so its time to target is
short; compiled graphs are cached on disk, so later strategies reuse shapes compiled before.

    python bench/search.py --quick          # 16-point grid, 10 samples (about 3 minutes)
    python bench/search.py --workers 2      # depth 1-32, width 16-256: 216-point grid
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dnnframe.executors import LocalExecutor, pinned_threads  # noqa: E402
from dnnframe.search.driver import SearchDriver  # noqa: E402
from dnnframe.spec import TrialConfig, parse_spec  # noqa: E402
from dnnframe.store import TrialState, open_store  # noqa: E402
from dnnframe.submit import submit_experiment  # noqa: E402

TOLERANCE = 0.005


def spaces(quick: bool) -> dict[str, Any]:
    """The grid and the continuous space it is a lattice of."""
    if quick:
        return {"depth": [1, 8], "width": [32, 128], "activation": ["relu", "tanh"],
                "optimizer": ["adam"], "lr": [0.003, 0.03], "depth_max": 8,
                "lr_range": [0.001, 0.1], "epochs": 9, "samples": 10, "min_epochs": 1}
    return {"depth": [1, 2, 4, 8, 16, 32], "width": [16, 64, 256],
            "activation": ["relu", "tanh"], "optimizer": ["adam", "sgd"],
            "lr": [0.001, 0.01, 0.1], "depth_max": 32, "lr_range": [0.001, 0.1], "epochs": 30,
            "samples": 72, "min_epochs": 2}


def spec_doc(method: str, s: dict[str, Any], eta: int, seed: int) -> dict:
    training = {"batch_size": 32, "max_epochs": s["epochs"]}
    if method == "grid":
        model = {"hidden_layers": {"grid": s["depth"]}, "width": {"grid": s["width"]},
                 "activation": {"grid": s["activation"]}}
        training |= {"optimizer": {"grid": s["optimizer"]}, "learning_rate": {"grid": s["lr"]}}
        search: dict[str, Any] = {"method": "grid"}
    else:
        model = {"hidden_layers": {"int_range": [1, s["depth_max"]]},
                 "width": {"choice": s["width"]}, "activation": {"choice": s["activation"]}}
        training |= {"optimizer": {"choice": s["optimizer"]},
                     "learning_rate": {"loguniform": s["lr_range"]}}
        search = {"method": {"tpe+asha": "tpe"}.get(method, method),
                  "num_samples": s["samples"], "random_seed": seed}
        if method in ("asha", "tpe+asha"):
            search |= {"pruner": "asha", "min_epochs": s["min_epochs"], "eta": eta}
    return {"name": f"bench-search-{method}", "dataset": {"name": "digits"}, "model": model,
            "training": training, "search": search}


def run_dnnframe(method: str, s: dict, eta: int, seed: int, workers: int, root: Path) -> dict:
    url = f"sqlite:///{root / f'{method}.db'}"
    store = open_store(url)
    spec = parse_spec(spec_doc(method, s, eta, seed))
    t0 = time.time()
    with LocalExecutor(url, workers=workers) as executor:
        if method == "tpe+asha":
            SearchDriver(spec, store, executor).run()
        else:
            submit_experiment(spec, store, executor)
            executor.wait()
    wall = time.time() - t0
    trials = store.list_trials(spec.experiment_id)
    store.close()
    done = [(t.finished_at - t0, t.value("test_accuracy")) for t in trials
            if t.state is TrialState.COMPLETE and t.value("test_accuracy") is not None]
    return {"strategy": method, "trials": len(trials),
            "pruned": sum(t.state is TrialState.PRUNED for t in trials),
            "failed": sum(t.state in (TrialState.FAILED, TrialState.DIVERGED) for t in trials),
            "epochs": sum(len(t.metrics) for t in trials), "finished": done, "wall": wall}


# --------------------------------------------------------------------------- optuna itself
def _optuna_process(journal: str, study_name: str, s: dict, eta: int, n_trials: int) -> None:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from dnnframe.engine import train

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = JournalStorage(JournalFileBackend(journal))
    study = optuna.load_study(
        study_name=study_name, storage=storage,
        sampler=optuna.samplers.TPESampler(seed=os.getpid()),
        pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=s["min_epochs"],
                                                      reduction_factor=eta))

    def objective(trial: optuna.Trial) -> float:
        config = TrialConfig.model_validate({
            "dataset": {"name": "digits"},
            "model": {"hidden_layers": trial.suggest_int("hidden_layers", 1, s["depth_max"]),
                      "width": trial.suggest_categorical("width", s["width"]),
                      "activation": trial.suggest_categorical("activation", s["activation"])},
            "training": {"batch_size": 32, "max_epochs": s["epochs"],
                         "optimizer": trial.suggest_categorical("optimizer", s["optimizer"]),
                         "learning_rate": trial.suggest_float("learning_rate", *s["lr_range"],
                                                              log=True)}})

        def on_epoch(epoch: int, metrics: dict) -> bool:
            trial.report(metrics.get("val_accuracy") or 0.0, epoch)
            trial.set_user_attr("epochs", epoch)
            return trial.should_prune()

        result = train(config, on_epoch=on_epoch)
        trial.set_user_attr("finished_at", time.time())
        if result.status != "COMPLETE":
            raise optuna.TrialPruned()
        return result.metrics["test_accuracy"]

    study.optimize(objective, n_trials=n_trials)


def run_optuna(s: dict, eta: int, workers: int, root: Path) -> dict:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    journal = str(root / "optuna.log")
    storage = JournalStorage(JournalFileBackend(journal))
    optuna.create_study(study_name="bench", direction="maximize", storage=storage)
    share = [s["samples"] // workers + (i < s["samples"] % workers) for i in range(workers)]
    ctx = multiprocessing.get_context("spawn")
    t0 = time.time()
    procs = [ctx.Process(target=_optuna_process, args=(journal, "bench", s, eta, n))
             for n in share]
    with pinned_threads():  # the one-thread pinning dnnframe's workers get
        for p in procs:
            p.start()
    for p in procs:
        p.join()
    wall = time.time() - t0
    trials = optuna.load_study(study_name="bench", storage=storage).trials
    done = [(t.user_attrs["finished_at"] - t0, t.value) for t in trials
            if t.state is optuna.trial.TrialState.COMPLETE]
    return {"strategy": "optuna tpe+sh", "trials": len(trials),
            "pruned": sum(t.state is optuna.trial.TrialState.PRUNED for t in trials),
            "failed": sum(t.state is optuna.trial.TrialState.FAIL for t in trials),
            "epochs": sum(t.user_attrs.get("epochs", 0) for t in trials), "finished": done,
            "wall": wall}


# --------------------------------------------------------------------------- report
def time_to(finished: list[tuple[float, float]], target: float) -> float | None:
    """The first time a finished trial reached ``target``."""
    hits = [t for t, acc in finished if acc >= target]
    return min(hits) if hits else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small grid and budget")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--eta", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", default=None,
                        help="strategies after the grid (random asha tpe+asha optuna)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    # PyTensor's deprecation notices, once per compile in every worker, drown the table
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    s = spaces(args.quick)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows.append(run_dnnframe("grid", s, args.eta, args.seed, args.workers, root))
        target = max(acc for _, acc in rows[0]["finished"]) - TOLERANCE
        for method in dict.fromkeys(args.only or ["random", "asha", "tpe+asha", "optuna"]):
            if method == "optuna":
                rows.append(run_optuna(s, args.eta, args.workers, root))
            else:
                rows.append(run_dnnframe(method, s, args.eta, args.seed, args.workers, root))
    for r in rows:
        r["best"] = max((acc for _, acc in r["finished"]), default=None)
        r["time_to_target"] = time_to(r["finished"], target)
        del r["finished"]
    if args.json:
        print(json.dumps({"target": target, "workers": args.workers, "quick": args.quick,
                          "rows": rows}, indent=2))
        return
    print(f"digits, {'quick' if args.quick else 'full'} space, {args.workers} worker(s), "
          f"eta {args.eta}; target test accuracy {target:.4f} (grid best - {TOLERANCE})")
    print(f"{'strategy':<15}{'trials':>7}{'pruned':>7}{'failed':>7}{'epochs':>8}{'best':>8}"
          f"{'to target s':>13}{'wall s':>9}")
    for r in rows:
        reach = "-" if r["time_to_target"] is None else f"{r['time_to_target']:.1f}"
        best = "-" if r["best"] is None else f"{r['best']:.4f}"
        print(f"{r['strategy']:<15}{r['trials']:>7}{r['pruned']:>7}{r['failed']:>7}"
              f"{r['epochs']:>8}{best:>8}{reach:>13}{r['wall']:>9.1f}")


if __name__ == "__main__":
    main()
