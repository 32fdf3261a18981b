"""Per-trial result-store overhead, dnnframe's backends side by side with Optuna's storages.

One "trial" is the store work a real trial costs, each step its own call as the runner makes it:

* dnnframe: ``create_trials`` (one trial per call, the worst case: a sweep submits all its
  trials in one call), ``claim_trial``, 10 × ``append_metrics``, ``finish_trial`` with a result.
* Optuna: ``create_new_trial``, 3 × ``set_trial_param`` (the configuration dnnframe stores at
  create), 10 × ``set_trial_intermediate_value``, ``set_trial_state_values(COMPLETE)``.

Usage::

    python bench/store.py                 # default sizes, ~1 minute
    python bench/store.py --trials 300 --optuna-trials 60

Prints milliseconds per trial and ratios against Optuna's SQLite RDBStorage. Target: the
SQLite backend at least 5x faster per trial than Optuna's SQLite storage.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dnnframe.store import TrialState, open_store  # noqa: E402

EPOCHS = 10
CONFIG = {"dataset": {"name": "digits"}, "model": {"hidden_layers": 3, "width": 64,
                                                   "activation": "relu"},
          "training": {"optimizer": "adam", "learning_rate": 0.001, "batch_size": 64,
                       "max_epochs": EPOCHS}, "seed": 0}


def result_dict(i: int) -> dict:
    """A result of the size TrialResult.to_dict() produces (metrics, timings, history)."""
    history = [{"epoch": e, "train_loss": 1.0 / (e + 1), "train_accuracy": 0.9, "val_loss": 0.5,
                "val_accuracy": 0.8, "seconds": 0.01} for e in range(EPOCHS)]
    return {"status": "COMPLETE", "metrics": {"test_accuracy": 0.8 + i * 1e-6, "test_loss": 0.4,
                                              "val_accuracy": 0.8, "val_loss": 0.5},
            "timings": {"data": 0.01, "compile": 0.5, "train": 2.0, "total": 2.6},
            "history": history, "n_params": 12345, "epochs_run": EPOCHS,
            "environment": {"python": "3.11", "pytensor": "3.0.7", "host": "bench"}}


def bench_dnnframe(url: str, n: int) -> float:
    """Seconds per trial for the dnnframe store at ``url``."""
    store = open_store(url)
    store.create_experiment("bench", "bench", {"bench": True}, n)
    start = time.perf_counter()
    for i in range(n):
        tid = f"trial-{i:06d}"
        store.create_trials("bench", [(tid, {**CONFIG, "seed": i})])
        assert store.claim_trial(tid, "bench-worker") is not None
        for e in range(EPOCHS):
            store.append_metrics(tid, {"epoch": e, "train_loss": 1.0 / (e + 1), "val_loss": 0.5,
                                       "val_accuracy": 0.8, "seconds": 0.01})
        assert store.finish_trial(tid, TrialState.COMPLETE, result=result_dict(i),
                                  worker="bench-worker")
    elapsed = time.perf_counter() - start
    assert store.counts_by_state("bench")["COMPLETE"] == n
    store.close()
    return elapsed / n


def bench_optuna(make_storage: Callable[[], object], n: int) -> float:
    """Seconds per trial for an Optuna storage doing the equivalent calls."""
    import optuna
    from optuna.distributions import FloatDistribution, IntDistribution
    from optuna.study import StudyDirection
    from optuna.trial import TrialState as OptunaState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage()
    study_id = storage.create_new_study([StudyDirection.MAXIMIZE], "bench")
    dists = {"hidden_layers": IntDistribution(1, 10), "width": IntDistribution(8, 512),
             "learning_rate": FloatDistribution(1e-4, 1e-1, log=True)}
    start = time.perf_counter()
    for i in range(n):
        tid = storage.create_new_trial(study_id)
        storage.set_trial_param(tid, "hidden_layers", 3, dists["hidden_layers"])
        storage.set_trial_param(tid, "width", 64, dists["width"])
        storage.set_trial_param(tid, "learning_rate", 0.001, dists["learning_rate"])
        for e in range(EPOCHS):
            storage.set_trial_intermediate_value(tid, e, 1.0 / (e + 1))
        storage.set_trial_state_values(tid, OptunaState.COMPLETE, [0.8 + i * 1e-6])
    elapsed = time.perf_counter() - start
    return elapsed / n


def main() -> None:
    """Run every backend and print the side-by-side table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=300, help="trials per dnnframe backend")
    ap.add_argument("--optuna-trials", type=int, default=60, help="trials per Optuna storage")
    args = ap.parse_args()
    logging.getLogger("sqlalchemy").setLevel(logging.WARNING)
    tmp = Path(tempfile.mkdtemp(prefix="dnnframe-bench-"))
    rows: list[tuple[str, int, float]] = []
    rows.append(("dnnframe sqlite (WAL)", args.trials,
                 bench_dnnframe(f"sqlite:///{tmp / 'dnnframe.db'}", args.trials)))
    try:
        import mongomock  # noqa: F401
        rows.append(("dnnframe mongomock (in-process)", args.trials,
                     bench_dnnframe(f"mongomock://bench/bench{time.time_ns()}", args.trials)))
    except ImportError:
        print("mongomock not installed: skipping the mongomock row")
    try:
        from optuna.storages import JournalStorage, RDBStorage
        from optuna.storages.journal import JournalFileBackend
    except ImportError:
        print("optuna not installed: no comparison rows")
    else:
        rows.append(("optuna RDBStorage sqlite", args.optuna_trials,
                     bench_optuna(lambda: RDBStorage(f"sqlite:///{tmp / 'optuna.db'}"),
                                  args.optuna_trials)))
        rows.append(("optuna JournalFileBackend", args.optuna_trials,
                     bench_optuna(lambda: JournalStorage(
                         JournalFileBackend(str(tmp / "optuna.log"))), args.optuna_trials)))
    ours = rows[0][2]
    ref = next((r[2] for r in rows if r[0] == "optuna RDBStorage sqlite"), None)
    print(f"\nper-trial store overhead: create + claim + {EPOCHS} metric appends + finish")
    print(f"{'backend':34} {'trials':>6} {'ms/trial':>9} {'vs dnnframe sqlite':>19} "
          f"{'optuna sqlite / this':>21}")
    for name, n, sec in rows:
        speedup = f"{ref / sec:.1f}x" if ref else "-"
        print(f"{name:34} {n:6d} {sec * 1e3:9.3f} {sec / ours:18.2f}x {speedup:>21}")
    if ref:
        verdict = "meets" if ref / ours >= 5 else "MISSES"
        print(f"\nSQLite backend is {ref / ours:.1f}x faster per trial than Optuna's SQLite "
              f"RDBStorage ({verdict} the >= 5x target)")


if __name__ == "__main__":
    main()
