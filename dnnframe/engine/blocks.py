"""What surrounds a hidden layer's dense product: normalisation and the residual branch.

A hidden layer is one :func:`block_step`::

    post-norm:  h ← combine(h, dropout(activation(norm(h @ W + b))))
    pre-norm:   h ← combine(h, dropout(activation(norm(h) @ W + b)))

with ``combine`` one of ``f`` (no residual), ``h + f`` (identity), ``h + a·f`` (ReZero,
Bachlechner et al. 2020: ``a`` learnable per layer, starting at 0; or a fixed ``a = 1/√depth``,
or a learnable one starting there as in SkipInit, De & Smith 2020). ``norm`` is layer
normalisation (over the features of each row) or batch normalisation (over the rows of the
minibatch while training; running statistics while evaluating). Each has a gain and a shift.

The step is a pure symbolic function of per-layer tensors, so the same code is the body of
a single :class:`~dnnframe.engine.layers.DenseLayer` and of one scan step of a
:class:`~dnnframe.engine.layers.DenseStackLayer` (whose per-layer tensors carry a leading
layer axis): the graph stays one step whatever the depth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from .flags import configure

configure()

import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402

NORM_EPS = 1e-5  # added to the variance before the square root
BN_MOMENTUM = 0.1  # running = (1 - m) * running + m * this minibatch's statistic


@dataclass(frozen=True)
class LayerDesign:
    """The graph-changing layer-design options of a hidden layer (see the module docstring).

    ``residual``: none | identity | rezero | scaled; ``learnable_scale``: the scale ``a`` of a
    rezero/scaled branch is a trained parameter (always for rezero); ``normalization``:
    none | batch | layer; ``norm_position``: post | pre.
    """

    residual: str = "none"
    learnable_scale: bool = False
    normalization: str = "none"
    norm_position: str = "post"

    @classmethod
    def from_model(cls, model) -> LayerDesign:
        """The design of a spec's :class:`~dnnframe.spec.models.ModelConfig`."""
        return cls(residual=model.residual,
                   learnable_scale=model.residual == "rezero" or model.residual_learnable,
                   normalization=model.normalization, norm_position=model.norm_position)

    @property
    def scaled(self) -> bool:
        """True when the residual branch is multiplied by a per-layer scale ``a``."""
        return self.residual in ("rezero", "scaled")

    def for_entry(self) -> LayerDesign:
        """The design of a layer whose input and output widths differ: no shortcut, and with
        pre-norm no normalisation either (pre-norm normalises the input of a residual branch;
        applied to the raw features it would erase each row's own scale)."""
        if self.norm_position == "pre":
            return LayerDesign()
        return replace(self, residual="none", learnable_scale=False)


def residual_scale(model) -> float:
    """The initial branch scale ``a`` of every layer: 0 for ReZero, 1/√depth for scaled."""
    if model.residual == "rezero":
        return 0.0
    return 1.0 / float(np.sqrt(max(model.hidden_layers, 1)))


def normalize(x, kind: str, gain, shift, running: tuple | None):
    """``(normalised x, (batch mean, batch variance) or None)`` for ``x`` of ``[rows, units]``.

    ``kind`` is ``layer`` (statistics over each row's units) or ``batch`` (over the rows of
    the minibatch, returned so running averages can be kept); with ``running`` (a pair of
    running mean and variance) batch normalisation uses those instead: the evaluation mode.
    """
    batch_stats = None
    if kind == "layer":
        mean = x.mean(axis=1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    elif running is not None:
        mean, var = running
    else:
        mean = x.mean(axis=0)
        var = ((x - mean) ** 2).mean(axis=0)
        batch_stats = (mean, var)
    return (x - mean) / pt.sqrt(var + NORM_EPS) * gain + shift, batch_stats


def block_step(h, W, b, extras: dict, design: LayerDesign, act: Callable, drop: Callable,
               deterministic: bool):
    """One hidden layer: ``(output, (batch mean, batch variance) or None)``.

    ``extras`` maps ``gain``/``shift`` (normalisation), ``mean``/``var`` (batch-norm running
    statistics, used when ``deterministic``) and ``scale`` (the residual scale) to this
    layer's tensors; ``drop`` applies dropout to the branch (identity when there is none).
    """
    batch_stats = None
    norm = design.normalization
    running = (extras["mean"], extras["var"]) if norm == "batch" and deterministic else None
    u = h
    if norm != "none" and design.norm_position == "pre":
        u, batch_stats = normalize(u, norm, extras["gain"], extras["shift"], running)
    z = pt.dot(u, W) + b
    if norm != "none" and design.norm_position == "post":
        z, batch_stats = normalize(z, norm, extras["gain"], extras["shift"], running)
    out = drop(act(z))
    if design.residual == "identity":
        out = h + out
    elif design.scaled:
        out = h + extras["scale"] * out
    return out, batch_stats


class BlockParams:
    """The shared variables :func:`block_step` needs beyond ``W`` and ``b`` for one layer
    (``n_layers`` None) or a stack of layers (a leading axis of ``n_layers``).

    ``params`` are trained (norm gain and shift, a learnable residual scale); ``stats`` are
    state that is not trained but belongs to the network's weights (batch-norm running
    statistics: saved and restored with the best epoch's weights); a fixed residual scale
    is a run-time constant (set per trial: the depth is not part of the graph).
    """

    def __init__(self, design: LayerDesign, n_in: int, n_out: int, dtype: str, name: str,
                 n_layers: int | None, static: bool = False):
        # static: the leading axis is fixed at n_layers in the variables' type (JAX's scans)
        self.design, self.dtype, self.stacked = design, dtype, n_layers is not None
        self.lead = (n_layers,) if n_layers is not None else ()
        self.static = static
        self.units = n_in if design.norm_position == "pre" else n_out
        self.shared: dict[str, object] = {}
        if design.normalization != "none":
            self.shared["gain"] = self._new(f"{name}.gain", (self.units,))
            self.shared["shift"] = self._new(f"{name}.shift", (self.units,))
        if design.normalization == "batch":
            self.shared["mean"] = self._new(f"{name}.running_mean", (self.units,))
            self.shared["var"] = self._new(f"{name}.running_var", (self.units,))
        if design.scaled:
            self.shared["scale"] = self._new(f"{name}.scale", ())
        self.params = [self.shared[k] for k in ("gain", "shift") if k in self.shared]
        if design.scaled and design.learnable_scale:
            self.params.append(self.shared["scale"])
        self.stats = [self.shared[k] for k in ("mean", "var") if k in self.shared]

    def _new(self, name: str, shape: tuple):
        full = self.lead + shape
        return pytensor.shared(np.zeros(full, dtype=self.dtype), name=name,
                               shape=full if self.static else None)

    def names(self, deterministic: bool) -> list[str]:
        """The extras :func:`block_step` reads, in the order of :meth:`sequences`."""
        skip = () if deterministic else ("mean", "var")
        return [k for k in self.shared if k not in skip]

    def sequences(self, deterministic: bool) -> list:
        return [self.shared[k] for k in self.names(deterministic)]

    def values(self) -> dict:
        return dict(self.shared)

    def running_updates(self, batch_mean, batch_var) -> list:
        """Update pairs moving the running statistics towards this minibatch's."""
        m = BN_MOMENTUM
        mean, var = self.shared["mean"], self.shared["var"]
        return [(mean, pt.cast((1 - m) * mean + m * batch_mean, mean.dtype)),
                (var, pt.cast((1 - m) * var + m * batch_var, var.dtype))]

    def initialise(self, residual_scale: float, n_layers: int | None = None) -> None:
        """Gain 1, shift 0, running mean 0 and variance 1, the residual scale as given."""
        lead = (n_layers,) if self.stacked else ()
        start = {"gain": 1.0, "shift": 0.0, "mean": 0.0, "var": 1.0, "scale": residual_scale}
        for key, var in self.shared.items():
            shape = lead + (() if key == "scale" else (self.units,))
            var.set_value(np.full(shape, start[key], dtype=self.dtype))
