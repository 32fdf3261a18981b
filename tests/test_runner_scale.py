"""Every epoch of every member reaches the store at the sizes users run: a pack of 10,000
trials trained by the engine, and hundreds of epochs, each stored once and equal to the
trial's result."""

from __future__ import annotations

import pytest

from dnnframe.runner import run_pack
from dnnframe.spec import expand_with_ids, parse_spec
from dnnframe.store import TrialState, open_store


def stored_sweep(tmp_path, spec: dict):
    store = open_store(f"sqlite:///{tmp_path / 'results.db'}")
    parsed = parse_spec(spec)
    pairs = [(tid, c.model_dump(mode="json")) for tid, c in expand_with_ids(parsed)]
    store.create_experiment(parsed.experiment_id, parsed.name, parsed.to_dict(), len(pairs))
    store.create_trials(parsed.experiment_id, pairs)
    return store, parsed.experiment_id, [tid for tid, _ in pairs]


def assert_every_epoch_stored(store, experiment_id: str, epochs: int, n: int) -> None:
    trials = store.list_trials(experiment_id)
    assert len(trials) == n
    for t in trials:
        assert t.state is TrialState.COMPLETE, (t.id, t.state, t.error)
        assert [m["epoch"] for m in t.metrics] == list(range(1, epochs + 1)), t.id
        # the stored curve is the result's history, value for value
        assert t.metrics == t.result["history"], t.id


@pytest.mark.slow
def test_a_pack_of_10000_trials_stores_every_epoch_of_every_member(tmp_path):
    store, eid, ids = stored_sweep(
        tmp_path,
        {
            "name": "ten-thousand",
            "dataset": {"name": "iris"},
            "model": {"hidden_layers": 1, "width": 2},
            "training": {
                "optimizer": "sgd",
                "learning_rate": {"grid": [0.01, 0.1]},
                "batch_size": 64,
                "max_epochs": 3,
                "early_stopping": None,
            },
            "search": {"seeds": 5000},
        },
    )
    states = run_pack(ids, store, worker="w")
    assert len(states) == 10_000 and set(states.values()) == {TrialState.COMPLETE}
    assert_every_epoch_stored(store, eid, 3, 10_000)


def test_400_epochs_are_each_stored_once(tmp_path):
    store, eid, ids = stored_sweep(
        tmp_path,
        {
            "name": "long",
            "dataset": {"name": "iris"},
            "model": {"hidden_layers": 2, "width": 4},
            "training": {
                "optimizer": "adam",
                "learning_rate": {"grid": [0.001, 0.003]},
                "batch_size": 64,
                "max_epochs": 400,
                "early_stopping": None,
            },
            "search": {"seeds": 2},
        },
    )
    states = run_pack(ids, store, worker="w")
    assert set(states.values()) == {TrialState.COMPLETE}
    assert_every_epoch_stored(store, eid, 400, 4)
