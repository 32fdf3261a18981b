"""Under the C backend a run of one hidden layer is a dense layer plus a stack of 0 real
layers (one placeholder step whose output is switched off), so every depth of a structure
shares one compiled graph. A depth-1 trial trained there gives what a graph of its own (the
layer unrolled, no stack) gives: same status, epochs, parameter count and accuracies,
losses within 1e-9 relative (float64).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from engine_support import assert_same

from dnnframe.engine import compile_key, epochloop, pack_key, packed, train_pack

pytestmark = pytest.mark.timeout(900)


def config(layers=1, width=4, seed=0, lr=0.05, model=None, optimizer="adam") -> dict:
    return {
        "dataset": {"name": "iris"},
        "seed": seed,
        "model": {"hidden_layers": layers, "width": width, "activation": "tanh", **(model or {})},
        "training": {
            "optimizer": optimizer,
            "learning_rate": lr,
            "batch_size": 16,
            "max_epochs": 3,
            "l2": 1e-4,
            "momentum": 0.9,
        },
    }


def unrolled(monkeypatch, pack: list[dict]) -> list:
    """``pack`` trained in a graph of its own where a run of one layer is that layer alone
    (as JAX's static depths split it), with no stack."""
    original = epochloop.segments_for
    with monkeypatch.context() as m:
        m.setattr(
            epochloop,
            "segments_for",
            lambda n, widths, static=False, pack_size=1: original(n, widths, True),
        )
        packed.clear_cache()
        out = train_pack(pack)
    packed.clear_cache()
    return out


CASES = {
    # two seeds: members read their own minibatches; one seed: the wide shared-input product
    "plain-sgd": (
        [config(width=16, seed=s, lr=lr, optimizer="sgd") for s, lr in ((0, 0.1), (1, 0.02))]
    ),
    "plain-shared-input-rmsprop": (
        [config(width=16, lr=lr, optimizer="rmsprop") for lr in (0.01, 0.002)]
    ),
    "rezero-pre-layer-norm-dropout-adam": (
        [
            config(
                width=4,
                seed=s,
                model={
                    "residual": "rezero",
                    "normalization": "layer",
                    "norm_position": "pre",
                    "dropout": 0.2,
                },
            )
            for s in (0, 1)
        ]
    ),
    "batch-norm-momentum": (
        [
            config(width=8, seed=s, optimizer="momentum", model={"normalization": "batch"})
            for s in (0, 1)
        ]
    ),
    "identity-nesterov-clipped": (
        [
            config(
                width=4,
                seed=s,
                optimizer="nesterov",
                model={"residual": "identity", "dropout": 0.1},
            )
            for s in (0, 1)
        ]
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_depth_one_trains_in_the_stack_graph_as_in_its_own(name, fresh, monkeypatch):
    pack = CASES[name]
    deeper = [{**c, "model": {**c["model"], "hidden_layers": 3}} for c in pack]
    assert compile_key(pack[0]) == compile_key(deeper[0])
    assert pack_key(pack[0]) != pack_key(deeper[0])
    train_pack(deeper)
    shared = train_pack(pack)
    assert shared[0].environment["compile_cache_hit"]
    for r, a in zip(shared, unrolled(monkeypatch, pack)):
        assert r.status == "COMPLETE" and math.isfinite(r.metrics["test_loss"])
        assert_same(r, a)


def test_a_depth_sweep_builds_one_graph(fresh):
    """Depths 1, 2 and 4 of one structure: one compiled model in the process."""
    results = [
        train_pack([config(width=8, layers=d, model={"normalization": "batch"})])[0]
        for d in (1, 2, 4)
    ]
    assert [r.environment["compile_cache_hit"] for r in results] == [False, True, True]
    assert len(packed._CACHE) == 1
    assert [r.n_params for r in results] == [
        4 * 8 + 8 + 2 * 8 + 8 * 3 + 3 + k * (8 * 8 + 8 + 2 * 8) for k in (0, 1, 3)
    ]


@pytest.mark.slow
def test_the_placeholder_layer_stays_finite_and_untouched():
    """The placeholder step's gradient is zero (the switch) and finite (zero weights keep
    its values finite in every design), so its values never change and no NaN reaches the
    members' real parameters or optimiser state."""
    from dnnframe.engine.blocks import LayerDesign
    from dnnframe.engine.layers import StackLayer
    from dnnframe.engine.packgraph import PackedModel, PackShape, graph_segments, segments_for
    from dnnframe.engine.pytensor_wall import configure
    from dnnframe.engine.segments import Segment

    segments, counts = segments_for(4, [5])
    assert segments == (Segment.dense(4, 5), Segment.stack(5)) and counts == (0,)
    design = LayerDesign(
        residual="rezero", learnable_scale=True, normalization="batch", norm_position="pre"
    )
    mode = configure().mode
    shape = PackShape(
        n_features=4,
        n_outputs=3,
        segments=graph_segments(segments, design, mode),
        activation="elu",
        design=design,
        dropout=True,
        grad_clip=True,
        loss="softmax_crossentropy",
        classification=True,
        optimizer="adam",
        dtype="float64",
        mode=mode,
        shared_input=False,
    )
    model = PackedModel(shape)
    rng = np.random.default_rng(0)
    values = model.initial_network(rng, "he", 0.0, counts, segments)
    assert model.n_params(values, counts) == 4 * 5 + 5 + 5 * 3 + 3
    # the placeholder draws nothing: the next draw is the one a plain depth-1 net makes next
    alone, _ = segments_for(4, [5], static=True)
    assert rng.integers(2**31) == _next_draw(alone)
    model.load(
        [np.stack([v, v]) for v in values],
        {
            "learning_rate": [0.1, 0.01],
            "momentum": [0, 0],
            "l2": [0.1, 0.1],
            "grad_clip": [1, 1],
            "dropout_scale": [1.25, 1.25],
        },
    )
    stack = model.hidden[1]
    assert isinstance(stack, StackLayer)
    before = {k: v.get_value().copy() for k, v in stack.shared.items()}
    X = rng.normal(size=(2, 6, 4))
    y = rng.integers(0, 3, size=(2, 6))
    keep = [
        np.ones((2, 5, 6), dtype=bool),
        np.zeros((1, 2, 5, 6), dtype=bool),
    ]  # a stack's: layer-major
    for _ in range(3):
        loss, _ = model.train_fn(X, y, *keep)
        assert np.isfinite(loss).all()
    for value in model.export_state():
        assert np.isfinite(value).all()
    for key in ("W", "b", "scale", "gain", "shift", "live"):
        assert np.array_equal(stack.shared[key].get_value(), before[key]), key


def _next_draw(segments) -> int:
    from dnnframe.engine.layers import init_weights

    rng = np.random.default_rng(0)
    for seg in segments:
        init_weights(rng, "he", seg.n_in, seg.n_out)
    init_weights(rng, "glorot", segments[-1].n_out, 3)
    return int(rng.integers(2**31))
