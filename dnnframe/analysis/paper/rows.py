"""Stored trials as flat rows for the depth study: style, depth, chance level."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from ...datasets import DatasetConfig, load_dataset
from ...jsonsafe import canonical_json
from ...store.base import ResultStore, TrialState
from .. import report

# States whose result is worth analysing: a DIVERGED trial is a real outcome of a deep stack
# (its signal exploded), FAILED/CANCELLED/PRUNED are not measurements of the network.
ANALYSED_STATES = (TrialState.COMPLETE.value, TrialState.DIVERGED.value)

# A group is "at chance" when its mean test accuracy is within this margin of the
# majority-class rate of the test split (the best a constant predictor can do).
CHANCE_MARGIN = 0.02


def residual_kind(model: dict[str, Any]) -> str:
    """The residual of a stored model config as a kind (``true``/``false`` of the first
    spec format read as identity/none)."""
    value = model.get("residual", "none")
    if isinstance(value, bool):
        return "identity" if value else "none"
    return value


def style_label(config: dict[str, Any]) -> str:
    """A short name for a trial's layer design: ``tanh/glorot/sgd``, ``relu/he/adam/residual``,
    ``relu/he/adam/scaled/pre-layernorm [clip 1, warm-up 2, cosine]``,
    ``relu/he/adam/rezero/pre-layernorm [dropout 0.1, clip 1, warm-up 2, cosine]``.

    >>> style_label({"model": {"activation": "relu", "init": "he", "residual": "rezero"},
    ...              "training": {"optimizer": "adam", "grad_clip": 1.0,
    ...                           "lr_schedule": {"kind": "cosine", "warmup_epochs": 2}}})
    'relu/he/adam/rezero [clip 1, warm-up 2, cosine]'
    """
    model, training = config.get("model", {}), config.get("training", {})
    label = f"{model.get('activation')}/{model.get('init')}/{training.get('optimizer')}"
    residual = residual_kind(model)
    if residual == "scaled" and model.get("residual_learnable"):
        residual = "skipinit"
    label += {"none": "", "identity": "/residual"}.get(residual, f"/{residual}")
    norm = model.get("normalization", "none")
    if norm != "none":
        label += f"/{'pre-' if model.get('norm_position') == 'pre' else ''}{norm}norm"
    aids = []
    # dropout changes what the network computes while training: a design with it is not
    # the same design without it, so their rows must not be merged
    if model.get("dropout"):
        aids.append(f"dropout {model['dropout']:g}")
    if training.get("grad_clip") is not None:
        aids.append(f"clip {training['grad_clip']:g}")
    schedule = training.get("lr_schedule") or {}
    if schedule.get("warmup_epochs"):
        aids.append(f"warm-up {schedule['warmup_epochs']}")
    if schedule.get("kind", "none") != "none":
        aids.append(schedule["kind"])
    # the epoch reported differs from the RQ1 protocol (validation loss), so it is part of the
    # design's name: two runs of the same network that select differently are not merged
    stopping = training.get("early_stopping") or {}
    metric = stopping.get("metric", "val_loss")
    if stopping and metric != "val_loss":
        keeps_all = stopping.get("patience", 5) >= training.get("max_epochs", 20)
        aids.append(f"best {metric}" if keeps_all else f"stop on {metric}")
    return label + (f" [{', '.join(aids)}]" if aids else "")


_chance_cache: dict[str, float] = {}


def majority_rate(dataset_config: dict[str, Any]) -> float | None:
    """Test accuracy of always predicting the most frequent training class (None: regression)."""
    key = canonical_json(dataset_config)
    if key not in _chance_cache:
        data = load_dataset(DatasetConfig.model_validate(dataset_config))
        if data.task != "classification":
            return None
        values, counts = _unique_counts(data.y_train)
        majority = values[max(range(len(counts)), key=counts.__getitem__)]
        _chance_cache[key] = float(sum(1 for y in data.y_test if y == majority) / len(data.y_test))
    return _chance_cache[key]


def _unique_counts(labels: Iterable[Any]) -> tuple[list[Any], list[int]]:
    counts: dict[Any, int] = defaultdict(int)
    for y in labels:
        counts[int(y)] += 1
    keys = sorted(counts)
    return keys, [counts[k] for k in keys]


def trial_row(record: Any, chance: float | None = None) -> dict[str, Any]:
    """:func:`dnnframe.analysis.report.trial_row` plus what the depth study needs: ``style``, ``depth``
    (= hidden_layers), ``seconds_per_epoch`` and ``chance`` (the majority-class rate)."""
    row = report.trial_row(record)
    row.pop("history", None)  # per-epoch curves are not needed for the depth tables
    model, training = (
        (record.config or {}).get("model", {}),
        (record.config or {}).get("training", {}),
    )
    row["style"] = style_label({"model": model, "training": training})
    # the design fields the signal analysis needs, in one spelling for old and new stores
    row["residual"] = residual_kind(model)
    row["normalization"] = model.get("normalization", "none")
    row["depth"] = row["hidden_layers"]
    epochs, train_s = row.get("epochs_run") or 0, row.get("train_seconds")
    row["seconds_per_epoch"] = train_s / epochs if (train_s is not None and epochs) else None
    row["chance"] = chance
    return row


def collect_rows(
    store: ResultStore, experiment_ids: Sequence[str] | None = None, with_chance: bool = True
) -> list[dict[str, Any]]:
    """Rows for every COMPLETE or DIVERGED trial of ``experiment_ids`` (all experiments if None).

    A trial shared by two experiments appears once. ``chance`` is the majority-class test
    accuracy of the trial's dataset split (computed, not stored, so old stores work too).
    """
    ids = list(experiment_ids) if experiment_ids else [None]
    seen: set[str] = set()
    rows = []
    for exp in ids:
        for rec in store.iter_trials(exp, state=list(ANALYSED_STATES)):
            if rec.id in seen:
                continue
            seen.add(rec.id)
            chance = majority_rate(rec.config["dataset"]) if with_chance else None
            rows.append(trial_row(rec, chance))
    return rows
