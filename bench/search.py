"""Adaptive search on a layer-design space for digits: how soon does each strategy find a
network within 0.5 percentage points of the full grid's best test accuracy?

The default space: depth 1/4/16, width 16/128, activation relu/tanh, optimiser adam/sgd,
learning rate 0.001-0.1 (the grid takes six log-spaced rates): a 144-point grid, 9 epochs,
ASHA rungs at epochs 1 and 3 (eta 3). ``--wide`` takes the issue's full ranges (depths 1-32
by powers of two, widths 16/64/256, two rates: 144 points); its 32-deep, 256-wide corner
costs seconds an epoch, so it is for a machine with cores to spare. Strategies, each on a
fresh SQLite store:

* ``grid``: every point of the grid (``search.method: grid``).
* ``random``: ``--samples`` random points (learning rate log-uniform), trained in full.
* ``asha``: the same random points, pruned by ASHA (``min_epochs``, ``eta``).
* ``tpe+asha``: ``--samples`` points from Optuna's TPE through dnnframe's driver, with ASHA
  pruning (``search.method: tpe, pruner: asha``).
* ``optuna``: Optuna's own ``study.optimize`` with TPESampler and SuccessiveHalvingPruner
  (same ``min_resource``/``reduction_factor``, asked at epochs below ``max_epochs`` only, so
  its rungs are dnnframe's), ``--workers`` processes on a journal file.

What makes the comparison fair: every strategy trains each trial with the same function
(``dnnframe.engine.train_pack`` with one member: dnnframe's strategies run with pack size 1
and the Optuna objective calls it directly), for the same ``max_epochs``, with the same
number of processes and the same one-thread pinning; the samplers draw from the space the
grid is a lattice of (its shapes, and the learning rate over the grid's span); and every
strategy starts with an empty disk cache of dnnframe's compiled graphs, so each pays for the
graph rewrites of what it builds. PyTensor's own cache of compiled C modules is per host
and shared: a strategy that runs later may link C code an earlier one compiled (it affects
every strategy alike; run them in another ``--only`` order to check for an order effect).

Per strategy: trials trained, pruned, epochs trained in all, best test accuracy, the wall
time to reach ``grid best - 0.005`` (from the start of the strategy, worker start included;
"-" when never reached) and the total wall time. The grid runs first (it sets the target).
Its own time to target depends on the order it trains its points in; since a grid only knows
its best at the end, the speed-ups (``x grid``) are against its full wall time, as the goal
is stated. Times on a shared machine vary from run to run: compare the columns side by side.

With several ``--seeds`` a second table gives each sampling strategy's time to target per
seed and its median and mean over the seeds. A seed on which a strategy never reached the
target counts as that strategy's whole wall time on the seed (shown ``>W``): a penalty that
flatters it, since it had stopped by then. Which graphs a sampler happens to draw first (each
new one compiles for seconds) moves the time to target more than anything else: judge the
samplers by the median over several seeds, not by one run.

    python bench/search.py --quick          # 16-point grid, 10 samples (a few minutes)
    python bench/search.py                  # 144-point grid, 48 samples (about 15 minutes)
    python bench/search.py --grid 289.4 0.9749 --only tpe+asha optuna --workers 2 \
        --seeds 1 2 3 4 5 6                 # our TPE+ASHA against Optuna's, six seeds
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from itertools import product
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dnnframe.executors import LocalExecutor, pinned_threads  # noqa: E402
from dnnframe.search.driver import SearchDriver  # noqa: E402
from dnnframe.spec import TrialConfig, parse_spec  # noqa: E402
from dnnframe.store import TrialState, open_store  # noqa: E402
from dnnframe.submit import submit_experiment  # noqa: E402

TOLERANCE = 0.005
BATCH = 32


def spaces(size: str) -> dict[str, Any]:
    """The grid's values, the ranges the samplers draw from (the same values for the
    graph's shape, the learning rate log-uniform over the grid's span) and the budget."""
    if size == "quick":
        return {
            "depth": [1, 8],
            "width": [32, 128],
            "activation": ["relu", "tanh"],
            "optimizer": ["adam"],
            "lr": [0.003, 0.03],
            "lr_range": [0.001, 0.1],
            "epochs": 6,
            "samples": 10,
            "min_epochs": 1,
        }
    if size == "wide":
        return {
            "depth": [1, 2, 4, 8, 16, 32],
            "width": [16, 64, 256],
            "activation": ["relu", "tanh"],
            "optimizer": ["adam", "sgd"],
            "lr": [0.003, 0.03],
            "lr_range": [0.001, 0.1],
            "epochs": 9,
            "samples": 72,
            "min_epochs": 1,
        }
    return {
        "depth": [1, 4, 16],
        "width": [16, 128],
        "activation": ["relu", "tanh"],
        "optimizer": ["adam", "sgd"],
        "lr": [0.001, 0.0025, 0.006, 0.016, 0.04, 0.1],
        "lr_range": [0.001, 0.1],
        "epochs": 9,
        "samples": 48,
        "min_epochs": 1,
    }


def spec_doc(method: str, s: dict[str, Any], eta: int, seed: int) -> dict:
    training: dict[str, Any] = {"batch_size": BATCH, "max_epochs": s["epochs"]}
    if method == "grid":
        model = {
            "hidden_layers": {"grid": s["depth"]},
            "width": {"grid": s["width"]},
            "activation": {"grid": s["activation"]},
        }
        training |= {"optimizer": {"grid": s["optimizer"]}, "learning_rate": {"grid": s["lr"]}}
        search: dict[str, Any] = {"method": "grid"}
    else:
        model = {
            "hidden_layers": {"choice": s["depth"]},
            "width": {"choice": s["width"]},
            "activation": {"choice": s["activation"]},
        }
        training |= {
            "optimizer": {"choice": s["optimizer"]},
            "learning_rate": {"loguniform": s["lr_range"]},
        }
        search = {
            "method": {"tpe+asha": "tpe"}.get(method, method),
            "num_samples": s["samples"],
            "random_seed": seed,
        }
        if method in ("asha", "tpe+asha"):
            search |= {"pruner": "asha", "min_epochs": s["min_epochs"], "eta": eta}
    return {
        "name": f"bench-search-{method}",
        "dataset": {"name": "digits"},
        "model": model,
        "training": training,
        "search": search,
    }


def fresh_compile_cache(root: Path, name: str) -> None:
    """Give the processes started from now on an empty disk cache of compiled graphs."""
    root.mkdir(parents=True, exist_ok=True)
    os.environ["DNNFRAME_CACHE_DIR"] = str(root / f"cache-{name}")


def run_dnnframe(method: str, s: dict, eta: int, seed: int, workers: int, root: Path) -> dict:
    fresh_compile_cache(root, method)
    url = f"sqlite:///{root / f'{method}.db'}"
    store = open_store(url)
    spec = parse_spec(spec_doc(method, s, eta, seed))
    t0 = time.time()
    with LocalExecutor(url, workers=workers) as executor:
        if method == "tpe+asha":
            SearchDriver(spec, store, executor, pack_size=1).run()
        else:
            submit_experiment(spec, store, executor, pack_size=1)
            executor.wait()
    wall = time.time() - t0
    trials = store.list_trials(spec.experiment_id)
    store.close()
    done = [
        (t.finished_at - t0, t.value("test_accuracy"))
        for t in trials
        if t.state is TrialState.COMPLETE and t.value("test_accuracy") is not None
    ]
    return {
        "strategy": method,
        "trials": len(trials),
        "pruned": sum(t.state is TrialState.PRUNED for t in trials),
        "failed": sum(t.state in (TrialState.FAILED, TrialState.DIVERGED) for t in trials),
        "epochs": sum(len(t.metrics) for t in trials),
        "finished": done,
        "wall": wall,
        "ends": {t.id: (t.state.value, len(t.metrics), t.value("test_accuracy")) for t in trials},
    }


# --------------------------------------------------------------------------- optuna itself
def _optuna_process(
    journal: str, study_name: str, s: dict, eta: int, n_trials: int, seed: int
) -> None:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from dnnframe.engine import train_pack

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = JournalStorage(JournalFileBackend(journal))
    study = optuna.load_study(
        study_name=study_name,
        storage=storage,
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.SuccessiveHalvingPruner(
            min_resource=s["min_epochs"], reduction_factor=eta
        ),
    )

    def objective(trial: optuna.Trial) -> float:
        config = TrialConfig.model_validate(
            {
                "dataset": {"name": "digits"},
                "model": {
                    "hidden_layers": trial.suggest_categorical("hidden_layers", s["depth"]),
                    "width": trial.suggest_categorical("width", s["width"]),
                    "activation": trial.suggest_categorical("activation", s["activation"]),
                },
                "training": {
                    "batch_size": BATCH,
                    "max_epochs": s["epochs"],
                    "optimizer": trial.suggest_categorical("optimizer", s["optimizer"]),
                    "learning_rate": trial.suggest_float("learning_rate", *s["lr_range"], log=True),
                },
            }
        )

        def on_epoch(epoch: int, members: list) -> list[bool]:
            metrics = members[0] or {}
            trial.report(metrics.get("val_accuracy") or 0.0, epoch)
            trial.set_user_attr("epochs", epoch)
            # Rungs below max_epochs only, as dnnframe's: the pruner would otherwise judge a
            # rung at the last epoch (1 * 3**2 = 9) and throw away trials trained in full.
            return [epoch < s["epochs"] and trial.should_prune()]

        (result,) = train_pack([config], on_epoch=on_epoch)  # what dnnframe's workers call
        trial.set_user_attr("finished_at", time.time())
        if result.status != "COMPLETE":
            raise optuna.TrialPruned()
        return result.metrics["test_accuracy"]

    study.optimize(objective, n_trials=n_trials)


def run_optuna(s: dict, eta: int, seed: int, workers: int, root: Path) -> dict:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    fresh_compile_cache(root, "optuna")
    journal = str(root / "optuna.log")
    storage = JournalStorage(JournalFileBackend(journal))
    optuna.create_study(study_name="bench", direction="maximize", storage=storage)
    share = [s["samples"] // workers + (i < s["samples"] % workers) for i in range(workers)]
    ctx = multiprocessing.get_context("spawn")
    t0 = time.time()
    procs = [
        ctx.Process(target=_optuna_process, args=(journal, "bench", s, eta, n, seed * 1000 + i))
        for i, n in enumerate(share)
    ]
    with pinned_threads():  # the one-thread pinning dnnframe's workers get
        for p in procs:
            p.start()
    for p in procs:
        p.join()
    wall = time.time() - t0
    trials = optuna.load_study(study_name="bench", storage=storage).trials
    done = [
        (t.user_attrs["finished_at"] - t0, t.value)
        for t in trials
        if t.state is optuna.trial.TrialState.COMPLETE
    ]
    return {
        "strategy": "optuna tpe+sh",
        "trials": len(trials),
        "pruned": sum(t.state is optuna.trial.TrialState.PRUNED for t in trials),
        "failed": sum(t.state is optuna.trial.TrialState.FAIL for t in trials),
        "epochs": sum(t.user_attrs.get("epochs", 0) for t in trials),
        "finished": done,
        "wall": wall,
    }


# --------------------------------------------------------------------------- report
def time_to(finished: list[tuple[float, float]], target: float) -> float | None:
    """The first time a finished trial reached ``target``."""
    hits = [t for t, acc in finished if acc >= target]
    return min(hits) if hits else None


def _pruned_good(rows: list[dict], target: float) -> dict | None:
    """How many of the configurations that reach ``target`` when trained in full (the
    random strategy's) ASHA pruned, and at which epochs: does it stop the eventual best?"""
    ends = {r["strategy"]: r.get("ends") for r in rows}
    if not ends.get("random") or not ends.get("asha"):
        return None
    good = [
        tid
        for tid, (state, _, acc) in ends["random"].items()
        if state == "COMPLETE" and acc is not None and acc >= target
    ]
    pruned = sorted(
        ends["asha"][t][1] for t in good if t in ends["asha"] and ends["asha"][t][0] == "PRUNED"
    )
    shared = len(set(ends["random"]) & set(ends["asha"]))
    return {"shared": shared, "reached": len(good), "pruned": pruned}


def seed_summary(rows: list[dict]) -> dict[str, dict]:
    """Per sampling strategy over its seeds: the time to target on each seed, with a seed
    that never reached the target counted as the strategy's whole wall time on that seed (a
    penalty that flatters it: it had stopped by then), and the median and mean of those."""
    out: dict[str, dict] = {}
    for r in rows:
        if "seed" not in r:
            continue
        entry = out.setdefault(r["strategy"], {"per_seed": {}, "reached": 0})
        reached = r["time_to_target"] is not None
        entry["per_seed"][r["seed"]] = {
            "time_to_target": r["time_to_target"],
            "counted": r["time_to_target"] if reached else r["wall"],
        }
        entry["reached"] += reached
    for entry in out.values():
        counted = [v["counted"] for v in entry["per_seed"].values()]
        entry["median"], entry["mean"] = statistics.median(counted), statistics.fmean(counted)
    return out


def _print_seed_summary(summary: dict[str, dict], seeds: list[int]) -> None:
    print("\ntime to target by seed (s); '>W' = never reached, counted as its wall time W")
    print(
        f"{'strategy':<15}"
        + "".join(f"{'seed ' + str(x):>10}" for x in seeds)
        + f"{'median':>9}{'mean':>9}{'reached':>9}"
    )
    for name, entry in summary.items():
        cells = []
        for seed in seeds:
            v = entry["per_seed"].get(seed)
            cells.append(
                "-"
                if v is None
                else f"{v['counted']:.1f}"
                if v["time_to_target"] is not None
                else f">{v['counted']:.0f}"
            )
        print(
            f"{name:<15}" + "".join(f"{c:>10}" for c in cells) + f"{entry['median']:>9.1f}"
            f"{entry['mean']:>9.1f}{entry['reached']:>5}/{len(entry['per_seed'])}"
        )
    ours, theirs = summary.get("tpe+asha"), summary.get("optuna tpe+sh")
    if ours and theirs:
        both = [x for x in seeds if x in ours["per_seed"] and x in theirs["per_seed"]]
        wins = sum(ours["per_seed"][x]["counted"] <= theirs["per_seed"][x]["counted"] for x in both)
        print(
            f"tpe+asha at least as fast as optuna tpe+sh on {wins} of {len(both)} seeds; "
            f"median {ours['median']:.1f} s vs {theirs['median']:.1f} s "
            f"(optuna / tpe+asha = {theirs['median'] / ours['median']:.2f}), "
            f"mean {ours['mean']:.1f} s vs {theirs['mean']:.1f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument(
        "--quick",
        action="store_const",
        dest="size",
        const="quick",
        help="16-point grid, 10 samples",
    )
    size.add_argument(
        "--wide",
        action="store_const",
        dest="size",
        const="wide",
        help="depths 1-32 by powers of two, widths 16/64/256: 144 points",
    )
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--eta", type=int, default=3)
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=[0],
        help="sampler seeds: each sampling strategy runs once per seed",
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=None,
        help="configurations per sampling strategy (default 48; quick 10)",
    )
    parser.add_argument(
        "--only",
        nargs="*",
        default=None,
        help="strategies after the grid (random asha tpe+asha optuna)",
    )
    parser.add_argument(
        "--grid",
        nargs=2,
        type=float,
        metavar=("WALL_S", "BEST"),
        default=None,
        help="skip the grid: its wall time and best test "
        "accuracy from an earlier run on this machine (to repeat seeds)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    # PyTensor's deprecation notices, once per compile in every worker, drown the table
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    s = spaces(args.size or "default")
    if args.samples:
        s["samples"] = args.samples
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.grid:
            grid_wall, target = args.grid[0], args.grid[1] - TOLERANCE
        else:
            rows.append(run_dnnframe("grid", s, args.eta, 0, args.workers, root))
            grid_wall = rows[0]["wall"]
            target = max(acc for _, acc in rows[0]["finished"]) - TOLERANCE
        for seed in args.seeds:
            for method in dict.fromkeys(args.only or ["random", "asha", "tpe+asha", "optuna"]):
                if method == "optuna":
                    row = run_optuna(s, args.eta, seed, args.workers, root / f"s{seed}")
                else:
                    row = run_dnnframe(method, s, args.eta, seed, args.workers, root / f"s{seed}")
                rows.append({**row, "seed": seed})
    pruned_good = {
        seed: _pruned_good([r for r in rows if r.get("seed") == seed], target)
        for seed in args.seeds
    }
    for r in rows:
        r["best"] = max((acc for _, acc in r["finished"]), default=None)
        r["time_to_target"] = time_to(r["finished"], target)
        r["speedup_vs_grid"] = grid_wall / r["time_to_target"] if r["time_to_target"] else None
        del r["finished"]
        r.pop("ends", None)
    summary = seed_summary(rows)
    n_grid = len(list(product(s["depth"], s["width"], s["activation"], s["optimizer"], s["lr"])))
    if args.json:
        print(
            json.dumps(
                {
                    "target": target,
                    "grid_wall": grid_wall,
                    "workers": args.workers,
                    "size": args.size,
                    "grid_points": n_grid,
                    "samples": s["samples"],
                    "max_epochs": s["epochs"],
                    "pruned_good": pruned_good,
                    "rows": rows,
                    "by_seed": summary,
                },
                indent=2,
            )
        )
        return
    print(
        f"digits, {n_grid}-point grid, {s['samples']} samples per sampling strategy, "
        f"{s['epochs']} epochs, {args.workers} worker(s), eta {args.eta}, min_epochs "
        f"{s['min_epochs']}"
    )
    print(
        f"target test accuracy {target:.4f} (grid best - {TOLERANCE}); x grid = grid wall "
        f"time ({grid_wall:.1f} s) / time to target"
    )
    print(
        f"{'strategy':<15}{'seed':>5}{'trials':>7}{'pruned':>7}{'failed':>7}{'epochs':>8}"
        f"{'best':>8}{'to target s':>13}{'x grid':>8}{'wall s':>9}"
    )
    for r in rows:
        reach = "-" if r["time_to_target"] is None else f"{r['time_to_target']:.1f}"
        best = "-" if r["best"] is None else f"{r['best']:.4f}"
        ratio = "-" if r["speedup_vs_grid"] is None else f"{r['speedup_vs_grid']:.1f}"
        seed = str(r["seed"]) if "seed" in r else "-"
        print(
            f"{r['strategy']:<15}{seed:>5}{r['trials']:>7}{r['pruned']:>7}{r['failed']:>7}"
            f"{r['epochs']:>8}{best:>8}{reach:>13}{ratio:>8}{r['wall']:>9.1f}"
        )
    for seed, good in pruned_good.items():
        if good is not None:
            print(
                f"seed {seed}: random and asha drew {good['shared']} configurations in "
                f"common; {good['reached']} of random's reached the target trained in full, "
                f"and asha pruned {len(good['pruned'])} of them (at epochs {good['pruned']})"
            )
    if len(args.seeds) > 1:
        _print_seed_summary(summary, args.seeds)


if __name__ == "__main__":
    main()
