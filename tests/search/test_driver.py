"""The TPE driver with a real SQLite store and local process pool, and a stand-in train
function whose objective is a known function of the hyperparameters."""

from __future__ import annotations

import math
import os
import time
import uuid
from pathlib import Path

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState as OptunaState

from dnnframe.engine.result import TrialResult
from dnnframe.executors.local import LocalExecutor
from dnnframe.search.driver import DriverResult, SearchDriver
from dnnframe.search.space import SpaceMap
from dnnframe.spec import count_trials, parse_spec
from dnnframe.spec.expand import spec_spaces
from dnnframe.store import TrialState, open_store
from dnnframe.testing.packs import one_by_one

RAW = {
    "name": "tpe",
    "dataset": {"name": "iris"},
    "model": {
        "hidden_layers": {"int_range": [1, 3]},
        "activation": {"choice": ["relu", "tanh"]},
        "width": 8,
    },
    "training": {"learning_rate": {"loguniform": [0.001, 1.0]}, "max_epochs": 4},
    "search": {
        "method": "tpe",
        "num_samples": 12,
        "random_seed": 3,
        "objective": {"metric": "test_accuracy"},
    },
}


def score(config) -> float:
    """Best at learning rate 0.03 with tanh: a known function of the hyperparameters."""
    lr = config.training.learning_rate
    return (
        0.9
        - (math.log10(lr) - math.log10(0.03)) ** 2 / 10
        - (0.05 if config.model.activation == "relu" else 0.0)
    )


def shaped_train(config, on_epoch=None):
    history = []
    for epoch in range(1, config.training.max_epochs + 1):
        history.append(
            {"epoch": epoch, "train_loss": 1.0 / epoch, "val_accuracy": score(config) - 0.1 / epoch}
        )
        if on_epoch(epoch, dict(history[-1])):
            break
    status = "COMPLETE" if len(history) == config.training.max_epochs else "CANCELLED"
    return TrialResult(
        status=status,
        metrics={"test_accuracy": history[-1]["val_accuracy"]},
        history=history,
        timings={"train": 0.0, "total": 0.0},
        n_params=1,
        environment={},
        epochs_run=len(history),
    )


def first_waits_for_two_more(config, on_epoch=None):
    """The first trial to start trains until two more have started (then as
    :func:`shaped_train`); after a minute without them it fails. The others are
    :func:`shaped_train`. ``$GATE_DIR`` holds the marks."""
    gate = Path(os.environ["GATE_DIR"])
    try:
        (gate / "first").touch(exist_ok=False)
    except FileExistsError:
        (gate / f"other-{uuid.uuid4().hex}").touch()
        return shaped_train(config, on_epoch)
    deadline = time.monotonic() + 60
    while len(list(gate.glob("other-*"))) < 2:
        if time.monotonic() > deadline:
            raise RuntimeError("no other trial started while the first one trained")
        time.sleep(0.02)
    return shaped_train(config, on_epoch)


def _drive(
    url: str, raw: dict = RAW, limit: int | None = None, workers: int = 1
) -> tuple[SearchDriver, object]:
    store = open_store(url)
    with LocalExecutor(url, workers=workers, train_fn=one_by_one(shaped_train)) as ex:
        driver = SearchDriver(parse_spec(raw), store, ex)
        result = driver.run(limit=limit)
    return driver, result


def test_spaces_become_optuna_distributions_and_back():
    spaces = SpaceMap(
        spec_spaces(
            parse_spec(
                {
                    **RAW,
                    "model": {
                        **RAW["model"],
                        "width": {"grid": [[8, 4], [16, 8]]},
                        "hidden_layers": 2,
                    },
                }
            )
        )
    )
    assert spaces.distributions == {
        "model.activation": CategoricalDistribution(["relu", "tanh"]),
        "model.width": CategoricalDistribution(["[8,4]", "[16,8]"]),
        "training.learning_rate": FloatDistribution(0.001, 1.0, log=True),
    }
    assert spaces.assignment(
        {"model.activation": "tanh", "model.width": "[16,8]", "training.learning_rate": 0.5}
    ) == {
        ("model", "activation"): "tanh",
        ("model", "width"): [16, 8],
        ("training", "learning_rate"): 0.5,
    }
    assert SpaceMap(spec_spaces(parse_spec(RAW))).distributions[
        "model.hidden_layers"
    ] == IntDistribution(1, 3, step=1)


def test_tpe_runs_num_samples_trials_and_is_reproducible(tmp_path):
    url_a, url_b = (f"sqlite:///{tmp_path / n}" for n in ("a.db", "b.db"))
    driver, result = _drive(url_a)
    assert result.finished and len(result.asked) == 12 and result.rebuilt == 0
    store = open_store(url_a)
    trials = store.list_trials(driver.experiment_id)
    assert len({t.id for t in trials}) == len(set(result.asked))
    assert {t.state for t in trials} == {TrialState.COMPLETE}
    assert [t.state for t in driver.study.trials] == [OptunaState.COMPLETE] * 12
    assert store.get_experiment(driver.experiment_id).n_trials == 12
    _, again = _drive(url_b)
    assert again.asked == result.asked


def test_a_restarted_driver_goes_on_from_the_stored_trials(tmp_path):
    url, fresh = f"sqlite:///{tmp_path / 'r.db'}", f"sqlite:///{tmp_path / 'f.db'}"
    _, first = _drive(url, limit=5)
    assert len(first.asked) == 5 and not first.finished
    driver, second = _drive(url)  # a new driver: a new in-memory study
    assert second.rebuilt == 5 and second.finished
    assert len(driver.study.trials) == 12
    _, uninterrupted = _drive(fresh)
    assert first.asked + second.asked == uninterrupted.asked


def test_a_successor_asks_on_past_what_a_killed_driver_left_in_flight(tmp_path):
    """A driver killed with trials stored but not ended: its successor numbers its asks
    after them (as one uninterrupted driver would), so it asks none of their configurations
    again, trains them, and fills the sample budget."""
    url, fresh = f"sqlite:///{tmp_path / 'k.db'}", f"sqlite:///{tmp_path / 'f.db'}"
    spec, store = parse_spec(RAW), open_store(url)
    killed = SearchDriver(spec, store, None)  # asks and stores, then dies before training
    store.create_experiment(killed.experiment_id, spec.name, spec.to_dict(), count_trials(spec))
    left = killed._ask(1, DriverResult(killed.experiment_id))
    assert len(left) == 1
    # two workers, one trial in flight: the successor asks for the free one at once
    driver, second = _drive(url, workers=2)
    assert second.rebuilt == 0 and second.finished
    assert set(second.asked).isdisjoint(left), (left, second.asked)
    _, uninterrupted = _drive(fresh)
    assert second.asked[0] == uninterrupted.asked[1]  # the random start: seeded by number
    trials = store.list_trials(driver.experiment_id)
    assert len(trials) == 12 and {t.state for t in trials} == {TrialState.COMPLETE}


def test_tpe_with_asha_pruning_tells_optuna_pruned(tmp_path):
    raw = {**RAW, "search": {**RAW["search"], "pruner": "asha", "eta": 2, "min_epochs": 1}}
    url = f"sqlite:///{tmp_path / 'p.db'}"
    driver, result = _drive(url, raw)
    assert result.finished
    store = open_store(url)
    pruned = store.counts_by_state(driver.experiment_id)["PRUNED"]
    assert pruned > 0
    told = [t for t in driver.study.trials if t.state is OptunaState.PRUNED]
    assert len(told) == pruned and all(t.intermediate_values for t in told)


def test_method_must_be_model_based(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(ValueError, match="tpe or cmaes"):
        SearchDriver(parse_spec({**RAW, "search": {"method": "random"}}), store, None)


def test_cmaes_runs_num_samples_trials(tmp_path):
    raw = {
        **RAW,
        "model": {"width": 8},
        "search": {**RAW["search"], "method": "cmaes", "num_samples": 4},
    }
    driver, result = _drive(f"sqlite:///{tmp_path / 'c.db'}", raw)
    assert result.finished and len(set(result.asked)) == 4
    assert [t.state for t in driver.study.trials] == [OptunaState.COMPLETE] * 4


def test_tpe_with_asha_makes_the_same_decisions_twice_with_one_worker(tmp_path):
    raw = {**RAW, "search": {**RAW["search"], "pruner": "asha", "eta": 2, "min_epochs": 1}}
    runs = []
    for name in ("a.db", "b.db"):
        url = f"sqlite:///{tmp_path / name}"
        driver, result = _drive(url, raw)
        store = open_store(url)
        ends = {t.id: (t.state, len(t.metrics)) for t in store.list_trials(driver.experiment_id)}
        store.close()
        runs.append((result.asked, ends))
    (asked_a, ends_a), (asked_b, ends_b) = runs
    assert asked_a == asked_b and ends_a == ends_b
    assert TrialState.PRUNED in {state for state, _ in ends_a.values()}


def test_a_freed_worker_gets_the_next_trial_while_another_still_trains(tmp_path, monkeypatch):
    # The first trial ends only once the third has started: the driver must hand the
    # worker freed by the second its next trial without waiting for the first (nor for a
    # poll: an hour here).
    gate = tmp_path / "gate"
    gate.mkdir()
    monkeypatch.setenv("GATE_DIR", str(gate))
    url = f"sqlite:///{tmp_path / 'g.db'}"
    store = open_store(url)
    raw = {**RAW, "search": {**RAW["search"], "num_samples": 4}}
    with LocalExecutor(url, workers=2, train_fn=one_by_one(first_waits_for_two_more)) as ex:
        driver = SearchDriver(parse_spec(raw), store, ex, poll_s=3600)
        result = driver.run()
    assert result.finished and len(result.asked) == 4
    assert {t.state for t in store.list_trials(driver.experiment_id)} == {TrialState.COMPLETE}
