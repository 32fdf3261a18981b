"""The engine's own graph rewrites: they compile the same graph PyTensor's would, and the
sums they turn into products with ones give the same values."""

from __future__ import annotations

import numpy as np
import pytest

pytensor = pytest.importorskip("pytensor")
import pytensor.tensor as pt  # noqa: E402
from pytensor.compile.mode import get_mode  # noqa: E402
from pytensor.scan.op import Scan  # noqa: E402

from dnnframe.engine.flags import DEFAULT_MODE  # noqa: E402
from dnnframe.engine.rewrites import EXCLUDED_REWRITES, SUM_AS_GEMV, compile_mode  # noqa: E402


def _ops(fgraph) -> list[str]:
    """Every node's op and output types, scans' inner graphs included, in order."""
    out = []
    for node in fgraph.toposort():
        out.append(f"{node.op} {[str(o.type) for o in node.outputs]}")
        if isinstance(node.op, Scan):
            out += ["  " + line for line in _ops(node.op.fgraph)]
    return out


def _layer_norm_scan_step():
    """A loss whose gradient fills and broadcasts (means, a scan over layers, per-member
    scales): the shapes of graph PyTensor's second-to-alloc rewrite is run on."""
    x = pt.tensor3("x")
    W = pt.tensor4("W")
    g = pt.tensor3("g")

    def step(Wl, gl, h):
        mean = h.mean(axis=1, keepdims=True)
        c = h - mean
        u = c / pt.sqrt((c**2).mean(axis=1, keepdims=True) + 1e-5) * gl.dimshuffle(0, 1, "x")
        return h + pt.tanh(pt.matmul(Wl, u))

    out = pytensor.scan(step, sequences=[W, g], outputs_info=[x], return_updates=False)[-1]
    loss = (out**2).mean()
    return [x, W, g], [loss, *pytensor.grad(loss, [W, g])]


@pytest.mark.slow
def test_the_compiled_graph_is_the_one_pytensors_own_rewrites_give():
    inputs, outputs = _layer_norm_scan_step()
    ours = pytensor.function(inputs, outputs, mode=compile_mode(DEFAULT_MODE))
    # PyTensor's own local_second_to_alloc instead of the engine's, the rest as compiled
    excluded = [r for r in EXCLUDED_REWRITES if r != "local_second_to_alloc"]
    reference = get_mode(DEFAULT_MODE).excluding(*excluded).register((SUM_AS_GEMV, 1.6))
    theirs = pytensor.function(inputs, outputs, mode=reference)
    assert any("Alloc" in line for line in _ops(ours.maker.fgraph))  # the rewrite ran
    assert _ops(ours.maker.fgraph) == _ops(theirs.maker.fgraph)
    rng = np.random.default_rng(0)
    values = [rng.normal(size=(3, 4, 5)), rng.normal(size=(6, 3, 4, 4)), rng.normal(size=(6, 3, 4))]
    for a, b in zip(ours(*values), theirs(*values), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_sum_over_trailing_axes_is_a_product_with_ones_of_the_same_value():
    x = pt.tensor4("x")
    sums = [x.sum(axis=3), x.sum(axis=(2, 3)), x.sum(axis=(1, 2, 3)), x.sum(axis=1)]
    f = pytensor.function([x], sums, mode=compile_mode(DEFAULT_MODE))
    gemvs = [n for n in f.maker.fgraph.toposort() if "Gemv" in str(n.op)]
    assert len(gemvs) == 3  # the sum over a leading axis stays a Sum
    value = np.random.default_rng(1).normal(size=(2, 3, 4, 5))
    for got, axes in zip(f(value), [3, (2, 3), (1, 2, 3), 1], strict=True):
        np.testing.assert_allclose(got, value.sum(axis=axes), rtol=1e-13)
