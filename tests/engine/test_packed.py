"""A trial trained in a pack gives the result it gets when trained alone.

Every pack here mixes members that differ in run-time values (seed, learning rate and its
schedule, momentum, L2, dropout rate, clipping threshold, init, epochs, early stopping) and
compares each member with ``train`` of the same config (a pack of one, which may compile
another graph: one seed shares its minibatches): same status, epochs, best epoch and
accuracies, and losses within 1e-9 relative (float64; batched products may round
differently in the last bit). Every layer design and optimiser is covered, at depths that
unroll and that scan.
"""

from __future__ import annotations

import pytest
from engine_support import assert_same

from dnnframe.engine import pack_key, train, train_pack

pytestmark = pytest.mark.timeout(900)


def config(
    seed=0,
    lr=0.1,
    optimizer="sgd",
    layers=2,
    width=8,
    activation="tanh",
    epochs=4,
    model=None,
    training=None,
    dataset="iris",
) -> dict:
    return {
        "dataset": {"name": dataset},
        "seed": seed,
        "model": {
            "hidden_layers": layers,
            "width": width,
            "activation": activation,
            **(model or {}),
        },
        "training": {
            "optimizer": optimizer,
            "learning_rate": lr,
            "batch_size": 32,
            "max_epochs": epochs,
            **(training or {}),
        },
    }


def check_pack(configs, on_epoch=None) -> list:
    results = train_pack(configs, on_epoch=on_epoch)
    assert len(results) == len(configs)
    for k, (c, r) in enumerate(zip(configs, results)):
        assert r.pack["size"] == len(configs) and r.pack["index"] == k
        assert_same(r, train(c))
    return results


def test_seeds_and_learning_rates_in_one_pack():
    """Different seeds: every member has its own init and minibatch order."""
    configs = [
        config(seed=s, lr=lr, model={"init": init})
        for s in (0, 3)
        for lr, init in ((0.01, "glorot"), (0.3, "he"), (1.0, "orthogonal"))
    ]
    check_pack(configs)


def test_shared_minibatch_order_and_l2():
    configs = [
        config(lr=lr, training={"l2": l2}, epochs=3 + i)
        for i, (lr, l2) in enumerate(((0.05, 0.0), (0.2, 1e-3), (0.5, 1e-2)))
    ]
    results = check_pack(configs)
    assert [r.epochs_run for r in results] == [3, 4, 5]  # each member runs its own max_epochs


@pytest.mark.parametrize("optimizer", ["momentum", "nesterov", "adam", "rmsprop"])
def test_optimisers(optimizer):
    configs = [
        config(
            seed=s,
            lr=lr,
            optimizer=optimizer,
            activation="relu",
            training={"momentum": m},
            layers=1,
        )
        for s, lr, m in ((0, 0.01, 0.9), (1, 0.003, 0.5), (0, 0.03, 0.0))
    ]
    check_pack(configs)


def test_dropout_masks_match(monkeypatch):
    from dnnframe.engine import packstate

    monkeypatch.setattr(packstate, "CHUNK_ELEMENTS", 1)  # the pack runs one member at a time
    configs = [
        config(seed=s, model={"dropout": p, "residual": True}, activation="relu", layers=3)
        for s, p in ((0, 0.1), (5, 0.5), (0, 0.3))
    ]
    check_pack(configs)


@pytest.mark.parametrize("chunk", [None, 2 * 32 * 8])
def test_early_stopping_divergence_and_cancellation_per_member(chunk, monkeypatch):
    """One member stops early, one diverges, one is cancelled, one runs to the end; the
    others are unaffected by the frozen ones (in one chunk, and in chunks of two)."""
    from dnnframe.engine import packstate

    if chunk:
        monkeypatch.setattr(packstate, "CHUNK_ELEMENTS", chunk)
    es = {"patience": 1, "metric": "val_accuracy"}
    relu = {"activation": "relu", "epochs": 12}
    configs = [
        config(lr=0.5, training={"early_stopping": es}, **relu),
        config(lr=1e200, **relu),
        config(lr=0.05, **relu),
        config(lr=0.1, training={"early_stopping": {"patience": 3}}, **relu),
    ]
    cancel_at = 4
    seen = []

    def on_epoch(epoch, metrics):
        seen.append([m is not None for m in metrics])
        return [k == 2 and epoch == cancel_at for k in range(len(metrics))]

    results = train_pack(configs, on_epoch=on_epoch)
    statuses = [r.status for r in results]
    assert statuses[1] == "DIVERGED" and statuses[2] == "CANCELLED"
    assert results[2].epochs_run == cancel_at and results[0].stopped_early
    assert seen[0] == [True, False, True, True]  # the diverged member is not reported
    for c, r in zip(configs, results):
        alone = train(c, on_epoch=(lambda e, m: e == cancel_at) if c is configs[2] else None)
        assert_same(r, alone)


def test_squared_error_and_no_hidden_layers():
    configs = [config(seed=s, lr=0.05, layers=0, model={"loss": "squared_error"}) for s in (0, 1)]
    check_pack(configs)


def test_mixed_pack_keys_are_refused():
    configs = [config(), config(layers=3)]
    assert pack_key(configs[0]) != pack_key(configs[1])
    with pytest.raises(ValueError, match=r"configs\[1\] has pack key"):
        train_pack(configs)
    assert train_pack([]) == []


def test_shared_order_paths_dropout_residual_and_no_hidden_layers():
    """One seed for all members: the first layer is one wide product (with dropout and a
    residual first layer), and a net without hidden layers goes straight to the output."""
    check_pack(
        [
            config(
                lr=lr, width=4, layers=2, activation="relu", model={"dropout": p, "residual": True}
            )
            for lr, p in ((0.05, 0.2), (0.2, 0.5))
        ]
    )
    check_pack([config(lr=lr, layers=0) for lr in (0.05, 0.5)])


# every layer design, with per-member clipping thresholds, schedules and dropout rates; depth 5
# is an unrolled first layer and a scanned stack of 4 (shallower runs are unrolled whole)
DESIGNS = {
    "batch-post-clip-cosine": (
        {"normalization": "batch"},
        {"grad_clip": 0.5, "lr_schedule": {"kind": "cosine", "warmup_epochs": 1}},
    ),
    "rezero-layer-pre-dropout": (
        {"residual": "rezero", "normalization": "layer", "norm_position": "pre", "dropout": 0.2},
        {"lr_schedule": "step"},
    ),
    "skipinit-layer-post": (
        {"residual": "scaled", "residual_learnable": True, "normalization": "layer"},
        {"grad_clip": 2.0},
    ),
    "scaled-batch-pre": (
        {"residual": "scaled", "normalization": "batch", "norm_position": "pre"},
        {},
    ),
}


@pytest.mark.parametrize("name", list(DESIGNS))
def test_layer_designs(name):
    model, training = DESIGNS[name]
    clip = {"grad_clip": 0.1} if "grad_clip" in training else {}
    variants = [
        (0, 0.01, {}),
        (1, 0.05, clip),
        (0, 0.003, {"lr_schedule": "none"}),
        (2, 0.02, {"l2": 1e-3}),
    ]
    configs = [
        config(
            seed=s,
            lr=lr,
            optimizer="adam",
            activation="relu",
            layers=5,
            epochs=5,
            model={**model, **({"dropout": 0.4} if s == 2 and model.get("dropout") else {})},
            training={**training, **extra},
        )
        for s, lr, extra in variants
    ]
    check_pack(configs)


def test_a_deep_scanned_stack_with_early_stopping_and_divergence():
    es = {"patience": 1, "metric": "val_loss"}
    configs = [
        config(
            seed=s,
            lr=lr,
            layers=60,
            width=6,
            epochs=6,
            model={"init": "orthogonal"},
            training={"early_stopping": es} if s else {},
        )
        for s, lr in ((0, 0.05), (1, 0.02), (0, 1e200))
    ]
    results = check_pack(configs)
    assert results[2].status == "DIVERGED"


def test_member_times_are_shares_that_add_up_to_the_pack():
    """Members that ran different numbers of epochs record different times; each epoch's
    time is split among the members that trained in it, so the times add up to the pack's."""
    configs = [config(lr=0.05, epochs=e) for e in (2, 6, 6)]
    results = train_pack(configs)
    assert [r.epochs_run for r in results] == [2, 6, 6]
    wall = results[0].pack["wall_seconds"]
    assert all(r.pack["wall_seconds"] == wall and r.pack["size"] == 3 for r in results)
    assert results[0].timings["train"] < results[1].timings["train"]
    assert results[1].timings["train"] == pytest.approx(results[2].timings["train"], rel=1e-12)
    assert sum(r.timings["total"] for r in results) == pytest.approx(wall, rel=1e-9)
    for r in results:
        assert sum(h["seconds"] for h in r.history) == pytest.approx(r.timings["train"], rel=1e-9)
        assert r.timings["total"] == pytest.approx(
            sum(r.timings[k] for k in ("data", "compile", "train", "evaluate")), rel=1e-12
        )
