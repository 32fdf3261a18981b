"""The metrics a trial records, which way each one is better, and the default objective.

One registry answers "is higher better for this metric?" for early stopping, the best-trial
ranking, reports, the dashboard and the search drivers, instead of each guessing from the
name; :func:`best_first` is the one ranking of values by an objective. It imports nothing
from dnnframe, so the spec, the store and the dashboard's form can all read it.

>>> direction("val_loss"), direction("test_accuracy")
('min', 'max')
>>> best_first([0.5, None, float("nan"), 0.9, 0.5], "max")
[3, 0, 4, 1, 2]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard, TypeVar, get_args

Mode = Literal["max", "min"]
MODES: tuple[str, ...] = get_args(Mode)


@dataclass(frozen=True)
class Metric:
    """A recorded metric: its name, whether higher (``max``) or lower (``min``) is better,
    and the words a chart axis or table header shows."""

    name: str
    direction: Mode
    label: str
    # the values it can take (None: unbounded), so a chart's ± sd band stops at them
    low: float | None = 0.0
    high: float | None = None


#: Every metric a trial records, in the order tables show them. The first six are the final
#: metrics of every trial (the last four also every epoch); the timings are ``result.timings``.
METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("test_accuracy", "max", "test accuracy", high=1.0),
        Metric("test_loss", "min", "test loss"),
        Metric("val_accuracy", "max", "val accuracy", high=1.0),
        Metric("val_loss", "min", "val loss"),
        Metric("train_accuracy", "max", "train accuracy", high=1.0),
        Metric("train_loss", "min", "train loss"),
        Metric("train_seconds", "min", "training time (s)"),
        Metric("compile_seconds", "min", "compile time (s)"),
    )
}
#: The final metrics every trial records (``result.metrics``).
FINAL_METRICS: tuple[str, ...] = (
    "test_accuracy",
    "test_loss",
    "val_accuracy",
    "val_loss",
    "train_accuracy",
    "train_loss",
)
#: The metrics recorded every epoch (what early stopping and pruning can watch).
EpochMetric = Literal["val_loss", "val_accuracy", "train_loss", "train_accuracy"]
EPOCH_METRICS: tuple[str, ...] = get_args(EpochMetric)
#: The per-epoch metric that stands in for a final one where only epochs are known (a
#: pruner's rungs): test metrics exist only at the end, their validation ones every epoch.
EPOCH_STAND_IN: dict[str, str] = {"test_accuracy": "val_accuracy", "test_loss": "val_loss"}
#: The metrics a spec may name as its objective.
OBJECTIVE_METRICS: tuple[str, ...] = tuple(METRICS)

#: The objective of a spec that names none: the best trial has the highest test accuracy.
DEFAULT_OBJECTIVE_METRIC = "test_accuracy"
DEFAULT_OBJECTIVE_MODE: Mode = "max"


def default_objective() -> tuple[str, Mode]:
    """``(metric, mode)`` of a spec that names no objective."""
    return DEFAULT_OBJECTIVE_METRIC, DEFAULT_OBJECTIVE_MODE


def metrics_json() -> dict[str, Any]:
    """The registry and the default objective as JSON (for the dashboard's page scripts)."""
    return {
        "metrics": {
            m.name: {"direction": m.direction, "label": m.label, "bounds": [m.low, m.high]}
            for m in METRICS.values()
        },
        "objective": {"metric": DEFAULT_OBJECTIVE_METRIC, "mode": DEFAULT_OBJECTIVE_MODE},
    }


def direction(metric: str) -> Mode:
    """Whether higher (``"max"``) or lower (``"min"``) is better for ``metric``.

    Raises:
        ValueError: naming the metric and the known ones, when it is not registered.
    """
    try:
        return METRICS[metric].direction
    except KeyError:
        raise ValueError(
            f"unknown metric {metric!r}: known metrics are {', '.join(METRICS)}"
        ) from None


def check_mode(mode: str) -> Mode:
    """``mode`` itself when it is "max" or "min". Raises ValueError naming it otherwise."""
    if not _is_mode(mode):
        raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
    return mode


def _is_mode(mode: str) -> TypeGuard[Mode]:
    return mode in MODES


def improves(metric: str, value: float, best: float | None, min_delta: float = 0.0) -> bool:
    """Whether ``value`` of ``metric`` beats ``best`` by more than ``min_delta`` in the
    metric's own direction (any value beats no best yet)."""
    if best is None:
        return True
    if direction(metric) == "max":
        return value > best + min_delta
    return value < best - min_delta


def worst_value(metric: str, mode: str, values: Sequence[Any]) -> float | None:
    """The worst value ``metric`` can take under ``mode``, which a trial without a valid
    score (it diverged) counts as: the metric's bound on its worse side when it has one (an
    accuracy's 0 when more is better), else the worst finite one of ``values`` (what the
    trials that trained reached: a loss has no bound above); None when there is neither.

    >>> worst_value("test_accuracy", "max", [0.9]), worst_value("test_loss", "min", [0.3, 2.5])
    (0.0, 2.5)
    >>> worst_value("test_loss", "min", [None]) is None
    True
    """
    known = METRICS.get(metric)
    bound = None if known is None else known.low if check_mode(mode) == "max" else known.high
    if bound is not None:
        return float(bound)
    finite = [float(v) for v in values if is_number(v)]
    if not finite:
        return None
    return min(finite) if mode == "max" else max(finite)


def counted_values(
    values: Sequence[tuple[bool, Any]], metric: str, mode: str
) -> list[float | None]:
    """The value each trial counts with in an analysis, given ``(diverged, recorded)`` for
    each: its own finite value (None when it has none), or for a diverged trial, whose
    scores mean nothing, :func:`worst_value` over what the others recorded. The one rule
    every chart, ranking and report counts diverged trials by.

    >>> counted_values([(False, 0.3), (True, None), (False, 2.5)], "test_loss", "min")
    [0.3, 2.5, 2.5]
    >>> counted_values([(False, 0.9), (True, float("nan"))], "test_accuracy", "max")
    [0.9, 0.0]
    """
    worst = worst_value(metric, mode, [v for diverged, v in values if not diverged])
    return [worst if diverged else float(v) if is_number(v) else None for diverged, v in values]


def configuration_order(mean: float, n: int, sd: float, mode: str) -> tuple[float, int, float]:
    """The key configurations are ranked by, best first (the dashboard's ranking and the
    CLI's summary alike): a better mean over seeds, then more seeds, then a smaller spread."""
    return (-mean if mode == "max" else mean, -n, sd)


def is_number(value: Any) -> TypeGuard[float]:
    """A finite int or float (not a bool): a value that can be ranked."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


T = TypeVar("T")


def best_first(values: Sequence[Any], mode: str) -> list[int]:
    """The indices of ``values`` from best to worst under ``mode`` ("max" or "min").

    Values that are not finite numbers (None, NaN, inf, text) come last, in their given
    order; equal values keep their given order, so a caller that passes rows in a stable
    order (creation order, trial id) gets the same ranking every time.

    Raises:
        ValueError: ``mode`` is not "max" or "min".
    """
    sign = -1.0 if check_mode(mode) == "max" else 1.0
    ranked = sorted(
        range(len(values)),
        key=lambda i: (0, sign * float(values[i]), i) if is_number(values[i]) else (1, 0.0, i),
    )
    return ranked


def rank(
    items: Sequence[T], value: Callable[[T], Any], mode: str, scored_only: bool = False
) -> list[T]:
    """``items`` best first by ``value(item)`` under ``mode`` (see :func:`best_first`);
    with ``scored_only`` the items without a finite value are left out."""
    values = [value(item) for item in items]
    order = best_first(values, mode)
    return [items[i] for i in order if not scored_only or is_number(values[i])]
