"""Under the C backend a pack of at least UNROLL_MIN_PACK trials unrolls each run of up to
four equal widths (dense layers only): a big shallow pack trains faster than through a
scan. Here small packs unroll too (the ``unrolling`` fixture lowers the threshold). A trial
trained unrolled gives what the same trial gets trained another way:

* through a scan (the run split as a first layer and a scanned stack of the rest, as a
  longer run is): the same values, bit for bit for plain layers; with normalisation,
  shortcuts and dropout the scan's fused loops may round differently in the last bit, so
  there within 1e-9 relative (float64);
* alone rather than in its pack: within 1e-9 relative (see ``engine_support``).
"""

from __future__ import annotations

import math

import pytest
from engine_support import assert_same

from dnnframe.engine import compile_key, graphkey, pack_key, packed, train, train_pack
from dnnframe.engine.packgraph import segments_for

pytestmark = pytest.mark.timeout(900)


def config(layers=3, width=8, seed=0, lr=0.05, model=None, optimizer="adam") -> dict:
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


@pytest.fixture
def unrolling(monkeypatch):
    """Packs of any size unroll short runs."""
    monkeypatch.setattr(graphkey, "UNROLL_MIN_PACK", 1)
    packed.clear_cache()
    yield
    packed.clear_cache()


def scanned(monkeypatch, pack: list[dict]) -> list:
    """``pack`` trained in a graph of its own where every run is a layer and a scanned
    stack (what a small pack gets)."""
    with monkeypatch.context() as m:
        m.setattr(graphkey, "UNROLL_MIN_PACK", 10**9)
        packed.clear_cache()
        out = train_pack(pack)
    packed.clear_cache()
    return out


CASES = {
    # two seeds: members read their own minibatches; one seed: the wide shared-input product
    "plain-sgd": [
        config(width=16, seed=s, lr=lr, optimizer="sgd") for s, lr in ((0, 0.1), (1, 0.02))
    ],
    "plain-shared-input-rmsprop": [
        config(width=16, lr=lr, optimizer="rmsprop") for lr in (0.01, 0.002)
    ],
    "rezero-pre-layer-norm-dropout-adam": [
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
    ],
    "batch-norm-momentum": [
        config(width=8, seed=s, optimizer="momentum", model={"normalization": "batch"})
        for s in (0, 1)
    ],
    "identity-nesterov-dropout-two-runs": [
        config(
            layers=4,
            width=[4, 8, 8, 8],
            seed=s,
            optimizer="nesterov",
            model={"residual": "identity", "dropout": 0.1},
        )
        for s in (0, 1)
    ],
}


def _values(result) -> tuple:
    return (
        result.status,
        result.n_params,
        result.epochs_run,
        result.best_epoch,
        result.metrics,
        [{k: v for k, v in h.items() if k != "seconds"} for h in result.history],
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_an_unrolled_run_trains_as_through_a_scan(name, fresh, unrolling, monkeypatch):
    pack = CASES[name]
    assert segments_for(4, graphkey.as_config(pack[0]).model.widths, pack_size=2)[1] == ()
    unrolled = train_pack(pack)
    for r, s in zip(unrolled, scanned(monkeypatch, pack)):
        assert r.status == "COMPLETE" and math.isfinite(r.metrics["test_loss"])
        if name.startswith("plain"):
            assert _values(r) == _values(s)
        else:
            assert_same(r, s)


@pytest.mark.slow
def test_depth_three_in_a_pack_trains_as_alone(fresh, unrolling):
    """Members that differ in seed, learning rate, init and L2, with dropout and batch
    norm, each against the same config trained alone (a pack of one)."""
    pack = [
        config(seed=s, lr=lr, model={"init": init, "dropout": 0.2, "normalization": "batch"})
        for s, lr, init in ((0, 0.05, "he"), (1, 0.01, "glorot"), (0, 0.2, "orthogonal"))
    ]
    pack[1]["training"]["l2"] = 1e-2
    for r, c in zip(train_pack(pack), pack):
        assert_same(r, train(c))


@pytest.mark.slow
def test_each_unrolled_depth_builds_its_graph_and_longer_runs_share_one(fresh, unrolling):
    """Depths 1 to 4 of one structure are four graphs; depths 5, 7 and 20 are one more (a
    layer and a scanned stack whose length is a run-time shape)."""
    results = [
        train_pack([config(width=8, layers=d, model={"normalization": "batch"})])[0]
        for d in (1, 2, 3, 4, 5, 7, 20)
    ]
    assert [r.environment["compile_cache_hit"] for r in results] == [False] * 5 + [True] * 2
    assert len(packed._CACHE) == 5
    assert len({compile_key(config(layers=d)) for d in (1, 2, 3, 4, 5, 7, 20)}) == 5
    assert len({pack_key(config(layers=d)) for d in (1, 2, 3, 4, 5, 7, 20)}) == 7
    per_layer = 8 * 8 + 8 + 2 * 8  # W, b, gain and shift
    assert [r.n_params for r in results] == [
        4 * 8 + 8 + 2 * 8 + 8 * 3 + 3 + k * per_layer for k in (0, 1, 2, 3, 4, 6, 19)
    ]


def test_only_a_big_pack_unrolls_and_its_stacks_are_never_empty():
    """A pack of UNROLL_MIN_PACK trials or more unrolls runs of up to UNROLLED_RUN layers
    (a longer run keeps a stack of at least UNROLLED_RUN real layers); a smaller pack scans
    every run, a run of one as a layer and a stack of 0 real layers (its placeholder step);
    JAX's static depths unroll runs of one whatever the pack."""
    big = graphkey.UNROLL_MIN_PACK
    for depth in range(1, 12):
        for widths in ([8] * depth, [4] + [8] * depth, [8] * depth + [4]):
            _, counts = segments_for(4, widths, pack_size=big)
            assert all(n >= graphkey.UNROLLED_RUN for n in counts), widths
            small, counts = segments_for(4, widths, pack_size=big - 1)
            assert [s.is_stack for s in small].count(True) == len(counts) >= 1, widths
            _, counts = segments_for(4, widths, static=True, pack_size=1)
            assert all(n >= 1 for n in counts), widths
    assert segments_for(4, [8] * 3, pack_size=big)[1] == ()
    assert segments_for(4, [8] * 5, pack_size=big)[1] == (graphkey.UNROLLED_RUN,)
    assert segments_for(4, [8], pack_size=1)[1] == (0,)
    assert compile_key(config(layers=3), big) != compile_key(config(layers=3), big - 1)
