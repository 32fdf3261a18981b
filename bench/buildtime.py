"""Where a graph build's seconds go, side by side with another checkout (the code before a
change).

    .venv/bin/python bench/buildtime.py [--base /path/to/old/checkout] [--repeats 3]

In one process set up as a local worker is (its heap settled after each build, the C
linker's modules preloaded), the 12 digits shapes of a diverse sweep (depth 1 and 8 x widths
16/64 x relu+adam, tanh+sgd, elu+adam; a pack of 3 learning rates, 2 epochs) are trained one
after another on an empty graph disk cache, so each builds its graph. Each build's seconds
(the pack's ``compile_seconds``: graph construction, rewriting, linking, the disk-cache
write, settling the heap) are split into PyTensor's rewriting (``prepare_fgraph``, the
scans' inner functions included), its linking (``create``, without the inner rewriting)
and the rest; the training seconds beside them show what the compiled steps cost. The
median of ``--repeats`` fresh processes per checkout. PyTensor's own C module cache is the
machine's (warm after a test run): ``bench/depth.py --only diverse`` measures the same
builds inside a whole sweep.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
    import collections, json, os, time, warnings
    warnings.simplefilter("ignore")
    from pytensor.compile import maker
    from dnnframe.engine import diskcache, heap, train_pack

    spent, stack = collections.Counter(), []

    def timed(fn, label):
        def run(*args, **kwargs):  # exclusive seconds: an inner compile is not counted twice
            t0 = time.perf_counter()
            stack.append(0.0)
            try:
                return fn(*args, **kwargs)
            finally:
                dt, inner = time.perf_counter() - t0, stack.pop()
                spent[label] += dt - inner
                if stack:
                    stack[-1] += dt
        return run

    F = maker.FunctionMaker
    F.prepare_fgraph = staticmethod(timed(F.prepare_fgraph, "rewrite"))
    F.create = timed(F.create, "link")
    heap.enable()
    diskcache.preload()

    def configs(depth, width, act, opt, epochs=2):
        return [{"dataset": {"name": "digits"}, "seed": 0,
                 "model": {"hidden_layers": depth, "width": width, "activation": act},
                 "training": {"optimizer": opt, "learning_rate": lr, "max_epochs": epochs,
                              "batch_size": 32}} for lr in (0.001, 0.01, 0.1)]

    train_pack(configs(2, 32, "relu", "sgd", 1))  # the worker's first build: module loading
    spent.clear()
    out = collections.Counter()
    for depth in (1, 8):
        for width in (16, 64):
            for act, opt in (("relu", "adam"), ("tanh", "sgd"), ("elu", "adam")):
                t0 = time.perf_counter()
                [r, *_] = train_pack(configs(depth, width, act, opt))
                out["build"] += r.pack["compile_seconds"]
                out["train"] += time.perf_counter() - t0 - r.pack["compile_seconds"]
                out["builds"] += 1
    out.update(spent)
    print(json.dumps(out))
"""


def measure(tree: Path) -> dict:
    """One fresh process in ``tree``: seconds summed over the 12 builds."""
    with tempfile.TemporaryDirectory() as cache:
        env = {
            **os.environ,
            "PYTHONPATH": str(tree),
            "DNNFRAME_CACHE_DIR": cache,
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
        }
        out = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(CHILD)],
            env=env,
            cwd=tree,
            capture_output=True,
            text=True,
        )
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1][:160]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, help="another checkout to measure beside this one")
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per checkout (median)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    trees = {"this": ROOT, **({"base": args.base.resolve()} if args.base else {})}
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(args.repeats):  # interleaved: a change in the machine's load hits both
        for name, tree in trees.items():
            runs[name].append(measure(tree))
    results = {}
    print(
        "12 builds of digits shapes in a worker-like process (seconds summed, median of "
        f"{args.repeats})"
    )
    for name, rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        if not ok:
            print(f"  {name:<6}{rs[-1]['error']}")
            continue
        med = {
            k: statistics.median(r.get(k, 0.0) for r in ok)
            for k in ("build", "rewrite", "link", "train")
        }
        med["rest"] = med["build"] - med["rewrite"] - med["link"]
        results[name] = med
        print(
            f"  {name:<6}build {med['build']:.2f}s (rewrite {med['rewrite']:.2f}, link "
            f"{med['link']:.2f}, rest {med['rest']:.2f})   training {med['train']:.2f}s"
        )
    if "base" in results and "this" in results:
        print(
            f"  base / this: build {results['base']['build'] / results['this']['build']:.2f}x,"
            f" training {results['base']['train'] / results['this']['train']:.2f}x"
        )
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "median": results}, indent=1))


if __name__ == "__main__":
    main()
