"""Diverged trials count in the analysis, through the real API over a real sweep
(diverging_sweep.py: every trial at a learning rate of 1000 diverges, every one at 0.05
trains): importance counts a diverged trial as the worst value, so the learning rate ranks
first; the seed is the noise floor and never ranked; too few trials are said to be so."""

from __future__ import annotations

import pytest
from diverging_sweep import DIVERGING_RATE

from dashboard import create_app
from dashboard.importance import EVALUATORS
from dnnframe.store import open_store
from dnnframe.store.base import TrialState

# the sweep trains for real, once for every test that reads it: those are marked slow


@pytest.fixture
def sweep_client(diverging_sweep, data_dir):
    url, exp_id = diverging_sweep
    app = create_app({"TESTING": True, "STORE_URL": url})
    try:
        yield app.test_client(), exp_id
    finally:
        app.extensions["dnnframe"].shutdown()


def _trials(diverging_sweep):
    url, exp_id = diverging_sweep
    with open_store(url) as store:
        return store.list_trials(exp_id)


@pytest.mark.slow
def test_the_sweep_diverges_where_its_learning_rate_says(diverging_sweep):
    # what every test below rests on: the rate alone decides which trials diverge
    states = {(t.config["training"]["learning_rate"], t.state) for t in _trials(diverging_sweep)}
    assert states == {(0.05, TrialState.COMPLETE), (DIVERGING_RATE, TrialState.DIVERGED)}


@pytest.mark.slow
@pytest.mark.parametrize("evaluator", EVALUATORS)
def test_importance_ranks_the_learning_rate_that_decides_divergence_first(sweep_client, evaluator):
    client, exp_id = sweep_client
    body = client.get(f"/api/v1/experiments/{exp_id}/importance?evaluator={evaluator}").json
    # the rate that decided which trials diverged ranks first; the seed is never ranked
    assert body["ranking"][0] == "learning_rate", body
    assert "seed" not in body["ranking"] and "seed" not in body["importances"]
    assert body["importances"]["learning_rate"] > 0.5
    # all eight trials count, the four that diverged as the worst accuracy there is
    assert (body["n_trials"], body["n_diverged"], body["n_pruned"], body["worst"]) == (8, 4, 0, 0.0)
    assert body["diverged_at"] == {"learning_rate": [DIVERGING_RATE]}
    # the seed's share is the noise floor
    assert body["params"] == ["hidden_layers", "learning_rate"]
    assert 0 <= body["noise_floor"] < body["importances"]["learning_rate"]
    assert "learning_rate" not in body["below_noise"]
    # eight trials for two parameters: it says the answer is rough
    assert body["few_trials"] is True
    assert body["note"] == (
        "rests on 8 trials for 2 parameters, fewer than 5 a parameter: a rough guide; "
        "4 diverged trials count as the worst test_accuracy (0), and every trial diverged at "
        "learning_rate 1000"
    )


@pytest.mark.slow
def test_a_loss_counts_diverged_trials_as_the_worst_loss_reached(sweep_client, diverging_sweep):
    client, exp_id = sweep_client
    trained = [
        t.result["metrics"]["test_loss"]
        for t in _trials(diverging_sweep)
        if t.state is TrialState.COMPLETE
    ]
    body = client.get(f"/api/v1/experiments/{exp_id}/importance?metric=test_loss").json
    assert body["mode"] == "min" and body["ranking"][0] == "learning_rate", body
    # a loss has no bound above: the worst a trained trial reached, not a diverged 1e37
    assert body["n_trials"] == 8 and body["worst"] == max(trained)


@pytest.mark.slow
def test_a_timing_of_a_diverged_trial_is_its_own(diverging_sweep):
    from dashboard.params import outcomes  # the rule every analysis counts trials by

    trials = _trials(diverging_sweep)
    by_id = {t.id: t for t in trials}
    counted = outcomes(trials, "train_seconds", "min")
    # a divergence voids scores, not measurements: each trial keeps its own training time
    assert len(counted) == 8
    own = sorted(t.result["timings"]["train"] for t in by_id.values())
    assert sorted(o.value for o in counted) == own
    accuracy = outcomes(trials, "test_accuracy", "max")
    assert sorted({o.value for o in accuracy if o.state == TrialState.DIVERGED.value}) == [0.0]


@pytest.mark.slow
def test_the_pages_first_read_carries_the_same_importance(sweep_client):
    client, exp_id = sweep_client
    body = client.get(
        f"/experiments/{exp_id}/page-data?metric=test_accuracy&evaluator=ped_anova"
    ).json
    api = client.get(f"/api/v1/experiments/{exp_id}/importance").json
    assert body["importance"] == api and api["ranking"][0] == "learning_rate"
    # every trial is in it, the diverged ones with their state for the charts to mark
    states = [t["state"] for t in body["trials"]]
    assert len(states) == 8 and states.count(TrialState.DIVERGED.value) == 4


def test_importance_says_when_nothing_but_the_seed_varies(client, store):
    spec = {
        "name": "seeds-only",
        "dataset": {"name": "iris"},
        "model": {"width": 4},
        "training": {"max_epochs": 2},
        "search": {"seeds": 3},
    }
    exp_id = client.post("/api/v1/experiments", json=spec).json["id"]
    for t in store.list_trials(exp_id):
        assert store.claim_trial(t.id, "w1") is not None
        assert store.finish_trial(
            t.id,
            TrialState.COMPLETE,
            worker="w1",
            result={"metrics": {"test_accuracy": 0.9 + 0.01 * t.config["seed"]}},
        )
    body = client.get(f"/api/v1/experiments/{exp_id}/importance").json
    # three seeds differ in their accuracy, and still nothing is ranked: the seed is no parameter
    assert body["ranking"] == [] and body["importances"] == {} and body["params"] == []
    assert body["note"] == "the trials differ in no parameter but the seed: nothing to rank"
