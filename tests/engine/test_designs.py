"""Layer designs end to end: one compiled graph for every depth of a scanned stack, clipping,
schedules, and packs of every design through the runner."""

from __future__ import annotations

import pytest

from dnnframe.engine import train
from dnnframe.executors.packing import make_packs
from dnnframe.runner import run_pack
from dnnframe.spec import expand_with_ids, parse_spec
from dnnframe.store import TrialState, open_store

pytensor = pytest.importorskip("pytensor")

# every graph-changing option on at once
ALL_ON = {
    "dataset": {"name": "iris"},
    "model": {
        "hidden_layers": 10,
        "width": 8,
        "activation": "relu",
        "init": "he",
        "residual": "rezero",
        "normalization": "batch",
        "norm_position": "pre",
        "dropout": 0.1,
    },
    "training": {
        "optimizer": "adam",
        "learning_rate": 0.01,
        "max_epochs": 2,
        "grad_clip": 1.0,
        "lr_schedule": {"kind": "cosine", "warmup_epochs": 1},
    },
}


def test_depth_10_and_1000_share_one_compiled_graph_with_every_option_on():
    shallow = train(ALL_ON)
    deep = train({**ALL_ON, "model": {**ALL_ON["model"], "hidden_layers": 1000}})
    assert shallow.status == deep.status == "COMPLETE"
    assert deep.environment["compile_cache_hit"] is True
    assert deep.n_params > shallow.n_params


def test_a_step_schedule_changes_the_learning_rate_per_epoch():
    config = {
        "dataset": {"name": "iris"},
        "model": {"hidden_layers": 1, "width": 8},
        "training": {
            "optimizer": "sgd",
            "learning_rate": 0.1,
            "max_epochs": 4,
            "lr_schedule": {"kind": "step", "step_epochs": 1, "step_factor": 1e-12},
        },
    }
    curve = [h["val_loss"] for h in train(config).history]
    # epoch 1 learns at 0.1; from epoch 2 on the rate is 1e-12 or less: the weights stay put
    assert curve[0] == pytest.approx(curve[1], abs=1e-9) == pytest.approx(curve[3], abs=1e-9)
    constant = {**config, "training": {**config["training"], "lr_schedule": "none"}}
    control = [h["val_loss"] for h in train(constant).history]
    assert control[0] == curve[0]  # the same first epoch
    assert abs(control[3] - control[0]) > 1e-3


def test_a_clipped_network_trains_differently_from_an_unclipped_one():
    config = {
        "dataset": {"name": "iris"},
        "model": {"hidden_layers": 2, "width": 8},
        "training": {"optimizer": "sgd", "learning_rate": 0.5, "max_epochs": 1},
    }
    free = train(config)
    clipped = train({**config, "training": {**config["training"], "grad_clip": 1e-3}})
    # a norm of 1e-3 at lr 0.5 moves weights by at most 5e-4 a step: the loss barely moves
    assert clipped.history[0]["val_loss"] != free.history[0]["val_loss"]
    assert abs(clipped.metrics["val_loss"] - free.metrics["val_loss"]) > 1e-3


SPEC = {
    "name": "designs-pack",
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": 3, "width": 8, "residual": {"grid": ["identity", "rezero"]}},
    "training": {"max_epochs": 2, "batch_size": 32},
    "search": {"seeds": 2},
}


def test_packs_of_every_design_train_together_through_the_runner(tmp_path):
    spec = parse_spec(SPEC)
    pairs = [(tid, cfg.model_dump(mode="json")) for tid, cfg in expand_with_ids(spec)]
    configs = dict(pairs)
    packs = make_packs([t for t, _ in pairs], configs, pack_size=None, workers=1)
    assert sorted(len(p) for p in packs) == [2, 2]  # one pack per design, the seeds together
    store = open_store(f"sqlite:///{tmp_path / 'designs.db'}")
    try:
        store.create_experiment(spec.experiment_id, spec.name, spec.to_dict(), len(pairs))
        store.create_trials(spec.experiment_id, pairs)
        for p in packs:
            assert set(run_pack(p, store).values()) == {TrialState.COMPLETE}
        for tid, _ in pairs:
            pack = store.get_trial(tid).result["pack"]
            assert pack["size"] == 2 and pack["id"] and pack["wall_seconds"] > 0
    finally:
        store.close()


def test_pre_norm_leaves_the_entry_layer_plain_and_post_norm_does_not():
    # iris: 4 features -> 8 units -> 3 classes = 4*8 + 8 + 8*3 + 3 = 67 weights and biases
    base = {"dataset": {"name": "iris"}, "training": {"max_epochs": 1}}
    plain = train({**base, "model": {"hidden_layers": 1, "width": 8}})
    pre = train(
        {
            **base,
            "model": {
                "hidden_layers": 1,
                "width": 8,
                "normalization": "layer",
                "norm_position": "pre",
            },
        }
    )
    post = train({**base, "model": {"hidden_layers": 1, "width": 8, "normalization": "layer"}})
    assert plain.n_params == pre.n_params == 67
    assert post.n_params == 67 + 2 * 8  # a gain and a shift per unit
