"""The pack's tanh side by side: glibc's vector loop (libmvec, :mod:`dnnframe.engine.mvec`)
against NumPy's, on the paper workload.

Where NumPy has no SIMD tanh for the float type (float64 on every CPU without AVX-512),
dnnframe computes the pack's tanh through libmvec. Each measurement is a fresh process of
the paper workload's packs (iris, 1-4 hidden layers of 16, 417 trials a pack, SGD, 20 epochs,
batch 32) with the tanh packs and the ReLU packs timed apart, by the process's CPU time,
one BLAS thread, the choices alternating; both are warmed once first.

    python bench/tanh.py                          # float64, 3 rounds
    THEANO_FLAGS=floatX=float32 python bench/tanh.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from blas import measure  # noqa: E402

from dnnframe.engine.blas import default_blas  # noqa: E402

CODE = """
import json, time, warnings
warnings.simplefilter("ignore")
from dnnframe.engine import heap, mvec, train_pack
mvec.enabled = {enabled}
heap.enable()
def cfg(depth, act, lr, seed):
    return {{"dataset": {{"name": "iris"}}, "seed": seed,
            "model": {{"hidden_layers": depth, "width": 16, "activation": act}},
            "training": {{"optimizer": "sgd", "learning_rate": lr, "batch_size": 32,
                         "max_epochs": 20, "early_stopping": None}}}}
lrs = (0.001, 0.003, 0.01, 0.03, 0.1)
out = {{"how": mvec.describe()}}
for act in ("tanh", "relu"):
    packs = [[cfg(d, act, lrs[i % 5], i) for i in range(417)] for d in (1, 2, 3, 4)]
    for p in packs:
        train_pack(p[:2])
    start = time.process_time()
    for p in packs:
        train_pack(p)
    out[act] = time.process_time() - start
out["rate"] = 2 * 4 * 417 / (out["tanh"] + out["relu"])
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    flags = default_blas()[1]
    choices = {"libmvec": CODE.format(enabled=True), "numpy": CODE.format(enabled=False)}
    how = {name: measure(code, flags)["how"] for name, code in choices.items()}  # warm
    print(f"tanh here: {how['libmvec']} (load average {os.getloadavg()[0]:.2f})")
    seen: dict[str, list[dict]] = {c: [] for c in choices}
    for r in range(args.rounds):
        for name in list(choices) if r % 2 == 0 else list(choices)[::-1]:
            seen[name].append(measure(choices[name], flags))
    print(f"CPU seconds for 1,668 trials of each activation, median of {args.rounds}:")
    med = {
        c: {k: statistics.median(m[k] for m in runs) for k in ("tanh", "relu", "rate")}
        for c, runs in seen.items()
    }
    for name, m in med.items():
        print(
            f"  {name:8s} tanh packs {m['tanh']:6.2f} s, relu packs {m['relu']:6.2f} s, "
            f"the paper workload {m['rate']:5.0f} trials/s"
        )
    a, b = med["libmvec"], med["numpy"]
    print(
        f"libmvec / numpy: tanh packs {b['tanh'] / a['tanh']:.2f}x, "
        f"the paper workload {a['rate'] / b['rate']:.2f}x"
    )


if __name__ == "__main__":
    main()
