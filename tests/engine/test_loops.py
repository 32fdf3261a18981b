"""The engine's elementwise loops: every broadcasting pattern, stride and in-place update a
pack's graphs have gives exactly PyTensor's own loop's values, and the pack's graphs use them."""

from __future__ import annotations

import numpy as np
import pytest

pytensor = pytest.importorskip("pytensor")
import pytensor.tensor as pt  # noqa: E402
from pytensor.compile.mode import get_mode  # noqa: E402
from pytensor.scan.op import Scan  # noqa: E402
from pytensor.tensor.elemwise import Elemwise  # noqa: E402

from dnnframe.engine.flags import DEFAULT_MODE  # noqa: E402
from dnnframe.engine.loops import ContiguousElemwise  # noqa: E402
from dnnframe.engine.rewrites import compile_mode  # noqa: E402

OURS = compile_mode(DEFAULT_MODE)
THEIRS = get_mode(DEFAULT_MODE)  # PyTensor's loops
RNG = np.random.default_rng(0)


def _elemwise_ops(fgraph) -> list:
    ops = []
    for node in fgraph.toposort():
        if isinstance(node.op, Elemwise):
            ops.append(node.op)
        if isinstance(node.op, Scan):
            ops += _elemwise_ops(node.op.fgraph)
    return ops


def _both(inputs, outputs, values, updates_of=None):
    """Compile with both loops; the outputs (and the updated shared values) of each."""
    results = []
    for mode in (OURS, THEIRS):
        shared = updates_of() if updates_of else None
        fn = pytensor.function(inputs, outputs, mode=mode, updates=shared[1] if shared else None)
        ops = _elemwise_ops(fn.maker.fgraph)
        assert ops and all(isinstance(op, ContiguousElemwise) for op in ops) == (mode is OURS)
        if mode is OURS:  # each node carries its loop functions
            for node in fn.maker.fgraph.apply_nodes:
                if isinstance(node.op, Elemwise) and node.outputs[0].ndim:
                    assert "_contiguous" in node.op.c_support_code_apply(node, "node_0")
        out = [np.array(o) for o in fn(*values)]
        if shared:
            out += [v.get_value() for v in shared[0]]
        results.append(out)
    return results


def _adam_like(x, c, m, v):
    """A fused multi-output loop with sqrt, division, a comparison and a select."""
    m_new = 0.9 * m + 0.1 * x
    v_new = 0.999 * v + 0.001 * x**2
    step = c * m_new / (pt.sqrt(v_new) + 1e-8)
    return [pt.switch(c > 0.5, x - step, x), m_new, v_new]


# (full shape, per-operand shapes as broadcast in the type): the patterns of a pack's graphs
PATTERNS = {
    "per-member [K,1,1,1]": ((5, 3, 4, 6), (None, 1, 1, 1)),
    "per-column [K,1,B]": ((5, 4, 7), (None, 1, None)),
    "per-unit [K,u,1]": ((5, 4, 7), (None, None, 1)),
    "scalar-like [1,1,1]": ((5, 4, 7), (1, 1, 1)),
    "full": ((5, 4, 7), (None, None, None)),
    "vector": ((9,), (None,)),
    "empty": ((0, 4, 7), (None, 1, None)),
}


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_broadcasting_pattern_gives_pytensors_values(pattern):
    full, small = PATTERNS[pattern]
    x, m, v = (pt.tensor(n, shape=(None,) * len(full)) for n in "xmv")
    c = pt.tensor("c", shape=small)
    values = [
        RNG.normal(size=full),
        RNG.random(tuple(1 if s == 1 else n for s, n in zip(small, full))),
        RNG.normal(size=full),
        RNG.random(full),
    ]
    ours, theirs = _both([x, c, m, v], _adam_like(x, c, m, v), values)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("axes", [(1, 0, 2, 3), (0, 1, 3, 2), (3, 2, 1, 0)])
def test_strided_views_give_pytensors_values(axes):
    """A transposed operand: contiguous over a shorter tail, or over none (PyTensor's loop)."""
    full = (5, 3, 4, 6)
    x = pt.tensor4("x")
    c = pt.tensor4("c", shape=(None, 1, 1, 1))
    m, v = pt.tensor4("m"), pt.tensor4("v")
    base = RNG.normal(size=tuple(full[a] for a in np.argsort(axes)))
    strided = base.transpose(axes)
    assert strided.shape == full and not strided.flags.c_contiguous
    values = [strided, RNG.random((5, 1, 1, 1)), RNG.normal(size=full), RNG.random(full)]
    ours, theirs = _both([x, c, m, v], _adam_like(x, c, m, v), values)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)


def test_in_place_updates_of_shared_values_give_pytensors_values():
    """Optimiser updates write their shared values in place, per member, under a mask."""
    g = pt.tensor4("g")
    lr = pt.tensor4("lr", shape=(None, 1, 1, 1))
    keep = pt.tensor4("keep", shape=(None, 1, 1, 1), dtype="bool")
    start = [RNG.normal(size=(4, 3, 5, 5)), np.zeros((4, 3, 5, 5)), np.zeros((4, 3, 5, 5))]

    def updates_of():
        W, m, v = (pytensor.shared(s.copy()) for s in start)
        W_new, m_new, v_new = _adam_like(g, lr, m, v)
        new = [W - lr * m_new / (pt.sqrt(v_new) + 1e-8), m_new, v_new]
        return [W, m, v], [(s, pt.switch(keep, e, s)) for s, e in zip((W, m, v), new)]

    values = [
        RNG.normal(size=(4, 3, 5, 5)),
        RNG.random((4, 1, 1, 1)),
        np.array([True, False, True, True]).reshape(4, 1, 1, 1),
    ]
    ours, theirs = _both([g, lr, keep], [], values, updates_of)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)
    assert np.array_equal(ours[0][1], start[0][1])  # the masked member kept its weights


def test_integer_and_boolean_loops_give_pytensors_values():
    a, b = pt.tensor3("a", dtype="int64"), pt.tensor3("b", dtype="int64", shape=(None, 1, None))
    values = [RNG.integers(-9, 9, size=(3, 4, 5)), RNG.integers(1, 9, size=(3, 1, 5))]
    ours, theirs = _both([a, b], [a * b + 3, pt.gt(a, b), pt.maximum(a, -b)], values)
    for x, y in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(x, y)


def test_a_loop_whose_element_can_fail_keeps_pytensors_loop():
    """Integer division reports a zero divisor through PyTensor's failure path, which the
    engine's loop functions have no way to take."""
    a, b = pt.tensor3("a", dtype="int64"), pt.tensor3("b", dtype="int64")
    fn = pytensor.function([a, b], a // b, mode=OURS)
    [node] = [n for n in fn.maker.fgraph.apply_nodes if isinstance(n.op, Elemwise)]
    assert "_contiguous" not in node.op.c_support_code_apply(node, "node_0")
    x, y = RNG.integers(-9, 9, size=(3, 4, 5)), RNG.integers(1, 9, size=(3, 4, 5))
    np.testing.assert_array_equal(fn(x, y), x // y)


@pytest.mark.slow
def test_a_packs_graphs_use_the_contiguous_loops(tmp_path, monkeypatch):
    """Training graphs, scans' inner graphs included, compile with the engine's loops."""
    monkeypatch.setenv("DNNFRAME_CACHE_DIR", str(tmp_path))
    from dnnframe.engine import packed, train_pack

    # five layers: a layer and a scanned stack (shorter runs are unrolled)
    config = {
        "dataset": {"name": "iris"},
        "seed": 0,
        "model": {
            "hidden_layers": 5,
            "width": 8,
            "activation": "relu",
            "residual": "rezero",
            "normalization": "layer",
            "norm_position": "pre",
        },
        "training": {"optimizer": "adam", "learning_rate": 0.01, "max_epochs": 1},
    }
    packed._CACHE.clear()  # then the one model in this process's cache is this trial's
    [result] = train_pack([config])
    assert result.status == "COMPLETE"
    [model] = packed._CACHE._items.values()
    ops = _elemwise_ops(model.train_fn.maker.fgraph)
    assert any(isinstance(node.op, Scan) for node in model.train_fn.maker.fgraph.apply_nodes)
    assert ops and all(isinstance(op, ContiguousElemwise) for op in ops)
