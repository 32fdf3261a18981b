"""run_trial: the trial life cycle against a real SQLite store.

The training function is injected (the runner's documented seam): these tests check what
the runner does with each outcome; one test drives the real engine end to end.
"""

from __future__ import annotations

import pytest

from dnnframe.engine.result import TrialResult
from dnnframe.runner import run_trial
from dnnframe.spec import expand_with_ids, parse_spec
from dnnframe.store import TrialState, open_store

SPEC = {"name": "runner-test", "dataset": {"name": "iris"},
        "model": {"hidden_layers": 1, "width": 8},
        "training": {"max_epochs": 2, "batch_size": 32}, "search": {"seeds": 2}}


@pytest.fixture
def store(tmp_path):
    s = open_store(f"sqlite:///{tmp_path / 'runner.db'}")
    yield s
    s.close()


@pytest.fixture
def trial_ids(store) -> list[str]:
    spec = parse_spec(SPEC)
    pairs = [(tid, cfg.model_dump(mode="json")) for tid, cfg in expand_with_ids(spec)]
    store.create_experiment(spec.experiment_id, spec.name, spec.to_dict(), len(pairs))
    store.create_trials(spec.experiment_id, pairs)
    return [tid for tid, _ in pairs]


def _result(status: str, epochs: int, **extra) -> TrialResult:
    return TrialResult(status=status, metrics={"test_accuracy": 0.5, "test_loss": 1.0},
                       history=[{"epoch": e} for e in range(1, epochs + 1)],
                       timings={"data": 0.0, "compile": 0.0, "train": 0.01, "total": 0.01},
                       n_params=10, environment={}, epochs_run=epochs, **extra)


def _epochs_then(status: str, epochs: int = 2):
    def train(config, on_epoch=None):
        for e in range(1, epochs + 1):
            if on_epoch(e, {"epoch": e, "train_loss": 1.0 / e, "val_loss": 1.0, "seconds": 0.0}):
                return _result("CANCELLED", e)
        return _result(status, epochs, diverged_epoch=epochs if status == "DIVERGED" else None)
    return train


def test_complete_trial_records_epochs_result_and_worker(store, trial_ids):
    state = run_trial(trial_ids[0], store, worker="w1", train_fn=_epochs_then("COMPLETE"))
    assert state is TrialState.COMPLETE
    t = store.get_trial(trial_ids[0])
    assert t.state is TrialState.COMPLETE
    assert [m["epoch"] for m in t.metrics] == [1, 2]
    assert t.result["metrics"]["test_accuracy"] == 0.5
    assert t.worker == "w1" and t.attempts == 1 and t.heartbeat_at is not None


def test_a_finished_trial_is_not_run_again(store, trial_ids):
    calls = []

    def train(config, on_epoch=None):
        calls.append(config.seed)
        return _result("COMPLETE", 1)

    assert run_trial(trial_ids[0], store, train_fn=train) is TrialState.COMPLETE
    assert run_trial(trial_ids[0], store, train_fn=train) is None
    assert calls == [0]


def test_training_exception_becomes_failed_with_traceback(store, trial_ids):
    def train(config, on_epoch=None):
        raise RuntimeError("boom in layer 3")

    assert run_trial(trial_ids[0], store, train_fn=train) is TrialState.FAILED
    t = store.get_trial(trial_ids[0])
    assert t.state is TrialState.FAILED
    assert "Traceback" in t.error and "RuntimeError: boom in layer 3" in t.error


def test_diverged_trial_keeps_its_result_and_says_when(store, trial_ids):
    assert run_trial(trial_ids[0], store, train_fn=_epochs_then("DIVERGED", 3)) is TrialState.DIVERGED
    t = store.get_trial(trial_ids[0])
    assert "diverged at epoch 3" in t.error and t.result["diverged_epoch"] == 3


def test_cancelling_the_experiment_stops_a_running_trial_after_its_epoch(store, trial_ids):
    exp_id = parse_spec(SPEC).experiment_id

    def train(config, on_epoch=None):
        store.cancel_experiment(exp_id)  # arrives while the trial runs
        for e in range(1, 10):
            if on_epoch(e, {"epoch": e}):
                return _result("CANCELLED", e)
        return _result("COMPLETE", 9)

    assert run_trial(trial_ids[0], store, train_fn=train) is TrialState.CANCELLED
    t = store.get_trial(trial_ids[0])
    assert t.state is TrialState.CANCELLED and len(t.metrics) == 1
    # the other trial was still queued: cancelled without starting
    assert store.get_trial(trial_ids[1]).state is TrialState.CANCELLED


def test_a_worker_that_lost_its_trial_stops_without_touching_the_new_owners_curve(store, trial_ids):
    tid = trial_ids[0]
    epochs_trained = []

    def train(config, on_epoch=None):
        for e in range(1, 10):
            epochs_trained.append(e)
            if on_epoch(e, {"epoch": e, "who": "w1"}):
                return _result("CANCELLED", e)
            if e == 1:
                # w1 stalls past the heartbeat timeout: the reaper requeues its trial and w2
                # claims it and logs its own first epoch, while w1 (a zombie) keeps training.
                assert store.requeue_stale(0) == [tid]
                assert store.claim_trial(tid, "w2") is not None
                assert store.append_metrics(tid, {"epoch": 1, "who": "w2"}, worker="w2")
        return _result("COMPLETE", 9)

    # w1's next epoch comes well within the heartbeat throttle: only the metrics write can
    # tell it that it lost the trial.
    assert run_trial(tid, store, worker="w1", train_fn=train) is None
    assert epochs_trained == [1, 2]  # stopped at the first refused write
    t = store.get_trial(tid)
    assert (t.state, t.worker, t.result) == (TrialState.RUNNING, "w2", None)
    assert t.metrics == [{"epoch": 1, "who": "w2"}]


def test_keyboard_interrupt_marks_the_trial_cancelled_and_propagates(store, trial_ids):
    def train(config, on_epoch=None):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_trial(trial_ids[0], store, train_fn=train)
    t = store.get_trial(trial_ids[0])
    assert t.state is TrialState.CANCELLED and "interrupted" in t.error


def test_real_engine_trains_a_tiny_trial(store, trial_ids):
    assert run_trial(trial_ids[0], store) is TrialState.COMPLETE
    t = store.get_trial(trial_ids[0])
    assert len(t.metrics) == 2 and len(t.result["history"]) == 2
    assert 0.0 <= t.result["metrics"]["test_accuracy"] <= 1.0
    assert set(t.result["timings"]) >= {"compile", "train", "total"}
