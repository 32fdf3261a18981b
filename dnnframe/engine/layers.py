"""Layers as small composable objects over symbolic PyTensor tensors (Lasagne style).

Each layer owns shared variables (its parameters), builds its symbolic output with
``get_output(x, deterministic)`` and fills its parameters from a NumPy generator with
``initialise(rng, init)``. Shapes are checked when a layer is built.

A run of hidden layers of equal width is one :class:`DenseStackLayer`: its weights are a
3-D shared tensor ``(n_layers, width, width)`` and its forward pass is a ``pytensor.scan``
over the first axis, so the graph — and the compile time — does not grow with depth, and
the number of layers is a runtime value: the same compiled function trains a stack of 2
or 2000 layers (only the shared values change shape).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .flags import configure

configure()  # THEANO_FLAGS must be mapped before PyTensor reads its flags

import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402
import pytensor.tensor.random as ptr  # noqa: E402

from .blocks import BlockParams, LayerDesign, block_step  # noqa: E402
from .constants import SELU_ALPHA, SELU_SCALE  # noqa: E402


def _elu(x):
    # exp of the clipped input: the untaken branch must not overflow into inf * 0 = NaN grads
    return pt.switch(x > 0, x, pt.exp(pt.minimum(x, 0)) - 1)


ACTIVATIONS: dict[str, Callable] = {
    "relu": lambda x: pt.maximum(x, 0),
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


class RandomChain:
    """One seeded random generator shared by every dropout op of a graph.

    Each draw threads the generator state to the next (``rng → next_rng``); the compiled
    training function updates the shared state with the last one (:meth:`updates`), and
    :meth:`seed` resets it, so a cached graph replays exactly for the same seed.
    """

    def __init__(self, name: str = "dropout_rng"):
        self.shared = ptr.shared_rng(seed=0, name=name)
        self.current = self.shared

    def uniform(self, size):
        """Symbolic U[0, 1) draw of ``size`` (advances the chain)."""
        self.current, x = self.current.uniform(0.0, 1.0, size=size)
        return x

    def updates(self) -> list:
        return [] if self.current is self.shared else [(self.shared, self.current)]

    def seed(self, seed: int) -> None:
        self.shared.set_value(np.random.default_rng(seed))


class Layer:
    """Base class: ``params`` (shared variables), ``regularizable`` (weights for L2),
    ``stats`` (state that is not trained but belongs with the weights: batch-norm running
    statistics)."""

    params: list
    regularizable: list
    stats: list = []

    def updates(self) -> list:
        """Update pairs for ``stats`` from the last training-mode :meth:`get_output`."""
        return []

    def get_output(self, x, deterministic: bool = False):
        """Symbolic output for the symbolic input ``x``."""
        raise NotImplementedError

    def initialise(self, rng: np.random.Generator, init: str) -> None:
        """Draw fresh parameter values (no recompilation: only shared values change)."""

    @property
    def n_params(self) -> int:
        return int(sum(p.get_value(borrow=True).size for p in self.params))


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, but got {value!r}")


def _activation(name: str) -> Callable:
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, but got {name!r}")
    return ACTIVATIONS[name]


class DenseLayer(Layer):
    """One hidden (or output) layer: :func:`block_step` with its own parameters.

    ``activation(x @ W + b)``, with the normalisation and residual of ``design``; the
    residual applies only when n_in == n_out. ``dropout`` (a shared rate, with ``srng``)
    drops units of the activation before the residual sum, exactly as a step of
    :class:`DenseStackLayer` does.
    """

    def __init__(self, n_in: int, n_out: int, activation: str = "linear", residual: bool = False,
                 dtype: str = "float64", name: str = "dense", dropout=None, srng: RandomChain | None = None,
                 design: LayerDesign | None = None):
        _check_positive("n_in", n_in)
        _check_positive("n_out", n_out)
        if design is None:
            design = LayerDesign(residual="identity" if residual else "none")
        elif residual:
            raise ValueError("give the residual either as residual=True or in design, not both")
        if design.residual != "none" and n_in != n_out:
            raise ValueError(f"a residual dense layer needs n_in == n_out, but got n_in={n_in}, n_out={n_out}")
        if dropout is not None and srng is None:
            raise ValueError("a dense layer with dropout needs a RandomChain (srng)")
        self.n_in, self.n_out, self.dtype, self.design = n_in, n_out, dtype, design
        self.residual = design.residual != "none"
        self.activation = _activation(activation)
        self.dropout = DropoutLayer(dropout, srng) if dropout is not None else None
        self.W = pytensor.shared(np.zeros((n_in, n_out), dtype=dtype), name=f"{name}.W")
        self.b = pytensor.shared(np.zeros((n_out,), dtype=dtype), name=f"{name}.b")
        self.extras = BlockParams(design, n_in, n_out, dtype, name, n_layers=None)
        self.params = [self.W, self.b, *self.extras.params]
        self.regularizable = [self.W]
        self.stats = self.extras.stats
        self._stat_updates: list = []

    def get_output(self, x, deterministic: bool = False):
        def drop(out):
            return self.dropout.get_output(out, deterministic) if self.dropout is not None else out

        out, batch_stats = block_step(x, self.W, self.b, self.extras.values(), self.design,
                                      self.activation, drop, deterministic)
        if batch_stats is not None:
            self._stat_updates = self.extras.running_updates(*batch_stats)
        return out

    def updates(self) -> list:
        return list(self._stat_updates)

    def initialise(self, rng: np.random.Generator, init: str, residual_scale: float = 1.0) -> None:
        self.W.set_value(init_weights(rng, init, self.n_in, self.n_out).astype(self.dtype))
        self.b.set_value(np.zeros(self.n_out, dtype=self.dtype))
        self.extras.initialise(residual_scale)


class DropoutLayer(Layer):
    """Inverted dropout: zero each unit with probability ``p`` while training, scale by 1/(1-p).

    ``p`` is a shared scalar, so trials that differ only in the rate share one compiled graph.
    """

    def __init__(self, p, srng: RandomChain):
        self.p, self.srng = p, srng
        self.params, self.regularizable = [], []

    def get_output(self, x, deterministic: bool = False):
        if deterministic:
            return x
        keep = pt.cast(self.srng.uniform(x.shape) >= self.p, x.dtype)
        return x * keep / (1 - self.p)


class DenseStackLayer(Layer):
    """``n_layers`` dense layers ``width → width`` as one scan over stacked weights.

    Each step is :func:`block_step`: ``h ← [h + a·] dropout(activation(norm(h @ W[l] + b[l])))``
    with the normalisation and residual of ``design``; every per-layer parameter (norm gain
    and shift, residual scale, batch-norm running statistics) is stacked on the same leading
    axis and scanned with the weights. ``n_layers`` is set by :meth:`initialise` and may
    change between trials without recompiling; given to the constructor it is static
    instead (part of the parameters' type, as JAX needs). Dropout masks for all layers are
    drawn outside the scan in one seeded random op and fed in as a sequence (reproducible,
    and the scan stays free of random state). Mask values are cast to the input's dtype.
    """

    def __init__(self, width: int, activation: str = "relu", residual: bool = False, dropout=None,
                 srng: RandomChain | None = None, dtype: str = "float64", name: str = "stack",
                 design: LayerDesign | None = None, n_layers: int | None = None):
        _check_positive("width", width)
        if dropout is not None and srng is None:
            raise ValueError("a dropout stack needs a RandomChain (srng)")
        if design is None:
            design = LayerDesign(residual="identity" if residual else "none")
        elif residual:
            raise ValueError("give the residual either as residual=True or in design, not both")
        self.width, self.dtype, self.design = width, dtype, design
        self.residual = design.residual != "none"
        self.activation = _activation(activation)
        self.dropout, self.srng = dropout, srng
        if n_layers is not None:
            _check_positive("n_layers", n_layers)
        self.n_layers = n_layers or 1
        static = (n_layers, width) if n_layers is not None else None
        self.W = pytensor.shared(np.zeros((self.n_layers, width, width), dtype=dtype), name=f"{name}.W",
                                 shape=(*static, width) if static else None)
        self.b = pytensor.shared(np.zeros((self.n_layers, width), dtype=dtype), name=f"{name}.b",
                                 shape=static)
        self.extras = BlockParams(design, width, width, dtype, name, n_layers=self.n_layers,
                                  static=n_layers is not None)
        self.params = [self.W, self.b, *self.extras.params]
        self.regularizable = [self.W]
        self.stats = self.extras.stats
        self._stat_updates: list = []

    def get_output(self, x, deterministic: bool = False):
        act, design = self.activation, self.design
        names = self.extras.names(deterministic)
        training_bn = design.normalization == "batch" and not deterministic

        def step(W, b, *rest):
            *seqs, h = rest
            extras = dict(zip(names, seqs))
            keep = extras.pop("keep", None)

            def drop(out):
                return out if keep is None else out * keep

            out, batch_stats = block_step(h, W, b, extras, design, act, drop, deterministic)
            return (out, *batch_stats) if training_bn else out

        sequences = [self.W, self.b, *self.extras.sequences(deterministic)]
        if self.dropout is not None and not deterministic:
            size = (self.W.shape[0], x.shape[0], self.width)
            keep = pt.cast(self.srng.uniform(size) >= self.dropout, x.dtype)
            sequences.append(keep / (1 - self.dropout))
            names = [*names, "keep"]
        outputs_info = [x, None, None] if training_bn else [x]
        outputs = pytensor.scan(step, sequences=sequences, outputs_info=outputs_info,
                                return_updates=False)
        if training_bn:
            hs, means, variances = outputs
            self._stat_updates = self.extras.running_updates(means, variances)
            return hs[-1]
        return outputs[-1]

    def updates(self) -> list:
        return list(self._stat_updates)

    def initialise(self, rng: np.random.Generator, init: str, n_layers: int | None = None,
                   residual_scale: float = 1.0) -> None:
        if n_layers is not None:
            _check_positive("n_layers", n_layers)
            self.n_layers = int(n_layers)
        w = self.width
        W = np.stack([init_weights(rng, init, w, w) for _ in range(self.n_layers)])
        self.W.set_value(W.astype(self.dtype))
        self.b.set_value(np.zeros((self.n_layers, w), dtype=self.dtype))
        self.extras.initialise(residual_scale, self.n_layers)
