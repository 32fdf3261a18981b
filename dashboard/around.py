"""The sweep form filled in around an experiment's best trial: "sweep again around the best".

The best trial's categorical choices are kept; its depth, width and learning rate become
small grids around the best values (one layer either way, half and double the width, a
third and three times the learning rate), so the next sweep looks closer where the last
one did best.

>>> best = {"dataset": {"name": "iris"}, "seed": 1,
...         "model": {"hidden_layers": 3, "width": 32, "activation": "tanh"},
...         "training": {"optimizer": "sgd", "learning_rate": 0.01, "max_epochs": 20,
...                      "batch_size": 16}}
>>> form = form_around_best("sweep", best, seeds=2)
>>> form["hidden_layers"], form["width"], form["learning_rate"], form["activation"]
('2-4', '16, 32, 64', '0.00333, 0.01, 0.03', ['tanh'])
"""

from __future__ import annotations

from typing import Any

from .forms import DEFAULT_FORM


def _number(value: float) -> str:
    return f"{value:.3g}"


def form_around_best(name: str, config: dict[str, Any], seeds: int) -> dict[str, Any]:
    """The sweep form's fields for a sweep around ``config`` (the best trial's)."""
    model = config.get("model") or {}
    training = config.get("training") or {}
    dataset = config.get("dataset") or {}
    schedule = training.get("lr_schedule") or {}
    form: dict[str, Any] = dict(DEFAULT_FORM)
    depth = model.get("hidden_layers")
    width = model.get("width")
    lr = training.get("learning_rate")
    form.update(
        {
            "name": f"{name}-around-best"[:200],
            "dataset": dataset.get("name", DEFAULT_FORM["dataset"]),
            "upload": dataset.get("upload") or "",
            "label_column": dataset.get("label_column") or "",
            "activation": [model.get("activation", "relu")],
            "residual": [model.get("residual", "none")],
            "normalization": [model.get("normalization", "none")],
            "norm_position": model.get("norm_position", "post"),
            "optimizer": [training.get("optimizer", "adam")],
            "epochs": str(training.get("max_epochs", DEFAULT_FORM["epochs"])),
            "batch_size": str(training.get("batch_size", DEFAULT_FORM["batch_size"])),
            "grad_clip": "" if training.get("grad_clip") is None else str(training["grad_clip"]),
            "lr_schedule": schedule.get("kind", "none"),
            "warmup_epochs": str(schedule.get("warmup_epochs", 0)),
            "seeds": str(seeds),
        }
    )
    if isinstance(depth, int):
        form["hidden_layers"] = f"{max(1, depth - 1)}-{depth + 1}"
    if isinstance(width, int):
        form["width"] = ", ".join(str(w) for w in sorted({max(1, width // 2), width, width * 2}))
    elif isinstance(width, list):
        form["width"] = ", ".join(map(str, width))
    if isinstance(lr, (int, float)) and lr > 0:
        form["learning_rate"] = ", ".join(_number(v) for v in (lr / 3, lr, lr * 3))
    return form
