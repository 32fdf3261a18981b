"""The engine's entry points: ``train_pack(configs, on_epoch)`` trains trials of one pack
key together (the epoch loop is :class:`~dnnframe.engine.epochloop.PackRun`), and
``train(config)`` is a pack of one; the compiled models of this process live here.

A member sees the same initialisation, minibatches and masks in any pack as alone (see
:mod:`~dnnframe.engine.packstate`), so its result equals its result alone up to
floating-point rounding of the batched products (float64: far below 1e-9 relative).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from . import diskcache
from .epochloop import OnPackEpoch, PackRun
from .graphkey import pack_keys
from .modelcache import ModelCache
from .packgraph import PackedModel, PackShape
from .result import EpochReport, TrialResult

if TYPE_CHECKING:
    from ..spec import TrialConfig

_CACHE = ModelCache()


def packed_model(shape: PackShape) -> tuple[PackedModel, bool, bool]:
    """The compiled packed model for ``shape``: from this process's cache, else from the
    host's disk cache, else compiled (and stored on disk). Returns (model, in_process_hit,
    disk_hit)."""
    disk_hit = False

    def build() -> PackedModel:
        nonlocal disk_hit
        # under JAX too: the pickle holds the rewritten graph (PyTensor's rewrites were most
        # of a fresh JAX process's build), and loading links it through jax.jit again, whose
        # executables XLA keeps on disk itself (backend.require)
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
            raise ValueError(
                f"configs[{i}] has pack key {key!r} but configs[0] has {keys[0]!r}: "
                "a pack trains trials of one pack key only"
            )
    return out


def train(
    config: TrialConfig | dict, on_epoch: Callable[[int, dict], bool | None] | None = None
) -> TrialResult:
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


def train_pack(
    configs: Sequence[TrialConfig | dict], on_epoch: OnPackEpoch | None = None
) -> list[TrialResult]:
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
        checked = _check_configs(list(configs))
        return PackRun(checked, on_epoch, packed_model).run() if checked else []
    finally:
        if enabled:
            gc.enable()


__all__ = ["clear_cache", "packed_model", "train", "train_pack"]
