"""``train(config, on_epoch)``: build (or reuse) a compiled network and train one trial.

Compiled functions are cached per process under a :class:`GraphShape` — everything that
changes the symbolic graph (layer widths pattern, activation, layer design (residual kind,
normalisation and its position), dropout and gradient clipping on/off, loss, optimiser,
dtype, mode). Depth of an equal-width run, learning rate (and its schedule), momentum,
L2, dropout rate, clipping threshold, residual scale, seed and data are runtime values
(shared variables), so a depth sweep at one width compiles once. Under ``mode=JAX`` the
depth of each stack is static instead (``GraphShape.stack_layers``: XLA needs static
shapes); XLA compiles the scan's body once, so the build time still does not grow with depth.
"""

from __future__ import annotations

import math
import os
import platform
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .flags import JAX_MODE, configure

_FLAGS = configure()

import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402

from .backend import describe, require, seed_random_state  # noqa: E402
from .blocks import LayerDesign, residual_scale  # noqa: E402
from .layers import DenseLayer, DenseStackLayer, Layer, RandomChain  # noqa: E402
from .modelcache import ModelCache  # noqa: E402
from .result import TrialResult  # noqa: E402
from .stopping import better as _better  # noqa: E402
from .stopping import monitor_for  # noqa: E402
from .updates import clip_by_global_norm, make_updates, reset_state  # noqa: E402

if TYPE_CHECKING:
    from ..spec import TrialConfig

EVAL_CHUNK = 4096  # rows per evaluation call: bounds memory on big splits and deep stacks


@dataclass(frozen=True)
class GraphShape:
    """Everything that decides the compiled graph; equal shapes share compiled functions.

    ``segments`` is a tuple of ``("dense", n_in, n_out)`` and ``("stack", width)``; the
    number of layers in a stack is not part of the shape.
    """

    n_features: int
    n_outputs: int
    segments: tuple
    activation: str
    residual: bool
    dropout: bool
    loss: str
    classification: bool
    optimizer: str
    dtype: str
    mode: str
    design: LayerDesign = LayerDesign()  # normalisation and residual kind of hidden layers
    grad_clip: bool = False  # the clipping threshold itself is a run-time value
    stack_layers: tuple[int, ...] | None = None  # per stack, under mode=JAX only


def segments_for(n_features: int, widths: list[int]) -> tuple[tuple, tuple[int, ...]]:
    """Split hidden widths into graph segments plus the layer count of each stack.

    The first layer of each run of equal widths is a dense layer (its input width differs,
    except possibly for the very first); the rest of the run is one scanned stack.
    """
    segments: list[tuple] = []
    counts: list[int] = []
    prev = n_features
    i = 0
    while i < len(widths):
        w = widths[i]
        segments.append(("dense", prev, w))
        j = i + 1
        while j < len(widths) and widths[j] == w:
            j += 1
        if j - i > 1:
            segments.append(("stack", w))
            counts.append(j - i - 1)
        prev, i = w, j
    return tuple(segments), tuple(counts)


class CompiledModel:
    """Layers, hyperparameter shared variables and the compiled train/eval functions."""

    def __init__(self, shape: GraphShape):
        self.shape = shape
        dtype = shape.dtype
        self.srng = RandomChain()
        self.lr = pytensor.shared(np.asarray(0.01, dtype=dtype), name="learning_rate")
        self.momentum = pytensor.shared(np.asarray(0.9, dtype=dtype), name="momentum")
        self.l2 = pytensor.shared(np.asarray(0.0, dtype=dtype), name="l2")
        self.p_drop = pytensor.shared(np.asarray(0.0, dtype=dtype), name="dropout")
        self.clip = pytensor.shared(np.asarray(1.0, dtype=dtype), name="grad_clip")
        self.layers, self.stacks = self._hidden_layers(shape)
        last = shape.segments[-1][-1] if shape.segments else shape.n_features
        self.layers.append(DenseLayer(last, shape.n_outputs, "linear", dtype=dtype, name="output"))
        self.params = [p for layer in self.layers for p in layer.params]
        self.regularizable = [p for layer in self.layers for p in layer.regularizable]
        # batch-norm running statistics: not trained, but saved with the best weights
        self.stats = [s for layer in self.layers for s in layer.stats]

        X = pt.matrix("X", dtype=dtype)
        y = pt.lvector("y") if shape.classification and shape.loss == "softmax_crossentropy" \
            else pt.matrix("y", dtype=dtype)
        out_eval = self._forward(X, deterministic=True)
        out_train = self._forward(X, deterministic=False)  # last: the dropout chain ends here
        loss_rows_train, correct_train = self._loss_rows(out_train, y)
        loss_rows_eval, correct_eval = self._loss_rows(out_eval, y)
        loss = loss_rows_train.mean()
        penalty = sum(pt.sum(W ** 2) for W in self.regularizable)
        objective = loss + self.l2 * penalty
        grads = pytensor.grad(objective, self.params)
        if shape.grad_clip:
            grads = clip_by_global_norm(grads, self.clip)
        updates, self.opt_state = make_updates(shape.optimizer, self.params, grads, self.lr, self.momentum)
        stat_updates = [u for layer in self.layers for u in layer.updates()]
        self.train_fn = pytensor.function([X, y], [loss, correct_train],
                                          updates=updates + stat_updates + self.srng.updates(),
                                          mode=shape.mode, name="train_step")
        self.eval_fn = pytensor.function([X, y], [loss_rows_eval.sum(), correct_eval],
                                         mode=shape.mode, name="evaluate")
        self._y_type = y.type
        if shape.mode != JAX_MODE:  # XLA compiles per input shape: train() warms those up
            self.warm_up([2], [2])

    def _hidden_layers(self, shape: GraphShape) -> tuple[list[Layer], list[DenseStackLayer]]:
        """The hidden layers of ``shape``: a dense layer per segment start, a scanned stack for
        the rest of each equal-width run, all with the shape's layer design."""
        layers: list[Layer] = []
        stacks: list[DenseStackLayer] = []
        drop = self.p_drop if shape.dropout else None
        for k, seg in enumerate(shape.segments):
            if seg[0] == "dense":
                _, n_in, n_out = seg
                design = shape.design if n_in == n_out else shape.design.for_entry()
                layers.append(DenseLayer(n_in, n_out, shape.activation, dtype=shape.dtype,
                                         name=f"hidden{k}", dropout=drop, srng=self.srng,
                                         design=design))
            else:
                n_static = shape.stack_layers[len(stacks)] if shape.stack_layers else None
                stack = DenseStackLayer(seg[1], shape.activation, dropout=drop, srng=self.srng,
                                        dtype=shape.dtype, name=f"stack{k}", design=shape.design,
                                        n_layers=n_static)
                layers.append(stack)
                stacks.append(stack)
        return layers, stacks

    def warm_up(self, train_rows: list[int], eval_rows: list[int]) -> None:
        """Call the functions once per batch size: the C backend builds some thunks on the
        first call and XLA compiles per input shape, so that cost is counted as compile
        time, not as the first epoch. reset() follows before training."""
        y_type = self._y_type
        for rows, fn in [(r, self.train_fn) for r in train_rows] + [(r, self.eval_fn) for r in eval_rows]:
            X0 = np.zeros((rows, self.shape.n_features), dtype=self.shape.dtype)
            y0 = np.zeros((rows,) if y_type.ndim == 1 else (rows, self.shape.n_outputs), dtype=y_type.dtype)
            fn(X0, y0)

    def _forward(self, x, deterministic: bool):
        for layer in self.layers:
            x = layer.get_output(x, deterministic=deterministic)
        return x

    def _loss_rows(self, out, y):
        if self.shape.loss == "softmax_crossentropy":
            logp = pt.special.log_softmax(out, axis=1)
            # the label's column by comparison with the (constant) class indices: JAX cannot
            # index with an arange over the run-time batch size
            onehot = pt.eq(pt.arange(self.shape.n_outputs).dimshuffle("x", 0), y.dimshuffle(0, "x"))
            rows = -pt.sum(pt.switch(onehot, logp, 0), axis=1)
            correct = pt.sum(pt.eq(pt.argmax(out, axis=1), y))
        else:
            rows = pt.mean((out - y) ** 2, axis=1)
            correct = pt.sum(pt.eq(pt.argmax(out, axis=1), pt.argmax(y, axis=1)))
        return rows, correct

    @property
    def n_params(self) -> int:
        return int(sum(p.get_value(borrow=True).size for p in self.params))

    def reset(self, config, counts: tuple[int, ...], rng: np.random.Generator) -> None:
        """Fresh weights, zero optimiser state, this trial's hyperparameters and dropout seed."""
        init = config.model.init
        scale = residual_scale(config.model)
        stacks = iter(zip(self.stacks, counts))
        for layer in self.layers:
            if isinstance(layer, DenseStackLayer):
                stack, n = next(stacks)
                stack.initialise(rng, init, n_layers=n, residual_scale=scale)
            elif isinstance(layer, DenseLayer) and layer is self.layers[-1]:
                # the output layer of a classifier uses Glorot whatever the hidden init:
                # the spec's init describes the hidden stack under study
                layer.initialise(rng, "glorot")
            else:
                layer.initialise(rng, init, residual_scale=scale)
        reset_state(self.opt_state)
        dtype = self.shape.dtype
        t = config.training
        self.lr.set_value(np.asarray(t.learning_rate, dtype=dtype))
        self.momentum.set_value(np.asarray(t.momentum, dtype=dtype))
        self.l2.set_value(np.asarray(t.l2, dtype=dtype))
        self.p_drop.set_value(np.asarray(config.model.dropout, dtype=dtype))
        self.clip.set_value(np.asarray(t.grad_clip or 1.0, dtype=dtype))
        seed = int(rng.integers(2**31))
        self.srng.seed(seed)
        if self.shape.mode == JAX_MODE:
            seed_random_state(self.train_fn, seed)

    def set_epoch_lr(self, config, epoch: int) -> None:
        """The learning rate of ``epoch`` (1-based) under the trial's schedule."""
        t = config.training
        lr = t.learning_rate * t.lr_schedule.factor(epoch, t.max_epochs)
        self.lr.set_value(np.asarray(lr, dtype=self.shape.dtype))

    def snapshot(self) -> list[np.ndarray]:
        return [p.get_value(borrow=False) for p in self.params + self.stats]

    def restore(self, values: list[np.ndarray]) -> None:
        for p, v in zip(self.params + self.stats, values):
            p.set_value(v)


_CACHE = ModelCache()


def _build(shape: GraphShape) -> CompiledModel:
    # unrolled width lists can still be long; scan keeps equal-width runs shallow
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        return CompiledModel(shape)
    finally:
        sys.setrecursionlimit(limit)


def compiled_model(shape: GraphShape) -> tuple[CompiledModel, bool]:
    """The cached model for ``shape`` (compiling it on first use); returns (model, was_cached).

    The per-process cache is an LRU bounded by bytes (``DNNFRAME_MODEL_CACHE_BYTES``).
    """
    return _CACHE.get_or_build(shape, lambda: _build(shape))


def clear_cache() -> None:
    """Forget every compiled model of this process."""
    _CACHE.clear()


def _environment(cached: bool) -> dict[str, Any]:
    import dnnframe

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pytensor": pytensor.__version__,
        "dnnframe": getattr(dnnframe, "__version__", None),
        "host": platform.node(),
        "platform": platform.platform(),
        "pid": os.getpid(),
        "floatX": str(pytensor.config.floatX),
        "mode": _FLAGS.mode,
        "blas__ldflags": str(pytensor.config.blas__ldflags),
        "flags": _FLAGS.to_dict(),
        "requested_device": _FLAGS.requested_device,
        **describe(),  # backend, device, device_name (+ jax, jaxlib, cuda)
        "compile_cache_hit": cached,
        # this process's peak resident memory so far (Linux reports KiB): what a worker needs
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _targets(y: np.ndarray, loss: str, classification: bool, n_outputs: int, dtype: str) -> np.ndarray:
    if loss == "softmax_crossentropy":
        return y.astype(np.int64)
    if classification:  # squared error on class labels: regress one-hot codes
        return np.eye(n_outputs, dtype=dtype)[y]
    return y.reshape(-1, 1).astype(dtype)


def _evaluate(model: CompiledModel, X: np.ndarray, y: np.ndarray, classification: bool) -> tuple[float | None, float | None]:
    if len(X) == 0:
        return None, None
    loss_sum, correct = 0.0, 0
    for start in range(0, len(X), EVAL_CHUNK):
        loss, c = model.eval_fn(X[start:start + EVAL_CHUNK], y[start:start + EVAL_CHUNK])
        loss_sum += float(loss)
        correct += int(c)
    return loss_sum / len(X), (correct / len(X) if classification else None)


def prepare_data(config: TrialConfig) -> tuple[Any, dict[str, Any], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Load ``config``'s dataset: (dataset, the graph-shape fields that follow from the data
    and the config, ``{"train"|"val"|"test": (X, y)}`` in the engine's dtype)."""
    from ..datasets import load_dataset

    require()  # a GPU that was asked for and cannot be used fails here, before any work
    model_cfg = config.model
    data = load_dataset(config.dataset, model_cfg.loss)
    dtype = str(pytensor.config.floatX)
    classification = data.task == "classification"
    shape_args = dict(
        n_features=data.n_features, n_outputs=data.n_outputs, activation=model_cfg.activation,
        residual=model_cfg.residual != "none", dropout=model_cfg.dropout > 0, loss=model_cfg.loss,
        classification=classification, optimizer=config.training.optimizer, dtype=dtype,
        mode=_FLAGS.mode,
    )
    splits = {}
    for split in ("train", "val", "test"):
        X, y = getattr(data, f"X_{split}"), getattr(data, f"y_{split}")
        splits[split] = (np.ascontiguousarray(X, dtype=dtype),
                         _targets(y, model_cfg.loss, classification, data.n_outputs, dtype))
    return data, shape_args, splits


def _train_epoch(model: CompiledModel, X: np.ndarray, y: np.ndarray, order: np.ndarray,
                 batch: int) -> tuple[float, int] | None:
    """One pass over the minibatches in ``order``: (loss sum, correct), None if it diverged."""
    loss_sum, correct = 0.0, 0
    for start in range(0, len(order), batch):
        idx = order[start:start + batch]
        loss, c = model.train_fn(X[idx], y[idx])
        loss = float(loss)
        if not math.isfinite(loss):
            return None
        loss_sum += loss * len(idx)
        correct += int(c)
    return loss_sum, correct


def train(config: TrialConfig | dict, on_epoch: Callable[[int, dict], bool | None] | None = None) -> TrialResult:
    """Train the network described by ``config`` (a :class:`~dnnframe.spec.TrialConfig`,
    or its JSON dict).

    ``on_epoch(epoch, metrics)`` is called after every epoch with ``{"epoch", "train_loss",
    "train_accuracy", "val_loss", "val_accuracy", "seconds"}`` (train_* are the running
    means over the epoch's minibatches; val_* are computed without dropout); returning True
    stops training and the result is CANCELLED. A NaN/inf loss ends the trial as DIVERGED.
    Same config and seed give bit-identical results in the same environment.
    """
    from ..spec import TrialConfig

    t_start = time.perf_counter()
    if isinstance(config, dict):  # a stored config document
        config = TrialConfig.model_validate(config)
    train_cfg = config.training
    data, shape_args, splits = prepare_data(config)
    classification = shape_args["classification"]
    segments, counts = segments_for(data.n_features, config.model.widths)
    shape = GraphShape(segments=segments, design=LayerDesign.from_model(config.model),
                       grad_clip=train_cfg.grad_clip is not None, **shape_args,
                       stack_layers=counts if shape_args["mode"] == JAX_MODE else None)
    (X_train, y_train), (X_val, y_val) = splits["train"], splits["val"]
    t_data = time.perf_counter()

    model, cached = compiled_model(shape)
    if shape.mode == JAX_MODE:
        batch = min(train_cfg.batch_size, len(X_train))
        eval_rows = {min(len(X), EVAL_CHUNK) for X, _ in splits.values() if len(X)} | \
            {len(X) % EVAL_CHUNK for X, _ in splits.values() if len(X) % EVAL_CHUNK}
        model.warm_up(sorted({batch, len(X_train) % batch} - {0}), sorted(eval_rows))
    t_compile = time.perf_counter()

    # independent streams for init, shuffling and dropout, all derived from the trial seed
    init_rng, shuffle_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(config.seed).spawn(2))
    model.reset(config, counts, init_rng)

    monitor, monitor_notes = monitor_for(config, len(X_val) > 0, classification)
    notes: list[str] = list(_FLAGS.notes) + monitor_notes
    es = train_cfg.early_stopping
    n = len(X_train)
    batch = min(train_cfg.batch_size, n)
    history: list[dict[str, Any]] = []
    status, diverged_epoch, stopped_early = "COMPLETE", None, False
    best_value, best_epoch, best_params, since_best = None, None, None, 0
    for epoch in range(1, train_cfg.max_epochs + 1):
        t0 = time.perf_counter()
        model.set_epoch_lr(config, epoch)
        sums = _train_epoch(model, X_train, y_train, shuffle_rng.permutation(n), batch)
        if sums is None:
            status, diverged_epoch = "DIVERGED", epoch
            history.append({"epoch": epoch, "train_loss": None, "train_accuracy": None,
                            "val_loss": None, "val_accuracy": None, "seconds": time.perf_counter() - t0})
            break
        val_loss, val_acc = _evaluate(model, X_val, y_val, classification)
        metrics = {"epoch": epoch, "train_loss": sums[0] / n,
                   "train_accuracy": sums[1] / n if classification else None,
                   "val_loss": val_loss, "val_accuracy": val_acc, "seconds": time.perf_counter() - t0}
        history.append(metrics)
        if val_loss is not None and not math.isfinite(val_loss):
            status, diverged_epoch = "DIVERGED", epoch
            break
        stop = bool(on_epoch(epoch, dict(metrics))) if on_epoch is not None else False
        if monitor:
            value = metrics[monitor]
            if _better(monitor, value, best_value, es.min_delta):
                best_value, best_epoch, since_best = value, epoch, 0
                best_params = model.snapshot()
            else:
                since_best += 1
        if stop:
            status = "CANCELLED"
            break
        if monitor and since_best >= es.patience:
            stopped_early = True
            break
    t_train = time.perf_counter()

    if best_params is not None and status != "DIVERGED":
        model.restore(best_params)  # final metrics are those of the best epoch
    final: dict[str, float | None] = {}
    for split, (X, y) in splits.items():
        final[f"{split}_loss"], final[f"{split}_accuracy"] = _evaluate(model, X, y, classification)
    t_end = time.perf_counter()
    return TrialResult(
        status=status, metrics=final, history=history,
        timings={"data": t_data - t_start, "compile": t_compile - t_data, "train": t_train - t_compile,
                 "evaluate": t_end - t_train, "total": t_end - t_start},
        n_params=model.n_params, environment=_environment(cached), diverged_epoch=diverged_epoch,
        stopped_early=stopped_early, epochs_run=len(history), best_epoch=best_epoch if monitor else None,
        notes=notes,
    )
