"""Elementwise-loop benchmark: the engine's vectorisable loops (``dnnframe/engine/loops.py``)
against PyTensor's own C loops, side by side in one process, on the shapes of a pack.

    .venv/bin/python bench/loops.py [--members 64] [--repeats 300]

Each row compiles one fused elementwise graph twice, with the engine's compile mode and
with PyTensor's default C mode, and prints microseconds per call (best of five timed
batches of ``--repeats`` calls, the two alternating), ns per element and the ratio. The
values are checked equal bit for bit first.

* Adam's update of a stack's weights ``[K, layers, w, w]`` (per-member learning rate, L2 and
  active flag ``[K, 1, 1, 1]``; sqrt and division), fresh outputs and in place;
* the same with the gradient a transposed view (a scan's layer-major output), which the
  engine's loop takes over the contiguous trailing ``[w, w]``;
* layer norm's gradient loop on ``[K, units, B]`` with per-column ``[K, 1, B]`` statistics;
* ReZero's residual update ``h + s * a * keep`` with a per-unit ``[K, units, 1]`` input.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from dnnframe.engine.flags import DEFAULT_MODE  # noqa: E402
from dnnframe.engine.pytensor_wall import configure  # noqa: E402

configure()  # the process's PyTensor flags, before PyTensor is imported

import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402
from pytensor.compile.mode import get_mode  # noqa: E402

from dnnframe.engine import heap  # noqa: E402
from dnnframe.engine.rewrites import compile_mode  # noqa: E402


def _adam(W, g, lr, l2, keep, m, v):
    grad = g + 2 * l2 * W
    m_new = 0.9 * m + 0.1 * grad
    v_new = 0.999 * v + 0.001 * grad**2
    W_new = W - lr * m_new / (pt.sqrt(v_new) + 1e-8)
    return [pt.switch(keep, e, s) for e, s in ((W_new, W), (m_new, m), (v_new, v))]


def _cases(K: int, rng) -> dict:
    L, w, u, B = 7, 16, 16, 32
    col4 = (None, 1, 1, 1)
    cases = {}
    W, g, m, v = (pt.tensor4(n) for n in ("W", "g", "m", "v"))
    lr, l2 = pt.tensor4("lr", shape=col4), pt.tensor4("l2", shape=col4)
    keep = pt.tensor4("keep", shape=col4, dtype="bool")
    full = [rng.normal(size=(K, L, w, w)) for _ in range(3)] + [rng.random((K, L, w, w))]
    per_member = [
        np.full((K, 1, 1, 1), 1e-3),
        np.full((K, 1, 1, 1), 1e-4),
        np.ones((K, 1, 1, 1), dtype=bool),
    ]
    inputs = [W, g, lr, l2, keep, m, v]
    values = [full[0], full[1], *per_member, full[2], full[3]]
    cases["adam, stack [K,7,16,16]"] = (inputs, _adam(*inputs), values, None)
    transposed = rng.normal(size=(L, K, w, w)).transpose(1, 0, 2, 3)
    cases["adam, gradient a transposed view"] = (
        inputs,
        _adam(*inputs),
        [full[0], transposed, *values[2:]],
        None,
    )

    def in_place():
        shared = [pytensor.shared(x.copy()) for x in (full[0], full[2], full[3])]
        Ws, ms, vs = shared
        new = _adam(Ws, g, lr, l2, keep, ms, vs)
        return [g, lr, l2, keep], list(zip(shared, new))

    cases["adam, in place (shared updates)"] = (None, None, [full[1], *per_member], in_place)

    x, a, gz = (pt.tensor3(n) for n in ("x", "a", "gz"))
    mean, std = pt.tensor3("mean", shape=(None, 1, None)), pt.tensor3("std", shape=(None, 1, None))
    dmean, dstd = (
        pt.tensor3("dmean", shape=(None, 1, None)),
        pt.tensor3("dstd", shape=(None, 1, None)),
    )
    ln = [gz / std + dmean + (x - mean) * dstd / std + a, gz * x]
    act = [rng.normal(size=(K, u, B)) for _ in range(3)]
    col = [rng.random((K, 1, B)) + 0.5 for _ in range(4)]
    cases["layer norm gradient [K,16,32]"] = (
        [x, a, gz, mean, std, dmean, dstd],
        ln,
        [*act, *col],
        None,
    )

    h, r = pt.tensor3("h"), pt.tensor3("r")
    s = pt.tensor3("s", shape=(None, None, 1))
    mask = pt.tensor3("mask", shape=(None, 1, None))
    cases["residual h + s*a*keep [K,16,32]"] = (
        [h, r, s, mask],
        [h + s * r * mask, s * r],
        [act[0], act[1], rng.random((K, u, 1)), rng.random((K, 1, B))],
        None,
    )
    return cases


def _timed(fn, args, repeats: int) -> float:
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn(*args)
    return (time.perf_counter() - t0) / repeats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=int, default=64, help="pack size K (default 64)")
    ap.add_argument("--repeats", type=int, default=300, help="calls per timed batch")
    args = ap.parse_args()
    heap.enable()  # as a worker process runs (freed memory kept for reuse)
    modes = {"engine": compile_mode(DEFAULT_MODE), "pytensor": get_mode(DEFAULT_MODE)}
    rng = np.random.default_rng(0)
    print(f"elementwise loops, K={args.members}: microseconds per call (ns per element)")
    for label, (inputs, outputs, values, shared) in _cases(args.members, rng).items():
        fns = {}
        for name, mode in modes.items():
            if shared:
                ins, updates = shared()
                fns[name] = pytensor.function(ins, [], updates=updates, mode=mode)
            else:
                fns[name] = pytensor.function(inputs, outputs, mode=mode)
        if not shared:
            a, b = (fns[n](*values) for n in modes)
            assert all(np.array_equal(x, y) for x, y in zip(a, b)), label
        n_elements = max(np.size(v) for v in values)
        best = {n: float("inf") for n in modes}
        for fn in fns.values():
            fn(*values)
        for _ in range(5):  # alternating batches: both see the same load
            for n, fn in fns.items():
                best[n] = min(best[n], _timed(fn, values, args.repeats))
        cells = "   ".join(
            f"{n}: {best[n] * 1e6:7.1f} us ({best[n] * 1e9 / n_elements:4.2f} ns)" for n in modes
        )
        print(
            f"  {label:<36}{cells}   pytensor / engine: {best['pytensor'] / best['engine']:.1f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
