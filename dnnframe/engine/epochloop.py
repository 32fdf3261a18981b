"""The epoch loop of one pack, step by step: :class:`PackRun`.

Set up (the data, the compiled graph, the members' state), then each epoch (shuffle, train
chunk by chunk, validate, record, ask the caller), then the final evaluation (at each
member's best epoch where it has one) and the members' results. Members step through the
epochs together; a member that finishes, stops early, is cancelled or diverges is frozen
(its updates are masked) while the others go on. Each member's recorded time is its share
of the pack's: an epoch's wall time is split between the members that trained in it, and
the pack's data loading, compile and final evaluation equally between all members, so the
members' times add up to the pack's.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from . import packstate
from .blocks import LayerDesign
from .data import prepare_data
from .environment import environment
from .environment import notes as flag_notes
from .flags import JAX_MODE
from .graphkey import compile_key, pack_key
from .ledger import PackLedger
from .packgraph import PackedModel, PackShape, graph_segments, segments_for
from .result import EpochReport, TrialResult
from .stopping import monitor_for

if TYPE_CHECKING:
    from ..spec import TrialConfig

EVAL_ELEMENTS = 2**22  # rows x members x hidden units per evaluation call: bounds memory

OnPackEpoch = Callable[[int, EpochReport], "list[bool] | None"]
LoadModel = Callable[[PackShape], "tuple[PackedModel, bool, bool]"]


def evaluate(
    model: PackedModel, X: np.ndarray, y: np.ndarray, K: int, units: int, classification: bool
):
    """Mean loss ``[K]`` and accuracy ``[K]`` (or None) of every member on one split."""
    if len(X) == 0:
        return None, None
    chunk = max(1, min(4096, EVAL_ELEMENTS // (K * units)))
    loss_sum = np.zeros(K)
    correct = np.zeros(K, dtype=np.int64)
    for start in range(0, len(X), chunk):
        loss, c = model.eval_fn(X[start : start + chunk], y[start : start + chunk])
        loss_sum += loss
        correct += c
    return loss_sum / len(X), (correct / len(X) if classification else None)


class PackRun:
    """One pack of validated ``configs`` (of one pack key) trained from set-up to results;
    ``load_model(shape)`` gives the compiled model and whether it came from this process's
    and the disk's cache. The caller restores the garbage collector's state afterwards."""

    def __init__(
        self, configs: list[TrialConfig], on_epoch: OnPackEpoch | None, load_model: LoadModel
    ):
        self.t_start = time.perf_counter()
        self.configs, self.on_epoch, self.K = configs, on_epoch, len(configs)
        first = configs[0]
        self.data, shape_args, self.splits = prepare_data(first)
        self.classification = self.data.task == "classification"
        self.seeds = [c.seed for c in configs]
        # this pack's widths; the compiled graph sees only what its backend needs of them
        static = shape_args["mode"] == JAX_MODE
        self.segments, self.counts = segments_for(
            self.data.n_features, first.model.widths, static=static, pack_size=self.K
        )
        design = LayerDesign.from_model(first.model)
        self.shape = PackShape(
            **shape_args,
            segments=graph_segments(self.segments, design, shape_args["mode"]),
            design=design,
            shared_input=len(set(self.seeds)) == 1,
            stack_layers=self.counts if static else None,
        )
        self.t_data = time.perf_counter()
        # building a graph creates hundreds of thousands of objects (a quarter of a build's
        # time went to the collector's passes over them), and training many small acyclic
        # ones (metrics, histories); with compiled graphs in memory, the cyclic collector's
        # full passes would cost more than either. A worker settles its heap after each build.
        gc.disable()
        self.model, self.cached, self.disk_hit = load_model(self.shape)
        self.t_compile = time.perf_counter()
        self._set_up_members()

    def _set_up_members(self) -> None:
        """The members' monitors, ledger, initial values, random streams and chunks."""
        configs, model, K = self.configs, self.model, self.K
        has_val = len(self.splits["val"][0]) > 0
        self.monitors, self.notes = [], []
        base_notes = flag_notes()
        for c in configs:
            monitor, more = monitor_for(c, has_val=has_val, classification=self.classification)
            self.monitors.append(monitor)
            self.notes.append(base_notes + more)
        self.ledger = PackLedger(configs, self.monitors)
        self.n_params, self.drop_rngs, self.shuffle_rngs = packstate.initialise(
            model, configs, self.segments, self.counts
        )
        row_of = {
            s: i for i, s in enumerate(self.shuffle_rngs)
        }  # a seed's row in an epoch's shuffles
        self.seed_rows = np.array([row_of[s] for s in self.seeds], dtype=np.intp)
        self.n = len(self.splits["train"][0])
        self.batch = min(configs[0].training.batch_size, self.n)
        self.units = packstate.units(self.shape, self.segments, self.counts)
        self.chunks = packstate.chunks(
            model, K, self.batch, self.units, packstate.widest(self.shape, self.segments)
        )
        self.active = np.ones(K, dtype=bool)
        self.best: list[np.ndarray] | None = None
        self.max_epochs = max(c.training.max_epochs for c in configs)
        self.schedules = any(
            c.training.lr_schedule.kind != "none" or c.training.lr_schedule.warmup_epochs
            for c in configs
        )
        self.lr_at = model.hyper_index("learning_rate")
        self.keep_limits = packstate.keep_limits(configs) if self.shape.dropout else None
        self.initial = np.full(K, np.nan)
        self.compute = 0.0  # seconds inside compiled calls

    def run(self) -> list[TrialResult]:
        """Every epoch, then the final evaluation; one result per member."""
        # every moment is shared out: the set-up before the first epoch and the bookkeeping
        # after each (callbacks, snapshots) count in the next epoch's time, the last epoch's
        # bookkeeping in the final evaluation's
        self.mark = self.t_compile
        for epoch in range(1, self.max_epochs + 1):
            if not self.active.any():
                break
            self._epoch(epoch)
        final = self._final_metrics()
        return self._results(final)

    def _epoch(self, epoch: int) -> None:
        """Train and validate every running member for one epoch, then record it."""
        K, configs = self.K, self.configs
        running = self.active.sum()
        lrs = (
            np.array(
                [
                    c.training.learning_rate
                    * c.training.lr_schedule.factor(epoch, c.training.max_epochs)
                    for c in configs
                ]
            )
            if self.schedules
            else None
        )
        # each seed's shuffle, then each member's row of them (one gather, not K rows stacked)
        orders = np.stack([rng.permutation(self.n) for rng in self.shuffle_rngs.values()])
        order = orders[0] if self.shape.shared_input else np.take(orders, self.seed_rows, axis=0)
        self.loss_sum, self.correct = np.zeros(K), np.zeros(K, dtype=np.int64)
        self.diverged = np.zeros(K, dtype=bool)
        has_val = len(self.splits["val"][0]) > 0
        self.val_loss = np.full(K, np.nan) if has_val else None
        self.val_acc = np.full(K, np.nan) if has_val and self.classification else None
        # members are independent: the pack runs chunk by chunk, each sized to stay in cache
        for lo, hi, state in self.chunks:
            if not self.active[lo:hi].any():
                continue
            if lrs is not None:  # (JAX's arrays are immutable: a new array, not assignment)
                state[self.lr_at] = np.asarray(lrs[lo:hi], dtype=self.shape.dtype)
            self.model.import_state(state)
            self.model.set_active(self.active[lo:hi])
            self._train_chunk(epoch, lo, hi, order)
            self._validate_chunk(lo, hi)
            state[:] = self.model.export_state()
        self._record(epoch, running)

    def _train_chunk(self, epoch: int, lo: int, hi: int, order: np.ndarray) -> None:
        """One epoch's minibatches for members lo..hi (their state loaded)."""
        model, active, shape = self.model, self.active, self.shape
        X_train, y_train = self.splits["train"]
        for start in range(0, self.n, self.batch):
            idx = (
                order[..., start : start + self.batch]
                if shape.shared_input
                else order[lo:hi, start : start + self.batch]
            )
            b = idx.shape[-1]
            masks = (
                []
                if self.keep_limits is None
                else packstate.dropout_masks(
                    model,
                    self.segments,
                    self.counts,
                    self.drop_rngs,
                    active,
                    self.keep_limits,
                    b,
                    lo,
                    hi,
                )
            )
            called = time.perf_counter()
            # take, not X[idx]: NumPy's fancy indexing by a 2-D index array took 8x longer
            loss, c = model.train_fn(
                np.take(X_train, idx, axis=0), np.take(y_train, idx, axis=0), *masks
            )
            self.compute += time.perf_counter() - called
            if epoch == 1 and start == 0:  # the loss at initialisation: before any update
                self.initial[lo:hi] = loss
            finite = np.isfinite(loss)
            part = active[lo:hi]
            ok = part & finite
            self.loss_sum[lo:hi][ok] += loss[ok] * b
            self.correct[lo:hi][ok] += c[ok]
            bad = part & ~finite
            if bad.any():  # alone, the trial stops right after this step: freeze it now
                self.diverged[lo:hi] |= bad
                active[lo:hi] &= ~bad
                model.set_active(active[lo:hi])

    def _validate_chunk(self, lo: int, hi: int) -> None:
        called = time.perf_counter()
        vl, va = evaluate(self.model, *self.splits["val"], hi - lo, self.units, self.classification)
        self.compute += time.perf_counter() - called
        if vl is not None and self.val_loss is not None:
            self.val_loss[lo:hi] = vl
            if va is not None and self.val_acc is not None:
                self.val_acc[lo:hi] = va

    def _record(self, epoch: int, running: int) -> None:
        """The epoch into the ledger, to the caller, and the best epochs' snapshot."""
        now = time.perf_counter()
        share, self.mark = (now - self.mark) / running, now
        if epoch == 1:
            self.ledger.initial_loss = self.initial
        report = self.ledger.record(
            epoch,
            self.diverged,
            {
                "train_loss": self.loss_sum / self.n,
                "train_accuracy": self.correct / self.n if self.classification else None,
                "val_loss": self.val_loss,
                "val_accuracy": self.val_acc,
            },
            share,
        )
        flags = self.on_epoch(epoch, report) if self.on_epoch is not None else None
        improved = self.ledger.advance(epoch, report, flags)
        if improved.any():
            self.best = packstate.snapshot(self.model, self.chunks, self.best, improved)
        self.active = self.ledger.running.copy()

    def _final_metrics(self) -> dict[str, tuple[Any, Any]]:
        """Every split's loss and accuracy per member, at its best epoch where it has one."""
        K, model = self.K, self.model
        restore = self.ledger.restore()
        final = {
            split: (np.full(K, np.nan), np.full(K, np.nan)) for split in ("train", "val", "test")
        }
        for lo, hi, state in self.chunks:
            if self.best is not None and restore[lo:hi].any():  # final metrics: the best epoch's
                keep = restore[lo:hi]
                for i in range(model.n_best):
                    state[i] = np.array(state[i])  # a copy (JAX's arrays are immutable)
                    state[i][keep] = self.best[i][lo:hi][keep]
            model.import_state(state)
            for split, (loss_all, acc_all) in final.items():
                called = time.perf_counter()
                loss, acc = evaluate(
                    model, *self.splits[split], hi - lo, self.units, self.classification
                )
                self.compute += time.perf_counter() - called
                if loss is not None:
                    loss_all[lo:hi] = loss
                if acc is not None:
                    acc_all[lo:hi] = acc
        return {
            split: (
                None if len(self.splits[split][0]) == 0 else loss,
                acc if self.classification and len(self.splits[split][0]) else None,
            )
            for split, (loss, acc) in final.items()
        }

    def _results(self, final: dict[str, tuple[Any, Any]]) -> list[TrialResult]:
        K, ledger, first = self.K, self.ledger, self.configs[0]
        t_end = time.perf_counter()
        shared = {
            "data": (self.t_data - self.t_start) / K,
            "compile": (self.t_compile - self.t_data) / K,
            "evaluate": (t_end - self.mark) / K,
        }
        # compute_seconds: inside the compiled calls; the rest of the wall after the compile
        # is the epoch loop's own Python (minibatches, masks, bookkeeping) and the callbacks
        pack = {
            "size": K,
            "wall_seconds": t_end - self.t_start,
            "compile_seconds": self.t_compile - self.t_data,
            "compute_seconds": self.compute,
        }
        env = environment(self.cached)
        env.update(
            compile_key=compile_key(first, K),
            pack_key=pack_key(first),
            disk_cache_hit=self.disk_hit,
        )
        histories = ledger.histories()
        columns = {
            f"{split}_{kind}": (None if values is None else values.tolist())
            for split, pair in final.items()
            for kind, values in zip(("loss", "accuracy"), pair)
        }
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
            results.append(
                TrialResult(
                    status=ledger.status_of(k),
                    metrics=metrics,
                    history=histories[k],
                    timings=timings,
                    n_params=self.n_params,
                    environment=dict(env),
                    pack=dict(pack, index=k),
                    diverged_epoch=diverged_at[k] or None,
                    stopped_early=bool(ledger.stopped_early[k]),
                    epochs_run=len(histories[k]),
                    best_epoch=(best_epochs[k] or None) if self.monitors[k] else None,
                    notes=self.notes[k],
                )
            )
        return results
