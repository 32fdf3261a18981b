"""The packed network: K same-shape trials as one compiled graph.

Every parameter has a leading trial axis (``W: [K, n_in, n_out]``, ``b: [K, n_out]``);
per-trial hyperparameters (learning rate, momentum, L2, dropout rate) and an ``active``
flag are shared vectors of length K. Hidden layers are unrolled and computed as batched
matrix products; when all members see the same minibatch (same shuffling seed), the first
layer of all K members is one wide product ``[B, D] @ [D, K*H]``. The loss is the sum of
the members' losses, so each member's gradient is exactly its own. Updates of inactive
members (stopped, diverged, cancelled, finished) are masked: their parameters and
optimiser state stay as they were.

The compiled functions do not depend on K (it is the run-time length of the shared
values), so one compiled :class:`PackedModel` trains packs of any size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .flags import configure

configure()

import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402

from .layers import ACTIVATIONS, init_weights  # noqa: E402
from .updates import make_updates  # noqa: E402


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
        self.act = ACTIVATIONS[shape.activation]
        dims = [shape.n_features, *shape.widths, shape.n_outputs]
        self.dims = dims
        self.W, self.b = [], []
        for i, (n_in, n_out) in enumerate(zip(dims[:-1], dims[1:])):
            self.W.append(pytensor.shared(np.zeros((1, n_in, n_out), dtype=dtype), name=f"W{i}"))
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
        out = self._forward(X, masks)
        rows, correct = self._loss_rows(out, y)
        loss = rows.mean(axis=1)
        penalty = sum(pt.sum(W ** 2, axis=(1, 2)) for W in self.W)
        objective = pt.sum(loss) + pt.sum(self.l2 * penalty)
        grads = pytensor.grad(objective, self.params)
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

    def _forward(self, x, masks):
        """Output ``[K, B, n_outputs]``; ``masks`` (dropout keep flags per hidden layer) or None."""
        shape, act = self.shape, self.act
        n_layers = len(self.W)
        h = x
        for i in range(n_layers):
            W, b = self.W[i], self.b[i]
            n_in, n_out = self.dims[i], self.dims[i + 1]
            last = i == n_layers - 1
            if h.ndim == 2:
                # shared input: all members' first layers are one wide product [B, D] @ [D, K*H]
                wide = W.dimshuffle(1, 0, 2).reshape((n_in, -1))
                z = pt.dot(h, wide) + b.reshape((-1,))
                z = z.reshape((h.shape[0], W.shape[0], n_out)).dimshuffle(1, 0, 2)
            else:
                z = pt.batched_dot(h, W) + b.dimshuffle(0, "x", 1)
            if last:
                return z
            out = act(z)
            if masks:
                out = out * masks[i] / (1 - _bcast(self.p_drop, 3))
            if shape.residual and n_in == n_out:
                out = h + out
            h = out
        return h

    def _loss_rows(self, out, y):
        """Per-member, per-row loss ``[K, B]`` and per-member correct counts ``[K]``."""
        K, B = out.shape[0], out.shape[1]
        pred = pt.argmax(out, axis=2)
        if self.shape.loss == "softmax_crossentropy":
            logp = pt.special.log_softmax(out, axis=2)
            if y.ndim == 1:
                rows = -logp[:, pt.arange(B), y]
                correct = pt.sum(pt.eq(pred, y.dimshuffle("x", 0)), axis=1)
            else:
                rows = -logp[pt.arange(K).dimshuffle(0, "x"), pt.arange(B).dimshuffle("x", 0), y]
                correct = pt.sum(pt.eq(pred, y), axis=1)
        else:
            target = y.dimshuffle("x", 0, 1) if y.ndim == 2 else y
            rows = pt.mean((out - target) ** 2, axis=2)
            labels = pt.argmax(y, axis=y.ndim - 1)
            correct = pt.sum(pt.eq(pred, labels.dimshuffle("x", 0) if y.ndim == 2 else labels), axis=1)
        return rows, correct

    # ------------------------------------------------------------------ values
    def load(self, weights: list[np.ndarray], hyper: dict[str, np.ndarray]) -> None:
        """Set parameters (``[W0, b0, W1, b1, ...]`` with a trial axis), zero the optimiser
        state and set the hyperparameter vectors (learning_rate, momentum, l2, dropout)."""
        dtype = self.shape.dtype
        for p, v in zip(self.params, weights):
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
        """The current parameter arrays (views: copy before the next training step)."""
        return [p.get_value(borrow=True) for p in self.params]

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
