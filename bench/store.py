"""Per-trial result-store overhead, dnnframe's backends side by side with Optuna's storages.

One "trial" is the store work a real trial costs, each step its own call as the runner makes it:

* dnnframe: ``create_trials`` (one trial per call, the worst case: a sweep submits all its
  trials in one call), ``claim_trial``, 10 × ``append_metrics``, ``finish_trial`` with a result.
* Optuna: ``create_new_trial``, 3 × ``set_trial_param`` (the configuration dnnframe stores at
  create), 10 × ``set_trial_intermediate_value``, ``set_trial_state_values(COMPLETE)``.

Then the batched operations against the same work done one call at a time, side by side:
``--batch-trials`` trials (default 1,000), each created, claimed, given ``BATCH_EPOCHS``
(20) metric appends and finished, once one trial per call and once with packs of
``--pack-size`` trials per call (``create_trials``, ``claim_trials``,
``append_metrics_many`` once per epoch, ``finish_trials``), and once more in packs with
``--epochs-per-write`` epochs per ``append_metrics_many`` call (the pack runner writes a
pack's curves at most once a second, so fast epochs go to the store together).

Usage::

    python bench/store.py                 # default sizes, ~1 minute
    python bench/store.py --trials 300 --optuna-trials 60 --batch-trials 1000 --pack-size 100 \
        --epochs-per-write 10

Prints milliseconds per trial and ratios against Optuna's SQLite RDBStorage (target: the
SQLite backend at least 5x faster per trial than Optuna's SQLite storage), then batched vs
one by one (target: batched at least 10x cheaper per trial on SQLite).

With a PostgreSQL server (``--postgresql-url``, default the local one at 127.0.0.1:5432 as
user postgres), the PostgreSQL backend is measured beside SQLite and beside Optuna's
RDBStorage on the same server (``postgresql+psycopg://``), each run in scratch databases
it creates and drops; without one those rows are left out, saying why.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dnnframe.store import TrialState, open_store  # noqa: E402

EPOCHS = 10
CONFIG = {
    "dataset": {"name": "digits"},
    "model": {"hidden_layers": 3, "width": 64, "activation": "relu"},
    "training": {
        "optimizer": "adam",
        "learning_rate": 0.001,
        "batch_size": 64,
        "max_epochs": EPOCHS,
    },
    "seed": 0,
}


def result_dict(i: int) -> dict:
    """A result of the size TrialResult.to_dict() produces (metrics, timings, history)."""
    history = [
        {
            "epoch": e,
            "train_loss": 1.0 / (e + 1),
            "train_accuracy": 0.9,
            "val_loss": 0.5,
            "val_accuracy": 0.8,
            "seconds": 0.01,
        }
        for e in range(EPOCHS)
    ]
    return {
        "status": "COMPLETE",
        "metrics": {
            "test_accuracy": 0.8 + i * 1e-6,
            "test_loss": 0.4,
            "val_accuracy": 0.8,
            "val_loss": 0.5,
        },
        "timings": {"data": 0.01, "compile": 0.5, "train": 2.0, "total": 2.6},
        "history": history,
        "n_params": 12345,
        "epochs_run": EPOCHS,
        "environment": {"python": "3.11", "pytensor": "3.0.7", "host": "bench"},
    }


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
            store.append_metrics(
                tid,
                {
                    "epoch": e,
                    "train_loss": 1.0 / (e + 1),
                    "val_loss": 0.5,
                    "val_accuracy": 0.8,
                    "seconds": 0.01,
                },
            )
        assert store.finish_trial(
            tid, TrialState.COMPLETE, result=result_dict(i), worker="bench-worker"
        )
    elapsed = time.perf_counter() - start
    assert store.counts_by_state("bench")["COMPLETE"] == n
    store.close()
    return elapsed / n


BATCH_EPOCHS = 20


def _epoch_metrics(e: int) -> dict:
    return {
        "epoch": e,
        "train_loss": 1.0 / (e + 1),
        "val_loss": 0.5,
        "val_accuracy": 0.8,
        "seconds": 0.01,
    }


def bench_one_by_one(url: str, n: int) -> tuple[float, float]:
    """(wall, CPU) seconds per trial: create, claim, BATCH_EPOCHS appends, finish, one call each."""
    store = open_store(url)
    store.create_experiment("single", "single", {}, n)
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        tid = f"single-{i:06d}"
        store.create_trials("single", [(tid, {**CONFIG, "seed": i})])
        assert store.claim_trial(tid, "w") is not None
        for e in range(BATCH_EPOCHS):
            store.append_metrics(tid, _epoch_metrics(e), worker="w")
        assert store.finish_trial(tid, TrialState.COMPLETE, result=result_dict(i), worker="w")
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert store.counts_by_state("single")["COMPLETE"] == n
    store.close()
    return elapsed / n, cpu / n


def bench_batched(url: str, n: int, pack: int, per_write: int = 1) -> tuple[float, float]:
    """(wall, CPU) seconds per trial for the same work in packs of ``pack`` trials per call,
    the metrics of ``per_write`` epochs appended per call."""
    store = open_store(url)
    store.create_experiment("packed", "packed", {}, n)
    start, cpu = time.perf_counter(), time.process_time()
    for first in range(0, n, pack):
        ids = [f"packed-{i:06d}" for i in range(first, min(n, first + pack))]
        store.create_trials("packed", [(t, {**CONFIG, "seed": i}) for i, t in enumerate(ids)])
        assert len(store.claim_trials(ids, "w")) == len(ids)
        for e in range(0, BATCH_EPOCHS, per_write):
            epochs = range(e, min(BATCH_EPOCHS, e + per_write))
            batch = {t: [_epoch_metrics(k) for k in epochs] for t in ids}
            assert len(store.append_metrics_many(batch, "w")) == len(ids)
        assert len(
            store.finish_trials(
                [(t, TrialState.COMPLETE, result_dict(i), None) for i, t in enumerate(ids)],
                worker="w",
            )
        ) == len(ids)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert store.counts_by_state("packed")["COMPLETE"] == n
    store.close()
    return elapsed / n, cpu / n


def bench_optuna(make_storage: Callable[[], object], n: int) -> float:
    """Seconds per trial for an Optuna storage doing the equivalent calls."""
    import optuna
    from optuna.distributions import FloatDistribution, IntDistribution
    from optuna.study import StudyDirection
    from optuna.trial import TrialState as OptunaState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage()
    study_id = storage.create_new_study([StudyDirection.MAXIMIZE], "bench")
    dists = {
        "hidden_layers": IntDistribution(1, 10),
        "width": IntDistribution(8, 512),
        "learning_rate": FloatDistribution(1e-4, 1e-1, log=True),
    }
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


class PgScratch:
    """Scratch databases on a PostgreSQL server, all dropped by :meth:`drop_all`."""

    def __init__(self, admin_url: str):
        import psycopg

        self._psycopg = psycopg
        self.admin_url = admin_url
        self.names: list[str] = []
        psycopg.connect(admin_url, connect_timeout=3).close()  # raises when unreachable

    def new(self) -> str:
        """A new empty database's URL (``postgresql://...``)."""
        name = f"dnnframe_bench_{uuid.uuid4().hex[:10]}"
        with self._psycopg.connect(self.admin_url, autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        self.names.append(name)
        return self.admin_url.rsplit("/", 1)[0] + "/" + name

    def drop_all(self) -> None:
        with self._psycopg.connect(self.admin_url, autocommit=True) as c:
            for name in self.names:
                c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.names = []


@contextlib.contextmanager
def pg_scratch(admin_url: str) -> Iterator[PgScratch | None]:
    """A :class:`PgScratch` on ``admin_url``, or None (said why) when it cannot be reached."""
    try:
        scratch = PgScratch(admin_url)
    except Exception as e:  # noqa: BLE001 - any failure just leaves the rows out
        print(
            f"no PostgreSQL server at {admin_url} ({str(e).strip()[:200]}): "
            "skipping the PostgreSQL rows"
        )
        yield None
        return
    try:
        yield scratch
    finally:
        scratch.drop_all()


def main() -> None:
    """Run every backend and print the side-by-side table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=300, help="trials per dnnframe backend")
    ap.add_argument("--optuna-trials", type=int, default=60, help="trials per Optuna storage")
    ap.add_argument(
        "--batch-trials",
        type=int,
        default=1000,
        help="trials for the batched vs one-by-one comparison",
    )
    ap.add_argument("--pack-size", type=int, default=100, help="trials per batched call")
    ap.add_argument(
        "--epochs-per-write",
        type=int,
        default=10,
        help="epochs per metrics call in the grouped column",
    )
    ap.add_argument(
        "--postgresql-url",
        default=os.environ.get(
            "DNNFRAME_BENCH_POSTGRESQL_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="a PostgreSQL server's maintenance database URL, on which scratch "
        "databases are created and dropped",
    )
    args = ap.parse_args()
    logging.getLogger("sqlalchemy").setLevel(logging.WARNING)
    with pg_scratch(args.postgresql_url) as pg:
        run_all(args, pg)


def run_all(args: argparse.Namespace, pg: PgScratch | None) -> None:
    """Every row of both tables."""
    tmp = Path(tempfile.mkdtemp(prefix="dnnframe-bench-"))
    rows: list[tuple[str, int, float]] = []
    rows.append(
        (
            "dnnframe sqlite (WAL)",
            args.trials,
            bench_dnnframe(f"sqlite:///{tmp / 'dnnframe.db'}", args.trials),
        )
    )
    try:
        import mongomock  # noqa: F401

        rows.append(
            (
                "dnnframe mongomock (in-process)",
                args.trials,
                bench_dnnframe(f"mongomock://bench/bench{time.time_ns()}", args.trials),
            )
        )
    except ImportError:
        print("mongomock not installed: skipping the mongomock row")
    if pg is not None:
        rows.append(
            ("dnnframe postgresql (local)", args.trials, bench_dnnframe(pg.new(), args.trials))
        )
    try:
        from optuna.storages import JournalStorage, RDBStorage
        from optuna.storages.journal import JournalFileBackend
    except ImportError:
        print("optuna not installed: no comparison rows")
    else:
        rows.append(
            (
                "optuna RDBStorage sqlite",
                args.optuna_trials,
                bench_optuna(
                    lambda: RDBStorage(f"sqlite:///{tmp / 'optuna.db'}"), args.optuna_trials
                ),
            )
        )
        rows.append(
            (
                "optuna JournalFileBackend",
                args.optuna_trials,
                bench_optuna(
                    lambda: JournalStorage(JournalFileBackend(str(tmp / "optuna.log"))),
                    args.optuna_trials,
                ),
            )
        )
        if pg is not None:
            optuna_url = pg.new().replace("postgresql://", "postgresql+psycopg://", 1)
            rows.append(
                (
                    "optuna RDBStorage postgresql",
                    args.optuna_trials,
                    bench_optuna(lambda: RDBStorage(optuna_url), args.optuna_trials),
                )
            )
    ours = rows[0][2]
    ref = next((r[2] for r in rows if r[0] == "optuna RDBStorage sqlite"), None)
    print(f"\nper-trial store overhead: create + claim + {EPOCHS} metric appends + finish")
    print(
        f"{'backend':34} {'trials':>6} {'ms/trial':>9} {'vs dnnframe sqlite':>19} "
        f"{'optuna sqlite / this':>21}"
    )
    for name, n, sec in rows:
        speedup = f"{ref / sec:.1f}x" if ref else "-"
        print(f"{name:34} {n:6d} {sec * 1e3:9.3f} {sec / ours:18.2f}x {speedup:>21}")
    if ref:
        verdict = "meets" if ref / ours >= 5 else "MISSES"
        print(
            f"\nSQLite backend is {ref / ours:.1f}x faster per trial than Optuna's SQLite "
            f"RDBStorage ({verdict} the >= 5x target)"
        )
    named = {name: sec for name, _, sec in rows}
    if {"dnnframe postgresql (local)", "optuna RDBStorage postgresql"} <= set(named):
        ours_pg = named["dnnframe postgresql (local)"]
        print(
            f"PostgreSQL backend is {named['optuna RDBStorage postgresql'] / ours_pg:.1f}x "
            "faster per trial than Optuna's RDBStorage on the same server, and costs "
            f"{ours_pg / ours:.1f}x the SQLite backend's time per trial"
        )
    batch_rows(tmp, args.batch_trials, args.pack_size, args.epochs_per_write, pg)


def batch_rows(tmp: Path, n: int, pack: int, per_write: int, pg: PgScratch | None = None) -> None:
    """Batched vs one-by-one per backend, measured in the same run, printed side by side:
    batched with one epoch per metrics call, and with ``per_write`` epochs per call (the
    pack runner writes a pack's curves at most once a second, so a pack of tiny trials
    sends several epochs at once).

    CPU time is printed beside wall time: on a shared machine the wall clock also measures
    the neighbours, while the store's work (SQLite runs in this process) is CPU time.
    """
    urls = [("sqlite (WAL)", lambda tag: f"sqlite:///{tmp / f'batch-{tag}.db'}", n)]
    try:
        import mongomock  # noqa: F401

        # mongomock copies documents in Python: a tenth of the trials keeps the run short
        urls.append(
            (
                "mongomock (in-process)",
                lambda tag: f"mongomock://batch/{tag}{time.time_ns()}",
                max(pack, n // 10),
            )
        )
    except ImportError:
        pass
    if pg is not None:
        urls.append(("postgresql (local)", lambda tag: pg.new(), n))
    print(
        f"\nper-trial store cost: create + claim + {BATCH_EPOCHS} metric appends + finish "
        f"(ms per trial; packs of {pack} trials per batched call; 'grouped': {per_write} "
        "epochs per metrics call)"
    )
    print(
        f"{'backend':24} {'trials':>6} {'one by one':>11} {'batched':>9} {'ratio':>6} "
        f"{'grouped':>9} {'ratio':>6}   {'CPU: one by one':>15} {'batched':>8} {'ratio':>6} "
        f"{'grouped':>8} {'ratio':>6}"
    )
    verdicts = []
    for name, make_url, trials in urls:
        single, single_cpu = bench_one_by_one(make_url("single"), trials)
        batched, batched_cpu = bench_batched(make_url("packed"), trials, pack)
        grouped, grouped_cpu = bench_batched(make_url("grouped"), trials, pack, per_write)
        print(
            f"{name:24} {trials:6d} {single * 1e3:11.3f} {batched * 1e3:9.3f} "
            f"{single / batched:5.1f}x {grouped * 1e3:9.3f} {single / grouped:5.1f}x   "
            f"{single_cpu * 1e3:15.3f} {batched_cpu * 1e3:8.3f} "
            f"{single_cpu / batched_cpu:5.1f}x {grouped_cpu * 1e3:8.3f} "
            f"{single_cpu / grouped_cpu:5.1f}x"
        )
        if name.startswith("sqlite"):
            for label, wall, cpu in (
                ("batched", batched, batched_cpu),
                (f"batched with {per_write} epochs a write", grouped, grouped_cpu),
            ):
                verdicts.append(
                    f"SQLite: {label} is {single / wall:.1f}x cheaper per trial than one by "
                    f"one in wall time, {single_cpu / cpu:.1f}x in CPU time (target >= 10x: "
                    f"{'met' if single / wall >= 10 else 'NOT met'})"
                )
    print("\n".join(verdicts))


if __name__ == "__main__":
    main()
