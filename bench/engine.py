"""Engine benchmark: compile time, peak memory and epoch time against depth.

    .venv/bin/python bench/engine.py [--depths 1,10,100,500,1000] [--width 32] [--epochs 3]

Each depth runs in a fresh subprocess (so peak RSS is that depth's own, and nothing is
reused from the in-process compiled cache); the on-disk PyTensor compiledir is whatever
this machine has (after the first run of the test suite: warm). Prints, side by side:
compile seconds and peak RSS per depth, seconds per epoch per depth with the fitted
linear slope, and the per-epoch time of the same MLP in plain NumPy (and PyTorch CPU
when installed) as a ratio. Dataset: digits (1257 training rows), relu, Glorot, Adam,
batch 64.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BATCH = 64


def _config(depth: int, width: int, epochs: int):
    from dnnframe.spec import TrialConfig

    return TrialConfig.model_validate(
        {
            "dataset": {"name": "digits"},
            "model": {
                "hidden_layers": depth,
                "width": width,
                "activation": "relu",
                "init": "glorot",
            },
            "training": {
                "optimizer": "adam",
                "learning_rate": 1e-3,
                "batch_size": BATCH,
                "max_epochs": epochs,
            },
        }
    )


# --------------------------------------------------------------------------- references
def numpy_epoch_seconds(
    X: np.ndarray, y: np.ndarray, depth: int, width: int, n_classes: int, epochs: int
) -> float:
    """Median epoch time of a hand-written NumPy MLP (relu, softmax CE, Adam, batch 64)."""
    rng = np.random.default_rng(0)
    sizes = [X.shape[1]] + [width] * depth + [n_classes]
    Ws = [rng.uniform(-1, 1, (a, b)) * np.sqrt(6 / (a + b)) for a, b in zip(sizes[:-1], sizes[1:])]
    bs = [np.zeros(b) for b in sizes[1:]]
    params = Ws + bs
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    t, lr, b1, b2, eps = 0, 1e-3, 0.9, 0.999, 1e-8
    times = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        order = rng.permutation(len(X))
        for s in range(0, len(X), BATCH):
            idx = order[s : s + BATCH]
            hs = [X[idx]]
            for W, b in zip(Ws[:-1], bs[:-1]):
                hs.append(np.maximum(hs[-1] @ W + b, 0))
            logits = hs[-1] @ Ws[-1] + bs[-1]
            logits -= logits.max(axis=1, keepdims=True)
            p = np.exp(logits)
            p /= p.sum(axis=1, keepdims=True)
            p[np.arange(len(idx)), y[idx]] -= 1
            delta = p / len(idx)
            gW, gb = [None] * len(Ws), [None] * len(bs)
            for k in range(len(Ws) - 1, -1, -1):
                gW[k], gb[k] = hs[k].T @ delta, delta.sum(axis=0)
                if k:
                    delta = (delta @ Ws[k].T) * (hs[k] > 0)
            t += 1
            a_t = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
            for i, g in enumerate(gW + gb):
                m[i] = b1 * m[i] + (1 - b1) * g
                v[i] = b2 * v[i] + (1 - b2) * g * g
                params[i] -= a_t * m[i] / (np.sqrt(v[i]) + eps)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def torch_epoch_seconds(
    X: np.ndarray, y: np.ndarray, depth: int, width: int, n_classes: int, epochs: int
) -> float | None:
    """Median epoch time of the same MLP in PyTorch on the CPU, or None when not installed."""
    try:
        import torch
    except ImportError:
        return None
    torch.manual_seed(0)
    layers: list = []
    prev = X.shape[1]
    for _ in range(depth):
        layers += [torch.nn.Linear(prev, width), torch.nn.ReLU()]
        prev = width
    net = torch.nn.Sequential(*layers, torch.nn.Linear(prev, n_classes)).double()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    times = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        order = torch.randperm(len(X))
        for s in range(0, len(X), BATCH):
            idx = order[s : s + BATCH]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(Xt[idx]), yt[idx]).backward()
            opt.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# --------------------------------------------------------------------------- one depth
def child(depth: int, width: int, epochs: int) -> dict:
    from dnnframe.datasets import load_dataset
    from dnnframe.engine import train

    config = _config(depth, width, epochs)
    result = train(config)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the references run
    epoch_times = [h["seconds"] for h in result.history]
    steady = statistics.median(epoch_times[1:] if len(epoch_times) > 1 else epoch_times)
    data = load_dataset(config.dataset)
    ref_epochs = max(1, min(epochs, 2))
    ref = numpy_epoch_seconds(
        np.asarray(data.X_train), np.asarray(data.y_train), depth, width, data.n_classes, ref_epochs
    )
    torch_s = torch_epoch_seconds(
        np.asarray(data.X_train), np.asarray(data.y_train), depth, width, data.n_classes, ref_epochs
    )
    return {
        "depth": depth,
        "status": result.status,
        "compile_s": result.timings["compile"],
        "cache_hit": result.environment["compile_cache_hit"],
        "peak_rss_mb": peak_mb,
        "epoch_s": steady,
        "numpy_epoch_s": ref,
        "torch_epoch_s": torch_s,
        "test_accuracy": result.metrics["test_accuracy"],
        "mode": result.environment["mode"],
        "blas": result.environment["blas__ldflags"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--depths", default="1,10,100,500,1000")
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.width, args.epochs)))
        return
    rows = []
    for depth in (int(d) for d in args.depths.split(",")):
        t0 = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                str(depth),
                "--width",
                str(args.width),
                "--epochs",
                str(args.epochs),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        if proc.returncode != 0:
            sys.exit(f"depth {depth} failed:\n{proc.stderr[-3000:]}")
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        row["process_s"] = time.perf_counter() - t0
        rows.append(row)
        print(f"  depth {depth} done in {row['process_s']:.1f} s", file=sys.stderr)

    print(
        f"engine benchmark: digits, width {args.width}, relu, adam, batch {BATCH}, "
        f"mode {rows[0]['mode']}, blas {rows[0]['blas']!r}; one fresh process per depth"
    )
    print(
        f"{'depth':>6} {'compile s':>10} {'vs d=10':>8} {'peak RSS MB':>12} {'epoch s':>9} "
        f"{'numpy s':>9} {'engine/numpy':>13} {'torch s':>9} {'test acc':>9}"
    )
    base = next((r["compile_s"] for r in rows if r["depth"] == 10), rows[0]["compile_s"])
    for r in rows:
        torch_s = f"{r['torch_epoch_s']:.4f}" if r["torch_epoch_s"] is not None else "n/a"
        print(
            f"{r['depth']:>6} {r['compile_s']:>10.2f} {r['compile_s'] / base:>7.2f}x {r['peak_rss_mb']:>12.0f} "
            f"{r['epoch_s']:>9.4f} {r['numpy_epoch_s']:>9.4f} {r['epoch_s'] / r['numpy_epoch_s']:>12.2f}x "
            f"{torch_s:>9} {r['test_accuracy']:>9.3f}"
        )
    depths = np.array([r["depth"] for r in rows], dtype=float)
    slope, intercept = np.polyfit(depths, [r["epoch_s"] for r in rows], 1)
    np_slope, _ = np.polyfit(depths, [r["numpy_epoch_s"] for r in rows], 1)
    pred = slope * depths + intercept
    resid = (
        max(abs(p - r["epoch_s"]) / r["epoch_s"] for p, r in zip(pred, rows) if r["depth"] >= 100)
        if len(rows) > 2
        else 0.0
    )
    print(
        f"epoch time linear fit: {slope * 1e3:.3f} ms per layer + {intercept * 1e3:.1f} ms "
        f"(numpy reference: {np_slope * 1e3:.3f} ms per layer; max relative residual at depth>=100: {resid:.1%})"
    )
    if all(r["torch_epoch_s"] is None for r in rows):
        print("PyTorch not installed: torch column skipped")


if __name__ == "__main__":
    main()
