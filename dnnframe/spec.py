"""Experiment specs: validation, search spaces, expansion into trials, trial ids.

A spec is plain JSON (or YAML) — the same document is a file for ``dnnframe run``, the
body of ``POST /api/v1/experiments`` and what the web form produces. Any leaf value may be
replaced by a search space, a one-key mapping::

    {"grid": [1, 2, 4]}            every value, crossed with the other grids
    {"choice": ["relu", "tanh"]}   every value under method=grid; sampled under method=random
    {"int_range": [1, 9, 2]}       1, 3, 5, 7, 9 (inclusive of the end when on the step)
    {"uniform": [0.0, 0.5]}        sampled (method=random only)
    {"loguniform": [1e-4, 1e-1]}   sampled on a log scale (method=random only)

Nothing in a spec is ever executed: there is no eval, YAML is read with ``safe_load``, and
strings that look like code are refused.

>>> spec = parse_spec({"dataset": {"name": "iris"},
...                    "model": {"hidden_layers": {"grid": [1, 2, 3]}, "width": 8},
...                    "search": {"seeds": 2}})
>>> count_trials(spec)
6
>>> [(t.model.hidden_layers, t.seed) for t in expand(spec)][:3]
[(1, 0), (1, 1), (2, 0)]
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .exceptions import SpecError

DEFAULT_MAX_TRIALS = 100_000
MAX_HIDDEN_LAYERS = 2000
# Hidden-to-hidden weights of one network: beyond this a trial cannot fit a worker's memory
# (400 MB per float64 copy; Adam keeps three more), so it is refused up front, not OOM-killed.
MAX_HIDDEN_WEIGHTS = 50_000_000
# Values in one int_range (more could never fit under any trial cap).
MAX_SPACE_VALUES = 10_000_000
# Sweeps up to this many trials are validated trial by trial when parsed, so every
# combination rule (width x depth, split fractions) is checked before anything is stored;
# larger ones are checked value by value here and trial by trial when expanded.
FULL_CHECK_TRIALS = 5_000
# Deepest nesting a spec may have (real specs need about 6).
MAX_NESTING = 32

Activation = Literal["relu", "leaky_relu", "elu", "selu", "tanh", "sigmoid", "softplus", "linear"]
Init = Literal["glorot", "he", "lecun", "orthogonal"]
Loss = Literal["softmax_crossentropy", "squared_error"]
Optimizer = Literal["sgd", "momentum", "nesterov", "adam", "rmsprop"]
EpochMetric = Literal["val_loss", "val_accuracy", "train_loss", "train_accuracy"]
ObjectiveMetric = Literal[
    "test_accuracy", "test_loss", "val_accuracy", "val_loss", "train_accuracy", "train_loss",
    "train_seconds", "compile_seconds",
]
SPACE_KINDS = ("grid", "choice", "uniform", "loguniform", "int_range")
DISCRETE_KINDS = ("grid", "choice", "int_range")

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)]

# Code-looking strings: calls of builtins that evaluate or import, dunders, shell/template
# interpolation, YAML python tags. Names and paths never need these.
_CODE_PATTERN = re.compile(
    r"__\w+__|\b(?:eval|exec|compile|__import__|import|lambda|getattr|setattr|globals|locals|"
    r"open|system|popen|subprocess)\b\s*[\(\w]|\$\{|\$\(|`|!!python",
    re.IGNORECASE,
)


_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------- resolved config
class EarlyStopping(_Strict):
    """Stop when ``metric`` has not improved by ``min_delta`` for ``patience`` epochs."""

    metric: EpochMetric = "val_loss"
    patience: int = Field(5, ge=1, le=100_000)
    min_delta: NonNegFloat = 0.0


class DatasetConfig(_Strict):
    """Which data to train on and how to split it (resolved: no search spaces)."""

    name: str = Field(min_length=1, max_length=200)
    params: dict[str, Any] = Field(default_factory=dict)
    path: str | None = Field(None, max_length=4096, description="CSV file (name=csv)")
    upload: str | None = Field(None, max_length=64, description="uploaded CSV id (name=csv)")
    label_column: str | None = Field(None, max_length=500)
    test_fraction: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)] = 0.2
    validation_fraction: Fraction = 0.1
    standardize: bool = True
    split_seed: int = Field(0, ge=0, le=2**32 - 1)

    @model_validator(mode="after")
    def _check(self) -> DatasetConfig:
        from .datasets import validate_dataset_config

        if self.test_fraction + self.validation_fraction >= 0.9:
            raise ValueError(
                "test_fraction + validation_fraction must be < 0.9, but got "
                f"{self.test_fraction} + {self.validation_fraction}"
            )
        validate_dataset_config(self)
        return self


class ModelConfig(_Strict):
    """The network: ``hidden_layers`` dense layers of ``width`` units, then the output head."""

    hidden_layers: int = Field(1, ge=0, le=MAX_HIDDEN_LAYERS)
    width: Annotated[int, Field(ge=1, le=16384)] | list[Annotated[int, Field(ge=1, le=16384)]] = 32
    activation: Activation = "relu"
    init: Init = "glorot"
    dropout: Fraction = 0.0
    residual: bool = False
    loss: Loss = "softmax_crossentropy"

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        if isinstance(self.width, list) and len(self.width) != self.hidden_layers:
            raise ValueError(
                f"a width list needs one entry per hidden layer, but got {len(self.width)} "
                f"widths for hidden_layers={self.hidden_layers}"
            )
        widths = self.widths
        weights = sum(a * b for a, b in zip(widths, widths[1:]))
        if weights > MAX_HIDDEN_WEIGHTS:
            raise ValueError(
                f"the hidden layers have {weights:,} weights, more than the limit of "
                f"{MAX_HIDDEN_WEIGHTS:,} (each copy is {weights * 8 / 2**30:.1f} GiB in float64 and "
                "optimisers keep several); use fewer or narrower layers")
        return self

    @property
    def widths(self) -> list[int]:
        """The width of each hidden layer."""
        if isinstance(self.width, list):
            return list(self.width)
        return [self.width] * self.hidden_layers


class TrainingConfig(_Strict):
    """How the network is trained."""

    optimizer: Optimizer = "adam"
    learning_rate: PositiveFloat = 1e-3
    momentum: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] = 0.9
    batch_size: int = Field(64, ge=1, le=1_000_000)
    max_epochs: int = Field(20, ge=1, le=100_000)
    early_stopping: EarlyStopping | None = None
    l2: NonNegFloat = 0.0


class TrialConfig(_Strict):
    """One fully resolved configuration: what a worker trains. No search spaces remain."""

    dataset: DatasetConfig
    model: ModelConfig = Field(default_factory=ModelConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    seed: int = Field(0, ge=0, le=2**32 - 1)

    @model_validator(mode="after")
    def _check(self) -> TrialConfig:
        from .datasets import dataset_task

        if dataset_task(self.dataset, self.model.loss) == "regression" and self.model.loss != "squared_error":
            raise ValueError(
                f"dataset {self.dataset.name!r} is a regression task and needs model.loss: "
                f"squared_error, but got {self.model.loss!r}")
        return self

    def canonical_json(self) -> str:
        """Key-sorted compact JSON: the same config gives the same text on every platform."""
        return canonical_json(self.model_dump(mode="json"))


# --------------------------------------------------------------------------- spec with spaces
class Objective(_Strict):
    metric: ObjectiveMetric = "test_accuracy"
    mode: Literal["max", "min"] = "max"


class SearchConfig(_Strict):
    method: Literal["grid", "random"] = "grid"
    num_samples: int = Field(1, ge=1, le=1_000_000, description="random: samples per grid point")
    seeds: Annotated[int, Field(ge=1, le=10_000)] | list[Annotated[int, Field(ge=0, le=2**32 - 1)]] = 1
    random_seed: int = Field(0, ge=0, le=2**32 - 1, description="seed of the random sampler")
    objective: Objective = Field(default_factory=Objective)
    max_trials: int = Field(DEFAULT_MAX_TRIALS, ge=1, le=10_000_000)

    @field_validator("seeds")
    @classmethod
    def _seeds_unique(cls, v: int | list[int]) -> int | list[int]:
        if isinstance(v, list):
            if not v:
                raise ValueError("seeds must not be empty")
            if len(set(v)) != len(v):
                raise ValueError(f"seeds must be unique, but got {v}")
        return v

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)


class ExperimentSpec(BaseModel):
    """A validated sweep. ``dataset``, ``model`` and ``training`` may hold search spaces;
    they are kept as plain JSON (validated) and resolved by :func:`expand`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field("experiment", min_length=1, max_length=200)
    description: str = Field("", max_length=10_000)
    dataset: dict[str, Any]
    model: dict[str, Any] = Field(default_factory=dict)
    training: dict[str, Any] = Field(default_factory=dict)
    search: SearchConfig = Field(default_factory=SearchConfig)

    @field_validator("dataset", mode="before")
    @classmethod
    def _dataset_shorthand(cls, v: Any) -> Any:
        # `dataset: digits` is short for `dataset: {name: digits}`
        return {"name": v} if isinstance(v, str) else v

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @property
    def experiment_id(self) -> str:
        """Stable id: the same spec submitted twice is the same experiment."""
        digest = hashlib.sha256(canonical_json(self.to_dict()).encode()).hexdigest()
        return "exp-" + digest[:16]


# --------------------------------------------------------------------------- helpers
def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def _fmt_path(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _depth(value: Any) -> int:
    """Nesting depth of plain JSON, computed without recursion (a hostile document may be
    nested deeper than Python's recursion limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > MAX_NESTING:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, level + 1) for v in item)
    return deepest


def _is_ancestor(parent: str, child: str) -> bool:
    return parent == "" or child == parent or child.startswith(parent + ".") or child.startswith(parent + "[")


def _is_space(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in SPACE_KINDS


def _find_spaces(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], dict]]:
    """Yield (path, space) for each search space, in sorted key order: the expansion must
    not depend on how a document happens to order its keys, since the experiment id (a hash
    of key-sorted JSON) does not."""
    if _is_space(value):
        yield path, value
    elif isinstance(value, dict):
        for key in sorted(value):
            yield from _find_spaces(value[key], (*path, key))


def _set_path(doc: dict, path: tuple[Any, ...], value: Any) -> None:
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


def _scan_strings(value: Any, path: tuple[Any, ...], errors: list[dict[str, str]]) -> None:
    """Refuse code-looking strings and non-finite numbers anywhere in the document."""
    if isinstance(value, str):
        if _CONTROL_CHARS.search(value) and path != ("description",):
            errors.append({"path": _fmt_path(path),
                           "message": f"must not contain control characters, but got {value[:80]!r}"})
        elif _CODE_PATTERN.search(value):
            errors.append({"path": _fmt_path(path),
                           "message": f"looks like code and is refused (nothing in a spec is executed): {value[:80]!r}"})
    elif isinstance(value, bool) or value is None or isinstance(value, int):
        return
    elif isinstance(value, float):
        if not math.isfinite(value):
            errors.append({"path": _fmt_path(path), "message": f"must be a finite number, but got {value}"})
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                errors.append({"path": _fmt_path(path), "message": f"keys must be strings, but got {key!r}"})
                continue
            if _CODE_PATTERN.search(key):
                _scan_strings(key, path, errors)
            _scan_strings(item, (*path, key), errors)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _scan_strings(item, (*path, i), errors)
    else:
        errors.append({"path": _fmt_path(path),
                       "message": f"must be plain JSON (string, number, bool, null, list or mapping), but got {type(value).__name__}"})


def _pydantic_errors(exc: ValidationError, prefix: tuple[Any, ...] = (),
                     remap: dict[tuple[Any, ...], tuple[Any, ...]] | None = None) -> list[dict[str, str]]:
    out = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        # pydantic appends the union member tag (e.g. 'int', 'list[...]') to the location
        loc = tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or "-" in p or p in ("int", "float", "str", "bool"))))
        full = (*prefix, *loc)
        if remap:
            for src, dst in remap.items():
                if full[: len(src)] == src:
                    full = dst + full[len(src):]
                    break
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key (not part of the spec format)"
        elif "input" in err and err["type"] not in ("missing",) and not isinstance(err["input"], (dict, list)):
            msg = f"{msg}, but got {err['input']!r}"
        out.append({"path": _fmt_path(full), "message": msg})
    # de-duplicate (union members can report the same problem twice)
    seen, unique = set(), []
    for e in out:
        key = (e["path"], e["message"])
        if key not in seen:
            seen.add(key)
            unique.append(e)
    return unique


def _space_values(path: tuple[Any, ...], space: dict, method: str, errors: list[dict[str, str]]) -> list[Any] | None:
    """Check a space's own shape; return its candidate values (discrete) or its bounds."""
    kind, arg = next(iter(space.items()))
    where = _fmt_path((*path, kind))
    if not isinstance(arg, list):
        errors.append({"path": where, "message": f"{kind} takes a list, but got {type(arg).__name__}"})
        return None
    if kind in ("grid", "choice"):
        if not arg:
            errors.append({"path": where, "message": f"{kind} must list at least one value, but got []"})
            return None
        for i, v in enumerate(arg):
            if _is_space(v):
                errors.append({"path": _fmt_path((*path, kind, i)), "message": "search spaces cannot be nested"})
                return None
        return list(arg)
    if kind == "int_range":
        if len(arg) not in (2, 3) or not all(isinstance(v, int) and not isinstance(v, bool) for v in arg):
            errors.append({"path": where, "message": f"int_range takes [low, high] or [low, high, step] integers, but got {arg!r}"})
            return None
        low, high, step = (*arg, 1)[:3]
        if step <= 0:
            errors.append({"path": _fmt_path((*path, kind, 2)), "message": f"step must be > 0, but got {step}"})
            return None
        if low > high:
            errors.append({"path": where, "message": f"low <= high must hold, but got low={low}, high={high}"})
            return None
        n = (high - low) // step + 1  # arithmetic: len(range(...)) overflows past 2**63
        if n > MAX_SPACE_VALUES:
            errors.append({"path": where, "message": f"int_range has {n} values, more than the limit of {MAX_SPACE_VALUES}"})
            return None
        return range(low, high + 1, step)  # lazy: never materialised
    # uniform / loguniform
    if len(arg) != 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in arg):
        errors.append({"path": where, "message": f"{kind} takes [low, high] numbers, but got {arg!r}"})
        return None
    low, high = float(arg[0]), float(arg[1])
    if not (math.isfinite(low) and math.isfinite(high)):
        errors.append({"path": where, "message": f"bounds must be finite, but got {arg!r}"})
        return None
    if low > high:
        errors.append({"path": where, "message": f"low <= high must hold, but got low={arg[0]}, high={arg[1]}"})
        return None
    if kind == "loguniform" and low <= 0:
        errors.append({"path": where, "message": f"loguniform needs low > 0, but got low={arg[0]}"})
        return None
    if method != "random":
        errors.append({"path": where, "message": f"{kind} is continuous and needs search.method: random"})
        return None
    return [low, high]


def _section_template(raw: dict) -> dict:
    return {"dataset": raw.get("dataset"), "model": raw.get("model", {}), "training": raw.get("training", {})}


def _resolve(template: dict, assignment: dict[tuple[Any, ...], Any], seed: int) -> dict:
    doc = copy.deepcopy(template)
    for path, value in assignment.items():
        _set_path(doc, path, value)
    doc["seed"] = seed
    return doc


# --------------------------------------------------------------------------- public API
def parse_spec(data: Any, source: str | None = None) -> ExperimentSpec:
    """Validate a spec document (already parsed JSON/YAML) into an :class:`ExperimentSpec`.

    Raises:
        SpecError: listing every problem with its path (``model.activation.grid[2]``).
    """
    errors: list[dict[str, str]] = []
    if not isinstance(data, dict):
        raise SpecError([{"path": "", "message": f"a spec must be a mapping, but got {type(data).__name__}"}], source)
    if _depth(data) > MAX_NESTING:
        raise SpecError([{"path": "", "message": f"nested more than {MAX_NESTING} levels deep; a spec is a few levels of mappings and lists"}], source)
    _scan_strings(data, (), errors)
    if errors:
        raise SpecError(errors, source)
    try:
        spec = ExperimentSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_pydantic_errors(exc), source) from None
    for section in ("dataset", "model", "training"):
        for path, _ in _find_spaces(getattr(spec, section), (section,)):
            if section == "dataset" and len(path) == 2 and path[1] in ("params",):
                errors.append({"path": _fmt_path(path), "message": "put search spaces on individual params, not on the whole mapping"})

    template = _section_template(spec.to_dict())
    spaces = list(_find_spaces(template))
    candidates: dict[tuple[Any, ...], list[Any]] = {}
    for path, space in spaces:
        values = _space_values(path, space, spec.search.method, errors)
        if values is not None:
            candidates[path] = values
    if errors:
        raise SpecError(errors, source)

    # Validate each candidate value in place (other spaces fixed to their first candidate),
    # so an error names the exact element: model.activation.grid[2].
    base = {path: vals[0] for path, vals in candidates.items()}
    try:
        TrialConfig.model_validate(_resolve(template, base, 0))
    except ValidationError as exc:
        remap = {path: (*path, next(iter(space)), 0) for path, space in spaces}
        errors.extend(_pydantic_errors(exc, remap=remap))
    for path, space in spaces:
        kind = next(iter(space))
        values = candidates[path]
        if kind in ("uniform", "loguniform"):
            # samples are floats strictly inside the bounds: check one such value too (an
            # integer field cannot take them)
            values = [*values, values[0] + (values[1] - values[0]) * 0.372]
        # int_range values are checked at both ends: every constraint on an int is a range
        indices = [len(values) - 1] if kind == "int_range" else range(1, len(values))
        for i in indices:
            if i == 0:
                continue
            value = values[i]
            try:
                TrialConfig.model_validate(_resolve(template, {**base, path: value}, 0))
            except ValidationError as exc:
                element = (*path, kind) if kind in ("uniform", "loguniform") else (*path, kind, 1 if kind == "int_range" else i)
                where = _fmt_path(element)
                for err in _pydantic_errors(exc, remap={path: element}):
                    if not err["path"].startswith(where):
                        if not _is_ancestor(err["path"], where):
                            continue  # about another field, already reported for the base values
                        # a whole-section rule broken by this value (unknown dataset, loss
                        # for a regression task): name the value that breaks it
                        err = {"path": where, "message": err["message"]}
                    if err not in errors:
                        errors.append(err)
    if errors:
        raise SpecError(errors, source)
    n = _count(spec)
    if n > spec.search.max_trials:
        raise SpecError([{"path": "search", "message": f"the sweep has {n} trials, more than the cap of {spec.search.max_trials} (search.max_trials); narrow the spaces or raise the cap"}], source)
    if n <= FULL_CHECK_TRIALS:
        try:
            for _ in _expand(spec, validate_seeds=False):
                pass
        except SpecError as exc:
            raise SpecError(exc.errors, source) from None
    return _regression_objective(spec, source)


def _regression_objective(spec: ExperimentSpec, source: str | None) -> ExperimentSpec:
    """Regression trials have no accuracy: default their objective to test_loss (min), and
    refuse an accuracy objective that was asked for explicitly."""
    from .datasets import dataset_task

    def values(section: dict, key: str, default: Any) -> list[Any]:
        value = section.get(key, default)
        return list(next(iter(value.values()))) if _is_space(value) else [value]

    dataset = spec.dataset
    losses = values(spec.model, "loss", "softmax_crossentropy")
    regression = any(
        dataset_task(DatasetConfig.model_construct(name=name), loss) == "regression"
        for name in values(dataset, "name", None) for loss in losses
        if isinstance(name, str) and (name == "csv" or name in _registered_names())
    )
    if not regression or "accuracy" not in spec.search.objective.metric:
        return spec
    if "objective" in spec.search.model_fields_set:
        raise SpecError([{"path": "search.objective.metric", "message": (
            f"regression trials (loss squared_error) have no accuracy; use test_loss or val_loss "
            f"with mode: min, but got {spec.search.objective.metric!r}")}], source)
    search = spec.search.model_copy(update={"objective": Objective(metric="test_loss", mode="min")})
    return spec.model_copy(update={"search": search})


def _registered_names() -> set[str]:
    from .datasets import REGISTRY

    return set(REGISTRY)


def load_spec(path: str | Path) -> ExperimentSpec:
    """Read a YAML or JSON spec file and validate it; errors name the file and the key."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError([{"path": "", "message": "file not found"}], str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([{"path": "", "message": f"cannot read the file: {exc}"}], str(path)) from None
    data = parse_spec_text(text, str(path))
    _resolve_csv_paths(data, path.parent)
    spec = parse_spec(data, source=str(path))
    missing = [p for p in _csv_paths(spec.dataset) if not Path(p).is_file()]
    if missing:
        raise SpecError([{"path": "dataset.path", "message": f"CSV file not found: {p}"} for p in missing],
                        str(path))
    return spec


def _csv_paths(dataset: dict[str, Any]) -> list[str]:
    value = dataset.get("path")
    values = next(iter(value.values())) if _is_space(value) else [value]
    return [v for v in values if isinstance(v, str)]


def _resolve_csv_paths(data: Any, base: Path) -> None:
    """A relative ``dataset.path`` in a spec file means relative to that file (as a user
    reading the file expects), not to wherever ``dnnframe`` was started."""
    dataset = data.get("dataset") if isinstance(data, dict) else None
    if not isinstance(dataset, dict) or "path" not in dataset:
        return

    def resolve(p: Any) -> Any:
        if isinstance(p, str) and p and not Path(p).is_absolute():
            return str((base / p).resolve())
        return p

    value = dataset["path"]
    if _is_space(value) and isinstance(next(iter(value.values())), list):
        kind, items = next(iter(value.items()))
        dataset["path"] = {kind: [resolve(p) for p in items]}
    else:
        dataset["path"] = resolve(value)


def parse_spec_text(text: str, source: str | None = None) -> Any:
    """Parse YAML or JSON text safely (no tags that construct objects)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError([{"path": "", "message": f"not valid YAML/JSON: {where}{problem}"}], source) from None


def _candidates(spec: ExperimentSpec) -> list[tuple[tuple[Any, ...], str, list[Any]]]:
    out = []
    for path, space in _find_spaces(_section_template(spec.to_dict())):
        kind, arg = next(iter(space.items()))
        if kind == "int_range":
            low, high, step = (*arg, 1)[:3]
            values = range(low, high + 1, step)
        else:
            values = list(arg)
        out.append((path, kind, values))
    return out


def _count(spec: ExperimentSpec) -> int:
    cands = _candidates(spec)
    n_seeds = len(spec.search.seed_list)
    if spec.search.method == "grid":
        return math.prod(len(v) for _, _, v in cands) * n_seeds
    grid = math.prod(len(v) for _, kind, v in cands if kind == "grid")
    return grid * spec.search.num_samples * n_seeds


def count_trials(spec: ExperimentSpec) -> int:
    """How many trials ``expand(spec)`` yields, computed without expanding."""
    return _count(spec)


def expand(spec: ExperimentSpec) -> Iterator[TrialConfig]:
    """Yield every resolved :class:`TrialConfig` in a deterministic order.

    Grid: the cartesian product of all discrete spaces in sorted path order (the last space
    varies fastest), each repeated for every seed. Random: the product of ``grid`` spaces,
    then ``num_samples`` draws of the other spaces from a generator seeded with
    ``search.random_seed``, each repeated for every seed.

    Raises:
        SpecError: a combination of values breaks a rule that no single value breaks
            (e.g. depth x width over the weight limit), naming the combination.
    """
    return _expand(spec)


def _expand(spec: ExperimentSpec, validate_seeds: bool = True) -> Iterator[TrialConfig]:
    template = _section_template(spec.to_dict())
    cands = _candidates(spec)
    seeds = spec.search.seed_list if validate_seeds else spec.search.seed_list[:1]

    def resolved(assignment: dict[tuple[Any, ...], Any], seed: int) -> TrialConfig:
        try:
            return TrialConfig.model_validate(_resolve(template, assignment, seed))
        except ValidationError as exc:
            combo = ", ".join(f"{_fmt_path(p)}={v!r}" for p, v in assignment.items())
            raise SpecError([{**e, "message": f"{e['message']} (for the combination {combo})"}
                             for e in _pydantic_errors(exc)]) from None

    if spec.search.method == "grid":
        paths = [p for p, _, _ in cands]
        for combo in itertools.product(*(v for _, _, v in cands)):
            assignment = dict(zip(paths, combo))
            for seed in seeds:
                yield resolved(assignment, seed)
        return
    grid = [(p, v) for p, kind, v in cands if kind == "grid"]
    sampled = [(p, kind, v) for p, kind, v in cands if kind != "grid"]
    rng = np.random.default_rng(spec.search.random_seed)
    for combo in itertools.product(*(v for _, v in grid)):
        assignment = {p: value for (p, _), value in zip(grid, combo)}
        for _ in range(spec.search.num_samples):
            for path, kind, values in sampled:
                if kind == "uniform":
                    assignment[path] = float(rng.uniform(values[0], values[1]))
                elif kind == "loguniform":
                    assignment[path] = float(math.exp(rng.uniform(math.log(values[0]), math.log(values[1]))))
                else:
                    assignment[path] = copy.deepcopy(values[int(rng.integers(len(values)))])
            for seed in seeds:
                yield resolved(assignment, seed)


def trial_id(config: TrialConfig, dataset_fingerprint: str, engine_version: str | None = None) -> str:
    """Stable id of a trial: a hash of everything that determines its result.

    The resolved config (which includes the seed), the dataset's content fingerprint and
    the engine version. Same inputs → same id in every process and on every platform.
    """
    if engine_version is None:
        from .engine import ENGINE_VERSION

        engine_version = ENGINE_VERSION
    payload = canonical_json({"config": json.loads(config.canonical_json()),
                              "dataset": dataset_fingerprint, "engine": engine_version})
    return "t-" + hashlib.sha256(payload.encode()).hexdigest()[:24]


def expand_with_ids(spec: ExperimentSpec) -> Iterator[tuple[str, TrialConfig]]:
    """``expand`` plus each trial's id; each distinct dataset is fingerprinted once."""
    from .datasets import dataset_fingerprint

    fingerprints: dict[str, str] = {}
    for config in expand(spec):
        key = canonical_json(config.dataset.model_dump(mode="json"))
        if key not in fingerprints:
            fingerprints[key] = dataset_fingerprint(config.dataset)
        yield trial_id(config, fingerprints[key]), config


def spec_json_schema() -> dict[str, Any]:
    """JSON Schema of the spec format (used by the OpenAPI document and the web form)."""
    schema = ExperimentSpec.model_json_schema()
    schema["$defs"] = {**schema.get("$defs", {}), **{
        name: model.model_json_schema()
        for name, model in (("DatasetConfig", DatasetConfig), ("ModelConfig", ModelConfig),
                            ("TrainingConfig", TrainingConfig))
    }}
    schema["description"] = (
        "A dnnframe sweep. dataset/model/training follow DatasetConfig/ModelConfig/"
        "TrainingConfig; any leaf value may be a search space: {grid|choice: [...]}, "
        "{int_range: [low, high, step]}, {uniform|loguniform: [low, high]}."
    )
    return schema
