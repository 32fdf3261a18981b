"""When a member stops: early stopping's monitor and comparison, and divergence."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..metrics import improves

if TYPE_CHECKING:
    from ..spec import TrialConfig


def better(metric: str, value: float, best: float | None, min_delta: float) -> bool:
    """Whether ``value`` of ``metric`` improves on ``best`` by more than ``min_delta``, in
    the metric's direction from the registry (:func:`dnnframe.metrics.improves`)."""
    return improves(metric, value, best, min_delta)


def monitor_for(
    config: TrialConfig, has_val: bool, classification: bool
) -> tuple[str | None, list[str]]:
    """The metric early stopping watches (None without early stopping) and notes on fallbacks."""
    es = config.training.early_stopping
    monitor: str | None = es.metric if es else None
    notes: list[str] = []
    if monitor and monitor.startswith("val_") and not has_val:
        notes.append(
            f"no validation split: early stopping monitors train_{monitor[4:]} instead of {monitor}"
        )
        monitor = "train_" + monitor[4:]
    if monitor and monitor.endswith("accuracy") and not classification:
        monitor = monitor.replace("accuracy", "loss")
        notes.append(f"regression has no accuracy: early stopping monitors {monitor} instead")
    return monitor, notes


def diverged(metrics: dict[str, Any], initial_loss: float | None, factor: float | None) -> bool:
    """Whether an epoch's losses mean divergence: the validation loss is NaN/inf, or a loss
    exceeds ``factor`` times the larger of the loss at initialisation and 1."""
    val = metrics.get("val_loss")
    if val is not None and not math.isfinite(val):
        return True
    if factor is None or initial_loss is None or not math.isfinite(initial_loss):
        return False
    bound = factor * max(initial_loss, 1.0)
    return any(v is not None and v > bound for v in (metrics.get("train_loss"), val))
