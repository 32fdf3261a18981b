"""Expansion of a validated sweep into resolved trial configs, and counting without it."""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
from pydantic import ValidationError

from ..exceptions import SpecError, brief
from .errors import ErrorList, KeyPath, fmt_path, pydantic_errors
from .models import MODEL_BASED_METHODS, ExperimentSpec, TrialConfig
from .spaces import Space, count_from_spaces, sections, spaces_of


def spec_spaces(spec: ExperimentSpec) -> list[Space]:
    """The search spaces of a validated spec, in sorted path order."""
    return spaces_of(spec.to_dict(), spec.search.method, ErrorList())


def count_trials(spec: ExperimentSpec) -> int:
    """How many trials ``expand(spec)`` yields, computed without expanding."""
    return count_from_spaces(
        spec_spaces(spec), spec.search.method, spec.search.num_samples, len(spec.search.seed_list)
    )


def skeleton(doc: dict[str, Any], spaces: list[Space]) -> dict[str, Any]:
    """The sections of ``doc`` with every space replaced by None: small to copy, whatever
    the size of the spaces."""
    return _without_spaces(sections(doc), (), {s.path for s in spaces})


def _without_spaces(value: Any, path: KeyPath, space_paths: set[KeyPath]) -> Any:
    if path in space_paths:
        return None
    if isinstance(value, dict):
        return {k: _without_spaces(v, (*path, k), space_paths) for k, v in value.items()}
    return copy.deepcopy(value)  # spaces sit only under mappings


def set_path(doc: dict, path: KeyPath, value: Any) -> None:
    """Set ``doc[path[0]][path[1]]... = value`` in place."""
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


def with_values(base: dict, assignment: dict[KeyPath, Any]) -> dict:
    """A copy of ``base`` with each path of ``assignment`` set; only the mappings along
    those paths are copied, so the cost does not grow with the rest of the document."""
    out = dict(base)
    for path, value in assignment.items():
        node = out
        for part in path[:-1]:
            node[part] = dict(node[part])
            node = node[part]
        node[path[-1]] = value
    return out


def expand(spec: ExperimentSpec) -> Iterator[TrialConfig]:
    """Yield every resolved :class:`TrialConfig` in a deterministic order.

    Grid: the cartesian product of all discrete spaces in sorted path order (the last space
    varies fastest), each repeated for every seed. Random and asha: the product of ``grid``
    spaces, then ``num_samples`` draws of the other spaces from a generator seeded with
    ``search.random_seed``, each repeated for every seed. Tpe and cmaes: ``num_samples``
    random draws of every space (their trials come from :mod:`dnnframe.search.driver`).
    ``search.max_epochs``, when set, is every trial's ``training.max_epochs``.

    Raises:
        SpecError: a combination of values breaks a rule that no single value breaks
            (e.g. depth x width over the weight limit), naming the combination.
    """
    return expand_checked(spec)


def expand_checked(spec: ExperimentSpec, seeds: list[int] | None = None) -> Iterator[TrialConfig]:
    """:func:`expand` over ``seeds`` (default: the spec's seeds)."""
    spaces = spec_spaces(spec)
    base = _base(spec, spaces)
    seeds = spec.search.seed_list if seeds is None else seeds
    for assignment in _assignments(spec, spaces):
        for seed in seeds:
            yield _resolved(base, assignment, seed, spec.search.max_epochs)


def resolve(spec: ExperimentSpec, assignment: dict[KeyPath, Any], seed: int) -> TrialConfig:
    """The trial config of ``spec`` whose spaces take ``assignment``'s values (one value per
    space path: a sampler's proposal) and training seed ``seed``.

    Raises:
        SpecError: the values break a rule (naming the combination).
    """
    return _resolved(_base(spec, spec_spaces(spec)), assignment, seed, spec.search.max_epochs)


def _base(spec: ExperimentSpec, spaces: list[Space]) -> dict[str, Any]:
    base = skeleton(spec.to_dict(), spaces)
    # ASHA's R is how long an unpruned trial trains (a space over the whole training section
    # gets it in _resolved, once its value is known)
    if spec.search.max_epochs is not None and isinstance(base.get("training", {}), dict):
        base["training"] = {**base.get("training", {}), "max_epochs": spec.search.max_epochs}
    return base


def _resolved(
    base: dict, assignment: dict[KeyPath, Any], seed: int, max_epochs: int | None = None
) -> TrialConfig:
    doc = with_values(base, {path: copy.deepcopy(v) for path, v in assignment.items()})
    if max_epochs is not None and isinstance(assignment.get(("training",)), dict):
        doc["training"] = {**doc["training"], "max_epochs": max_epochs}
    doc["seed"] = seed
    try:
        return TrialConfig.model_validate(doc)
    except ValidationError as exc:
        combo = ", ".join(f"{fmt_path(p)}={brief(v)}" for p, v in assignment.items())
        raise SpecError(
            [
                {**e, "message": f"{e['message']} (for the combination {combo})"}
                for e in pydantic_errors(exc, TrialConfig)
            ]
        ) from None


def _assignments(spec: ExperimentSpec, spaces: list[Space]) -> Iterator[dict[KeyPath, Any]]:
    if spec.search.method == "grid":
        paths = [s.path for s in spaces]
        for combo in itertools.product(*(s.values for s in spaces)):
            yield dict(zip(paths, combo))
        return
    # tpe/cmaes: a sampler proposes every value as results arrive (dnnframe.search.driver);
    # expanding them draws num_samples configurations of all spaces (for validation).
    model_based = spec.search.method in MODEL_BASED_METHODS
    grid = [] if model_based else [s for s in spaces if s.kind == "grid"]
    sampled = [s for s in spaces if model_based or s.kind != "grid"]
    rng = np.random.default_rng(spec.search.random_seed)
    for combo in itertools.product(*(s.values for s in grid)):
        assignment = {s.path: value for s, value in zip(grid, combo)}
        for _ in range(spec.search.num_samples):
            for s in sampled:
                assignment[s.path] = _draw(s, rng)
            yield dict(assignment)


def _draw(space: Space, rng: np.random.Generator) -> Any:
    low, high = space.values[0], space.values[-1]
    if space.kind == "uniform":
        return float(rng.uniform(low, high))
    if space.kind == "loguniform":
        return float(math.exp(rng.uniform(math.log(low), math.log(high))))
    return space.values[int(rng.integers(len(space.values)))]
