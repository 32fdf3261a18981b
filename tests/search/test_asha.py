"""ASHA pruning against a real SQLite store, with stand-in train functions whose
objective is a known function of the learning rate (quality q = 100 * learning_rate)."""

from __future__ import annotations

import pytest

from dnnframe.engine.result import TrialResult
from dnnframe.executors.local import LocalExecutor
from dnnframe.pruning.asha import AshaPruner, promoted, rungs
from dnnframe.pruning.factory import pruner_for_pack
from dnnframe.pruning.pruner import PackTrial
from dnnframe.runner import run_pack
from dnnframe.spec import expand_with_ids, parse_spec
from dnnframe.store import TrialState, open_store
from dnnframe.submit import submit_experiment
from dnnframe.testing.packs import one_by_one, run_one

# In the order the trials run: the bad half (q 1-4) interleaved with the good half.
ORDER = [5, 1, 7, 3, 8, 2, 6, 4]


def _spec(max_epochs: int, **search) -> dict:
    return {
        "name": "asha",
        "dataset": {"name": "iris"},
        "model": {"width": 8},
        "training": {"max_epochs": max_epochs, "learning_rate": {"grid": [q / 100 for q in ORDER]}},
        "search": {
            "method": "asha",
            "objective": {"metric": "test_accuracy"},
            "min_epochs": 1,
            "eta": 2,
            **search,
        },
    }


def _metrics(config, epoch: int) -> dict:
    # val_accuracy grows with the learning rate and a little with each epoch
    return {
        "epoch": epoch,
        "train_loss": 1.0 / epoch,
        "val_accuracy": config.training.learning_rate * 10 + epoch / 1000,
        "val_loss": 1.0 - config.training.learning_rate,
    }


def _result(status: str, history: list[dict]) -> TrialResult:
    last = history[-1]
    return TrialResult(
        status=status,
        metrics={"test_accuracy": last["val_accuracy"]},
        history=history,
        timings={"train": 0.0, "total": 0.0},
        n_params=1,
        environment={},
        epochs_run=len(history),
    )


def curve_train(config, on_epoch=None):
    """A single-trial stand-in: reports every epoch, stops when asked (CANCELLED)."""
    history = []
    for epoch in range(1, config.training.max_epochs + 1):
        history.append(_metrics(config, epoch))
        if on_epoch(epoch, dict(history[-1])):
            return _result("CANCELLED", history)
    return _result("COMPLETE", history)


def pack_train(configs, on_epoch):
    """A pack stand-in: members train epoch by epoch together; a stop flag freezes one."""
    histories: list[list[dict]] = [[] for _ in configs]
    stopped = [False] * len(configs)
    for epoch in range(1, max(c.training.max_epochs for c in configs) + 1):
        slots = []
        for i, c in enumerate(configs):
            if stopped[i] or epoch > c.training.max_epochs:
                slots.append(None)
                continue
            histories[i].append(_metrics(c, epoch))
            slots.append(dict(histories[i][-1]))
        flags = on_epoch(epoch, slots)
        stopped = [s or f for s, f in zip(stopped, flags)]
    return [_result("CANCELLED" if s else "COMPLETE", h) for s, h in zip(stopped, histories)]


@pytest.fixture
def store(tmp_path):
    s = open_store(f"sqlite:///{tmp_path / 'asha.db'}")
    yield s
    s.close()


def _stored(store, raw: dict) -> dict[int, str]:
    spec = parse_spec(raw)
    pairs = [(tid, c.model_dump(mode="json")) for tid, c in expand_with_ids(spec)]
    store.create_experiment(spec.experiment_id, spec.name, spec.to_dict(), len(pairs))
    store.create_trials(spec.experiment_id, pairs)
    return {round(c["training"]["learning_rate"] * 100): tid for tid, c in pairs}


def _ends(store, ids: dict[int, str]) -> dict[int, tuple[str, int]]:
    out = {}
    for q, tid in ids.items():
        t = store.get_trial(tid)
        out[q] = (t.state.value, len(t.metrics))
    return out


def test_rungs_and_the_promotion_rule():
    assert rungs(1, 27, 3) == [1, 3, 9]
    assert rungs(2, 8, 2) == [2, 4]
    assert rungs(1, 1, 3) == []
    assert promoted(0.1, [0.1, 0.9], eta=3, mode="max")  # fewer than eta: go on
    assert not promoted(0.5, [0.5, 0.9, 0.7], eta=3, mode="max")
    assert promoted(0.9, [0.5, 0.9, 0.7], eta=3, mode="max")
    assert promoted(0.2, [0.2, 0.9, 0.7], eta=3, mode="min")
    assert not promoted(0.7, [0.2, 0.9, 0.7, 0.1, 0.3, 0.4], eta=3, mode="min")


def test_one_by_one_the_bad_half_is_pruned_at_the_first_rung(store):
    ids = _stored(store, _spec(max_epochs=4))  # rungs at epochs 1 and 2
    for q in ORDER:
        run_one(ids[q], store, worker="w", train=curve_train)
    assert _ends(store, ids) == {
        1: ("PRUNED", 1),
        2: ("PRUNED", 1),
        3: ("PRUNED", 1),
        4: ("PRUNED", 1),
        5: ("COMPLETE", 4),
        7: ("COMPLETE", 4),
        8: ("COMPLETE", 4),
        6: ("PRUNED", 2),  # 5, 7 and 8 were ahead of it at the second rung
    }
    pruned = store.get_trial(ids[3])
    assert pruned.result["status"] == "PRUNED"
    assert pruned.result["pruned"]["epoch"] == 1
    assert pruned.result["pruned"]["trials_at_rung"] == 4  # 5, 1, 7 and itself
    assert pruned.result["history"][0]["epoch"] == 1
    assert store.counts_by_state(parse_spec(_spec(4)).experiment_id)["PRUNED"] == 5


def test_members_of_a_pack_are_pruned_one_by_one(store):
    ids = _stored(store, _spec(max_epochs=8))  # rungs at epochs 1, 2 and 4
    states = run_pack([ids[q] for q in ORDER], store, worker="w", train_fn=pack_train)
    assert states[ids[8]] is TrialState.COMPLETE
    assert _ends(store, ids) == {
        1: ("PRUNED", 1),
        2: ("PRUNED", 1),
        3: ("PRUNED", 1),
        4: ("PRUNED", 1),
        5: ("PRUNED", 2),
        6: ("PRUNED", 2),
        7: ("PRUNED", 4),
        8: ("COMPLETE", 8),
    }


def test_trials_of_a_grid_experiment_are_never_pruned(store):
    raw = _spec(max_epochs=4)
    raw["search"] = {"method": "grid"}
    ids = _stored(store, raw)
    for q in ORDER:
        run_one(ids[q], store, worker="w", train=curve_train)
    assert {state for state, _ in _ends(store, ids).values()} == {"COMPLETE"}


def _random_asha(tmp_path, name: str) -> set[float]:
    url = f"sqlite:///{tmp_path / name}"
    raw = {
        "name": "asha-random",
        "dataset": {"name": "iris"},
        "model": {"width": 8},
        "training": {"learning_rate": {"loguniform": [0.001, 0.09]}},
        "search": {
            "method": "asha",
            "num_samples": 12,
            "random_seed": 7,
            "max_epochs": 9,
            "min_epochs": 1,
            "eta": 3,
            "objective": {"metric": "val_accuracy"},
        },
    }
    store = open_store(url)
    with LocalExecutor(url, workers=1, train_fn=one_by_one(curve_train)) as ex:
        result = submit_experiment(parse_spec(raw), store, ex, pack_size=1)
        assert ex.wait(timeout=300)
    trials = store.list_trials(result.experiment.id)
    store.close()
    assert len(trials) == 12 and all(t.config["training"]["max_epochs"] == 9 for t in trials)
    assert {t.state for t in trials} == {TrialState.PRUNED, TrialState.COMPLETE}
    return {t.config["training"]["learning_rate"] for t in trials if t.state is TrialState.PRUNED}


def test_one_worker_and_a_fixed_seed_prune_the_same_trials(tmp_path):
    assert _random_asha(tmp_path, "a.db") == _random_asha(tmp_path, "b.db")


def test_the_packed_engine_prunes_members_at_the_rungs(store):
    raw = {
        "name": "asha-engine",
        "dataset": {"name": "iris"},
        "model": {"width": 8},
        "training": {
            "max_epochs": 4,
            "batch_size": 16,
            "learning_rate": {"grid": [0.01, 0.02, 0.05, 0.1]},
        },
        "search": {
            "method": "asha",
            "min_epochs": 1,
            "eta": 2,
            "objective": {"metric": "test_loss", "mode": "min"},
        },
    }
    ids = list(_stored(store, raw).values())
    run_pack(ids, store, worker="w")  # the default: dnnframe.engine.train_pack
    trials = [store.get_trial(t) for t in ids]
    assert sorted((t.state.value, len(t.metrics)) for t in trials) == [
        ("COMPLETE", 4),
        ("PRUNED", 1),
        ("PRUNED", 1),
        ("PRUNED", 2),
    ]
    assert all(t.result["status"] == t.state.value for t in trials)
    survivor = next(t for t in trials if t.state is TrialState.COMPLETE)
    at_two = [t for t in trials if len(t.metrics) >= 2]
    assert survivor.metrics[1]["val_loss"] == min(t.metrics[1]["val_loss"] for t in at_two)


def test_each_pack_reuses_the_rule_read_once_from_the_store(store, monkeypatch):
    """An experiment's search settings are read once per store, not once per pack (the read
    counts every trial of the experiment by state)."""
    ids = _stored(store, _spec(max_epochs=4))
    reads = []
    original = store.get_experiment
    monkeypatch.setattr(store, "get_experiment", lambda eid: reads.append(eid) or original(eid))
    for q in ORDER:  # eight packs of one
        run_pack([ids[q]], store, worker="w", train_fn=pack_train)
    assert reads == [parse_spec(_spec(4)).experiment_id]
    assert _ends(store, ids)[1] == ("PRUNED", 1)  # the remembered rule still prunes


def test_the_factory_prunes_a_trial_only_when_all_its_experiments_prune(store):
    asha = _stored(store, _spec(max_epochs=4))
    raw = _spec(max_epochs=4)
    raw["name"], raw["search"] = "grid", {"method": "grid"}
    grid = _stored(store, raw)
    assert grid == asha  # the same configurations: the same trials, in both experiments
    trial = store.get_trial(asha[5])
    assert len(trial.experiment_ids) == 2
    both = {asha[5]: PackTrial(trial.experiment_ids, 4)}
    assert not pruner_for_pack(store, both).active
    only_asha = [parse_spec(_spec(max_epochs=4)).experiment_id]
    pruner = pruner_for_pack(store, {asha[5]: PackTrial(only_asha, 4)})
    assert isinstance(pruner, AshaPruner) and pruner.active
    missing = pruner_for_pack(store, {asha[5]: PackTrial([*only_asha, "no-such"], 4)})
    assert not missing.active
    # and run that way, none of the shared trials is pruned
    for q in ORDER:
        run_one(asha[q], store, worker="w", train=curve_train)
    assert {state for state, _ in _ends(store, asha).values()} == {"COMPLETE"}
