"""A pack's members as arrays: their initial values and random streams, the chunks the
pack trains in, their dropout masks and the snapshot of their best epochs.

Each member keeps its own random streams, all derived from its seed: initial weights from
the first child of ``SeedSequence(seed)``, the minibatch order of every epoch from the
second, dropout masks from a generator seeded by the first child after the weights. So a
member sees the same initialisation, minibatches and masks in any pack as alone.
"""

from __future__ import annotations

import numpy as np

from .blocks import residual_scale, saved_count
from .flags import JAX_MODE
from .layers import StackLayer
from .packgraph import PackedModel, PackShape
from .segments import Segment

CHUNK_ELEMENTS = 2**17  # members x width x batch per training call: keeps activations in cache
# members x all hidden units x batch per training call: a deep stack keeps every layer's
# activations for the backward pass, so deep packs train in smaller chunks
DEEP_ELEMENTS = 2**23


def units(shape: PackShape, segments: tuple[Segment, ...], counts: tuple[int, ...]) -> int:
    """Units per row of every layer, input and output included (what one row of a member
    keeps for the backward pass: a hidden layer's output and the intermediates its gradient
    reuses); ``segments``: the pack's, with its widths."""
    stacks = [seg.known_width for seg in segments if seg.is_stack]
    dense = [seg.known_width for seg in segments if not seg.is_stack]
    hidden = sum(dense) + sum(w * c for w, c in zip(stacks, counts))
    return (
        shape.n_features + shape.n_outputs + hidden * (1 + saved_count(shape.design, shape.dropout))
    )


def widest(shape: PackShape, segments: tuple[Segment, ...]) -> int:
    """The widest layer of the pack, its input and output included."""
    return max([shape.n_features, shape.n_outputs, *(seg.known_width for seg in segments)])


def chunks(
    model: PackedModel, K: int, batch: int, units: int, widest: int
) -> list[tuple[int, int, list[np.ndarray]]]:
    """Split the loaded pack state into ``(lo, hi, state)`` chunks of members whose
    activations stay within CHUNK_ELEMENTS per layer and DEEP_ELEMENTS in all. Under mode=JAX
    the pack is one chunk: XLA compiles per shape, and a GPU wants the whole pack at once."""
    size = (
        K
        if model.shape.mode == JAX_MODE
        else max(1, min(CHUNK_ELEMENTS // (batch * widest), DEEP_ELEMENTS // (batch * units)))
    )
    full = model.export_state()
    out = []
    for lo in range(0, K, size):
        hi = min(K, lo + size)
        out.append((lo, hi, [np.array(v[lo:hi]) if v.ndim else np.array(v) for v in full]))
    return out


def initialise(
    model: PackedModel, configs: list, segments: tuple[Segment, ...], counts: tuple[int, ...]
):
    """Load every member's initial values and hyperparameters; return one member's parameter
    count, the members' dropout generators and one shuffling generator per distinct seed."""
    by_draw: dict[tuple[int, str], tuple[list[np.ndarray], int]] = {}
    shuffle_rngs: dict[int, np.random.Generator] = {}
    drop_rngs: list[np.random.Generator | None] = []
    per_member = []
    for c in configs:
        key = (c.seed, c.model.init)
        if key not in by_draw:
            init_ss, shuffle_ss = np.random.SeedSequence(c.seed).spawn(2)
            rng = np.random.default_rng(init_ss)
            values = model.initial_network(
                rng, c.model.init, residual_scale(c.model), counts, segments
            )
            by_draw[key] = (values, int(rng.integers(2**31)))
            shuffle_rngs.setdefault(c.seed, np.random.default_rng(shuffle_ss))
        values, drop_seed = by_draw[key]
        per_member.append(values)
        drop_rngs.append(np.random.default_rng(drop_seed) if model.shape.dropout else None)
    network = [np.stack(parts) for parts in zip(*per_member)]
    hyper = {
        "learning_rate": [c.training.learning_rate for c in configs],
        "momentum": [c.training.momentum for c in configs],
        "l2": [c.training.l2 for c in configs],
        "grad_clip": [c.training.grad_clip or 1.0 for c in configs],
        "dropout_scale": [1.0 / (1.0 - c.model.dropout) for c in configs],
    }
    model.load(network, {k: np.asarray(v, dtype=np.float64) for k, v in hyper.items()})
    n_params = model.n_params(per_member[0], counts)
    return n_params, drop_rngs, shuffle_rngs


def dropout_masks(
    model: PackedModel,
    segments: tuple[Segment, ...],
    counts: tuple[int, ...],
    drop_rngs,
    active,
    keep_limits: np.ndarray,
    b: int,
    lo: int,
    hi: int,
) -> list[np.ndarray]:
    """Boolean keep masks for members lo..hi (the graph scales them by each member's
    ``1 / (1 - p)``): ``[hi - lo, width, b]`` per unrolled hidden layer and ``[n_layers,
    hi - lo, width, b]`` per stack (layer-major, as its scan steps through them; ``segments``
    and ``counts``: the pack's, with its widths and depths). A unit is kept when its 32-bit
    draw is at least its member's ``keep_limits`` row (:func:`keep_limits`: ``p`` of the
    2**32 values, so the rate is ``p`` to within 2**-32); each
    member's draws come from its own generator, two per 64-bit output, layer by layer, units
    then rows, in the ``[width, b]`` order the graph reads them (so each member's block of a
    layer is copied whole). A stack of 0 real layers gets one mask of zeros for its
    placeholder step, drawn from nothing.

    Each member's draws for every layer come from one call, and the thresholding and
    transposing run once for the whole chunk: done per member and layer they cost as much as
    the draws themselves. Raw 32-bit draws cost a third of doubles'."""
    stacks = iter(counts)
    shapes = [
        (next(stacks) if isinstance(layer, StackLayer) else 1, seg.known_width)
        for layer, seg in zip(model.hidden, segments)
    ]
    sizes = [n * w * b for n, w in shapes]
    total = sum(sizes)
    # a frozen member draws nothing (its updates are masked) and keeps nothing: its row of
    # draws is left as it was allocated and masked out by ``active`` below
    draws = np.empty((hi - lo, total + total % 2), dtype=np.uint32)
    for k in range(lo, hi):
        if active[k]:
            draws[k - lo] = drop_rngs[k].bit_generator.random_raw((total + 1) // 2).view(np.uint32)
    keep = np.greater_equal(draws[:, :total], keep_limits[lo:hi])
    if not active[lo:hi].all():
        np.logical_and(keep, active[lo:hi, None], out=keep)
    masks, at = [], 0
    for layer, (n, w), size in zip(model.hidden, shapes, sizes):
        if not n:
            mask = np.zeros((1, hi - lo, w, b), dtype=bool)
        else:
            part = keep[:, at : at + size].reshape(hi - lo, n, w, b)
            mask = np.ascontiguousarray(part.transpose(1, 0, 2, 3))
        at += size
        masks.append(mask if isinstance(layer, StackLayer) else mask[0])
    return masks


def keep_limits(configs: list) -> np.ndarray:
    """Each member's least 32-bit draw that keeps a unit at its dropout rate ``p``,
    ``[K, 1]``."""
    return np.array(
        [[min(round(c.model.dropout * 2**32), 2**32 - 1)] for c in configs], dtype=np.uint32
    )


def snapshot(
    model: PackedModel, chunks, best: list[np.ndarray] | None, improved: np.ndarray
) -> list[np.ndarray]:
    """Copy the parameters and running statistics of the members that improved into
    ``best`` (allocated once)."""
    n = model.n_best
    if best is None:
        K = chunks[-1][1]
        best = [np.empty((K, *v.shape[1:]), dtype=v.dtype) for v in chunks[0][2][:n]]
    for lo, hi, state in chunks:
        imp = improved[lo:hi]
        if imp.any():
            for bv, v in zip(best, state[:n]):
                bv[lo:hi][imp] = v[imp]
    return best
