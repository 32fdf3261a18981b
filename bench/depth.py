"""Depth benchmark: what one engine with scanned layers costs against depth, side by side
with another checkout (the code before the change) where that one runs at all.

    .venv/bin/python bench/depth.py [--base /path/to/old/checkout] [--only build sweep ...]
        [--json out.json]

Sections (each prints this checkout and, with ``--base``, the other one beside it):

* ``build``: first build of a plain relu stack of width 16 (iris, one epoch) in a fresh
  process with an empty compiled-graph disk cache, at depths 1, 10, 100, 1,000, 2,000:
  the median build seconds of ``--repeats`` processes per depth, whether it trained, and
  slowest / fastest. PyTensor's own C
  module cache is the machine's (warm after a test run): what is measured is building and
  optimising the graph. The base runs each depth with a time limit (``--base-timeout``).
* ``sweep``: ``dnnframe run`` of a depth sweep end to end (digits, depths 1, 2, 4, ...,
  1,024, 3 seeds, 5 epochs, 2 workers, empty graph cache): wall seconds, trials COMPLETE.
* ``diverse``: ``dnnframe run`` of 216 digits configurations with ASHA pruning (depths 1-32
  x widths 16/64 x 3 activations x 2 optimisers x 3 rates, 9 epochs, 2 workers, empty graph
  cache): graphs built, build seconds summed over the workers, and their share of the
  workers' time (2 x wall).
* ``epoch``: seconds per epoch of one trial at width 128, depth 100 (digits, adam, batch 64):
  median of 3 epochs, fresh process each.
* ``designs``: 64 trials of the RQ2 design (ReZero + pre-norm layer norm + dropout 0.1,
  depth 8, iris, 10 epochs, 64 learning rates) trained as one pack against one by one, in
  one process after both graphs are built: trials per second (best of ``--rounds``
  alternating rounds) and the ratio (goal >= 5x), with each round's ratio in wall and in CPU
  time (the CPU ratio is steadier on a shared machine).

The paper workload (10,000 small trials, packed, 2 workers) is ``bench/throughput.py``; its
engine part alone is ``bench/packs.py``: run both with this and with the base checkout.
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD_DEPTHS = (1, 10, 100, 1000, 2000)


def _python(tree: Path, code: str, env: dict | None = None, timeout: float | None = None) -> dict:
    """Run ``code`` with ``tree`` first on the path in a fresh process; its last stdout line
    is JSON. A time-out or a failure comes back as ``{"error": ...}``."""
    full = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        **(env or {}),
    }
    try:
        out = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            env=full,
            cwd=tree,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"still building after {timeout:.0f} s"}
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": last[:120]}
    return json.loads(out.stdout.strip().splitlines()[-1])


BUILD = """
    import json, warnings
    warnings.simplefilter("ignore")
    from dnnframe.engine import train_pack  # the path every trial takes (a pack of one here)
    [r] = train_pack([{"dataset": {"name": "iris"}, "seed": 0,
                       "model": {"hidden_layers": %d, "width": 16, "activation": "relu"},
                       "training": {"optimizer": "sgd", "learning_rate": 0.01, "max_epochs": 1}}])
    print(json.dumps({"build": r.timings["compile"], "status": r.status}))
"""


def build(tree: Path, timeout: float | None, repeats: int) -> dict:
    """Per depth, the median build of ``repeats`` fresh processes (one, if it fails)."""
    out = {}
    for depth in BUILD_DEPTHS:
        runs = []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as cache:
                runs.append(_python(tree, BUILD % depth, {"DNNFRAME_CACHE_DIR": cache}, timeout))
            if "error" in runs[-1]:
                break
        ok = [r["build"] for r in runs if "build" in r]
        out[depth] = (
            {"build": statistics.median(ok), "runs": ok, "status": runs[-1]["status"]}
            if len(ok) == len(runs)
            else runs[-1]
        )
    return out


def _run_spec(tree: Path, spec: dict, workers: int, timeout: float | None) -> dict:
    """``dnnframe run`` of ``spec`` in ``tree`` on a fresh store and graph cache: wall seconds,
    trials by state, graphs built and their seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.json"
        path.write_text(json.dumps(spec))
        url = f"sqlite:///{tmp}/sweep.db"
        env = {**os.environ, "PYTHONPATH": str(tree), "DNNFRAME_CACHE_DIR": f"{tmp}/graphs"}
        env.pop("DNNFRAME_STORE_URL", None)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "dnnframe.cli",
                    "run",
                    str(path),
                    "--store",
                    url,
                    "--workers",
                    str(workers),
                    "-q",
                ],
                env=env,
                cwd=tree,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"not finished after {timeout:.0f} s"}
        wall = time.perf_counter() - t0
        summary = _python(
            tree,
            f"""
            import json
            from collections import Counter
            from dnnframe.store import open_store
            store = open_store({url!r})
            trials = store.list_trials()
            results = [t.result for t in trials if t.result]
            pack_compiles = {{}}
            for r in results:
                env, pack = r.get("environment") or {{}}, r.get("pack") or {{}}
                if not env.get("compile_cache_hit"):  # the pack that built (or loaded) its graph
                    pack_compiles[pack.get("id") or id(r)] = (
                        pack.get("compile_seconds", r["timings"]["compile"]), env.get("disk_cache_hit"))
            print(json.dumps({{"states": Counter(t.state.value for t in trials),
                              "built": sum(1 for _, disk in pack_compiles.values() if not disk),
                              "build_seconds": sum(s for s, _ in pack_compiles.values())}}))
        """,
        )
        return {"wall": wall, "exit": proc.returncode, **summary}


def sweep(tree: Path, timeout: float | None) -> dict:
    spec = {
        "name": "bench-depth-sweep",
        "dataset": {"name": "digits"},
        "model": {
            "hidden_layers": {"grid": [2**i for i in range(11)]},
            "width": 16,
            "activation": "relu",
        },
        "training": {
            "optimizer": "adam",
            "learning_rate": 0.003,
            "max_epochs": 5,
            "batch_size": 64,
        },
        "search": {"seeds": 3},
    }
    return _run_spec(tree, spec, 2, timeout)


def diverse(tree: Path, timeout: float | None) -> dict:
    spec = {
        "name": "bench-diverse",
        "dataset": {"name": "digits"},
        "model": {
            "hidden_layers": {"grid": [1, 2, 4, 8, 16, 32]},
            "width": {"grid": [16, 64]},
            "activation": {"grid": ["relu", "tanh", "elu"]},
        },
        "training": {
            "optimizer": {"grid": ["adam", "sgd"]},
            "learning_rate": {"grid": [0.001, 0.01, 0.1]},
            "max_epochs": 9,
            "batch_size": 32,
        },
        "search": {"pruner": "asha", "min_epochs": 1, "eta": 3},
    }
    out = _run_spec(tree, spec, 2, timeout)
    if "wall" in out and "build_seconds" in out:
        out["build_share"] = out["build_seconds"] / (2 * out["wall"])
    return out


EPOCH = """
    import json, statistics, warnings
    warnings.simplefilter("ignore")
    from dnnframe.engine import train
    r = train({"dataset": {"name": "digits"}, "seed": 0,
               "model": {"hidden_layers": 100, "width": 128, "activation": "relu"},
               "training": {"optimizer": "adam", "learning_rate": 0.001, "max_epochs": 3,
                            "batch_size": 64}})
    print(json.dumps({"epoch": statistics.median(h["seconds"] for h in r.history)}))
"""

DESIGNS = """
    import json, time, warnings
    warnings.simplefilter("ignore")
    from dnnframe.engine import heap, train, train_pack
    heap.enable()  # as a worker process runs (collector and allocator settings)
    def cfg(lr):
        return {"dataset": {"name": "iris"}, "seed": 0,
                "model": {"hidden_layers": 8, "width": 16, "activation": "relu",
                          "residual": "rezero", "normalization": "layer", "norm_position": "pre",
                          "dropout": 0.1},
                "training": {"optimizer": "adam", "learning_rate": lr, "max_epochs": 10,
                             "batch_size": 32}}
    configs = [cfg(1e-4 * 1.1 ** i) for i in range(64)]
    train_pack(configs[:2]); train(configs[0])  # both graphs built before the clock
    packed, alone, cpu = [], [], []
    for _ in range(%d):  # alternating rounds: both sides see the same load
        t0, c0 = time.perf_counter(), time.process_time()
        train_pack(configs)
        packed.append(time.perf_counter() - t0); c1 = time.process_time() - c0
        t0, c0 = time.perf_counter(), time.process_time()
        for c in configs[:16]:
            train(c)
        alone.append((time.perf_counter() - t0) * 4); cpu.append((time.process_time() - c0) * 4 / c1)
    print(json.dumps({"packed": 64 / min(packed), "alone": 64 / min(alone),
                      "rounds": [a / p for a, p in zip(alone, packed)], "cpu_rounds": cpu}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, help="another checkout to measure beside this one")
    ap.add_argument(
        "--base-timeout",
        type=float,
        default=300.0,
        help="seconds the base may take per measurement (default 300)",
    )
    ap.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="fresh processes per depth in the build section (median; default 3)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="alternating packed / one-by-one rounds in the designs section (default 3)",
    )
    ap.add_argument("--only", nargs="+", choices=["build", "sweep", "diverse", "epoch", "designs"])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    trees = {"this": ROOT, **({"base": args.base.resolve()} if args.base else {})}
    limits = {"this": None, "base": args.base_timeout}
    only = set(args.only or ["build", "sweep", "diverse", "epoch", "designs"])
    results: dict = {}

    def show(label: str, row: dict) -> None:
        cells = "   ".join(f"{name}: {value}" for name, value in row.items())
        print(f"  {label:<28}{cells}", flush=True)

    if "build" in only:
        print("first build, fresh process, empty graph cache (plain relu, width 16)")
        for name, tree in trees.items():
            res = results.setdefault("build", {})[name] = build(tree, limits[name], args.repeats)
            cells = {
                d: (f"{r['build']:.1f}s" if "build" in r else r["error"]) for d, r in res.items()
            }
            ok = [r["build"] for r in res.values() if "build" in r and r["status"] == "COMPLETE"]
            show(
                name,
                {
                    **{f"depth {d}": c for d, c in cells.items()},
                    "slowest/fastest": f"{max(ok) / min(ok):.2f}" if len(ok) == len(res) else "-",
                },
            )
    if "sweep" in only:
        print(
            "depth sweep through dnnframe run (digits, depths 1..1024, 3 seeds, 5 epochs, 2 workers)"
        )
        for name, tree in trees.items():
            r = results.setdefault("sweep", {})[name] = sweep(tree, limits[name])
            show(
                name,
                {
                    "wall": f"{r['wall']:.1f}s" if "wall" in r else r["error"],
                    "states": r.get("states"),
                    "graphs built": r.get("built"),
                },
            )
    if "diverse" in only:
        print("216 digits configurations with ASHA (2 workers, empty graph cache)")
        for name, tree in trees.items():
            r = results.setdefault("diverse", {})[name] = diverse(tree, limits[name])
            show(
                name,
                {
                    "wall": f"{r['wall']:.1f}s" if "wall" in r else r["error"],
                    "graphs built": r.get("built"),
                    "build seconds": f"{r['build_seconds']:.1f}" if "build_seconds" in r else "-",
                    "build share": f"{r['build_share']:.0%}" if "build_share" in r else "-",
                },
            )
    if "epoch" in only:
        print("seconds per epoch, one trial, width 128, depth 100 (digits, adam, batch 64)")
        for name, tree in trees.items():
            r = results.setdefault("epoch", {})[name] = _python(tree, EPOCH, timeout=limits[name])
            show(name, {"epoch": f"{r['epoch']:.3f}s" if "epoch" in r else r["error"]})
        e = results["epoch"]
        if "base" in e and "epoch" in e["this"] and "epoch" in e["base"]:
            show("this / base", {"ratio": f"{e['this']['epoch'] / e['base']['epoch']:.2f}"})
    if "designs" in only:
        print(
            f"64 trials of the RQ2 design (ReZero + pre-norm LN + dropout), packed vs one by one "
            f"(best of {args.rounds} alternating rounds; ratios per round, wall and CPU time)"
        )
        for name, tree in trees.items():
            r = results.setdefault("designs", {})[name] = _python(
                tree, DESIGNS % args.rounds, timeout=limits[name]
            )
            if "packed" in r:
                show(
                    name,
                    {
                        "packed": f"{r['packed']:.1f}/s",
                        "one by one": f"{r['alone']:.1f}/s",
                        "ratio": f"{r['packed'] / r['alone']:.1f}x",
                        "rounds": " ".join(f"{x:.1f}" for x in r["rounds"]),
                        "cpu": " ".join(f"{x:.1f}" for x in r["cpu_rounds"]),
                    },
                )
            else:
                show(name, r)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
