"""``parse_spec``: a spec document in, a validated :class:`ExperimentSpec` out, in steps.

The cost is linear in the document's size: the trial cap is checked from the spaces'
lengths before any value is looked at, each search-space value is checked once against a
small document (spaces left out), and whole sweeps are expanded only when small.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import ValidationError

from ..datasets import REGISTRY, DatasetConfig, dataset_task
from ..exceptions import SpecError
from .document import MAX_NESTING, nesting_depth, scan_values
from .errors import (
    UNKNOWN_KEY,
    ErrorList,
    KeyPath,
    fmt_path,
    is_ancestor,
    pydantic_errors,
    user_loc,
    without_key,
)
from .expand import expand_checked, skeleton, with_values
from .models import ExperimentSpec, Objective, TrainingConfig, TrialConfig
from .spaces import Space, count_from_spaces, is_space, spaces_of

# Sweeps up to this many trials are validated trial by trial when parsed, so every
# combination rule (width x depth, split fractions) is checked before anything is stored;
# larger ones are checked value by value here and trial by trial when expanded.
FULL_CHECK_TRIALS = 5_000

# Where inside [low, high] a continuous space is probed: samples are floats strictly inside
# the bounds, which an integer field refuses even when both bounds are whole numbers. Not
# 1/2, whose probe is a whole number for bounds like [1, 3].
INTERIOR_FRACTION = 0.372

# Values listed in grid and choice spaces, all spaces together: each is validated in place,
# so this bounds the time a spec can cost (well under a second). A longer integer sweep
# is an int_range, which is checked at its ends whatever its length.
MAX_LISTED_VALUES = 20_000


class _Invalid(Exception):
    """Raised by a step with every problem it found; ``parse_spec`` turns it into SpecError."""

    def __init__(self, errors: ErrorList | list[dict[str, str]]):
        super().__init__()
        self.errors = errors.items if isinstance(errors, ErrorList) else errors


def _raise_if(errors: ErrorList) -> None:
    if errors:
        raise _Invalid(errors)


def parse_spec(
    data: Any, source: str | None = None, trial_cap: int | None = None, json_types: bool = False
) -> ExperimentSpec:
    """Validate a spec document (already parsed JSON/YAML) into an :class:`ExperimentSpec`.

    ``trial_cap`` is a limit on the sweep's size that the spec cannot raise (a server's).
    With ``json_types`` every value must have its field's JSON type, as the spec's JSON
    Schema says: no ``"0.1"`` for a number, no ``true`` for an integer (YAML files are read
    without it: YAML reads ``1e-3`` as a string). Every problem is reported at once:
    top-level fields that are invalid are set aside (their errors kept) and the rest of the
    spec is checked without them.

    Raises:
        SpecError: listing the problems with their paths (``model.activation.grid[2]``).
    """
    if json_types:
        # pydantic's strict mode, on a copy where a whole number such as 2.0 is an int: JSON
        # has one number type, and 2.0 is an integer to JSON Schema. The spec itself is the
        # document as given, so its id does not change.
        _parse_spec(_whole_numbers_as_ints(data), source, trial_cap, strict=True)
    return _parse_spec(data, source, trial_cap, strict=False)


def _whole_numbers_as_ints(value: Any) -> Any:
    # recursion is bounded: callers pass bodies of bounded nesting (read_json_body)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers_as_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers_as_ints(v) for v in value]
    return value


def _parse_spec(
    data: Any, source: str | None, trial_cap: int | None, strict: bool
) -> ExperimentSpec:
    errors = ErrorList()
    set_aside: list[KeyPath] = []
    try:
        _check_document(data)
        spec, data, set_aside = _validate_top_level(data, errors, strict)
        if spec is None:
            raise _Invalid(errors)
        spaces = _check_spaces(data, spec)
        _check_trial_cap(spec, spaces, trial_cap)
        _check_pruning_epochs(spec)
        _check_listed_values(spaces)
        _check_plain_values(data)
        _check_space_values(spec, spaces, strict)
        if not strict:
            # every value's type is checked above; combinations are the lax pass's work
            _check_combinations(spec, spaces)
        spec = _regression_objective(spec)
    except _Invalid as exc:
        # a field set aside took its default: what follows from that default is not news
        errors.extend(
            [
                e
                for e in exc.errors
                if not any(is_ancestor(fmt_path(path), e["path"]) for path in set_aside)
            ]
        )
    else:
        if not errors:
            return spec
    raise SpecError(errors.items, source) from None


def _check_document(data: Any) -> None:
    """A mapping of bounded nesting (checked before anything recurses into it)."""
    if not isinstance(data, dict):
        raise _Invalid(
            [{"path": "", "message": f"a spec must be a mapping, but got {type(data).__name__}"}]
        )
    if nesting_depth(data) > MAX_NESTING:
        raise _Invalid(
            [
                {
                    "path": "",
                    "message": f"nested more than {MAX_NESTING} levels deep; a spec "
                    "is a few levels of mappings and lists",
                }
            ]
        )


# How many times an invalid top-level field is set aside before giving up on the rest.
_SET_ASIDE_ROUNDS = 5


def _validate_top_level(
    data: dict, errors: ErrorList, strict: bool
) -> tuple[ExperimentSpec | None, dict, list[KeyPath]]:
    """Top-level keys, the search section and free text; sections stay plain JSON.

    An invalid field is reported in ``errors`` and set aside (left out of a copy of the
    document, so it takes its default) for the checks that follow. Returns the spec (None
    when the document could not be repaired so: a required key is missing, say), the
    document checked and the paths set aside.
    """
    set_aside: list[KeyPath] = []
    for _ in range(_SET_ASIDE_ROUNDS):
        try:
            return ExperimentSpec.model_validate(data, strict=strict), data, set_aside
        except ValidationError as exc:
            errors.extend(pydantic_errors(exc, ExperimentSpec))
            found = [user_loc(e) for e in exc.errors(include_url=False)]
            repaired = data
            for loc in found:
                repaired = without_key(repaired, loc)
            if repaired is data:
                break
            set_aside += found
            data = repaired
    return None, data, set_aside


def _check_spaces(data: dict, spec: ExperimentSpec) -> list[Space]:
    """Each search space's own shape, and no space over a whole params mapping.

    Reads the document as given: it is not yet known to be plain JSON, so it is not
    serialised before :func:`_check_plain_values` has looked at every value.
    """
    errors = ErrorList()
    spaces = spaces_of(data, spec.search.method, errors)
    for space in spaces:
        if space.path == ("dataset", "params"):
            errors.add(
                space.path, "put search spaces on individual params, not on the whole mapping"
            )
    _raise_if(errors)
    return spaces


def _check_trial_cap(spec: ExperimentSpec, spaces: list[Space], trial_cap: int | None) -> None:
    """Refuse a sweep over ``search.max_trials`` (or ``trial_cap``, which the spec cannot
    raise) from the spaces' lengths alone."""
    n = count_from_spaces(
        spaces, spec.search.method, spec.search.num_samples, len(spec.search.seed_list)
    )
    if trial_cap is not None and n > trial_cap and trial_cap <= spec.search.max_trials:
        message = (
            f"the sweep has {n} trials, more than this server accepts ({trial_cap}); "
            "narrow the search spaces or use fewer seeds"
        )
    elif n > spec.search.max_trials:
        message = (
            f"the sweep has {n} trials, more than the cap of {spec.search.max_trials} "
            "(search.max_trials); narrow the spaces or raise the cap"
        )
    else:
        return
    raise _Invalid([{"path": "search", "message": message}])


def _check_pruning_epochs(spec: ExperimentSpec) -> None:
    """ASHA needs one fixed R: training.max_epochs plain, agreeing with search.max_epochs."""
    search = spec.search
    if not search.prunes:
        return
    given = spec.training.get("max_epochs")
    if is_space(given):
        raise _Invalid(
            [
                {
                    "path": "training.max_epochs",
                    "message": (
                        "ASHA prunes up to a fixed number of epochs; training.max_epochs must not be a "
                        "search space (set search.max_epochs)"
                    ),
                }
            ]
        )
    if search.max_epochs is not None and given is not None and given != search.max_epochs:
        raise _Invalid(
            [
                {
                    "path": "search.max_epochs",
                    "message": (
                        f"search.max_epochs ({search.max_epochs}) and training.max_epochs ({given}) differ; "
                        "set one of them"
                    ),
                }
            ]
        )
    top = (
        search.max_epochs
        or (given if isinstance(given, int) else None)
        or TrainingConfig.model_fields["max_epochs"].default
    )
    if search.min_epochs >= top:
        raise _Invalid(
            [
                {
                    "path": "search.min_epochs",
                    "message": (
                        f"min_epochs < max_epochs must hold for ASHA, but got min_epochs="
                        f"{search.min_epochs}, max_epochs={top}"
                    ),
                }
            ]
        )


def _check_listed_values(spaces: list[Space]) -> None:
    """Refuse more listed values than validation may spend time on."""
    listed = sum(len(s.values) for s in spaces if s.kind in ("grid", "choice"))
    if listed > MAX_LISTED_VALUES:
        raise _Invalid(
            [
                {
                    "path": "",
                    "message": (
                        f"the spec lists {listed} values in grid and choice spaces, more than the limit of "
                        f"{MAX_LISTED_VALUES}; use int_range for long integer sweeps"
                    ),
                }
            ]
        )


def _check_plain_values(data: dict) -> None:
    errors = ErrorList()
    scan_values(data, errors)
    _raise_if(errors)


def _check_space_values(spec: ExperimentSpec, spaces: list[Space], strict: bool) -> None:
    """Check every value of every space in place, the other spaces at their first value, so
    an error names the exact element: ``model.activation.grid[2]``."""
    errors = ErrorList()
    base = with_values(skeleton(spec.to_dict(), spaces), {s.path: s.values[0] for s in spaces})
    base["seed"] = 0
    misspelt: set[str] = set()
    base_errors = 0
    try:
        TrialConfig.model_validate(base, strict=strict)
    except ValidationError as exc:
        base_errors = exc.error_count()
        found = pydantic_errors(exc, TrialConfig, {s.path: (*s.path, s.kind, 0) for s in spaces})
        errors.extend(found)
        misspelt = {e["path"] for e in found if e["message"].startswith(UNKNOWN_KEY)}
    for space in spaces:
        if fmt_path(space.path) in misspelt:
            continue  # reported once, at the key
        for element, value in _probes(space):
            try:
                TrialConfig.model_validate(with_values(base, {space.path: value}), strict=strict)
            except ValidationError as exc:
                if len(errors.items) < SpecError.MAX_LISTED:
                    _report_probe(exc, space.path, element, errors)
                elif exc.error_count() > base_errors:
                    # beyond what is listed only the count is shown: skip composing messages
                    errors.add(element, "invalid value")
    _raise_if(errors)


def _probes(space: Space) -> list[tuple[KeyPath, Any]]:
    """The values of a space to check beyond its first, each with the element it is reported at.

    Every listed value; an int_range's end (every constraint on an int is a range); a
    continuous space's upper bound and one value strictly inside.
    """
    path, kind, values = space.path, space.kind, space.values
    if kind in ("grid", "choice"):
        # a value listed twice is checked (and reported) once, at its first place
        seen = {_value_key(values[0])}
        probes = []
        for i in range(1, len(values)):
            key = _value_key(values[i])
            if key not in seen:
                seen.add(key)
                probes.append(((*path, kind, i), values[i]))
        return probes
    if kind == "int_range":
        return [((*path, kind, 1), values[-1])] if len(values) > 1 else []
    low, high = values
    inside = low + (high - low) * INTERIOR_FRACTION
    if inside.is_integer() and low < high:
        inside = math.nextafter(inside, high)
    return [((*path, kind), high), ((*path, kind), inside)]


def _value_key(value: Any) -> tuple[str, Any]:
    # the type is part of the key: 1, 1.0 and True are equal but not equally valid
    if isinstance(value, (dict, list)):
        return ("json", json.dumps(value, sort_keys=True))
    return (type(value).__name__, value)


def _report_probe(exc: ValidationError, path: KeyPath, element: KeyPath, errors: ErrorList) -> None:
    where = fmt_path(element)
    for err in pydantic_errors(exc, TrialConfig, remap={path: element}):
        if is_ancestor(where, err["path"]):
            errors.add(err["path"], err["message"])
        elif is_ancestor(err["path"], where):
            # a whole-section rule broken by this value (unknown dataset, loss for a
            # regression task): name the value that breaks it
            errors.add(where, err["message"])
        # otherwise it is about another field, already reported for the first values


def _check_combinations(spec: ExperimentSpec, spaces: list[Space]) -> None:
    """Expand a small sweep (first seed only) to check rules no single value breaks."""
    n = count_from_spaces(spaces, spec.search.method, spec.search.num_samples, 1)
    if n > FULL_CHECK_TRIALS:
        return
    try:
        for _ in expand_checked(spec, seeds=spec.search.seed_list[:1]):
            pass
    except SpecError as exc:
        raise _Invalid(exc.errors) from None


def _regression_objective(spec: ExperimentSpec) -> ExperimentSpec:
    """Regression trials have no accuracy: default their objective to test_loss (min), and
    refuse an accuracy objective that was asked for explicitly."""

    def values(section: dict, key: str, default: Any) -> list[Any]:
        value = section.get(key, default)
        return list(next(iter(value.values()))) if is_space(value) else [value]

    losses = values(spec.model, "loss", "softmax_crossentropy")
    regression = any(
        dataset_task(DatasetConfig.model_construct(name=name), loss) == "regression"
        for name in values(spec.dataset, "name", None)
        for loss in losses
        if isinstance(name, str) and (name == "csv" or name in REGISTRY)
    )
    if not regression or "accuracy" not in spec.search.objective.metric:
        return spec
    if "objective" in spec.search.model_fields_set:
        raise _Invalid(
            [
                {
                    "path": "search.objective.metric",
                    "message": (
                        "regression trials (loss squared_error) have no accuracy; use test_loss "
                        f"or val_loss with mode: min, but got {spec.search.objective.metric!r}"
                    ),
                }
            ]
        )
    search = spec.search.model_copy(update={"objective": Objective(metric="test_loss", mode="min")})
    return spec.model_copy(update={"search": search})
