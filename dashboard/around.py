"""The spec of a sweep around an experiment's best configuration: "sweep again around the best".

The new spec is the old one with three changes: every search space in ``dataset``, ``model``
and ``training`` is pinned to the best trial's value; depth, width and learning rate become
small grids around the best values (one layer either way, half and double the width, a
third and three times the learning rate); the name says where it came from. Everything else
— the loss, the objective, the search method, early stopping, dropout, L2, init, seeds —
is kept, so a regression sweep stays a regression sweep.

>>> spec = {"name": "sweep", "dataset": {"name": "diabetes"},
...         "model": {"hidden_layers": {"grid": [1, 3]}, "width": 32,
...                   "activation": {"grid": ["relu", "tanh"]}, "loss": "squared_error"},
...         "training": {"learning_rate": 0.01, "l2": 0.001},
...         "search": {"seeds": 2, "objective": {"metric": "test_loss", "mode": "min"}}}
>>> best = {"dataset": {"name": "diabetes"}, "seed": 1,
...         "model": {"hidden_layers": 3, "width": 32, "activation": "tanh",
...                   "loss": "squared_error"},
...         "training": {"learning_rate": 0.01}}
>>> around = spec_around_best(spec, best)
>>> around["model"]
{'hidden_layers': {'int_range': [2, 4, 1]}, 'width': {'grid': [16, 32, 64]}, 'activation': 'tanh', 'loss': 'squared_error'}
>>> around["training"], around["search"] == spec["search"], around["name"]
({'learning_rate': {'grid': [0.00333, 0.01, 0.03]}, 'l2': 0.001}, True, 'sweep-around-best')
"""

from __future__ import annotations

import copy
from typing import Any

from dnnframe.spec import MAX_HIDDEN_LAYERS
from dnnframe.spec.models import MAX_WIDTH
from dnnframe.spec.spaces import is_space

# the parts of a spec whose leaves a trial's config resolves
_RESOLVED_SECTIONS = ("dataset", "model", "training")


def _rounded(value: float) -> float:
    return float(f"{value:.3g}")


def _pin_spaces(section: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """``section`` with each search space replaced by the value ``config`` has at its path
    (a space ``config`` does not resolve stays as it is)."""
    out: dict[str, Any] = {}
    for key, value in section.items():
        if is_space(value) and key in config:
            out[key] = copy.deepcopy(config[key])
        elif isinstance(value, dict) and not is_space(value) and isinstance(config.get(key), dict):
            out[key] = _pin_spaces(value, config[key])
        else:
            out[key] = copy.deepcopy(value)
    return out


def spec_around_best(spec: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """A sweep like ``spec`` (a stored spec) around ``config`` (its best trial's)."""
    out = copy.deepcopy(spec)
    out["name"] = f"{spec.get('name') or 'experiment'}-around-best"[:200]
    for section in _RESOLVED_SECTIONS:
        if isinstance(out.get(section), dict):
            out[section] = _pin_spaces(out[section], config.get(section) or {})
    model = out.setdefault("model", {})
    training = out.setdefault("training", {})
    best_model = config.get("model") or {}
    depth = best_model.get("hidden_layers")
    width = best_model.get("width")
    lr = (config.get("training") or {}).get("learning_rate")
    # a per-layer width list fixes the depth: another depth would not match the list
    if isinstance(depth, int) and not isinstance(width, list):
        low, high = max(min(depth, 1), depth - 1), min(depth + 1, MAX_HIDDEN_LAYERS)
        model["hidden_layers"] = {"int_range": [low, high, 1]} if low != high else depth
    if isinstance(width, int):
        widths = sorted({max(1, width // 2), width, min(width * 2, MAX_WIDTH)})
        model["width"] = {"grid": widths} if len(widths) > 1 else width
    if isinstance(lr, (int, float)) and lr > 0:
        training["learning_rate"] = {"grid": [_rounded(v) for v in (lr / 3, lr, lr * 3)]}
    return out
