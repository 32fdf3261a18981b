"""The packed network: K same-shape trials as one compiled graph.

Every parameter has a leading trial axis (``W: [K, n_out, n_in]``, stored transposed, and
``b: [K, n_out]``); activations are feature-major ``[K, width, B]``, so every product
reads and writes contiguous blocks and elementwise chains run over contiguous arrays;
per-trial hyperparameters (learning rate, momentum, L2, dropout rate) and an ``active``
flag are shared vectors of length K. Hidden layers are unrolled and computed as batched
matrix products; when all members see the same minibatch (same shuffling seed), the first
layer of all K members is one wide product ``[K*H, D] @ [D, B]``. The loss is the sum of
the members' losses, so each member's gradient is exactly its own. Updates of inactive
members (stopped, diverged, cancelled, finished) are masked: their parameters and
optimiser state stay as they were.

The compiled functions do not depend on K (it is the run-time length of the shared
values), so one compiled :class:`PackedModel` trains packs of any size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .flags import JAX_MODE, configure

configure()

import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402

from .layers import ACTIVATIONS, init_weights  # noqa: E402
from .updates import make_updates  # noqa: E402
from .vecmath import vexp, vrelu, vtanh  # noqa: E402

# NumPy's SIMD tanh instead of libm's scalar one (see vecmath): the pack's activations are
# large. ReLU too: PyTensor fuses max(z + b, 0) with the z + b its gradient needs into one
# two-output loop that ran at about 2 ns per element, 8x slower than the two apart.
# Under mode=JAX XLA vectorises them itself (and vecmath's NumPy ops cannot run inside XLA).
_PACK_ACTIVATIONS = {**ACTIVATIONS, "tanh": vtanh, "relu": vrelu}


def _activation(shape: PackShape):
    return (ACTIVATIONS if shape.mode == JAX_MODE else _PACK_ACTIVATIONS)[shape.activation]


@dataclass(frozen=True)
class PackShape:
    """Everything the packed graph depends on (the graph key's content, resolved)."""

    n_features: int
    n_outputs: int
    widths: tuple[int, ...]
    activation: str
    residual: bool
    dropout: bool
    loss: str
    classification: bool
    optimizer: str
    dtype: str
    mode: str
    shared_input: bool  # all members see the same minibatches (one shuffling seed)


def _bcast(v, ndim: int):
    """A length-K vector broadcast against a tensor of ``ndim`` with a leading trial axis."""
    return v.dimshuffle(0, *(["x"] * (ndim - 1)))


class PackedModel:
    """Shared parameters with a trial axis plus the compiled train-step and eval functions."""

    def __init__(self, shape: PackShape):
        self.shape = shape
        dtype = shape.dtype
        self.act = _activation(shape)
        dims = [shape.n_features, *shape.widths, shape.n_outputs]
        self.dims = dims
        self.W, self.b = [], []
        for i, (n_in, n_out) in enumerate(zip(dims[:-1], dims[1:])):
            self.W.append(pytensor.shared(np.zeros((1, n_out, n_in), dtype=dtype), name=f"W{i}"))
            self.b.append(pytensor.shared(np.zeros((1, n_out), dtype=dtype), name=f"b{i}"))
        self.params = [p for pair in zip(self.W, self.b) for p in pair]

        def vec(name: str):
            return pytensor.shared(np.zeros(1, dtype=dtype), name=name)

        self.lr, self.momentum, self.l2 = vec("learning_rate"), vec("momentum"), vec("l2")
        self.p_drop, self.active = vec("dropout"), vec("active")

        if shape.shared_input:
            X = pt.matrix("X", dtype=dtype)
            y = self._y_type(0)
        else:
            X = pt.tensor3("X", dtype=dtype)
            y = self._y_type(1)
        masks = [pt.tensor3(f"keep{i}", dtype=dtype) for i in range(len(shape.widths))] \
            if shape.dropout else []
        biased: list = []
        out = self._forward(X, masks, biased)
        rows, correct = self._loss_rows(out, y)
        loss = rows.mean(axis=1)
        penalty = sum(pt.sum(W ** 2, axis=(1, 2)) for W in self.W)
        objective = pt.sum(loss) + pt.sum(self.l2 * penalty)
        grads = self._grads(objective, biased)
        updates, self.opt_state = make_updates(
            shape.optimizer, self.params, grads,
            lambda p: _bcast(self.lr, p.ndim), lambda p: _bcast(self.momentum, p.ndim))
        keep = self.active > 0
        # frozen members keep their values; adam's step counter is shared by all members
        updates = [(v, pt.switch(_bcast(keep, v.ndim), e, v)) if v.ndim > 0 else (v, e)
                   for v, e in updates]
        self.train_fn = pytensor.function([X, y, *masks], [loss, correct], updates=updates,
                                          mode=shape.mode, name="packed_train_step")
        Xe = pt.matrix("X_eval", dtype=dtype)
        ye = self._y_type(0)
        out_e = self._forward(Xe, None)
        rows_e, correct_e = self._loss_rows(out_e, ye)
        self.eval_fn = pytensor.function([Xe, ye], [rows_e.sum(axis=1), correct_e],
                                         mode=shape.mode, name="packed_evaluate")

    def _y_type(self, extra: int):
        if self.shape.loss == "softmax_crossentropy":
            return pt.tensor("y", dtype="int64", shape=(None,) * (1 + extra))
        return pt.tensor("y", dtype=self.shape.dtype, shape=(None,) * (2 + extra))

    def _grads(self, objective, biased: list) -> list:
        """Gradients in :attr:`params` order. A bias's gradient is its layer's
        pre-activation gradient summed over the batch, taken as a matrix-vector product with
        ones: the C backend's Sum over the last axis of ``[K, width, B]`` is about 20x slower
        than that gemv, and was a tenth of a step. (XLA fuses its own reduction.)"""
        if self.shape.mode == JAX_MODE:
            return pytensor.grad(objective, self.params)
        n = len(self.W)
        g = pytensor.grad(objective, [*self.W, *biased])
        out = []
        for W_grad, z_grad, b in zip(g[:n], g[n:], self.b):
            rows = z_grad.reshape((-1, z_grad.shape[-1]))
            ones = pt.ones((z_grad.shape[-1],), dtype=z_grad.dtype)
            out += [W_grad, pt.dot(rows, ones).reshape(b.shape)]
        return out

    def _forward(self, x, masks, biased: list | None = None):
        """Output ``[K, n_outputs, B]`` for input ``[B, D]`` (shared by all members) or
        ``[K, B, D]``; ``masks`` (dropout keep flags ``[K, width, B]`` per hidden layer) or None.
        ``biased`` collects each layer's sum with its bias (``[..., B]``, bias rows first)."""
        shape, act = self.shape, self.act
        n_layers = len(self.W)
        h = x
        for i in range(n_layers):
            W, b = self.W[i], self.b[i]
            n_in, n_out = self.dims[i], self.dims[i + 1]
            last = i == n_layers - 1
            if i == 0 and x.ndim == 2 and shape.mode == JAX_MODE:
                # shared input under JAX: a broadcast product (XLA needs no reshape trick,
                # and a reshape to a run-time K is not a static shape)
                z = pt.matmul(W, x.T) + b.dimshuffle(0, 1, "x")
                x_fm = x.T.dimshuffle("x", 0, 1)
            elif i == 0 and x.ndim == 2:
                # shared input: all members' first layers are one wide product
                # [K*H, D] @ [D, B], already feature-major
                z = pt.dot(W.reshape((-1, n_in)), x.T) + b.reshape((-1,)).dimshuffle(0, "x")
                if biased is not None:
                    biased.append(z)
                z = z.reshape((W.shape[0], n_out, x.shape[0]))
                x_fm = x.T.dimshuffle("x", 0, 1)
            else:
                if i == 0:
                    h = x_fm = x.dimshuffle(0, 2, 1)
                z = pt.matmul(W, h) + b.dimshuffle(0, 1, "x")  # compiles to BatchedDot
                if biased is not None:
                    biased.append(z)
            if last:
                return z
            out = act(z)
            if masks:
                out = out * masks[i] / (1 - _bcast(self.p_drop, 3))
            if shape.residual and n_in == n_out:
                out = (x_fm if i == 0 else h) + out
            h = out
        return h

    def _loss_rows(self, out, y):
        """Per-member, per-row loss ``[K, B]`` and per-member correct counts ``[K]``.

        ``y``: class labels ``[B]`` / ``[K, B]``, or targets ``[B, O]`` / ``[K, B, O]``.
        """
        pred = pt.argmax(out, axis=1)
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
            labels = pt.argmax(target, axis=1)
            correct = pt.sum(pt.eq(pred, labels), axis=1)
        return rows, correct

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict:
        # the activation is a lambda (not picklable) and only needed to build the graph
        return {k: v for k, v in self.__dict__.items() if k != "act"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.act = _activation(self.shape)

    # ------------------------------------------------------------------ values
    def load(self, weights: list[np.ndarray], hyper: dict[str, np.ndarray]) -> None:
        """Set parameters (``[W0, b0, W1, b1, ...]`` with a trial axis), zero the optimiser
        state and set the hyperparameter vectors (learning_rate, momentum, l2, dropout)."""
        dtype = self.shape.dtype
        for p, v in zip(self.params, weights):
            if v.ndim == 3:  # [K, n_in, n_out] -> stored as [K, n_out, n_in]
                v = v.transpose(0, 2, 1)
            p.set_value(np.ascontiguousarray(v, dtype=dtype), borrow=True)
        for s, p in self.opt_state:
            shape = p.get_value(borrow=True).shape if p is not None else ()
            s.set_value(np.zeros(shape, dtype=dtype))
        K = weights[0].shape[0]
        for name, var in (("learning_rate", self.lr), ("momentum", self.momentum),
                          ("l2", self.l2), ("dropout", self.p_drop)):
            var.set_value(np.asarray(hyper[name], dtype=dtype).reshape(K))
        self.active.set_value(np.ones(K, dtype=dtype))

    def values(self) -> list[np.ndarray]:
        """The current parameter arrays in storage layout (views: copy before the next step)."""
        return [p.get_value(borrow=True) for p in self.params]

    @property
    def state_vars(self) -> list:
        """Every shared variable that holds per-pack state (parameters first)."""
        return [*self.params, *(s for s, _ in self.opt_state),
                self.lr, self.momentum, self.l2, self.p_drop, self.active]

    def export_state(self) -> list[np.ndarray]:
        """The state values, in :attr:`state_vars` order (not copied)."""
        return [v.get_value(borrow=True) for v in self.state_vars]

    def import_state(self, values: list[np.ndarray]) -> None:
        """Install state exported before (not copied: the arrays become the model's)."""
        for var, value in zip(self.state_vars, values):
            var.set_value(value, borrow=True)

    def set_active(self, active: np.ndarray) -> None:
        self.active.set_value(active.astype(self.shape.dtype))


def initial_weights(rng: np.random.Generator, init: str, dims: list[int], dtype: str) -> list[np.ndarray]:
    """One member's initial ``[W0, b0, ...]``, drawn in the order the per-trial engine draws.

    Hidden layers use ``init``; the output layer of every network uses Glorot.
    """
    out = []
    n_layers = len(dims) - 1
    for i, (n_in, n_out) in enumerate(zip(dims[:-1], dims[1:])):
        scheme = "glorot" if i == n_layers - 1 else init
        out.append(init_weights(rng, scheme, n_in, n_out).astype(dtype))
        out.append(np.zeros(n_out, dtype=dtype))
    return out
