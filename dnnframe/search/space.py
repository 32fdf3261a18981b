"""The spec's search spaces as Optuna distributions, and back.

Each space becomes one Optuna parameter named by its dotted path
(``training.learning_rate``): ``uniform`` → ``FloatDistribution``, ``loguniform`` →
``FloatDistribution(log=True)``, ``int_range`` → ``IntDistribution`` with its step, and
``grid``/``choice`` → ``CategoricalDistribution``. A categorical value Optuna cannot hold
(a list or a mapping) travels as its canonical JSON text.
"""

from __future__ import annotations

import json
from typing import Any

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from ..spec.errors import KeyPath
from ..spec.models import canonical_json
from ..spec.spaces import Space

_PLAIN = (type(None), bool, int, float, str)


def param_name(path: KeyPath) -> str:
    """The Optuna parameter name of a space: its dotted path."""
    return ".".join(str(p) for p in path)


def _encoded(space: Space) -> bool:
    return space.kind in ("grid", "choice") and not all(isinstance(v, _PLAIN) for v in space.values)


def distribution(space: Space) -> BaseDistribution:
    """The Optuna distribution of one space."""
    if space.kind == "uniform":
        return FloatDistribution(space.values[0], space.values[-1])
    if space.kind == "loguniform":
        return FloatDistribution(space.values[0], space.values[-1], log=True)
    if space.kind == "int_range":
        values = space.values
        step = values.step if isinstance(values, range) else 1
        return IntDistribution(values[0], values[-1], step=step)
    if _encoded(space):
        return CategoricalDistribution([canonical_json(v) for v in space.values])
    return CategoricalDistribution(list(space.values))


class SpaceMap:
    """Translates between a spec's spaces and Optuna's parameters."""

    def __init__(self, spaces: list[Space]):
        self.spaces = list(spaces)
        self.distributions = {param_name(s.path): distribution(s) for s in self.spaces}

    def assignment(self, params: dict[str, Any]) -> dict[KeyPath, Any]:
        """The value of every space from Optuna's ``params``."""
        out = {}
        for s in self.spaces:
            value = params[param_name(s.path)]
            out[s.path] = json.loads(value) if _encoded(s) else value
        return out

    def params(self, config: dict[str, Any]) -> dict[str, Any] | None:
        """Optuna's params of a stored trial config, or None when a value lies outside its
        space (a config this spec could not have proposed)."""
        out = {}
        for s in self.spaces:
            node: Any = config
            for part in s.path:
                if not isinstance(node, dict) or part not in node:
                    return None
                node = node[part]
            if not _inside(s, node):
                return None
            out[param_name(s.path)] = canonical_json(node) if _encoded(s) else node
        return out


def _inside(space: Space, value: Any) -> bool:
    if space.kind in ("uniform", "loguniform"):
        return isinstance(value, (int, float)) and space.values[0] <= value <= space.values[-1]
    return value in space.values
