"""A stored trial as one flat row: for analysis tables (``trial_row``) and CSV (``export_row``).

>>> from dnnframe.store.records import TrialRecord, TrialState
>>> t = TrialRecord(id="t1", experiment_ids=["e"], state=TrialState.COMPLETE,
...                 config={"model": {"hidden_layers": 2, "width": [8, 4]}, "seed": 3},
...                 result={"metrics": {"test_accuracy": 0.9}, "timings": {"train": 1.5},
...                         "pack": {"id": "p7", "size": 4, "wall_seconds": 6.2}})
>>> r = trial_row(t)
>>> (r["trial_id"], r["hidden_layers"], r["width"], r["seed"], r["test_accuracy"])
('t1', 2, '8x4', 3, 0.9)
>>> (r["train_seconds"], r["pack_id"], r["pack_size"], r["pack_seconds"])
(1.5, 'p7', 4, 6.2)
>>> iso_utc(0.0)
'1970-01-01T00:00:00Z'
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from ..jsonsafe import dotted_items
from ..metrics import FINAL_METRICS
from .records import TrialRecord
from .sorting import resolve_sort_path

if TYPE_CHECKING:
    from .base import ResultStore

# Each swept column of a row and where it lives in a trial's config.
CONFIG_PATHS = {
    "dataset": "config.dataset.name",
    "hidden_layers": "config.model.hidden_layers",
    "width": "config.model.width",
    "activation": "config.model.activation",
    "init": "config.model.init",
    "dropout": "config.model.dropout",
    "residual": "config.model.residual",
    "optimizer": "config.training.optimizer",
    "learning_rate": "config.training.learning_rate",
    "batch_size": "config.training.batch_size",
    "max_epochs": "config.training.max_epochs",
    "l2": "config.training.l2",
    "seed": "config.seed",
}
CONFIG_COLUMNS = tuple(CONFIG_PATHS)
# Kept out of CSV rows: the per-epoch history and the environment would explode the columns
# (they stay in JSON lines).
_NOT_IN_CSV = ("history", "environment")


def error_summary(error: str | None) -> str | None:
    """The last line of a traceback or reason (what a table cell can show), or None."""
    if not error or not error.strip():
        return None
    return error.strip().splitlines()[-1]


def iso_utc(timestamp: float | None) -> str | None:
    """Unix seconds as ISO 8601 in UTC (``2026-12-02T17:20:30.5Z``), or None."""
    if timestamp is None:
        return None
    text = dt.datetime.fromtimestamp(timestamp, dt.timezone.utc).isoformat()
    return text.removesuffix("+00:00") + "Z"


def trial_row(trial: TrialRecord) -> dict[str, Any]:
    """Flatten one stored trial: id, state, the swept config values, final metrics, timings.

    ``width`` of a per-layer list reads ``"64x32"`` so rows group by it; ``history`` is the
    result's learning curve (or the epochs logged so far); ``error`` is its last line. The
    ``*_seconds`` are the trial's share of its pack's time (they add up to the pack's over
    its members); ``pack_id``, ``pack_size`` and ``pack_seconds`` (the pack's wall time) say
    which pack it trained in.
    """
    row: dict[str, Any] = {"trial_id": trial.id, "state": trial.state.value}
    row.update(config_columns({path: _at(trial.config, path) for path in CONFIG_PATHS.values()}))
    result = trial.result or {}
    metrics = result.get("metrics") or {}
    for m in FINAL_METRICS:
        row[m] = metrics.get(m)
    timings = result.get("timings") or {}
    row["train_seconds"] = timings.get("train")
    row["compile_seconds"] = timings.get("compile")
    row["total_seconds"] = timings.get("total")
    pack = result.get("pack") or {}
    row["pack_id"] = pack.get("id")
    row["pack_size"] = pack.get("size")
    row["pack_seconds"] = pack.get("wall_seconds")
    row["epochs_run"] = result.get("epochs_run")
    row["n_params"] = result.get("n_params")
    row["history"] = result.get("history") or list(trial.metrics or [])
    row["error"] = error_summary(trial.error)
    return row


def _at(config: dict[str, Any], path: str) -> Any:
    value: Any = config or {}
    for key in path.split(".")[1:]:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def config_columns(values: dict[str, Any]) -> dict[str, Any]:
    """The swept columns of a row from its config's values by path (:data:`CONFIG_PATHS`):
    a per-layer ``width`` list reads ``"64x32"`` so rows group by it."""
    row = {column: values.get(path) for column, path in CONFIG_PATHS.items()}
    if isinstance(row["width"], list):
        row["width"] = "x".join(map(str, row["width"]))
    return row


def summary_rows(store: ResultStore, experiment_id: str, metric: str) -> list[dict[str, Any]]:
    """Light rows of an experiment's trials: id, state, the swept columns, ``metric`` (any
    sort key, e.g. ``test_accuracy`` or ``train_seconds``) and the error's last line, read
    with ``store.trial_values``: what a summary of a large sweep reads instead of whole
    trials with their learning curves."""
    path = resolve_sort_path(metric)
    values = store.trial_values(experiment_id, [*CONFIG_PATHS.values(), path])
    return [
        {
            "trial_id": v["id"],
            "state": v["state"].value,
            **config_columns(v),
            metric: v[path],
            "error": error_summary(v["error"]),
        }
        for v in values
    ]


def export_row(trial: TrialRecord) -> dict[str, Any]:
    """One CSV row: ids, state, ISO 8601 UTC times, ``config.*`` and ``result.*`` flattened.

    Lists are written as JSON; the result's history and environment are left out.
    """
    row: dict[str, Any] = {
        "id": trial.id,
        "experiment_ids": " ".join(trial.experiment_ids),
        "state": trial.state.value,
        "attempts": trial.attempts,
        "worker": trial.worker,
        "created_at": iso_utc(trial.created_at),
        "started_at": iso_utc(trial.started_at),
        "finished_at": iso_utc(trial.finished_at),
        "epochs_logged": len(trial.metrics),
        "error": error_summary(trial.error),
    }
    _flatten("config", trial.config, row)
    result = {k: v for k, v in (trial.result or {}).items() if k not in _NOT_IN_CSV}
    _flatten("result", result, row)
    return row


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    # a list is one cell, as compact JSON; an empty mapping adds no column
    for path, leaf in dotted_items(value, prefix):
        if isinstance(leaf, list):
            out[path] = json.dumps(leaf, separators=(",", ":"))
        elif not isinstance(leaf, dict):
            out[path] = leaf
