"""The packed network: K trials of one shape as one compiled graph.

Every value has a leading member axis (``W: [K, n_out, n_in]``, stored transposed, and
``b: [K, n_out]``); activations are feature-major ``[K, width, B]``, so every product reads
and writes contiguous blocks; per-member hyperparameters (learning rate, momentum, L2,
clipping threshold) and an ``active`` flag are shared vectors of length K. A short run of
equal widths is unrolled (under the C backend up to four layers: shallow packs train
1.2-1.7x faster unrolled than through a scan); in a longer one the first layer is unrolled
and the rest of the run is a scanned :class:`~dnnframe.engine.layers.StackLayer`, so the
graph does not grow with depth (see :func:`segments_for`). When all
members see the same minibatch (same shuffling seed), the first layer of all K members is
one wide product ``[K*H, D] @ [D, B]``. The loss is the sum of the members' losses, so each
member's gradient is exactly its own (gradient clipping and L2 are per member too). Updates
of inactive members (stopped, diverged, cancelled, finished) are masked: their parameters,
running statistics and optimiser state stay as they were.

The compiled functions depend on neither K nor (under the C backend) the hidden widths and
the number of layers of a stack: all are run-time shapes of the shared values, so one
compiled :class:`PackedModel` trains packs of any size, width and stack depth of one
:class:`PackShape` (see :func:`graph_segments`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.tensor.blas import gemv_no_inplace
from pytensor.tensor.variable import TensorVariable

from .argmax import class_argmax
from .blocks import LayerDesign
from .flags import DEFAULT_MODE, JAX_MODE
from .graphkey import unrolled_run
from .layers import ACTIVATIONS, DenseLayer, Layer, StackLayer
from .rewrites import compile_mode
from .segments import Segment, split_widths
from .updates import make_updates
from .vecmath import vexp, vrelu, vtanh

# NumPy's SIMD tanh instead of libm's scalar one (see vecmath): the pack's activations are
# large. ReLU too: PyTensor fuses max(z + b, 0) with the z + b its gradient needs into one
# two-output loop that ran at about 2 ns per element, 8x slower than the two apart.
# Under mode=JAX XLA vectorises them itself (and vecmath's NumPy ops cannot run inside XLA).
_PACK_ACTIVATIONS = {**ACTIVATIONS, "tanh": vtanh, "relu": vrelu}

# per-member values the graph reads (dropout_scale: 1 / (1 - p), applied to the 0/1 masks)
HYPER = ("learning_rate", "momentum", "l2", "grad_clip", "dropout_scale")


def _grad_list(objective, wrt: list) -> list:
    """``pytensor.grad`` over a list: a list of the gradients, in order (grad's annotation
    is the union of what every way of calling it returns)."""
    grads = pytensor.grad(objective, wrt)
    assert isinstance(grads, list)
    return grads


def _activation(shape: PackShape):
    return (ACTIVATIONS if shape.mode == JAX_MODE else _PACK_ACTIVATIONS)[shape.activation]


@dataclass(frozen=True)
class PackShape:
    """Everything the compiled graph depends on: the compile key, resolved.

    ``segments`` is a tuple of :class:`~dnnframe.engine.segments.Segment` as
    :func:`graph_segments` gives them: under the C backend the hidden widths are None
    (run-time shapes). The number of layers of a stack is not part of the shape either,
    except under JAX (``stack_layers``, one count per stack: XLA needs static shapes).
    """

    n_features: int
    n_outputs: int
    segments: tuple[Segment, ...]
    activation: str
    design: LayerDesign
    dropout: bool
    grad_clip: bool
    loss: str
    classification: bool
    optimizer: str
    dtype: str
    mode: str
    shared_input: bool  # all members see the same minibatches (one shuffling seed)
    stack_layers: tuple[int, ...] | None = None


def segments_for(
    n_features: int, widths: list[int] | tuple[int, ...], static: bool = False, pack_size: int = 1
) -> tuple[tuple[Segment, ...], tuple[int, ...]]:
    """Hidden widths as graph segments plus the layer count of each stack
    (:func:`~dnnframe.engine.segments.split_widths`), a run of equal widths unrolled up to
    :func:`~dnnframe.engine.graphkey.unrolled_run` layers (``static``: JAX's static depths;
    ``pack_size``: a big pack unrolls short runs). The compile key's runs
    (:func:`~dnnframe.engine.graphkey.compile_key_fields`) come from the same split, so
    trials of one compile key share these segments as the graph sees them
    (:func:`graph_segments`).
    """
    return split_widths(n_features, widths, unrolled_run(static, pack_size))


def graph_segments(
    segments: tuple[Segment, ...], design: LayerDesign, mode: str
) -> tuple[Segment, ...]:
    """``segments`` (of :func:`segments_for`) as the compiled graph depends on them.

    Under JAX, as they are (static shapes). Otherwise every tensor's shape is a run-time
    value, so the hidden widths are erased (None) and one compiled function serves every
    width of a structure; only the first layer's input width (the dataset's) stays, and both
    widths of a dense layer whose input and output widths are equal when its design depends
    on that (a shortcut or pre-norm needs them equal; see ``LayerDesign.for_entry``): the
    first layer where the dataset is as wide, and every unrolled layer after the first of
    its run.
    """
    if mode == JAX_MODE:
        return segments
    out: list[Segment] = []
    for k, seg in enumerate(segments):
        if seg.is_stack:
            out.append(Segment.stack(None))
        elif seg.n_in == seg.n_out and design.for_entry() != design:
            out.append(seg)
        else:
            out.append(Segment.dense(seg.n_in if k == 0 else None, None))
    return tuple(out)


def _first(v, ndim: int):
    """A length-K vector broadcast against a tensor of ``ndim`` with a leading member axis."""
    return v.dimshuffle(0, *(["x"] * (ndim - 1)))


def _per_member_sum(x):
    """The sum of ``x`` over every axis but the member axis: ``[K]``."""
    return x if x.ndim == 1 else pt.sum(x, axis=tuple(range(1, x.ndim)))


class PackedModel:
    """The packed layers, the per-member hyperparameter vectors and the compiled train-step
    and evaluation functions of one :class:`PackShape`."""

    def __init__(self, shape: PackShape):
        self.shape = shape
        dtype, jax = shape.dtype, shape.mode == JAX_MODE
        mode = compile_mode(shape.mode)
        # the scans' inner functions get the same rewrites; other modes keep PyTensor's default
        scan_mode = mode if shape.mode == DEFAULT_MODE else None
        act = _activation(shape)
        self.layers: list[Layer] = []
        counts = iter(shape.stack_layers or ())
        for k, seg in enumerate(shape.segments):
            if not seg.is_stack:
                n_in, n_out = seg.n_in, seg.n_out
                design = (
                    shape.design if n_in is not None and n_in == n_out else shape.design.for_entry()
                )
                self.layers.append(DenseLayer(n_in, n_out, act, design, dtype, f"hidden{k}", jax))
            else:
                n_static = next(counts) if shape.stack_layers is not None else None
                self.layers.append(
                    StackLayer(
                        seg.width,
                        act,
                        shape.design,
                        dtype,
                        f"stack{k}",
                        n_static,
                        jax,
                        scan_mode=scan_mode,
                    )
                )
        last = self.layers[-1].n_out if self.layers else shape.n_features  # None: run-time
        self.layers.append(
            DenseLayer(last, shape.n_outputs, None, LayerDesign(), dtype, "output", jax)
        )
        self.params = [p for layer in self.layers for p in layer.params]
        self.stats = [s for layer in self.layers for s in layer.stats]
        self.consts = [c for layer in self.layers for c in layer.consts]
        self.hyper = {name: pytensor.shared(np.zeros(1, dtype=dtype), name=name) for name in HYPER}
        self.active = pytensor.shared(np.zeros(1, dtype=dtype), name="active")

        X = pt.matrix("X", dtype=dtype) if shape.shared_input else pt.tensor3("X", dtype=dtype)
        y = self._y_type(0 if shape.shared_input else 1)
        hidden = self.layers[:-1]
        masks = (
            [
                pt.tensor(
                    f"keep{i}",
                    dtype="bool",
                    shape=(None,) * (4 if isinstance(layer, StackLayer) else 3),
                )
                for i, layer in enumerate(hidden)
            ]
            if shape.dropout
            else []
        )
        biased: dict | None = None if jax else {}
        keeps: list[TensorVariable | None] = list(masks) if masks else [None] * len(hidden)
        out, stat_updates = self._forward(X, keeps, False, biased)
        rows, correct = self._loss_rows(out, y)
        loss = rows.mean(axis=1)
        W_all = [layer.shared["W"] for layer in self.layers]
        penalty = sum(_per_member_sum(W**2) for W in W_all)
        objective = pt.sum(loss) + pt.sum(self.hyper["l2"] * penalty)
        grads = self._grads(objective, biased, X.shape[-2])
        if shape.grad_clip:
            grads = self._clip(grads)
        updates, self.opt_state = make_updates(
            shape.optimizer,
            self.params,
            grads,
            lambda p: _first(self.hyper["learning_rate"], p.ndim),
            lambda p: _first(self.hyper["momentum"], p.ndim),
        )
        keep = self.active > 0
        # frozen members keep their values; adam's step counter is shared by all members
        updates = [
            (v, pt.switch(_first(keep, v.ndim), e, v)) if v.ndim > 0 else (v, e)
            for v, e in updates + stat_updates
        ]
        self.train_fn = pytensor.function(
            [X, y, *masks], [loss, correct], updates=updates, mode=mode, name="packed_train_step"
        )
        Xe = pt.matrix("X_eval", dtype=dtype)
        ye = self._y_type(0)
        out_e, _ = self._forward(Xe, [None] * len(hidden), True, None)
        rows_e, correct_e = self._loss_rows(out_e, ye)
        self.eval_fn = pytensor.function(
            [Xe, ye], [rows_e.sum(axis=1), correct_e], mode=mode, name="packed_evaluate"
        )

    def _y_type(self, extra: int):
        if self.shape.loss == "softmax_crossentropy":
            return pt.tensor("y", dtype="int64", shape=(None,) * (1 + extra))
        return pt.tensor("y", dtype=self.shape.dtype, shape=(None,) * (2 + extra))

    def _forward(self, x, masks: list, deterministic: bool, biased: dict | None):
        """Output ``[K, n_outputs, B]`` for input ``[B, D]`` (shared by all members) or
        ``[K, B, D]``, and the batch-norm update pairs of the training graph."""
        h = x if x.ndim == 2 else x.dimshuffle(0, 2, 1)
        stat_updates: list = []
        for layer, keep in zip(self.layers[:-1], masks):
            h, pairs = layer.forward(h, keep, deterministic, biased, self.hyper["dropout_scale"])
            stat_updates += pairs
        out, _ = self.layers[-1].forward(h, None, deterministic, biased)
        return out, stat_updates

    def _grads(self, objective, biased: dict | None, batch) -> list:
        """Gradients in :attr:`params` order. A dense layer's bias gradient is its
        pre-activation gradient summed over the batch, taken as a matrix-vector product with
        ones: the C backend's Sum over the last axis of ``[K, width, B]`` is about 20x slower
        than that gemv, and was a tenth of a step. (XLA fuses its own reduction.)

        ``batch`` is the minibatch size read off the input: a shape read off the gradient
        instead makes every Reshape and Alloc built here infer it statically through the
        whole gradient graph (a tenth of a build)."""
        if not biased:
            return _grad_list(objective, self.params)
        direct = [p for p in self.params if p not in biased]
        via_z = [p for p in self.params if p in biased]
        g = _grad_list(objective, [*direct, *(biased[b] for b in via_z)])
        out = dict(zip(direct, g[: len(direct)]))
        for b, z_grad in zip(via_z, g[len(direct) :]):
            rows = z_grad.reshape((-1, batch))
            ones = pt.ones((batch,), dtype=z_grad.dtype)
            # the gemv written out, its output sized off b: the rewrite that turns a dot
            # into one sizes its output by inferring rows' shape through the whole graph
            zeros = pt.zeros((b.shape[0] * b.shape[1],), dtype=z_grad.dtype)
            summed = gemv_no_inplace(zeros, 1.0, rows, ones, 0.0)
            assert isinstance(summed, TensorVariable)  # the Op has one output
            out[b] = summed.reshape(b.shape)
        return [out[p] for p in self.params]

    def _clip(self, grads: list) -> list:
        """Each member's gradients rescaled together so their global L2 norm is at most its
        threshold: directions are kept, only too-large steps shrink (Pascanu et al. 2013)."""
        norm = pt.sqrt(sum(_per_member_sum(g**2) for g in grads))
        factor = pt.minimum(1.0, self.hyper["grad_clip"] / pt.maximum(norm, 1e-12))
        return [pt.cast(g * _first(factor, g.ndim), g.dtype) for g in grads]

    def _loss_rows(self, out, y):
        """Per-member, per-row loss ``[K, B]`` and per-member correct counts ``[K]``.

        ``y``: class labels ``[B]`` / ``[K, B]``, or targets ``[B, O]`` / ``[K, B, O]``.
        """
        argmax = (lambda v: pt.argmax(v, axis=1)) if self.shape.mode == JAX_MODE else class_argmax
        pred = argmax(out)
        if self.shape.loss == "softmax_crossentropy":
            # log-softmax over the class axis from fusable elementwise ops and reductions;
            # the max is a constant shift (no gradient flows through it)
            m = pytensor.gradient.disconnected_grad(pt.max(out, axis=1, keepdims=True))
            shifted = out - m
            exp = pt.exp if self.shape.mode == JAX_MODE else vexp
            logp = shifted - pt.log(pt.sum(exp(shifted), axis=1, keepdims=True))
            labels = y.dimshuffle("x", 0) if y.ndim == 1 else y
            classes = pt.arange(self.shape.n_outputs).dimshuffle("x", 0, "x")
            onehot = pt.eq(classes, labels.dimshuffle(0, "x", 1))
            rows = -pt.sum(pt.switch(onehot, logp, 0), axis=1)
            correct = pt.sum(pt.eq(pred, labels), axis=1)
        else:
            target = y.dimshuffle("x", 1, 0) if y.ndim == 2 else y.dimshuffle(0, 2, 1)
            rows = pt.mean((out - target) ** 2, axis=1)
            labels = argmax(target)
            correct = pt.sum(pt.eq(pred, labels), axis=1)
        return rows, correct

    # ------------------------------------------------------------------ values
    @property
    def network(self) -> list:
        """The layers' shared variables: parameters, then running statistics, then constants."""
        return [*self.params, *self.stats, *self.consts]

    @property
    def state_vars(self) -> list:
        """Every shared variable that holds per-pack state, :attr:`network` first."""
        return [*self.network, *(s for s, _ in self.opt_state), *self.hyper.values(), self.active]

    @property
    def n_best(self) -> int:
        """How many leading :attr:`state_vars` a best-epoch snapshot keeps (parameters and
        running statistics)."""
        return len(self.params) + len(self.stats)

    def hyper_index(self, name: str) -> int:
        """The position of hyperparameter vector ``name`` in :attr:`state_vars`."""
        return len(self.state_vars) - 1 - len(HYPER) + HYPER.index(name)

    def load(self, network: list[np.ndarray], hyper: dict[str, np.ndarray]) -> None:
        """Set the network's values (in :attr:`network` order, member axis first), zero the
        optimiser state, set the hyperparameter vectors and make every member active."""
        dtype = self.shape.dtype
        for var, value in zip(self.network, network):
            var.set_value(np.ascontiguousarray(value, dtype=dtype), borrow=True)
        for s, p in self.opt_state:
            shape = p.get_value(borrow=True).shape if p is not None else ()
            s.set_value(np.zeros(shape, dtype=dtype))
        K = network[0].shape[0]
        for name, var in self.hyper.items():
            var.set_value(np.asarray(hyper[name], dtype=dtype).reshape(K))
        self.active.set_value(np.ones(K, dtype=dtype))

    def export_state(self) -> list[np.ndarray]:
        """The state values, in :attr:`state_vars` order (not copied)."""
        return [v.get_value(borrow=True) for v in self.state_vars]

    def import_state(self, values: list[np.ndarray]) -> None:
        """Install state exported before (not copied: the arrays become the model's)."""
        for var, value in zip(self.state_vars, values):
            var.set_value(value, borrow=True)

    def set_active(self, active: np.ndarray) -> None:
        self.active.set_value(active.astype(self.shape.dtype))

    def n_params(self, values: list[np.ndarray], stack_layers: tuple[int, ...]) -> int:
        """One member's count of trained parameters from its values (:attr:`network` order):
        a stack of 0 real layers (a run of one under the C backend) counts none."""
        counts = iter(stack_layers)
        empty = {
            id(p)
            for layer in self.layers
            if isinstance(layer, StackLayer) and next(counts) == 0
            for p in layer.params
        }
        return int(sum(v.size for p, v in zip(self.params, values) if id(p) not in empty))

    def initial_network(
        self,
        rng: np.random.Generator,
        init: str,
        residual_scale: float,
        stack_layers: tuple[int, ...],
        segments: tuple[Segment, ...] | None = None,
    ) -> list[np.ndarray]:
        """One member's initial values in :attr:`network` order, drawn layer by layer in
        order; hidden layers use ``init``, the output layer of every network uses Glorot.
        ``segments``: the member's own (of :func:`segments_for`, with its widths; default:
        the shape's, which have them only under JAX)."""
        counts = iter(stack_layers)
        sizes = list(segments if segments is not None else self.shape.segments)
        last = sizes[-1].width if sizes else self.shape.n_features
        sizes.append(Segment.dense(last, self.shape.n_outputs))
        values: dict = {}
        for layer, seg in zip(self.layers, sizes):
            if isinstance(layer, StackLayer):
                drawn = layer.initial_values(rng, init, residual_scale, next(counts), seg.width)
            else:
                scheme = "glorot" if layer is self.layers[-1] else init
                drawn = layer.initial_values(rng, scheme, residual_scale, seg.n_in, seg.n_out)
            values.update(zip(layer.shared.values(), drawn))
        return [values[v] for v in self.network]

    @property
    def hidden(self) -> list[Layer]:
        return self.layers[:-1]
