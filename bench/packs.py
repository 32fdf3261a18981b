"""Packed-engine benchmark: trials per second of ``train_pack`` on one core, no store.

    .venv/bin/python bench/packs.py [--sizes 1,10,100,1000] [--dtypes float64,float32]

The paper workload: iris, 1-4 hidden layers of 16, tanh and relu, five SGD learning rates,
20 epochs, batch 32, one seed. That is 8 pack keys (depth x activation); a pack of size K
holds K trials of one key (learning rates cycling), and each K row trains one pack per key
(8 K trials, at least 40). Each dtype runs in a fresh subprocess with one BLAS/OpenMP
thread (floatX is fixed when PyTensor is imported); compiles happen before the clock.

Printed side by side, per dtype: the unpacked ``train`` rate, the packed rate per K, and
the FLOP limit: the workload's FLOPs per trial divided by this core's 64x128x128
matrix-product rate measured in the same process.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LEARNING_RATES = (0.001, 0.003, 0.01, 0.03, 0.1)
DEPTHS = (1, 2, 3, 4)
ACTIVATIONS = ("tanh", "relu")
WIDTH, BATCH, EPOCHS = 16, 32, 20


def config(depth: int, activation: str, lr: float) -> dict:
    return {
        "dataset": {"name": "iris"},
        "seed": 0,
        "model": {"hidden_layers": depth, "width": WIDTH, "activation": activation},
        "training": {
            "optimizer": "sgd",
            "learning_rate": lr,
            "batch_size": BATCH,
            "max_epochs": EPOCHS,
        },
    }


def matmul_rate(dtype: str) -> float:
    """FLOP/s of a 64x128x128 matrix product on this core."""
    import numpy as np

    a = np.random.default_rng(0).normal(size=(64, 128)).astype(dtype)
    b = np.random.default_rng(1).normal(size=(128, 128)).astype(dtype)
    reps, best = 2000, math.inf
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * 64 * 128 * 128 * reps / best


def workload_flops() -> float:
    """Mean FLOPs of one paper-workload trial: 3x the forward products per training row
    (forward, weight gradient, input gradient), plus the per-epoch validation and final
    evaluation forward passes."""
    from dnnframe.datasets import load_dataset
    from dnnframe.spec import DatasetConfig

    data = load_dataset(DatasetConfig(name="iris"))
    n_train, n_val = len(data.X_train), len(data.X_val)
    n_all = n_train + n_val + len(data.X_test)
    total = 0.0
    for depth in DEPTHS:
        dims = [data.n_features] + [WIDTH] * depth + [data.n_outputs]
        macs = sum(a * b for a, b in zip(dims[:-1], dims[1:]))
        total += 2 * macs * (3 * n_train * EPOCHS + n_val * EPOCHS + n_all)
    return total / len(DEPTHS)


def child(sizes: list[int]) -> dict:
    """Run in the subprocess: measure and return one dtype's numbers."""
    from dnnframe.engine import heap, train, train_pack

    heap.enable()  # as a worker process runs (collector and allocator settings)

    keys = [(d, a) for d in DEPTHS for a in ACTIVATIONS]
    for d, a in keys:  # compile every graph (packed and per-trial) before timing
        train_pack([config(d, a, lr) for lr in LEARNING_RATES[:2]])
        train(config(d, a, 0.01))
    import pytensor

    out = {
        "dtype": str(pytensor.config.floatX),
        "matmul_flops": matmul_rate(str(pytensor.config.floatX)),
        "trial_flops": workload_flops(),
        "packed": {},
    }
    n = 0
    t = time.perf_counter()
    for d, a in keys:
        for lr in LEARNING_RATES:
            train(config(d, a, lr))
            n += 1
    out["unpacked"] = n / (time.perf_counter() - t)
    for K in sizes:
        rounds = max(1, math.ceil(40 / (K * len(keys))))
        n = 0
        t = time.perf_counter()
        for _ in range(rounds):
            for d, a in keys:
                results = train_pack([config(d, a, LEARNING_RATES[i % 5]) for i in range(K)])
                n += len(results)
        out["packed"][str(K)] = n / (time.perf_counter() - t)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100,1000")
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.child:
        print(json.dumps(child(sizes)))
        return
    for dtype in args.dtypes.split(","):
        env = dict(
            os.environ,
            OPENBLAS_NUM_THREADS="1",
            OMP_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
            THEANO_FLAGS=f"floatX={dtype}",
            PYTHONWARNINGS="ignore",
        )
        proc = subprocess.run(
            [sys.executable, __file__, "--child", "--sizes", args.sizes],
            env=env,
            capture_output=True,
            text=True,
        )
        if proc.returncode:
            sys.exit(f"{dtype} run failed:\n{proc.stderr[-4000:]}")
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        limit = r["matmul_flops"] / r["trial_flops"]
        print(f"\n{dtype}: one core, paper workload ({r['trial_flops'] / 1e6:.2f} MFLOP per trial)")
        print(f"  64x128x128 matmul          {r['matmul_flops'] / 1e9:8.1f} GFLOP/s")
        print(f"  FLOP limit                 {limit:8.0f} trials/s")
        print(f"  unpacked train()           {r['unpacked']:8.0f} trials/s")
        for K, rate in r["packed"].items():
            print(
                f"  train_pack K={K:<5}         {rate:8.0f} trials/s   "
                f"{rate / r['unpacked']:6.1f}x unpacked   {rate / limit:6.1%} of the FLOP limit"
            )


if __name__ == "__main__":
    main()
