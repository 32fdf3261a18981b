"""Under the C backend a hidden width is a run-time shape: one compiled function trains every
width of a structure, and gives what a graph built for that width alone gives.

Each case trains a sequence of widths in one process, so every width after the first runs
in the graph the first one built, and compares each result with the result of a graph with
that width written into it (what the engine built before widths left the graph's shape):
same status, epochs and accuracies, losses within 1e-9 relative (float64).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest
from engine_support import assert_same

from dnnframe.engine import compile_key, epochloop, packed, train_pack

pytestmark = pytest.mark.timeout(900)


def config(width, layers=3, seed=0, lr=0.05, model=None, optimizer="adam") -> dict:
    return {
        "dataset": {"name": "iris"},
        "seed": seed,
        "model": {"hidden_layers": layers, "width": width, "activation": "tanh", **(model or {})},
        "training": {
            "optimizer": optimizer,
            "learning_rate": lr,
            "batch_size": 16,
            "max_epochs": 3,
        },
    }


def width_baked(monkeypatch, packs: list[list[dict]]) -> list:
    """Each pack trained in a graph with its widths written in (a fresh one per pack)."""
    with monkeypatch.context() as m:
        m.setattr(epochloop, "graph_segments", lambda segments, design, mode: segments)
        out = []
        for pack in packs:
            packed.clear_cache()
            out.append(train_pack(pack))
    packed.clear_cache()
    return out


CASES = {
    # two seeds: members read their own minibatches; one seed: the wide shared-input product
    "plain": ([[config(w, seed=s) for s in (0, 1)] for w in (16, 4, 9)]),
    "shared-input": ([[config(w, lr=lr) for lr in (0.01, 0.1)] for w in (8, 3)]),
    "two-runs": ([[config([a, b, b], model=None)] for a, b in ((8, 3), (2, 12), (5, 6))]),
    # a layer and a scanned stack: an unrolled pre-norm layer keeps its widths (its design
    # needs them equal), a stack does not
    "rezero-pre-layer-norm-dropout": (
        [
            [
                config(
                    w,
                    layers=5,
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
            for w in (8, 16, 5)
        ]
    ),
    "batch-norm-sgd": (
        [[config(w, model={"normalization": "batch"}, optimizer="momentum")] for w in (6, 10)]
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_widths_share_a_compiled_function_and_train_as_in_their_own(name, fresh, monkeypatch):
    packs = CASES[name]
    # with a shortcut or pre-norm the key keeps the first width (it cannot see the input's)
    assert len({compile_key(p[0]) for p in packs}) == (len(packs) if "pre" in name else 1)
    shared = [train_pack(p) for p in packs]
    hits = [r.environment["compile_cache_hit"] for rs in shared for r in rs[:1]]
    assert hits == [False] + [True] * (len(packs) - 1)
    for rs, alone in zip(shared, width_baked(monkeypatch, packs)):
        for r, a in zip(rs, alone):
            assert r.status == "COMPLETE"
            assert_same(r, a)


def test_a_width_of_one_trains_in_a_shared_graph(fresh):
    """A width of 1 is a dimension of length 1 in every value: nothing may treat it as
    broadcastable. It shares the graph of wider stacks and gets what a graph first built
    for it gets."""
    wide = train_pack([config(16, seed=s) for s in (0, 1)])
    one = train_pack([config(1, seed=s) for s in (0, 1)])
    assert one[0].environment["compile_cache_hit"]
    assert one[0].environment["compile_key"] == wide[0].environment["compile_key"]
    packed.clear_cache()
    first = train_pack([config(1, seed=s) for s in (0, 1)])
    assert not first[0].environment["compile_cache_hit"]
    for r, a in zip(one, first):
        assert r.status == "COMPLETE" and math.isfinite(r.metrics["test_loss"])
        assert_same(r, a)


CHILD = textwrap.dedent("""
    import json, sys, warnings
    warnings.simplefilter("ignore")
    from dnnframe.engine import train_pack
    cfg = {"dataset": {"name": "iris"},
           "model": {"hidden_layers": int(sys.argv[2]), "width": int(sys.argv[1]), "activation": "relu"},
           "training": {"optimizer": "momentum", "max_epochs": 2, "learning_rate": 0.05}}
    [r] = train_pack([cfg])
    print(json.dumps({"disk": r.environment["disk_cache_hit"], "status": r.status}))
""")


@pytest.mark.slow
def test_the_disk_cache_serves_every_width_and_stack_depth_of_a_known_structure(tmp_path):
    """Depths past the four that are unrolled are a layer and a scanned stack whose length
    is a run-time shape: one graph on disk serves them all, at every width."""
    env = dict(os.environ, DNNFRAME_CACHE_DIR=str(tmp_path))

    def child(width: int, depth: int) -> dict:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(width), str(depth)],
            env=env,
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    assert child(6, 5) == {"disk": False, "status": "COMPLETE"}
    assert child(23, 7) == {"disk": True, "status": "COMPLETE"}
    assert child(1, 30) == {"disk": True, "status": "COMPLETE"}
    assert len(list(tmp_path.glob("packed-*.pkl"))) == 1
