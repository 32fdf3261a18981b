"""What surrounds a hidden layer's dense product: normalisation and the residual branch.

A hidden layer is one :func:`block_step`::

    post-norm:  h ← combine(h, dropout(activation(norm(h @ W + b))))
    pre-norm:   h ← combine(h, dropout(activation(norm(h) @ W + b)))

with ``combine`` one of ``f`` (no residual), ``h + f`` (identity), ``h + a·f`` (ReZero,
Bachlechner et al. 2020: ``a`` learnable per layer, starting at 0; or a fixed ``a = 1/√depth``,
or a learnable one starting there as in SkipInit, De & Smith 2020). ``norm`` is layer
normalisation (over the features of each row) or batch normalisation (over the rows of the
minibatch while training; running statistics while evaluating). Each has a gain and a shift.

Tensors are packed: every value has a leading member axis ``K`` (the trials of a pack), and
activations are feature-major ``[K, units, B]``. The step is a pure symbolic function of one
layer's tensors, so the same code is the body of an unrolled layer and of one scan step of a
stack (whose tensors carry a layer axis that the scan iterates): the graph stays one step
whatever the depth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pytensor.tensor as pt

from .rewrites import alloc

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
        return cls(
            residual=model.residual,
            learnable_scale=model.residual == "rezero" or model.residual_learnable,
            normalization=model.normalization,
            norm_position=model.norm_position,
        )

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

    def extras(self) -> tuple[str, ...]:
        """The per-layer tensors beyond ``W`` and ``b``: ``gain``/``shift`` (normalisation),
        ``mean``/``var`` (batch-norm running statistics), ``scale`` (residual branch)."""
        out: tuple[str, ...] = ()
        if self.normalization != "none":
            out += ("gain", "shift")
        if self.normalization == "batch":
            out += ("mean", "var")
        if self.scaled:
            out += ("scale",)
        return out

    def trained(self, name: str) -> bool:
        """Whether the extra ``name`` is a trained parameter (else state or a constant)."""
        return name in ("gain", "shift") or (name == "scale" and self.learnable_scale)


def residual_scale(model) -> float:
    """The initial branch scale ``a`` of every layer: 0 for ReZero, 1/√depth for scaled."""
    if model.residual == "rezero":
        return 0.0
    return 1.0 / float(np.sqrt(max(model.hidden_layers, 1)))


def _units(v):
    """``[K, units]`` → ``[K, units, 1]`` (broadcast over the batch axis)."""
    return v.dimshuffle(0, 1, "x")


def normalize(x, kind: str, gain, shift, running: tuple | None, saved: list | None = None):
    """``(normalised x, (batch mean, batch variance) or None)`` for ``x`` of ``[K, units, B]``.

    ``kind`` is ``layer`` (statistics over each row's units) or ``batch`` (over the rows of
    the minibatch, per member, returned ``[K, units]`` so running averages can be kept); with
    ``running`` (running mean and variance, ``[K, units]``) batch normalisation uses those
    instead: the evaluation mode. ``gain`` and ``shift`` None: the normalised x alone (a
    pre-norm layer folds them into its product, see :func:`fold_affine`).
    """
    batch_stats = None
    if kind == "layer":
        mean = x.mean(axis=1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    elif running is not None:
        mean, var = _units(running[0]), _units(running[1])
    else:
        m = x.mean(axis=2)
        v = ((x - _units(m)) ** 2).mean(axis=2)
        batch_stats = (m, v)
        mean, var = _units(m), _units(v)
    centred, spread = x - mean, pt.sqrt(var + NORM_EPS)
    if saved is not None:
        saved += [centred, spread]
    if gain is None:
        return centred / spread, batch_stats
    return centred / spread * _units(gain) + _units(shift), batch_stats


def fold_affine(W, b, gain, shift):
    """``(W', b')`` with ``W' u + b' = W (gain * u + shift) + b``: a pre-norm layer's gain and
    shift folded into its product. They then scale the ``[K, units, units]`` weights rather
    than the ``[K, units, B]`` activations, which PyTensor's loops read several times slower
    when an input is constant along the batch axis. ``W`` ``[K, n_out, n_in]``."""
    return W * gain.dimshuffle(0, "x", 1), b + pt.matmul(W, shift.dimshuffle(0, 1, "x"))[:, :, 0]


def _per_member_rows(v, like):
    """A per-member ``[K]`` value as ``[K, 1, B]`` rows for the batch of ``like``: an outer
    product with ones, which elementwise fusion leaves apart. Broadcast from ``[K, 1, 1]``
    it slowed the fused loops over ``[K, units, B]`` 3-4x (every input constant along the
    batch axis does); rows vary along it, as the loops expect."""
    ones = alloc(
        pt.constant(1, dtype=like.dtype), [like.shape[-1]], pt.TensorType(like.dtype, shape=(None,))
    )
    return pt.outer(v, ones).dimshuffle(0, "x", 1)


def block_step(
    h,
    product: Callable,
    extras: dict,
    design: LayerDesign,
    act: Callable,
    keep,
    deterministic: bool,
    product_input=None,
    saved: list | None = None,
    keep_scale=None,
):
    """One hidden layer: ``(output [K, units, B], (batch mean, batch variance) or None)``.

    ``product(u)`` is the layer's ``W u + b`` on its (possibly normalised) input, which is
    ``product_input`` when given and there is no pre-norm (else ``h``); with pre-norm,
    ``product(u, gain, shift)`` is ``W (gain * u + shift) + b`` (see :func:`fold_affine`); ``extras``
    maps ``gain``/``shift``, ``mean``/``var`` and ``scale`` to this layer's tensors;
    ``keep`` is the dropout mask (None: no dropout): 0/1 (booleans), scaled by each member's
    ``keep_scale`` ``[K]`` (``1 / (1 - p)``) when given. Masks of booleans are an eighth of the
    bytes of scaled float ones, and the scaling fuses into the step's elementwise loop.
    ``saved`` (a list, in a training graph's scan step) collects, in the order computed, the
    :func:`saved_count` intermediates that the step's gradient would otherwise compute again.
    """
    batch_stats = None
    norm = design.normalization
    running = (extras["mean"], extras["var"]) if norm == "batch" and deterministic else None
    u = h if product_input is None else product_input
    affine: tuple = ()
    if norm != "none" and design.norm_position == "pre":
        u, batch_stats = normalize(h, norm, None, None, running, saved)
        affine = (extras["gain"], extras["shift"])
        if saved is not None:
            saved.append(u)
    z = product(u, *affine)
    if norm != "none" and design.norm_position == "post":
        z, batch_stats = normalize(z, norm, extras["gain"], extras["shift"], running, saved)
    out = act(z)
    if saved is not None and _branch_differs(design, keep is not None):
        saved.append(out)
    # the branch's per-member factor: its dropout scale and its residual scale
    factor = keep_scale if keep is not None else None
    if design.scaled:
        factor = extras["scale"] if factor is None else factor * extras["scale"]
    if keep is not None:
        out = out * keep
    if factor is not None:
        out = out * _per_member_rows(factor, out)
    if design.residual != "none":
        out = h + out
    return out, batch_stats


def _branch_differs(design: LayerDesign, dropout: bool) -> bool:
    """Whether the activation's output is not itself the layer's output (which a scan keeps
    anyway)."""
    return dropout or design.residual != "none"


def saved_count(design: LayerDesign, dropout: bool) -> int:
    """How many intermediates :func:`block_step` appends to its ``saved`` list: those the
    layer's gradient would otherwise compute again (the normalisation's centred input,
    spread and output; the activation's output)."""
    norm = 0 if design.normalization == "none" else 2 + (design.norm_position == "pre")
    return norm + _branch_differs(design, dropout)


def running_update(running, batch_stat):
    """The running statistic moved towards this minibatch's (inactive members are masked
    with every other update)."""
    return pt.cast((1 - BN_MOMENTUM) * running + BN_MOMENTUM * batch_stat, running.dtype)
