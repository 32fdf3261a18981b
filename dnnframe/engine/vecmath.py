"""Transcendental functions evaluated by NumPy's vectorised ufuncs inside a PyTensor graph.

PyTensor's C backend computes ``tanh`` and ``exp`` one element at a time through libm
(tens of ns per element on this class of CPU); NumPy's SIMD loops are about ten times
faster. Where NumPy's float tanh is libm's scalar loop too (a CPU without AVX-512),
:mod:`.mvec` calls glibc's vector tanh instead. On the large activation arrays of a pack
that is the difference between the elementwise work and the matrix products dominating.
The ops here run NumPy in ``perform`` (a few microseconds of call overhead) and give
symbolic gradients that reuse the output, so the backward pass needs no further
transcendental calls.

Results agree with libm to within a few units in the last place, not bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from . import mvec


class _Unary(Op):
    """``out = ufunc(x)`` with ``d out / dx`` written in terms of ``out``."""

    __props__ = ("name",)
    ufuncs = {"tanh": mvec.tanh, "exp": np.exp, "relu": lambda x: np.maximum(x, 0)}

    def __init__(self, name: str):
        self.name = name

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        (x,) = inputs
        outputs[0][0] = self.ufuncs[self.name](x)

    def infer_shape(self, fgraph, node, shapes):
        return shapes

    def pullback(self, inputs, outputs, output_grads):
        (out,), (gz,) = outputs, output_grads
        if self.name == "tanh":
            return [gz * (1 - out * out)]
        if self.name == "relu":  # from the output: a scan's gradient then needs no z again
            return [gz * pt.gt(out, 0)]
        return [gz * out]


vtanh = _Unary("tanh")
vexp = _Unary("exp")
vrelu = _Unary("relu")
