"""The BLAS choices of the C backend side by side: OpenBLAS from PyPI (scipy-openblas32),
the system's OpenBLAS (Debian's libopenblas-dev) and PyTensor's NumPy fallback.

Each measurement runs in a fresh process with ``PYTENSOR_FLAGS=blas__ldflags=...`` and one
BLAS thread; every choice is warmed once (its C modules compiled) before the rounds, which
alternate the choices. Times are the measured process's CPU time, which a busy machine
inflates far less than wall time. Two workloads:

* ``paper``: packs of 417 trials of the paper workload (iris, 1-4 hidden layers of 16,
  tanh/relu, SGD, 20 epochs, batch 32, one seed per member), trials per second;
* ``wide``: seconds per epoch of one trial at width 128, depth 100 (digits, adam, batch 64).

    python bench/blas.py                 # 3 rounds
    python bench/blas.py --rounds 5 --only paper
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dnnframe.engine.blas import choices  # noqa: E402

PAPER = """
import json, time, warnings
warnings.simplefilter("ignore")
from dnnframe.engine import heap, train_pack
heap.enable()
def cfg(depth, act, lr, seed):
    return {"dataset": {"name": "iris"}, "seed": seed,
            "model": {"hidden_layers": depth, "width": 16, "activation": act},
            "training": {"optimizer": "sgd", "learning_rate": lr, "batch_size": 32,
                         "max_epochs": 20, "early_stopping": None}}
lrs = (0.001, 0.003, 0.01, 0.03, 0.1)
packs = [[cfg(d, a, lrs[i % 5], i) for i in range(417)] for d in (1, 2, 3, 4)
         for a in ("tanh", "relu")]
for p in packs:
    train_pack(p[:2])
start = time.process_time()
for p in packs:
    train_pack(p)
print(json.dumps({"rate": sum(map(len, packs)) / (time.process_time() - start)}))
"""

WIDE = """
import json, time, warnings
warnings.simplefilter("ignore")
from dnnframe.engine import train
def run(epochs):
    start = time.process_time()
    train({"dataset": {"name": "digits"}, "seed": 0,
           "model": {"hidden_layers": 100, "width": 128, "activation": "relu"},
           "training": {"optimizer": "adam", "learning_rate": 0.001, "max_epochs": epochs,
                        "batch_size": 64, "early_stopping": None}})
    return time.process_time() - start
run(1)  # the graph built
print(json.dumps({"epoch": (run(4) - run(1)) / 3}))
"""


def measure(code: str, ldflags: str) -> dict:
    env = {
        **os.environ,
        "PYTENSOR_FLAGS": f"blas__ldflags={ldflags}",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", nargs="+", choices=["paper", "wide"], default=["paper", "wide"])
    args = ap.parse_args()
    offered = choices()
    print("BLAS choices here:", ", ".join(offered), f"(load average {os.getloadavg()[0]:.2f})")
    workloads = {"paper": (PAPER, "rate", "trials/s", max), "wide": (WIDE, "epoch", "s/epoch", min)}
    for name in args.only:
        code, key, unit, best = workloads[name]
        for flags in offered.values():
            measure(code, flags)  # compile this choice's C modules, untimed
        seen: dict[str, list[float]] = {c: [] for c in offered}
        for r in range(args.rounds):
            order = list(offered) if r % 2 == 0 else list(offered)[::-1]
            for choice in order:
                seen[choice].append(measure(code, offered[choice])[key])
        print(f"{name} ({unit}, median of {args.rounds}, alternating):")
        medians = {c: statistics.median(v) for c, v in seen.items()}
        winner = best(medians, key=medians.get)
        for choice, values in seen.items():
            ratio = (
                medians[choice] / medians[winner]
                if best is max
                else medians[winner] / medians[choice]
            )
            print(
                f"  {choice:7s} {medians[choice]:8.3f}  ({ratio:.2f} of the best; "
                f"{', '.join(f'{v:.3f}' for v in values)})"
            )


if __name__ == "__main__":
    main()
