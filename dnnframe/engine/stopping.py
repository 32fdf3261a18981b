"""Early-stopping rules shared by the per-trial and the packed engine."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..spec import TrialConfig


def better(metric: str, value: float, best: float | None, min_delta: float) -> bool:
    """Whether ``value`` of ``metric`` improves on ``best`` by more than ``min_delta``
    (accuracies go up, losses go down)."""
    if best is None:
        return True
    if metric.endswith("accuracy"):
        return value > best + min_delta
    return value < best - min_delta


def monitor_for(config: TrialConfig, has_val: bool, classification: bool) -> tuple[str | None, list[str]]:
    """The metric early stopping watches (None without early stopping) and notes on fallbacks."""
    es = config.training.early_stopping
    monitor = es.metric if es else None
    notes: list[str] = []
    if monitor and monitor.startswith("val_") and not has_val:
        monitor = "train_" + monitor[4:]
        notes.append(f"no validation split: early stopping monitors {monitor} instead of {es.metric}")
    if monitor and monitor.endswith("accuracy") and not classification:
        monitor = monitor.replace("accuracy", "loss")
        notes.append(f"regression has no accuracy: early stopping monitors {monitor} instead")
    return monitor, notes
