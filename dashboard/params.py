"""A trial's parameters and recorded numbers as flat name → value maps, for charts and analysis.

Every leaf of the trial's ``model`` and ``training`` configuration becomes a parameter
(nested settings read ``lr_schedule.kind``), so a chart can put whatever a sweep varies on an
axis; per-layer widths read ``"64x32"`` as in :func:`dnnframe.store.rows.trial_row`.

>>> cfg = {"model": {"hidden_layers": 2, "width": [8, 4]},
...        "training": {"lr_schedule": {"kind": "cosine"}}, "seed": 1,
...        "dataset": {"name": "iris"}}
>>> trial_params(cfg)
{'hidden_layers': 2, 'width': '8x4', 'lr_schedule.kind': 'cosine', 'seed': 1, 'dataset': 'iris'}
>>> trial_values({"metrics": {"test_loss": 0.5, "test_accuracy": None},
...               "timings": {"train": 2.0}, "epochs_run": 3})
{'test_loss': 0.5, 'train_seconds': 2.0, 'epochs_run': 3}
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dnnframe.jsonsafe import dotted_items
from dnnframe.metrics import METRICS, counted_values, is_number
from dnnframe.states import ANALYSED_STATES, TrialState

# What a trial's result records besides its metrics, under the names the charts use.
TIMING_VALUES = {"train_seconds": "train", "compile_seconds": "compile", "total_seconds": "total"}
RESULT_VALUES = ("epochs_run", "n_params")
#: Every name :func:`trial_values` can give: what a chart or importance may be asked about.
VALUE_NAMES: tuple[str, ...] = tuple(dict.fromkeys((*METRICS, *TIMING_VALUES, *RESULT_VALUES)))
#: What a trial measured rather than scored: a diverged trial's own values of these stand.
MEASURED_VALUES: tuple[str, ...] = (*TIMING_VALUES, *RESULT_VALUES)
_ANALYSED = frozenset(s.value for s in ANALYSED_STATES)
_DIVERGED = TrialState.DIVERGED.value


def value_direction(name: str) -> str:
    """Whether more (``max``) or less (``min``) of a value is better; timings and sizes
    are better smaller."""
    return METRICS[name].direction if name in METRICS else "min"


def _param(value: Any) -> Any:
    """A configured value as the charts show it: lists read ``8x4``, as widths do."""
    if isinstance(value, list):
        return "x".join(map(str, value))
    return None if isinstance(value, dict) else value


def trial_params(config: dict[str, Any] | None) -> dict[str, Any]:
    """Every configured value of a trial, by its leaf name (``learning_rate``), plus the seed
    and the dataset's name."""
    cfg = config or {}
    out: dict[str, Any] = {}
    for section in ("model", "training"):
        out.update((path, _param(v)) for path, v in dotted_items(cfg.get(section) or {}))
    out["seed"] = cfg.get("seed")
    out["dataset"] = (cfg.get("dataset") or {}).get("name")
    return out


def trial_values(result: dict[str, Any] | None) -> dict[str, Any]:
    """Every finite number a finished trial recorded: its final metrics (whatever the task
    measured), its timings in seconds, the epochs it ran and its parameter count."""
    result = result or {}
    out = {k: v for k, v in (result.get("metrics") or {}).items() if is_number(v)}
    timings = result.get("timings") or {}
    for name, key in TIMING_VALUES.items():
        if is_number(timings.get(key)):
            out[name] = timings[key]
    for key in RESULT_VALUES:
        if is_number(result.get(key)):
            out[key] = result[key]
    return out


@dataclass(frozen=True)
class Outcome:
    """One trial as an analysis counts it: its parameters, state and value of a metric."""

    params: dict[str, Any]
    state: str
    value: float
    trial_id: str | None = None


def outcomes(trials: Iterable[Any], metric: str, mode: str) -> list[Outcome]:
    """The trials of ``ANALYSED_STATES`` with their value of ``metric``, the one rule every
    analysis counts by (the page's outcomes.js is its copy): a complete or pruned trial
    with the finite value it recorded (none: left out); a diverged trial, whose scores mean
    nothing, with the worst value of ``metric`` under ``mode`` (``worst_value``: an
    accuracy's 0, else the worst any trial reached), so the parameter values that make
    trials blow up rank as the worst instead of vanishing. A diverged trial's timings,
    epochs and size are measurements, and stand.

    >>> from types import SimpleNamespace as T
    >>> runs = [T(state="COMPLETE", config={"training": {"learning_rate": 0.05}},
    ...           result={"metrics": {"test_loss": 0.4}}),
    ...         T(state="DIVERGED", config={"training": {"learning_rate": 1000}},
    ...           result={"metrics": {"test_loss": float("nan")}}),
    ...         T(state="FAILED", config={}, result=None)]
    >>> [(o.params["learning_rate"], o.state, o.value) for o in outcomes(runs, "test_loss", "min")]
    [(0.05, 'COMPLETE', 0.4), (1000, 'DIVERGED', 0.4)]
    """
    counted = []
    for trial in trials:
        state = str(getattr(trial.state, "value", trial.state))
        if state in _ANALYSED:
            counted.append((trial, state, trial_values(trial.result).get(metric)))
    if metric in MEASURED_VALUES:
        values = [v for _, _, v in counted]
    else:
        values = counted_values([(s == _DIVERGED, v) for _, s, v in counted], metric, mode)
    return [
        Outcome(trial_params(trial.config), state, float(value), getattr(trial, "id", None))
        for (trial, state, _), value in zip(counted, values)
        if value is not None
    ]
