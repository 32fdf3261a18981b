"""The engine's epoch loop: ``train_pack(configs, on_epoch)`` trains trials of one pack key
together, and ``train(config)`` is a pack of one.

Each member keeps its own random streams, all derived from its seed: initial weights from
the first child of ``SeedSequence(seed)``, the minibatch order of every epoch from the
second, dropout masks from a generator seeded by the first child after the weights. So a
member sees the same initialisation, minibatches and masks in any pack as alone, and its
result equals its result alone up to floating-point rounding of the batched products
(float64: far below 1e-9 relative).

Members step through the epochs together; a member that finishes, stops early, is
cancelled or diverges is frozen (its updates are masked) while the others go on. Each
member's recorded time is its share of the pack's: an epoch's wall time is split between
the members that trained in it, and the pack's data loading, compile and final evaluation
equally between all members, so the members' times add up to the pack's.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from . import diskcache
from .blocks import LayerDesign, residual_scale, saved_count
from .data import prepare_data
from .environment import environment
from .environment import notes as flag_notes
from .flags import JAX_MODE
from .graphkey import compile_key, pack_key, pack_keys
from .layers import StackLayer
from .ledger import PackLedger
from .modelcache import ModelCache
from .packgraph import PackedModel, PackShape, graph_segments, segments_for
from .result import EpochReport, TrialResult
from .stopping import monitor_for

if TYPE_CHECKING:
    from ..spec import TrialConfig

EVAL_ELEMENTS = 2**22  # rows x members x hidden units per evaluation call: bounds memory
CHUNK_ELEMENTS = 2**17  # members x width x batch per training call: keeps activations in cache
# members x all hidden units x batch per training call: a deep stack keeps every layer's
# activations for the backward pass, so deep packs train in smaller chunks
DEEP_ELEMENTS = 2**23

OnPackEpoch = Callable[[int, EpochReport], "list[bool] | None"]

_CACHE = ModelCache()


def packed_model(shape: PackShape) -> tuple[PackedModel, bool, bool]:
    """The compiled packed model for ``shape``: from this process's cache, else from the
    host's disk cache, else compiled (and stored on disk). Returns (model, in_process_hit,
    disk_hit)."""
    disk_hit = False

    def build() -> PackedModel:
        nonlocal disk_hit
        if shape.mode == JAX_MODE:  # JAX keeps its own compiled executables on disk (backend.require)
            return PackedModel(shape)
        model, disk_hit = diskcache.load_or_build("packed", shape, lambda: PackedModel(shape))
        return model

    model, cached = _CACHE.get_or_build(shape, build)
    # the epoch loop passes arrays of exactly the inputs' types (the dtype, int64 labels,
    # C-contiguous): checking them on every call cost a pack of one about a tenth of its time
    model.train_fn.trust_input = model.eval_fn.trust_input = True
    return model, cached, disk_hit


def clear_cache() -> None:
    """Forget every packed model of this process (the disk cache stays)."""
    _CACHE.clear()


def _check_configs(configs: list) -> list[TrialConfig]:
    from ..spec import TrialConfig

    out = [TrialConfig.model_validate(c) if isinstance(c, dict) else c for c in configs]
    keys = pack_keys(out)
    for i, key in enumerate(keys):
        if key != keys[0]:
            raise ValueError(f"configs[{i}] has pack key {key!r} but configs[0] has {keys[0]!r}: "
                             "a pack trains trials of one pack key only")
    return out


def _evaluate(model: PackedModel, X: np.ndarray, y: np.ndarray, K: int, units: int,
              classification: bool):
    """Mean loss ``[K]`` and accuracy ``[K]`` (or None) of every member on one split."""
    if len(X) == 0:
        return None, None
    chunk = max(1, min(4096, EVAL_ELEMENTS // (K * units)))
    loss_sum = np.zeros(K)
    correct = np.zeros(K, dtype=np.int64)
    for start in range(0, len(X), chunk):
        loss, c = model.eval_fn(X[start:start + chunk], y[start:start + chunk])
        loss_sum += loss
        correct += c
    return loss_sum / len(X), (correct / len(X) if classification else None)


def train(config: TrialConfig | dict, on_epoch: Callable[[int, dict], bool | None] | None = None) -> TrialResult:
    """Train one trial: a pack of one.

    ``on_epoch(epoch, metrics)`` is called after every epoch with ``{"epoch", "train_loss",
    "train_accuracy", "val_loss", "val_accuracy", "seconds"}`` (train_* are the running
    means over the epoch's minibatches; val_* are computed without dropout); returning True
    stops training and the result is CANCELLED. A NaN/inf loss, or one that explodes past
    ``training.divergence_factor`` times its loss at initialisation (the first minibatch's,
    before any update; at least 1), ends the trial as DIVERGED.
    Same config and seed give bit-identical results in the same environment.
    """
    if on_epoch is None:
        return train_pack([config])[0]

    def each_epoch(epoch: int, report: EpochReport) -> list[bool]:
        metrics = report[0]  # None in the epoch it diverged: nothing to report
        return [metrics is not None and bool(on_epoch(epoch, metrics))]

    return train_pack([config], each_epoch)[0]


def train_pack(configs: list[TrialConfig | dict], on_epoch: OnPackEpoch | None = None) -> list[TrialResult]:
    """Train ``configs`` (all of one :func:`pack_key`) as one pack; one result per config.

    ``on_epoch(epoch, report)`` is called once per epoch with an
    :class:`~dnnframe.engine.result.EpochReport`: the members' metrics as arrays, indexable
    as one metrics dict per member (as :func:`train` passes to its callback) or None for
    members that no longer train; it may return one flag per member: True ends that member
    CANCELLED after this epoch.
    Raises ValueError when the configs do not share one pack key.
    """
    enabled = gc.isenabled()
    try:
        return _train_pack(configs, on_epoch)
    finally:
        if enabled:
            gc.enable()


def _train_pack(configs: list, on_epoch: OnPackEpoch | None) -> list[TrialResult]:
    """:func:`train_pack` (which restores the garbage collector's state afterwards)."""
    t_start = time.perf_counter()
    configs = _check_configs(list(configs))
    if not configs:
        return []
    first = configs[0]
    data, shape_args, splits = prepare_data(first)
    X_train, y_train = splits["train"]
    classification = data.task == "classification"
    K = len(configs)
    seeds = [c.seed for c in configs]
    # this pack's widths; the compiled graph sees only what its backend needs of them
    segments, counts = segments_for(data.n_features, first.model.widths,
                                    static=shape_args["mode"] == JAX_MODE, pack_size=K)
    design = LayerDesign.from_model(first.model)
    shape = PackShape(**shape_args, segments=graph_segments(segments, design, shape_args["mode"]),
                      design=design, shared_input=len(set(seeds)) == 1,
                      stack_layers=counts if shape_args["mode"] == JAX_MODE else None)
    t_data = time.perf_counter()
    # building a graph creates hundreds of thousands of objects (a quarter of a build's time
    # went to the collector's passes over them), and training many small acyclic ones
    # (metrics, histories); with compiled graphs in memory, the cyclic collector's full
    # passes would cost more than either. A worker settles its heap after each build.
    gc.disable()
    model, cached, disk_hit = packed_model(shape)
    t_compile = time.perf_counter()

    monitors, notes = [], []
    base_notes = flag_notes()
    for c in configs:
        monitor, more = monitor_for(c, has_val=len(splits["val"][0]) > 0, classification=classification)
        monitors.append(monitor)
        notes.append(base_notes + more)
    ledger = PackLedger(configs, monitors)
    n_params, drop_rngs, shuffle_rngs = _initialise(model, configs, segments, counts)
    row_of = {s: i for i, s in enumerate(shuffle_rngs)}  # a seed's row in an epoch's shuffles
    seed_rows = np.array([row_of[s] for s in seeds], dtype=np.intp)
    n = len(X_train)
    batch = min(first.training.batch_size, n)
    units = _units(shape, segments, counts)
    chunks = _chunks(model, K, batch, units, _widest(shape, segments))
    active = np.ones(K, dtype=bool)
    best: list[np.ndarray] | None = None
    max_epochs = max(c.training.max_epochs for c in configs)
    schedules = any(c.training.lr_schedule.kind != "none" or c.training.lr_schedule.warmup_epochs
                    for c in configs)
    lr_at = model.hyper_index("learning_rate")
    keep_limits = _keep_limits(configs) if shape.dropout else None
    initial = np.full(K, np.nan)
    compute = 0.0  # seconds inside compiled calls
    # every moment is shared out: the set-up before the first epoch and the bookkeeping
    # after each (callbacks, snapshots) count in the next epoch's time, the last epoch's
    # bookkeeping in the final evaluation's
    mark = t_compile
    for epoch in range(1, max_epochs + 1):
        if not active.any():
            break
        running = active.sum()
        if schedules:
            lrs = np.array([c.training.learning_rate * c.training.lr_schedule.factor(epoch, c.training.max_epochs)
                            for c in configs])
        # each seed's shuffle, then each member's row of them (one gather, not K rows stacked)
        orders = np.stack([rng.permutation(n) for rng in shuffle_rngs.values()])
        order = orders[0] if shape.shared_input else np.take(orders, seed_rows, axis=0)
        loss_sum, correct = np.zeros(K), np.zeros(K, dtype=np.int64)
        diverged = np.zeros(K, dtype=bool)
        val_loss = np.full(K, np.nan) if len(splits["val"][0]) else None
        val_acc = np.full(K, np.nan) if val_loss is not None and classification else None
        # members are independent: the pack runs chunk by chunk, each sized to stay in cache
        for lo, hi, state in chunks:
            if not active[lo:hi].any():
                continue
            if schedules:  # (JAX's arrays are immutable: a new array, not assignment)
                state[lr_at] = np.asarray(lrs[lo:hi], dtype=shape.dtype)
            model.import_state(state)
            model.set_active(active[lo:hi])
            for start in range(0, n, batch):
                idx = order[..., start:start + batch] if shape.shared_input \
                    else order[lo:hi, start:start + batch]
                b = idx.shape[-1]
                masks = _dropout_masks(model, segments, counts, drop_rngs, active, keep_limits, b, lo, hi) \
                    if shape.dropout else []
                called = time.perf_counter()
                # take, not X[idx]: NumPy's fancy indexing by a 2-D index array took 8x longer
                loss, c = model.train_fn(np.take(X_train, idx, axis=0), np.take(y_train, idx, axis=0),
                                         *masks)
                compute += time.perf_counter() - called
                if epoch == 1 and start == 0:  # the loss at initialisation: before any update
                    initial[lo:hi] = loss
                finite = np.isfinite(loss)
                part = active[lo:hi]
                ok = part & finite
                loss_sum[lo:hi][ok] += loss[ok] * b
                correct[lo:hi][ok] += c[ok]
                bad = part & ~finite
                if bad.any():  # alone, the trial stops right after this step: freeze it now
                    diverged[lo:hi] |= bad
                    active[lo:hi] &= ~bad
                    model.set_active(active[lo:hi])
            called = time.perf_counter()
            vl, va = _evaluate(model, *splits["val"], hi - lo, units, classification)
            compute += time.perf_counter() - called
            if vl is not None:
                val_loss[lo:hi] = vl
                if va is not None:
                    val_acc[lo:hi] = va
            state[:] = model.export_state()
        now = time.perf_counter()
        share, mark = (now - mark) / running, now
        if epoch == 1:
            ledger.initial_loss = initial
        report = ledger.record(epoch, diverged, {
            "train_loss": loss_sum / n, "train_accuracy": correct / n if classification else None,
            "val_loss": val_loss, "val_accuracy": val_acc}, share)
        flags = on_epoch(epoch, report) if on_epoch is not None else None
        improved = ledger.advance(epoch, report, flags)
        if improved.any():
            best = _snapshot(model, chunks, best, improved)
        active = ledger.running.copy()

    restore = ledger.restore()
    final = {split: (np.full(K, np.nan), np.full(K, np.nan)) for split in ("train", "val", "test")}
    for lo, hi, state in chunks:
        if best is not None and restore[lo:hi].any():  # final metrics: those of the best epoch
            keep = restore[lo:hi]
            for i in range(model.n_best):
                state[i] = np.array(state[i])  # a copy (JAX's arrays are immutable)
                state[i][keep] = best[i][lo:hi][keep]
        model.import_state(state)
        for split, (loss_all, acc_all) in final.items():
            called = time.perf_counter()
            loss, acc = _evaluate(model, *splits[split], hi - lo, units, classification)
            compute += time.perf_counter() - called
            if loss is not None:
                loss_all[lo:hi] = loss
            if acc is not None:
                acc_all[lo:hi] = acc
    final = {split: (None if len(splits[split][0]) == 0 else loss,
                     acc if classification and len(splits[split][0]) else None)
             for split, (loss, acc) in final.items()}
    t_end = time.perf_counter()
    shared = {"data": (t_data - t_start) / K, "compile": (t_compile - t_data) / K,
              "evaluate": (t_end - mark) / K}
    # compute_seconds: inside the compiled calls; the rest of the wall after the compile is
    # the epoch loop's own Python (minibatches, masks, bookkeeping) and the callbacks
    pack = {"size": K, "wall_seconds": t_end - t_start, "compile_seconds": t_compile - t_data,
            "compute_seconds": compute}
    env = environment(cached)
    env.update(compile_key=compile_key(first, K), pack_key=pack_key(first), disk_cache_hit=disk_hit)
    histories = ledger.histories()
    columns = {f"{split}_{kind}": (None if values is None else values.tolist())
               for split, pair in final.items() for kind, values in zip(("loss", "accuracy"), pair)}
    train_seconds = ledger.train_seconds.tolist()
    diverged_at, best_epochs = ledger.diverged_epoch.tolist(), ledger.best_epoch.tolist()
    results = []
    for k in range(K):
        metrics: dict[str, float | None] = {}
        for split in final:
            for kind in ("loss", "accuracy"):
                values = columns[f"{split}_{kind}"]
                metrics[f"{split}_{kind}"] = None if values is None else values[k]
        timings = {**shared, "train": train_seconds[k]}
        timings["total"] = sum(timings.values())
        results.append(TrialResult(
            status=ledger.status_of(k), metrics=metrics, history=histories[k], timings=timings,
            n_params=n_params, environment=dict(env), pack=dict(pack, index=k),
            diverged_epoch=diverged_at[k] or None, stopped_early=bool(ledger.stopped_early[k]),
            epochs_run=len(histories[k]),
            best_epoch=(best_epochs[k] or None) if monitors[k] else None, notes=notes[k]))
    return results


def _units(shape: PackShape, segments: tuple, counts: tuple[int, ...]) -> int:
    """Units per row of every layer, input and output included (what one row of a member
    keeps for the backward pass: a hidden layer's output and the intermediates its gradient
    reuses); ``segments``: the pack's, with its widths."""
    stacks = [seg[1] for seg in segments if seg[0] == "stack"]
    dense = [seg[2] for seg in segments if seg[0] == "dense"]
    hidden = sum(dense) + sum(w * c for w, c in zip(stacks, counts))
    return shape.n_features + shape.n_outputs + hidden * (1 + saved_count(shape.design, shape.dropout))


def _widest(shape: PackShape, segments: tuple) -> int:
    """The widest layer of the pack, its input and output included."""
    return max([shape.n_features, shape.n_outputs, *(seg[-1] for seg in segments)])


def _chunks(model: PackedModel, K: int, batch: int, units: int,
            widest: int) -> list[tuple[int, int, list[np.ndarray]]]:
    """Split the loaded pack state into ``(lo, hi, state)`` chunks of members whose
    activations stay within CHUNK_ELEMENTS per layer and DEEP_ELEMENTS in all. Under mode=JAX
    the pack is one chunk: XLA compiles per shape, and a GPU wants the whole pack at once."""
    size = K if model.shape.mode == JAX_MODE else \
        max(1, min(CHUNK_ELEMENTS // (batch * widest), DEEP_ELEMENTS // (batch * units)))
    full = model.export_state()
    out = []
    for lo in range(0, K, size):
        hi = min(K, lo + size)
        out.append((lo, hi, [np.array(v[lo:hi]) if v.ndim else np.array(v) for v in full]))
    return out


def _initialise(model: PackedModel, configs: list, segments: tuple, counts: tuple[int, ...]):
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
            values = model.initial_network(rng, c.model.init, residual_scale(c.model), counts, segments)
            by_draw[key] = (values, int(rng.integers(2**31)))
            shuffle_rngs.setdefault(c.seed, np.random.default_rng(shuffle_ss))
        values, drop_seed = by_draw[key]
        per_member.append(values)
        drop_rngs.append(np.random.default_rng(drop_seed) if model.shape.dropout else None)
    network = [np.stack(parts) for parts in zip(*per_member)]
    hyper = {"learning_rate": [c.training.learning_rate for c in configs],
             "momentum": [c.training.momentum for c in configs],
             "l2": [c.training.l2 for c in configs],
             "grad_clip": [c.training.grad_clip or 1.0 for c in configs],
             "dropout_scale": [1.0 / (1.0 - c.model.dropout) for c in configs]}
    model.load(network, {k: np.asarray(v, dtype=np.float64) for k, v in hyper.items()})
    n_params = model.n_params(per_member[0], counts)
    return n_params, drop_rngs, shuffle_rngs


def _dropout_masks(model: PackedModel, segments: tuple, counts: tuple[int, ...], drop_rngs,
                   active, keep_limits: np.ndarray, b: int, lo: int, hi: int) -> list[np.ndarray]:
    """Boolean keep masks for members lo..hi (the graph scales them by each member's
    ``1 / (1 - p)``): ``[hi - lo, width, b]`` per unrolled hidden layer and ``[n_layers,
    hi - lo, width, b]`` per stack (layer-major, as its scan steps through them; ``segments``
    and ``counts``: the pack's, with its widths and depths). A unit is kept when its 32-bit
    draw is at least its member's ``keep_limits`` row (:func:`_keep_limits`: ``p`` of the
    2**32 values, so the rate is ``p`` to within 2**-32); each
    member's draws come from its own generator, two per 64-bit output, layer by layer, units
    then rows, in the ``[width, b]`` order the graph reads them (so each member's block of a
    layer is copied whole). A stack of 0 real layers gets one mask of zeros for its
    placeholder step, drawn from nothing.

    Each member's draws for every layer come from one call, and the thresholding and
    transposing run once for the whole chunk: done per member and layer they cost as much as
    the draws themselves. Raw 32-bit draws cost a third of doubles'."""
    stacks = iter(counts)
    shapes = [(next(stacks), seg[1]) if isinstance(layer, StackLayer) else (1, seg[2])
              for layer, seg in zip(model.hidden, segments)]
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
            part = keep[:, at:at + size].reshape(hi - lo, n, w, b)
            mask = np.ascontiguousarray(part.transpose(1, 0, 2, 3))
        at += size
        masks.append(mask if isinstance(layer, StackLayer) else mask[0])
    return masks


def _keep_limits(configs: list) -> np.ndarray:
    """Each member's least 32-bit draw that keeps a unit at its dropout rate ``p``,
    ``[K, 1]``."""
    return np.array([[min(round(c.model.dropout * 2**32), 2**32 - 1)] for c in configs],
                    dtype=np.uint32)


def _snapshot(model: PackedModel, chunks, best: list[np.ndarray] | None, improved: np.ndarray) -> list[np.ndarray]:
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


__all__ = ["clear_cache", "packed_model", "train", "train_pack"]
