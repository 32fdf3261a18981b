"""Adaptive search through real Celery workers over the real RabbitMQ: ASHA's rung decisions
are store queries made by whichever worker trains the trial, and the TPE driver keeps the
workers busy through the Celery executor.

The workers train with ``dnnframe.testing.hooks:rate_train``, whose accuracy is ten times the
learning rate, so which trial is better than which is known.
"""

from __future__ import annotations

import pytest

from dnnframe.executors import CeleryExecutor
from dnnframe.pruning.asha import rungs
from dnnframe.search.driver import SearchDriver
from dnnframe.spec import parse_spec
from dnnframe.store import TrialState
from dnnframe.submit import submit_experiment

pytestmark = pytest.mark.slow

RATE = {
    "DNNFRAME_TRAIN_FN": "dnnframe.testing.hooks:rate_train",
    "DNNFRAME_HOOK_EPOCHS": "4",
    "DNNFRAME_HOOK_EPOCH_SECONDS": "0.2",
}
ORDER = [5, 1, 7, 3, 8, 2, 6, 4]  # learning rate in hundredths, in the order submitted


def _asha_spec(name: str) -> dict:
    return {
        "name": name,
        "dataset": {"name": "iris"},
        "model": {"width": 8},
        "training": {"max_epochs": 4, "learning_rate": {"grid": [q / 100 for q in ORDER]}},
        "search": {
            "method": "asha",
            "objective": {"metric": "test_accuracy"},
            "min_epochs": 1,
            "eta": 2,
        },
    }


def _check_rung_decisions(store, trials) -> None:
    """Every PRUNED trial stopped at a rung, and at that rung at least ``1/eta`` of the
    trials it was compared with were better (values at a rung never change, so the trials
    stored now hold the ones it was compared with)."""
    at = {}
    for t in trials:
        for m in t.metrics:
            at.setdefault(m["epoch"], []).append(m["val_accuracy"])
    for t in trials:
        if t.state is not TrialState.PRUNED:
            continue
        note = t.result["pruned"]
        assert note["epoch"] in rungs(1, 4, 2) and len(t.metrics) == note["epoch"]
        assert note["metric"] == "val_accuracy" and note["trials_at_rung"] >= 2
        better = sum(v > note["value"] for v in at[note["epoch"]])
        assert better >= note["trials_at_rung"] // 2, (note, sorted(at[note["epoch"]]))


@pytest.mark.parametrize("pack_size", [1, 4])
def test_asha_prunes_on_celery_workers(
    broker_url, store_url, queue_name, start_worker, store, pack_size
):
    workers = [start_worker(queue_name, **RATE) for _ in range(2)]
    spec = parse_spec(_asha_spec(f"celery-asha-{pack_size}"))
    with CeleryExecutor(broker_url, store_url, queue=queue_name) as ex:
        submit_experiment(spec, store, ex, pack_size=pack_size)
        assert ex.wait(timeout=120), "the ASHA experiment did not finish in 120 s"
    trials = store.list_trials(spec.experiment_id)
    by_rate = {round(t.config["training"]["learning_rate"] * 100): t for t in trials}
    assert sorted(by_rate) == list(range(1, 9))
    assert by_rate[8].state is TrialState.COMPLETE and len(by_rate[8].metrics) == 4
    states = {t.state for t in trials}
    assert states <= {TrialState.COMPLETE, TrialState.PRUNED} and TrialState.PRUNED in states
    assert all(len(t.metrics) == 4 for t in trials if t.state is TrialState.COMPLETE)
    assert all(t.result["status"] == t.state.value for t in trials)
    _check_rung_decisions(store, trials)
    # no coordinator: the decisions were made on both workers
    assert {t.worker.split(":")[0] for t in trials} == {w.nodename for w in workers}
    assert store.counts_by_state(spec.experiment_id)["PRUNED"] == sum(
        t.state is TrialState.PRUNED for t in trials
    )


def test_tpe_with_asha_drives_celery_workers(
    broker_url, store_url, queue_name, start_worker, store, monkeypatch
):
    monkeypatch.setenv("DNNFRAME_WORKERS", "2")  # the executor's parallelism: two workers
    workers = [start_worker(queue_name, **RATE) for _ in range(2)]
    spec = parse_spec(
        {
            **_asha_spec("celery-tpe"),
            "training": {"max_epochs": 4, "learning_rate": {"loguniform": [0.001, 0.09]}},
            "search": {
                "method": "tpe",
                "pruner": "asha",
                "num_samples": 10,
                "random_seed": 2,
                "min_epochs": 1,
                "eta": 2,
                "objective": {"metric": "test_accuracy"},
            },
        }
    )
    with CeleryExecutor(broker_url, store_url, queue=queue_name) as ex:
        driver = SearchDriver(spec, store, ex)
        result = driver.run()
    assert result.finished and len(result.asked) == 10
    trials = store.list_trials(spec.experiment_id)
    assert len(trials) == 10
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert any(t.state is TrialState.PRUNED for t in trials)
    _check_rung_decisions(store, trials)
    assert {t.worker.split(":")[0] for t in trials} == {w.nodename for w in workers}
    told = [t.state.name for t in driver.study.trials]
    assert sorted(told) == sorted(t.state.value for t in trials)
