"""Packed layers as small composable objects over symbolic PyTensor tensors (Lasagne style).

Every layer holds the values of all members of a pack: each shared variable has a leading
member axis ``K`` (run-time: one compiled graph trains packs of any size, a pack of one
included). Activations are feature-major ``[K, units, B]``, so every product reads and
writes contiguous blocks. A layer builds its symbolic output with ``forward`` and gives one
member's initial values with ``initial_values``; shapes are checked when it is built.

A run of hidden layers of equal width is one :class:`StackLayer`: its tensors carry a layer
axis after the member axis and its forward pass is a ``pytensor.scan`` over it, so the graph
(and the compile time) does not grow with depth. Under the C backend the number of layers is
a run-time value (the shared values' shape): one compiled function trains a stack of 0 or
2,000 layers (0: one placeholder layer whose output a per-member flag switches off). Under JAX it is static (XLA needs static shapes), and XLA compiles the scan's
body once, so the build time does not grow with depth there either. Likewise a hidden width
given as None is a run-time value (the C backend's graphs serve every width): the values
loaded set it, and ``initial_values`` is told it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytensor
import pytensor.tensor as pt

from .blocks import LayerDesign, block_step, fold_affine, running_update, saved_count
from .constants import SELU_ALPHA, SELU_SCALE


def _elu(x):
    # exp of the clipped input: the untaken branch must not overflow into inf * 0 = NaN grads
    return pt.switch(x > 0, x, pt.exp(pt.minimum(x, 0)) - 1)


ACTIVATIONS: dict[str, Callable] = {
    # the gradient stops at x == 0, as the C backend's NumPy ReLU's (which reads its output)
    "relu": lambda x: pt.switch(x > 0, x, 0),
    "leaky_relu": lambda x: pt.maximum(x, 0.01 * x),
    "elu": _elu,
    "selu": lambda x: SELU_SCALE * pt.switch(x > 0, x, SELU_ALPHA * (pt.exp(pt.minimum(x, 0)) - 1)),
    "tanh": pt.tanh,
    "sigmoid": pt.sigmoid,
    "softplus": pt.softplus,
    "linear": lambda x: x,
}


def init_weights(rng: np.random.Generator, init: str, n_in: int, n_out: int) -> np.ndarray:
    """One ``(n_in, n_out)`` weight matrix drawn with the named scheme (float64)."""
    if init == "glorot":  # Glorot & Bengio 2010, uniform
        limit = np.sqrt(6.0 / (n_in + n_out))
        return rng.uniform(-limit, limit, size=(n_in, n_out))
    if init == "he":  # He et al. 2015, normal
        return rng.normal(0.0, np.sqrt(2.0 / n_in), size=(n_in, n_out))
    if init == "lecun":  # LeCun 1998, normal
        return rng.normal(0.0, np.sqrt(1.0 / n_in), size=(n_in, n_out))
    if init == "orthogonal":  # Saxe et al. 2014
        a = rng.normal(size=(max(n_in, n_out), min(n_in, n_out)))
        q, r = np.linalg.qr(a)
        q = q * np.sign(np.diag(r))  # unique decomposition → a uniform draw
        return q if n_in >= n_out else q.T
    raise ValueError(f"init must be one of glorot, he, lecun, orthogonal, but got {init!r}")


def _check_positive(name: str, value: int | None) -> None:
    if value is None:  # a run-time size
        return
    if not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, but got {value!r}")


class PackedLayer:
    """Base class. ``shared`` maps names (``W``, ``b`` and the design's extras) to shared
    variables with a leading member axis; ``params`` are trained, ``regularizable`` get L2,
    ``stats`` are batch-norm running statistics (saved with the best epoch's weights), and
    the rest (a fixed residual scale) are per-member constants."""

    design: LayerDesign
    shared: dict
    units: int | None
    n_in: int | None  # None: a run-time width
    n_out: int | None
    dtype: str

    def _make(self, name: str, lead: tuple, static: tuple | None) -> None:
        """Create ``W``, ``b`` and the extras with the per-member shape ``lead + ...``;
        ``static``: the same shape fixed in the variables' type (None: unknown). A run-time
        width (None) holds 1 until values are loaded: an untyped shared value's dims of
        length 1 are not broadcastable, so nothing in the graph assumes it."""
        n_in, n_out = self.n_in, self.n_out
        shapes = {"W": (*lead, n_out, n_in), "b": (*lead, n_out)}
        for extra in self.design.extras():
            shapes[extra] = lead if extra == "scale" else (*lead, self.units)
        self.shared = {}
        for key, shape in shapes.items():
            typed = (None, *shape) if static is not None else None
            placeholder = tuple(1 if n is None else n for n in shape)
            self.shared[key] = pytensor.shared(
                np.zeros((1, *placeholder), dtype=self.dtype), name=f"{name}.{key}", shape=typed
            )
        self.params = [
            v for k, v in self.shared.items() if k in ("W", "b") or self.design.trained(k)
        ]
        self.regularizable = [self.shared["W"]]
        self.stats = [self.shared[k] for k in ("mean", "var") if k in self.shared]
        self.consts = [
            v for k, v in self.shared.items() if v not in self.params and v not in self.stats
        ]

    def __getstate__(self) -> dict:
        # activations may be lambdas (not picklable), and only building the graph needs them
        return {k: v for k, v in self.__dict__.items() if k != "act"}

    def _start(self, key: str, lead: tuple, residual_scale: float, units: int) -> np.ndarray:
        start = {"gain": 1.0, "shift": 0.0, "mean": 0.0, "var": 1.0, "scale": residual_scale}
        shape = lead if key == "scale" else (*lead, units)
        return np.full(shape, start[key], dtype=self.dtype)


class DenseLayer(PackedLayer):
    """One layer ``n_in → n_out``: :func:`block_step` with its own parameters (``W`` stored
    transposed, ``[K, n_out, n_in]``). ``act`` None makes it the linear output layer.
    ``n_in``/``n_out`` None: run-time widths (a residual layer needs them given and equal)."""

    def __init__(
        self,
        n_in: int | None,
        n_out: int | None,
        act: Callable | None,
        design: LayerDesign,
        dtype: str,
        name: str,
        jax: bool = False,
    ):
        _check_positive("n_in", n_in)
        _check_positive("n_out", n_out)
        if design.residual != "none" and (n_in is None or n_in != n_out):
            raise ValueError(
                f"a residual layer needs n_in == n_out, but got n_in={n_in}, n_out={n_out}"
            )
        self.n_in, self.n_out, self.dtype, self.design = n_in, n_out, dtype, design
        self.act, self.jax = act, jax
        self.units = n_in if design.norm_position == "pre" else n_out
        self._make(name, (), None)

    def forward(self, h, keep, deterministic: bool, biased: dict | None = None, keep_scale=None):
        """``(output, batch-norm update pairs)`` for ``h`` ``[K, n_in, B]``, or the members'
        shared input ``[B, n_in]`` (one minibatch for all). ``biased`` (training graph of the
        C backend) collects ``W u + b`` under ``b``: its batch sum is ``b``'s gradient.
        ``keep``/``keep_scale``: as :func:`block_step` takes them."""
        W, b = self.shared["W"], self.shared["b"]

        def product(u, *affine):
            if affine:  # pre-norm: u is the normalised [K or 1, n_in, B]
                W_eff, b_eff = fold_affine(W, b, *affine)
                z = pt.matmul(W_eff, u) + b_eff.dimshuffle(0, 1, "x")
                if biased is not None:
                    biased[b] = z  # (b_eff's gradient, which is b's)
                return z
            if u.ndim == 2 and not self.jax:
                # shared input: all members' products are one wide product [K*n_out, D] @ [D, B]
                n_in = W.shape[2] if self.n_in is None else self.n_in
                n_out = W.shape[1] if self.n_out is None else self.n_out
                z = pt.dot(W.reshape((-1, n_in)), u.T) + b.reshape((-1,)).dimshuffle(0, "x")
                if biased is not None:
                    biased[b] = z
                return z.reshape((W.shape[0], n_out, u.shape[0]))
            if u.ndim == 2:  # under JAX a broadcast product (a run-time K is no static shape)
                return pt.matmul(W, u.T) + b.dimshuffle(0, 1, "x")
            z = pt.matmul(W, u) + b.dimshuffle(0, 1, "x")  # compiles to BatchedDot
            if biased is not None:
                biased[b] = z
            return z

        if self.act is None:
            return product(h), []
        # a shared input enters residual sums and normalisation feature-major, [1, D, B]
        h_fm = h.T.dimshuffle("x", 0, 1) if h.ndim == 2 else h
        extras = {k: v for k, v in self.shared.items() if k not in ("W", "b")}
        out, stats = block_step(
            h_fm,
            product,
            extras,
            self.design,
            self.act,
            keep,
            deterministic,
            product_input=h,
            keep_scale=keep_scale,
        )
        return out, self._stat_updates(stats)

    def _stat_updates(self, stats) -> list:
        if stats is None:
            return []
        return [
            (self.shared["mean"], running_update(self.shared["mean"], stats[0])),
            (self.shared["var"], running_update(self.shared["var"], stats[1])),
        ]

    def initial_values(
        self,
        rng: np.random.Generator,
        init: str,
        residual_scale: float,
        n_in: int | None = None,
        n_out: int | None = None,
    ) -> list[np.ndarray]:
        """One member's values, in ``shared`` order (draws one weight matrix from ``rng``);
        ``n_in``/``n_out``: the member's widths (default: the layer's own)."""
        n_in = self.n_in if n_in is None else n_in
        n_out = self.n_out if n_out is None else n_out
        if n_in is None or n_out is None:
            raise ValueError(
                f"layer {self.shared['W'].name}: run-time widths need the member's n_in and n_out"
            )
        units = n_in if self.design.norm_position == "pre" else n_out
        out = []
        for key in self.shared:
            if key == "W":
                out.append(init_weights(rng, init, n_in, n_out).T.astype(self.dtype))
            elif key == "b":
                out.append(np.zeros(n_out, dtype=self.dtype))
            else:
                out.append(self._start(key, (), residual_scale, units))
        return out


class StackLayer(PackedLayer):
    """``n_layers`` layers ``width → width`` as one scan of :func:`block_step` over stacked
    tensors (``W: [K, n_layers, width, width]``, every extra with the same layer axis).

    ``n_layers`` given: static (part of the variables' type, as JAX needs); None: a run-time
    value, set by the values loaded (so is ``width`` when None), 0 included: one placeholder
    layer and a per-member const ``live`` (1: the scan's output; 0: the stack's input).
    Dropout masks come in as one ``[n_layers, K, width, B]`` input, layer-major so that each
    step's slice is contiguous (strided, it slowed the step's elementwise loops), scanned with
    the weights. ``scan_mode``: the PyTensor mode the scan's inner functions compile with
    (None: PyTensor's default), the same as the outer function's.

    In a training graph each step also outputs what its gradient would compute again (see
    :func:`~.blocks.block_step`'s ``saved``): PyTensor's scan gradient reads those outputs
    instead of recomputing them.
    """

    def __init__(
        self,
        width: int | None,
        act: Callable,
        design: LayerDesign,
        dtype: str,
        name: str,
        n_layers: int | None = None,
        jax: bool = False,
        scan_mode=None,
    ):
        _check_positive("width", width)
        if n_layers is not None:
            _check_positive("n_layers", n_layers)
        self.n_in = self.n_out = self.units = width
        self.width, self.dtype, self.design, self.act = width, dtype, design, act
        self.n_layers, self.jax, self.scan_mode = n_layers, jax, scan_mode
        lead = (n_layers or 1,)
        self._make(name, lead, lead if n_layers is not None else None)
        if n_layers is None:
            # a run-time depth may be 0 real layers: the scan still runs one placeholder step
            # (a scan of 0 steps has no gradient in PyTensor) and this per-member flag (0)
            # passes the stack's input through instead
            self.shared["live"] = pytensor.shared(np.zeros(1, dtype=dtype), name=f"{name}.live")
            self.consts.append(self.shared["live"])

    def forward(self, h, keep, deterministic: bool, biased: dict | None = None, keep_scale=None):
        """``(output [K, width, B], batch-norm update pairs)`` for ``h`` ``[K, width, B]``;
        ``keep`` ``[n_layers, K, width, B]`` or None, and ``keep_scale`` as :func:`block_step`
        takes them."""
        design, act = self.design, self.act
        names = [
            k
            for k in self.shared
            if k != "live" and not (k in ("mean", "var") and not deterministic)
        ]
        live = self.shared.get("live")
        h_all, used = h, None
        if live is not None:
            # 0 real layers: the placeholder step runs on one row (about free; 0 rows trip
            # BLAS's stride checks) whose output is dropped: every row passes through (see
            # _pass). With layers, on all rows.
            used = pt.switch(live[0] > 0, h.shape[-1], 0)
            rows = pt.maximum(used, 1)
            h = h[:, :, :rows]
            keep = keep[..., :rows] if keep is not None else None
        # the scan runs over layers: layer axis first
        seqs = [v.dimshuffle(1, 0, *range(2, v.ndim)) for v in (self.shared[k] for k in names)]
        if keep is not None:
            seqs.append(keep)
        training_bn = design.normalization == "batch" and not deterministic

        def step(*args):
            *layer, h = args
            values = dict(zip(names, layer))
            W, b = values.pop("W"), values.pop("b")
            k = layer[len(names)] if keep is not None else None

            def product(u, *affine):
                # the bias broadcast over the batch: its gradient's Sum over the batch axis
                # compiles to a gemv with ones (SUM_AS_GEMV in rewrites)
                W_eff, b_eff = fold_affine(W, b, *affine) if affine else (W, b)
                return pt.matmul(W_eff, u) + b_eff.dimshuffle(0, 1, "x")

            saved = None if deterministic else []
            out, stats = block_step(
                h,
                product,
                values,
                design,
                act,
                k,
                deterministic,
                saved=saved,
                keep_scale=keep_scale,
            )
            assert len(saved or ()) == n_saved
            # The gradient's scan swaps each of the step's outputs that it would recompute
            # for the value saved here, output by output in this order: last computed
            # first, since swapping an inner value first hides the outer ones built on it.
            return (out, *reversed(saved or ()), *(stats if training_bn else ()))

        n_steps = self.n_layers if self.n_layers is not None else self.shared["W"].shape[1]
        n_saved = 0 if deterministic else saved_count(design, keep is not None)
        outputs_info = [h] + [None] * (n_saved + 2 * training_bn)
        outputs = pytensor.scan(
            step,
            sequences=seqs,
            outputs_info=outputs_info,
            n_steps=n_steps,
            return_updates=False,
            mode=self.scan_mode,
        )
        if not (n_saved or training_bn):
            return self._pass(outputs[-1], h_all, used), []
        if not training_bn:
            return self._pass(outputs[0][-1], h_all, used), []
        hs, means, variances = outputs[0], outputs[-2], outputs[-1]
        return self._pass(hs[-1], h_all, used), [
            (s, self._keep_placeholder(s, running_update(s, stats.dimshuffle(1, 0, 2))))
            for s, stats in ((self.shared["mean"], means), (self.shared["var"], variances))
        ]

    def _pass(self, out, h, used):
        """The stack's output: the scan's first ``used`` rows (all, or none for a stack of 0
        real layers), then the rest of its input ``h``'s. Exact, also in the gradient."""
        if used is None:
            return out
        return pt.concatenate([out[:, :, :used], h[:, :, used:]], axis=2)

    def _keep_placeholder(self, running, new):
        """``new`` running statistics, but the placeholder's stay as they are."""
        if "live" not in self.shared:
            return new
        return pt.switch(self.shared["live"].dimshuffle(0, "x", "x") > 0, new, running)

    def initial_values(
        self,
        rng: np.random.Generator,
        init: str,
        residual_scale: float,
        n_layers: int = 1,
        width: int | None = None,
    ) -> list[np.ndarray]:
        """One member's values for ``n_layers`` layers of ``width`` (default: the layer's
        own), in ``shared`` order (draws the layers' weight matrices from ``rng`` in order).
        ``n_layers`` 0 (a run-time depth only): one placeholder layer of zero weights,
        drawing nothing from ``rng``, and the ``live`` flag 0."""
        w = self.width if width is None else width
        if w is None:
            raise ValueError(
                f"layer {self.shared['W'].name}: a run-time width needs the member's width"
            )
        if n_layers == 0 and "live" not in self.shared:
            raise ValueError("a stack of static depth needs n_layers >= 1")
        placeholder = n_layers == 0
        n_layers = max(n_layers, 1)
        out = []
        for key in self.shared:
            if key == "live":
                out.append(np.asarray(0.0 if placeholder else 1.0, dtype=self.dtype))
            elif key == "W" and placeholder:
                out.append(np.zeros((1, w, w), dtype=self.dtype))
            elif key == "W":
                out.append(
                    np.stack([init_weights(rng, init, w, w).T for _ in range(n_layers)]).astype(
                        self.dtype
                    )
                )
            elif key == "b":
                out.append(np.zeros((n_layers, w), dtype=self.dtype))
            else:
                out.append(self._start(key, (n_layers,), residual_scale, w))
        return out


# The layers a packed network is built of.
Layer = DenseLayer | StackLayer

__all__ = ["ACTIVATIONS", "DenseLayer", "Layer", "PackedLayer", "StackLayer", "init_weights"]
