"""Build time of the layer designs at depth 10 against depth 1000.

    .venv/bin/python bench/designs.py [--depths 10,1000] [--repeats 2]

Every design (plain, ReZero, pre-norm layer norm with 1/sqrt(depth) branches, and one with
every option on: batch norm before the branch, ReZero, dropout, clipping, warm-up and
cosine) is built in a fresh subprocess per depth, so nothing comes from the in-process
model cache (the on-disk PyTensor compiledir is shared: run once to warm it). Prints the
compile seconds of each depth and the ratio deepest/shallowest per design: a ratio near 1
says the graph does not grow with depth (the layers are one scan whatever the depth).
Dataset: iris, width 16, one epoch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DESIGNS = {
    "plain": {},
    "rezero": {"model": {"residual": "rezero"}},
    "preln-scaled": {
        "model": {"residual": "scaled", "normalization": "layer", "norm_position": "pre"}
    },
    "everything": {
        "model": {
            "residual": "rezero",
            "normalization": "batch",
            "norm_position": "pre",
            "dropout": 0.1,
        },
        "training": {"grad_clip": 1.0, "lr_schedule": {"kind": "cosine", "warmup_epochs": 1}},
    },
}


def _config(design: str, depth: int) -> dict:
    extra = DESIGNS[design]
    return {
        "dataset": {"name": "iris"},
        "model": {
            "hidden_layers": depth,
            "width": 16,
            "activation": "relu",
            "init": "he",
            **extra.get("model", {}),
        },
        "training": {
            "optimizer": "adam",
            "learning_rate": 0.002,
            "max_epochs": 1,
            **extra.get("training", {}),
        },
    }


def _child(design: str, depth: int) -> None:
    from dnnframe.engine import train

    result = train(_config(design, depth))
    print(json.dumps({"compile": result.timings["compile"], "status": result.status}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="10,1000")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return
    depths = [int(d) for d in args.depths.split(",")]
    print(
        f"{'design':<14}"
        + "".join(f"{'depth ' + str(d) + ' s':>14}" for d in depths)
        + f"{'ratio':>8}"
    )
    for design in DESIGNS:
        medians = []
        for depth in depths:
            times = []
            for _ in range(args.repeats):
                out = subprocess.run(
                    [sys.executable, __file__, "--child", design, str(depth)],
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=ROOT,
                )
                times.append(json.loads(out.stdout.strip().splitlines()[-1])["compile"])
            medians.append(statistics.median(times))
        print(
            f"{design:<14}"
            + "".join(f"{m:>14.2f}" for m in medians)
            + f"{medians[-1] / medians[0]:>8.2f}"
        )


if __name__ == "__main__":
    main()
