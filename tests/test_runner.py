"""run_pack (and a trial alone, a pack of one): the trial life cycle against a real SQLite
store.

The training function is injected (the runner's documented seam; single-trial stand-ins
through dnnframe.testing.packs): these tests check what the runner does with each outcome;
one test drives the real engine end to end.
"""

from __future__ import annotations

import time

import pytest

from dnnframe import retrying
from dnnframe.engine.result import TrialResult
from dnnframe.runner import epochs as pack_epochs
from dnnframe.runner import run_pack
from dnnframe.spec import expand_with_ids, parse_spec
from dnnframe.store import TrialState, open_store
from dnnframe.testing.packs import run_one

SPEC = {
    "name": "runner-test",
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": 1, "width": 8},
    "training": {"max_epochs": 2, "batch_size": 32},
    "search": {"seeds": 2},
}


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
    return TrialResult(
        status=status,
        metrics={"test_accuracy": 0.5, "test_loss": 1.0},
        history=[{"epoch": e} for e in range(1, epochs + 1)],
        timings={"data": 0.0, "compile": 0.0, "train": 0.01, "total": 0.01},
        n_params=10,
        environment={},
        epochs_run=epochs,
        **extra,
    )


def _epochs_then(status: str, epochs: int = 2):
    def train(config, on_epoch=None):
        for e in range(1, epochs + 1):
            if on_epoch(e, {"epoch": e, "train_loss": 1.0 / e, "val_loss": 1.0, "seconds": 0.0}):
                return _result("CANCELLED", e)
        return _result(status, epochs, diverged_epoch=epochs if status == "DIVERGED" else None)

    return train


def test_complete_trial_records_epochs_result_and_worker(store, trial_ids):
    state = run_one(trial_ids[0], store, worker="w1", train=_epochs_then("COMPLETE"))
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

    assert run_one(trial_ids[0], store, train=train) is TrialState.COMPLETE
    assert run_one(trial_ids[0], store, train=train) is None
    assert calls == [0]


def test_training_exception_becomes_failed_with_traceback(store, trial_ids):
    def train(config, on_epoch=None):
        raise RuntimeError("boom in layer 3")

    assert run_one(trial_ids[0], store, train=train) is TrialState.FAILED
    t = store.get_trial(trial_ids[0])
    assert t.state is TrialState.FAILED
    assert "Traceback" in t.error and "RuntimeError: boom in layer 3" in t.error


def test_diverged_trial_keeps_its_result_and_says_when(store, trial_ids):
    assert run_one(trial_ids[0], store, train=_epochs_then("DIVERGED", 3)) is TrialState.DIVERGED
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

    assert run_one(trial_ids[0], store, train=train) is TrialState.CANCELLED
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
    assert run_one(tid, store, worker="w1", train=train) is None
    assert epochs_trained == [1, 2]  # stopped at the first refused write
    t = store.get_trial(tid)
    assert (t.state, t.worker, t.result) == (TrialState.RUNNING, "w2", None)
    assert t.metrics == [{"epoch": 1, "who": "w2"}]


def test_keyboard_interrupt_marks_the_trial_cancelled_and_propagates(store, trial_ids):
    def train(config, on_epoch=None):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_one(trial_ids[0], store, train=train)
    t = store.get_trial(trial_ids[0])
    assert t.state is TrialState.CANCELLED and "interrupted" in t.error


def test_real_engine_trains_a_tiny_trial(store, trial_ids):
    assert run_one(trial_ids[0], store) is TrialState.COMPLETE
    t = store.get_trial(trial_ids[0])
    assert len(t.metrics) == 2 and len(t.result["history"]) == 2
    assert 0.0 <= t.result["metrics"]["test_accuracy"] <= 1.0
    assert set(t.result["timings"]) >= {"compile", "train", "total"}


# ---------------------------------------------------------------- packs
PACK_SPEC = {
    **SPEC,
    "name": "pack-test",
    "training": {"max_epochs": 4, "batch_size": 32},
    "search": {"seeds": 5},
}


@pytest.fixture
def pack_ids(store) -> list[str]:
    """Five trials (seeds 0-4); seed 2 belongs to experiment "solo" only, so it can be
    cancelled while the others go on."""
    spec = parse_spec(PACK_SPEC)
    pairs = [(tid, cfg.model_dump(mode="json")) for tid, cfg in expand_with_ids(spec)]
    store.create_experiment(spec.experiment_id, spec.name, spec.to_dict(), len(pairs) - 1)
    store.create_trials(spec.experiment_id, [p for p in pairs if p[1]["seed"] != 2])
    store.create_experiment("solo", "solo", {}, 1)
    store.create_trials("solo", [p for p in pairs if p[1]["seed"] == 2])
    return [tid for tid, _ in pairs]


@pytest.fixture(autouse=True)
def every_epoch_checks(monkeypatch):
    # Cancellation and heartbeat checks and metrics writes are throttled in time; here every
    # epoch checks and writes, so what a test sees depends on epochs, never on the clock.
    monkeypatch.setattr(pack_epochs, "CHECK_INTERVAL_S", 0.0)
    monkeypatch.setattr(pack_epochs, "METRICS_INTERVAL_S", 0.0)


class StandInPack:
    """A packed train function: member k's fate is set by ``plans[seed]``.

    ``"diverge@E"`` reports epoch E, then stops (metrics None) and returns DIVERGED;
    ``"fail"`` returns a member-level FAILED result; anything else trains every epoch unless
    its stop flag comes back True. ``hooks[epoch]`` runs after that epoch's report.
    """

    def __init__(self, plans: dict[int, str] | None = None, epochs: int = 4, hooks=None):
        self.plans, self.epochs, self.hooks = plans or {}, epochs, hooks or {}
        self.calls: list[list[int]] = []
        self.flags: list[list[bool]] = []

    def __call__(self, configs, on_epoch):
        seeds = [c.seed for c in configs]
        self.calls.append(seeds)
        done: dict[int, TrialResult] = {}
        for epoch in range(1, self.epochs + 1):
            metrics = []
            for k, seed in enumerate(seeds):
                plan = self.plans.get(seed, "")
                if k in done:
                    metrics.append(None)
                    continue
                metrics.append({"epoch": epoch, "seed": seed, "train_loss": 1.0 / epoch})
                if plan == f"diverge@{epoch}":
                    done[k] = _result("DIVERGED", epoch, diverged_epoch=epoch)
            flags = on_epoch(epoch, metrics)
            self.flags.append(flags)
            for k, stop in enumerate(flags):
                if stop and k not in done:
                    done[k] = _result("CANCELLED", epoch)
            if epoch in self.hooks:
                self.hooks[epoch]()
        out = []
        for k, seed in enumerate(seeds):
            if self.plans.get(seed) == "fail":
                failed = _result("COMPLETE", self.epochs)
                failed.status = "FAILED"
                failed.notes = [f"member {k}: singular matrix in layer 2"]
                out.append(failed)
            else:
                out.append(done.get(k, _result("COMPLETE", self.epochs)))
        return out


def _seed(store, tid: str) -> int:
    return store.get_trial(tid).config["seed"]


def test_a_pack_survives_divergence_failure_cancellation_and_a_lost_member(store, pack_ids):
    by_seed = {_seed(store, t): t for t in pack_ids}

    def cancel_seed_2():
        store.cancel_experiment("solo")

    def lose_seed_3():
        assert store.release_trial(by_seed[3], "w1")
        assert store.claim_trial(by_seed[3], "w2") is not None
        assert store.append_metrics(by_seed[3], {"epoch": 1, "who": "w2"}, worker="w2")

    writes = []
    real_append = store.append_metrics_many

    def counting_append(batch, worker=None):
        if worker == "w1":
            writes.append(sorted(batch))
        return real_append(batch, worker)

    store.append_metrics_many = counting_append
    train = StandInPack({0: "diverge@2", 1: "fail"}, hooks={2: cancel_seed_2, 3: lose_seed_3})
    states = run_pack(pack_ids, store, worker="w1", train_fn=train)

    assert states == {
        by_seed[0]: TrialState.DIVERGED,
        by_seed[1]: TrialState.FAILED,
        by_seed[2]: TrialState.CANCELLED,
        by_seed[3]: None,
        by_seed[4]: TrialState.COMPLETE,
    }
    assert train.calls == [[0, 1, 2, 3, 4]]
    assert len(writes) == 4  # one metrics write per epoch for the whole pack
    assert writes[1] == sorted(pack_ids) and by_seed[0] not in writes[2]
    complete, failed = store.get_trial(by_seed[4]), store.get_trial(by_seed[1])
    assert [m["epoch"] for m in complete.metrics] == [1, 2, 3, 4]
    assert [m["epoch"] for m in failed.metrics] == [1, 2, 3, 4]
    assert failed.error == "member 1: singular matrix in layer 2"
    diverged = store.get_trial(by_seed[0])
    assert [m["epoch"] for m in diverged.metrics] == [1, 2]
    assert diverged.error.startswith("diverged at epoch 2")
    cancelled = store.get_trial(by_seed[2])
    assert [m["epoch"] for m in cancelled.metrics] == [1, 2, 3]  # stopped after epoch 3's check
    lost = store.get_trial(by_seed[3])
    assert (lost.state, lost.worker, lost.result) == (TrialState.RUNNING, "w2", None)
    assert lost.metrics == [{"epoch": 1, "who": "w2"}]
    assert [f[3] for f in train.flags] == [False, False, False, True]  # lost: told to stop
    assert complete.result["pack"]["size"] == 5 and complete.result["pack"]["index"] == 4
    assert diverged.result["pack"]["id"] == complete.result["pack"]["id"]


def _counting_finish(store) -> list[dict[str, list[int]]]:
    """Each ``finish_trials`` call's epochs (trial id -> epoch numbers), as the runner sent them."""
    calls: list[dict[str, list[int]]] = []
    real_finish = store.finish_trials

    def counting_finish(items, worker=None, epochs=None):
        calls.append({tid: [m["epoch"] for m in e] for tid, e in (epochs or {}).items()})
        return real_finish(items, worker, epochs)

    store.finish_trials = counting_finish
    return calls


def test_fast_epochs_are_written_first_at_once_then_with_the_ends(store, pack_ids, monkeypatch):
    monkeypatch.setattr(pack_epochs, "METRICS_INTERVAL_S", 3600.0)  # no epoch is ever slow enough
    by_seed = {_seed(store, t): t for t in pack_ids}
    seen = {}

    def look():  # while the pack trains: its curves are live from the first epoch on
        seen.update({t.id: [m["epoch"] for m in t.metrics] for t in store.list_trials()})

    def lose_seed_3():
        assert store.release_trial(by_seed[3], "w1")
        assert store.claim_trial(by_seed[3], "w2") is not None

    writes = []
    real_append = store.append_metrics_many

    def counting_append(batch, worker=None):
        writes.append({tid: [m["epoch"] for m in epochs] for tid, epochs in batch.items()})
        return real_append(batch, worker)

    store.append_metrics_many = counting_append
    finishes = _counting_finish(store)
    train = StandInPack(epochs=6, hooks={2: look, 4: lose_seed_3})
    states = run_pack(pack_ids, store, worker="w1", train_fn=train)

    assert seen == dict.fromkeys(pack_ids, [1])
    assert writes == [dict.fromkeys(pack_ids, [1])]
    # the other epochs go with the ends, in the one write that finishes each trial; the
    # lost member's not at all
    assert finishes == [{t: [2, 3, 4, 5, 6] for t in pack_ids if t != by_seed[3]}]
    assert states[by_seed[3]] is None
    for tid in pack_ids:
        t = store.get_trial(tid)
        if tid == by_seed[3]:
            assert (t.state, t.worker, t.metrics) == (TrialState.RUNNING, "w2", [])
        else:
            assert t.state is TrialState.COMPLETE
            assert [m["epoch"] for m in t.metrics] == [1, 2, 3, 4, 5, 6]


def test_a_pack_of_fast_epochs_checks_nothing_of_its_own(store, pack_ids, monkeypatch):
    """A pack that ends within the check interval beats and asks for cancellation never
    (the claim did both); its curves are written twice: the first epoch at once, the rest
    with the ends."""
    monkeypatch.setattr(pack_epochs, "METRICS_INTERVAL_S", 3600.0)
    monkeypatch.setattr(pack_epochs, "CHECK_INTERVAL_S", 3600.0)
    calls = []
    for name in ("append_metrics_many", "heartbeat_trials", "cancel_requested"):
        real = getattr(store, name)

        def counting(*args, _name=name, _real=real, **kwargs):
            calls.append(_name)
            return _real(*args, **kwargs)

        setattr(store, name, counting)
    finishes = _counting_finish(store)
    states = run_pack(pack_ids, store, worker="w1", train_fn=StandInPack(epochs=5))
    assert set(states.values()) == {TrialState.COMPLETE}
    assert calls.count("append_metrics_many") == 1
    assert finishes == [dict.fromkeys(pack_ids, [2, 3, 4, 5])]
    assert "cancel_requested" not in calls and "heartbeat_trials" not in calls
    for tid in pack_ids:
        assert [m["epoch"] for m in store.get_trial(tid).metrics] == [1, 2, 3, 4, 5]


def test_a_failed_epoch_write_is_sent_again_with_the_next_one(store, pack_ids, monkeypatch):
    """Every epoch is written (METRICS_INTERVAL_S 0); the writes of epochs 2, 3 and 4 fail, so
    they go with the ends, whose first try fails too: each stored curve still holds every
    epoch once."""
    from dnnframe.exceptions import StoreError

    monkeypatch.setattr(pack_epochs, "METRICS_INTERVAL_S", 0.0)
    monkeypatch.setattr(retrying, "pause", lambda s: None)  # the end's back-off
    real_append, real_finish = store.append_metrics_many, store.finish_trials
    calls = []

    def flaky(batch, worker=None):
        epochs = sorted({m["epoch"] for ms in batch.values() for m in ms})
        calls.append(epochs)
        if len(calls) in (2, 3, 4):
            raise StoreError("the store went away")
        return real_append(batch, worker)

    ends = []

    def flaky_finish(items, worker=None, epochs=None):
        ends.append(sorted({m["epoch"] for ms in (epochs or {}).values() for m in ms}))
        if len(ends) == 1:
            raise StoreError("the store went away")
        return real_finish(items, worker, epochs)

    store.append_metrics_many, store.finish_trials = flaky, flaky_finish
    states = run_pack(pack_ids, store, worker="w1", train_fn=StandInPack(epochs=4))
    assert set(states.values()) == {TrialState.COMPLETE}
    assert calls == [[1], [2], [2, 3], [2, 3, 4]]
    assert ends == [[2, 3, 4], [2, 3, 4]]
    for tid in pack_ids:
        assert [m["epoch"] for m in store.get_trial(tid).metrics] == [1, 2, 3, 4]


def test_a_stored_curve_is_the_results_history_and_is_written_once(store, pack_ids):
    """The row's result leaves the history out (the curve holds it); read back, the record's
    result shows the curve as its history."""
    import sqlite3

    states = run_pack(pack_ids, store, worker="w1", train_fn=StandInPack(epochs=3))
    assert set(states.values()) == {TrialState.COMPLETE}
    with sqlite3.connect(store.path) as db:
        assert db.execute(
            "SELECT count(*) FROM trials WHERE json_extract(result, '$.history') IS NOT NULL"
        ).fetchone() == (0,)
    for tid in pack_ids:
        t = store.get_trial(tid)
        assert [m["epoch"] for m in t.metrics] == [1, 2, 3]
        assert t.result["history"] == t.metrics
        assert t.to_dict()["result"]["history"] == t.metrics


def test_a_result_keeps_its_history_when_the_curve_could_not_be_stored(
    store, pack_ids, monkeypatch, caplog
):
    """Every curve write fails, with the ends too, retries included: the final states still
    land, without the epochs, each result with the whole history the engine returned, and
    an error names the epochs the curves lack."""
    from dnnframe.exceptions import StoreError

    monkeypatch.setattr(retrying, "pause", lambda s: None)  # the end's back-off

    def broken(batch, worker=None):
        raise StoreError("the curves' table is unwritable")

    real_finish = store.finish_trials

    def finish_without_curves(items, worker=None, epochs=None):
        if epochs:
            raise StoreError("the curves' table is unwritable")
        return real_finish(items, worker)

    store.append_metrics_many, store.finish_trials = broken, finish_without_curves
    states = run_pack(pack_ids, store, worker="w1", train_fn=StandInPack(epochs=3))
    assert set(states.values()) == {TrialState.COMPLETE}
    for tid in pack_ids:
        t = store.get_trial(tid)
        assert t.metrics == []
        assert [h["epoch"] for h in t.result["history"]] == [1, 2, 3]
    (error,) = [r for r in caplog.records if r.levelname == "ERROR"]
    assert f"3 epochs of {pack_ids[0]}" in error.getMessage()
    assert "the curves' table is unwritable" in error.getMessage()


def test_an_engine_exception_fails_every_member_with_the_traceback(store, pack_ids):
    def train(configs, on_epoch):
        on_epoch(1, [{"epoch": 1}] * len(configs))
        raise RuntimeError("out of memory in the packed graph")

    states = run_pack(pack_ids[:3], store, worker="w", train_fn=train)
    assert states == dict.fromkeys(pack_ids[:3], TrialState.FAILED)
    for tid in pack_ids[:3]:
        t = store.get_trial(tid)
        assert (
            "Traceback" in t.error and "RuntimeError: out of memory in the packed graph" in t.error
        )
        assert len(t.metrics) == 1
    assert store.get_trial(pack_ids[3]).state is TrialState.QUEUED


def test_the_delivery_cap_holds_per_member(store, pack_ids):
    first, *rest = pack_ids[:3]
    assert store.claim_trial(first, "dead") is not None
    assert store.requeue_stale(0) == [first]
    train = StandInPack(epochs=1)
    states = run_pack(pack_ids[:3], store, worker="w", max_attempts=1, train_fn=train)
    assert states == {first: None, rest[0]: TrialState.COMPLETE, rest[1]: TrialState.COMPLETE}
    assert train.calls == [[_seed(store, t) for t in rest]]
    capped = store.get_trial(first)
    assert capped.state is TrialState.FAILED and capped.error.startswith("delivery cap reached")


def test_a_redelivered_pack_runs_only_its_unfinished_members(store, pack_ids):
    done, running_elsewhere, *todo = pack_ids
    assert run_one(done, store, train=_epochs_then("COMPLETE")) is TrialState.COMPLETE
    before = store.get_trial(done)
    assert store.claim_trial(running_elsewhere, "alive") is not None
    train = StandInPack(epochs=2)
    states = run_pack(pack_ids, store, worker="w", train_fn=train)
    assert states == {
        done: None,
        running_elsewhere: None,
        **dict.fromkeys(todo, TrialState.COMPLETE),
    }
    assert train.calls == [[_seed(store, t) for t in todo]]
    assert store.get_trial(done) == before
    assert store.get_trial(running_elsewhere).worker == "alive"
    assert run_pack(pack_ids, store, worker="w", train_fn=train) == dict.fromkeys(pack_ids)
    assert len(train.calls) == 1  # nothing left to train


def test_the_heartbeat_thread_beats_during_a_long_compile(store, pack_ids):
    claimed: dict[str, float] = {}

    def slow_compile(configs, on_epoch):
        # No epoch for a while: only the heartbeat thread can refresh the members.
        for tid in pack_ids[:2]:
            claimed.setdefault(tid, store.get_trial(tid).heartbeat_at)
        deadline = time.monotonic() + 30
        while any(store.get_trial(t).heartbeat_at == claimed[t] for t in pack_ids[:2]):
            assert time.monotonic() < deadline, "no heartbeat during the compile"
            time.sleep(0.01)
        return [_result("COMPLETE", 0) for _ in configs]

    states = run_pack(
        pack_ids[:2], store, worker="w", train_fn=slow_compile, heartbeat_interval_s=0.05
    )
    assert set(states.values()) == {TrialState.COMPLETE}


def test_a_single_trial_train_function_runs_as_a_pack_of_one(store, trial_ids):
    state = run_one(trial_ids[0], store, train=_epochs_then("COMPLETE"))
    assert state is TrialState.COMPLETE
    pack = store.get_trial(trial_ids[0]).result["pack"]
    assert (pack["size"], pack["index"]) == (1, 0)


def test_heartbeat_examples_run():
    import doctest

    from dnnframe.runner import heartbeat

    assert doctest.testmod(heartbeat).failed == 0
