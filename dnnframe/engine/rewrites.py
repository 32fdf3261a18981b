"""The graph rewrites the C backend compiles a pack with: PyTensor's default pipeline less a
few that cost build time for nothing here, plus the engine's own: two below, and the
vectorisable elementwise loops of :mod:`~dnnframe.engine.loops`.

Two of PyTensor's rewrites build Alloc nodes (vectors of ones, zeros, a value broadcast to a
shape) whose constructor looks for a constant shape by cloning and rewriting every node
above the shape's variables. In a gradient graph those are the whole graph: tens of
milliseconds per node, a fifth of a build. The engine's rewrites build the same nodes
directly, with the static shape they already know.
"""

from __future__ import annotations

import pytensor.tensor as pt
from pytensor.graph.basic import Apply
from pytensor.graph.rewriting.basic import copy_stack_trace, in2out, node_rewriter
from pytensor.tensor.basic import Alloc, second
from pytensor.tensor.blas import gemv_no_inplace
from pytensor.tensor.math import Sum
from pytensor.tensor.rewriting.basic import broadcasted_by, get_simplified_broadcast_shape

from .flags import DEFAULT_MODE
from .loops import CONTIGUOUS_LOOPS
from .pytensor_wall.internals import extend_mode

# Rewrites left out of the C backend's default pipeline. ShapeOpt attaches shape inference
# to every node a rewrite creates: about a fifth of a build's rewriting, while the compiled
# steps measured the same without it (the engine reads run-time sizes off its inputs).
# local_second_to_alloc is replaced by SECOND_AS_ALLOC (the same rewrite, built cheaply).
# The others look for diagonal, orthogonal or selection matrices in every product, walking
# its ancestors each time (a tenth of the rest); no product of a pack has such an operand.
EXCLUDED_REWRITES = (
    "ShapeOpt",
    "local_second_to_alloc",
    "dot_diag_to_elemwise",
    "orthogonal_dot_transpose_to_eye",
    "selection_dot_to_indexing",
)


def alloc(value, shape: list, otype) -> pt.TensorVariable:
    """``value`` broadcast to ``shape`` as an Alloc node of output type ``otype``, built
    without Alloc's search for a constant shape (see the module docstring)."""
    sizes = [pt.as_tensor_variable(s, ndim=0) for s in shape]
    out = Apply(Alloc(), [pt.as_tensor_variable(value), *sizes], [otype()]).outputs[0]
    assert isinstance(out, pt.TensorVariable)  # otype is a TensorType
    return out


def _sum_last_axes_as_gemv(fgraph, node):
    """A Sum over the trailing axes of a float tensor as a matrix-vector product with ones.
    The gradients of a pack's per-unit and per-layer scales (normalisation gain and shift,
    a residual branch's scale) sum over the batch axis inside the gradient scan, and the C
    backend's Sum over the last axis is several times slower than that gemv."""
    (x,), (out,) = node.inputs, node.outputs
    axes = node.op.axis
    # float32 sums accumulate in float64; a gemv would accumulate in float32
    if (
        axes is None
        or x.ndim < 2
        or x.dtype not in ("float32", "float64")
        or out.dtype != x.dtype
        or node.op.acc_dtype != x.dtype
    ):
        return None
    n = len(axes)
    if n == x.ndim or sorted(a % x.ndim for a in axes) != list(range(x.ndim - n, x.ndim)):
        return None
    cols = pt.prod(x.shape[x.ndim - n :])
    rows = x.reshape((-1, cols))
    vector = pt.TensorType(x.dtype, shape=(None,))
    zeros = alloc(pt.constant(0, dtype=x.dtype), [rows.shape[0]], vector)
    ones = alloc(pt.constant(1, dtype=x.dtype), [cols], vector)
    return [gemv_no_inplace(zeros, 1.0, rows, ones, 0.0).reshape(x.shape[: x.ndim - n])]


def _second_as_alloc(fgraph, node):
    """``second(a, b)`` (b in a's shape, as gradients of sums and means build it) as ``b``
    or ``alloc(b, shape)``: PyTensor's local_second_to_alloc, its Alloc built directly with
    the output's own static shape."""
    a, b = node.inputs
    out = node.outputs[0]
    value = b if b.type.dtype == out.type.dtype else pt.cast(b, out.type.dtype)
    if broadcasted_by(value, out):
        shape = get_simplified_broadcast_shape(b, a, fgraph=fgraph)
        value = alloc(value, shape, out.type)
    copy_stack_trace(out, value)
    return [value]


# (the rewrites wrap plain functions, which pickle by name with the compiled model)
SUM_AS_GEMV = in2out(node_rewriter([Sum])(_sum_last_axes_as_gemv), name="sum_last_axes_as_gemv")
SECOND_AS_ALLOC = in2out(node_rewriter([second])(_second_as_alloc), name="second_as_alloc")


def compile_mode(mode: str):
    """The PyTensor mode the pack's functions (and the inner functions of its scans) compile
    with: ``mode`` as configured, less :data:`EXCLUDED_REWRITES` for the default C backend,
    plus :data:`SECOND_AS_ALLOC` where PyTensor runs local_second_to_alloc (after its
    stabilising and specialising passes), :data:`SUM_AS_GEMV` (before the BLAS rewrites
    pick their C ops) and :data:`~.loops.CONTIGUOUS_LOOPS` (after elementwise fusion)."""
    if mode != DEFAULT_MODE:
        return mode
    return extend_mode(
        mode,
        EXCLUDED_REWRITES,
        [
            (SECOND_AS_ALLOC, "after_stabilize"),
            (SUM_AS_GEMV, "before_blas"),
            (SECOND_AS_ALLOC, "after_specialize"),
            (CONTIGUOUS_LOOPS, "after_fusion"),
        ],
    )
