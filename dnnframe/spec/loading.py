"""Spec files: read YAML or JSON safely, resolve CSV paths against the file, validate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ..exceptions import SpecError
from .models import ExperimentSpec
from .spaces import is_space
from .validate import parse_spec


def load_spec(path: str | Path) -> ExperimentSpec:
    """Read a YAML or JSON spec file and validate it; errors name the file and the key."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError([{"path": "", "message": "spec file not found"}], str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(
            [{"path": "", "message": f"cannot read the file: {exc}"}], str(path)
        ) from None
    data = parse_spec_text(text, str(path))
    _resolve_csv_paths(data, path.parent)
    spec = parse_spec(data, source=str(path))
    missing = [p for p in _csv_paths(spec.dataset) if not Path(p).is_file()]
    if missing:
        raise SpecError(
            [{"path": "dataset.path", "message": f"CSV file not found: {p}"} for p in missing],
            str(path),
        )
    return spec


# libyaml's parser when PyYAML was built with it (an order of magnitude faster); the same
# safe constructors either way.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_spec_text(text: str, source: str | None = None) -> Any:
    """Parse YAML or JSON text safely (no tags that construct objects).

    A JSON document is read by the JSON parser (a long grid in a generated JSON spec is
    read in well under a second, where a YAML parser takes many); anything else, or JSON
    that the JSON parser refuses, is read as YAML, whose errors name the line.
    """
    if text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text, parse_constant=_non_json_constant)
        except ValueError:
            pass  # YAML flow style, or a mistake: the YAML parser says where
    try:
        return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(
            [{"path": "", "message": f"not valid YAML/JSON: {where}{problem}"}], source
        ) from None


def _non_json_constant(name: str) -> Any:
    # NaN and Infinity are not JSON: leave them to the YAML reading, which refuses them
    raise ValueError(f"{name} is not JSON")


def _csv_paths(dataset: dict[str, Any]) -> list[str]:
    value = dataset.get("path")
    values = next(iter(value.values())) if is_space(value) else [value]
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
    if is_space(value) and isinstance(next(iter(value.values())), list):
        kind, items = next(iter(value.items()))
        dataset["path"] = {kind: [resolve(p) for p in items]}
    else:
        dataset["path"] = resolve(value)
