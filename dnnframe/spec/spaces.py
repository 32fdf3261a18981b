"""The search-space language: any leaf value of a spec may be a one-key mapping.

::

    {"grid": [1, 2, 4]}            every value, crossed with the other grids
    {"choice": ["relu", "tanh"]}   every value under method=grid; sampled otherwise
    {"int_range": [1, 9, 2]}       1, 3, 5, 7, 9 (inclusive of the end when on the step)
    {"uniform": [0.0, 0.5]}        sampled (not under method=grid)
    {"loguniform": [1e-4, 1e-1]}   sampled on a log scale (not under method=grid)

Under random and asha, grid spaces are crossed and the others drawn; under tpe and cmaes an
Optuna sampler proposes every value (grid and choice become categorical parameters).

This module checks each space's own shape and counts trials from the spaces alone, without
expanding anything.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from ..exceptions import brief
from .errors import ErrorList, KeyPath

SPACE_KINDS = ("grid", "choice", "uniform", "loguniform", "int_range")
DISCRETE_KINDS = ("grid", "choice", "int_range")
# Values in one int_range (more could never fit under any trial cap).
MAX_SPACE_VALUES = 10_000_000
# The parts of a spec that make up a trial config and may hold spaces.
SECTIONS = ("dataset", "model", "training")


def is_space(value: Any) -> TypeGuard[dict[str, Any]]:
    """Whether ``value`` is a search space (a one-key mapping whose key is a space kind)."""
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in SPACE_KINDS


@dataclass(frozen=True)
class Space:
    """A well-formed search space at ``path``.

    ``values`` are the candidates of a discrete space (a lazy ``range`` for int_range) or
    the ``[low, high]`` bounds of a continuous one.
    """

    path: KeyPath
    kind: str
    values: Sequence[Any]


def find_spaces(value: Any, path: KeyPath = ()) -> Iterator[tuple[KeyPath, dict]]:
    """Yield (path, space) for each search space, in sorted key order: the expansion must
    not depend on how a document happens to order its keys, since the experiment id (a hash
    of key-sorted JSON) does not."""
    if is_space(value):
        yield path, value
    elif isinstance(value, dict):
        for key in sorted(value):
            yield from find_spaces(value[key], (*path, key))


def sections(doc: dict[str, Any]) -> dict[str, Any]:
    """The :data:`SECTIONS` of a spec document (model and training default to empty)."""
    return {key: doc.get(key, None if key == "dataset" else {}) for key in SECTIONS}


def check_space(path: KeyPath, space: dict, method: str, errors: ErrorList) -> Space | None:
    """Check a space's own shape; the :class:`Space`, or None after recording why not."""
    kind, arg = next(iter(space.items()))
    where = (*path, kind)
    if not isinstance(arg, list):
        errors.add(where, f"{kind} takes a list, but got {type(arg).__name__}")
        return None
    if kind in ("grid", "choice"):
        return _check_listed(path, kind, arg, errors)
    if kind == "int_range":
        return _check_int_range(path, arg, errors)
    return _check_continuous(path, kind, arg, method, errors)


def _check_listed(path: KeyPath, kind: str, arg: list, errors: ErrorList) -> Space | None:
    if not arg:
        errors.add((*path, kind), f"{kind} must list at least one value, but got []")
        return None
    for i, v in enumerate(arg):
        if isinstance(v, dict) and is_space(v):
            errors.add((*path, kind, i), "search spaces cannot be nested")
            return None
    return Space(path, kind, arg)


def _check_int_range(path: KeyPath, arg: list, errors: ErrorList) -> Space | None:
    where = (*path, "int_range")
    # 2.0 is an integer in JSON (and to JSON Schema)
    if len(arg) not in (2, 3) or not all(
        isinstance(v, int) and not isinstance(v, bool) or isinstance(v, float) and v.is_integer()
        for v in arg
    ):
        errors.add(
            where,
            f"int_range takes [low, high] or [low, high, step] integers, but got {brief(arg)}",
        )
        return None
    low, high, step = (int(v) for v in (*arg, 1)[:3])
    if step <= 0:
        errors.add((*where, 2), f"step must be > 0, but got {step}")
        return None
    if low > high:
        errors.add(where, f"low <= high must hold, but got low={low}, high={high}")
        return None
    n = (high - low) // step + 1  # arithmetic: len(range(...)) overflows past 2**63
    if n > MAX_SPACE_VALUES:
        errors.add(where, f"int_range has {n} values, more than the limit of {MAX_SPACE_VALUES}")
        return None
    return Space(path, "int_range", range(low, high + 1, step))  # lazy: never materialised


def _check_continuous(
    path: KeyPath, kind: str, arg: list, method: str, errors: ErrorList
) -> Space | None:
    where = (*path, kind)
    if len(arg) != 2 or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in arg
    ):
        errors.add(where, f"{kind} takes [low, high] numbers, but got {brief(arg)}")
        return None
    low, high = float(arg[0]), float(arg[1])
    if not (math.isfinite(low) and math.isfinite(high)):
        errors.add(where, f"bounds must be finite, but got {brief(arg)}")
        return None
    if low > high:
        errors.add(where, f"low <= high must hold, but got low={arg[0]}, high={arg[1]}")
        return None
    if kind == "loguniform" and low <= 0:
        errors.add(where, f"loguniform needs low > 0, but got low={arg[0]}")
        return None
    if method == "grid":
        errors.add(
            where, f"{kind} is continuous and needs search.method: random (or asha, tpe, cmaes)"
        )
        return None
    return Space(path, kind, [low, high])


def spaces_of(doc: dict[str, Any], method: str, errors: ErrorList) -> list[Space]:
    """Every well-formed space of a spec document's sections; shape problems go to ``errors``."""
    out = []
    for path, raw in find_spaces(sections(doc)):
        space = check_space(path, raw, method, errors)
        if space is not None:
            out.append(space)
    return out


def count_from_spaces(spaces: list[Space], method: str, num_samples: int, n_seeds: int) -> int:
    """How many trials a sweep has: grid crosses every discrete space; random crosses the
    ``grid`` spaces and draws ``num_samples`` from the rest (so does asha); tpe and cmaes
    ask for ``num_samples`` configurations in all."""
    if method == "grid":
        return math.prod(len(s.values) for s in spaces) * n_seeds
    if method in ("tpe", "cmaes"):
        return num_samples * n_seeds
    grid = math.prod(len(s.values) for s in spaces if s.kind == "grid")
    return grid * num_samples * n_seeds
