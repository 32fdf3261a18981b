"""Spec files: read YAML or JSON safely, resolve CSV paths against the file, validate."""

from __future__ import annotations

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


def parse_spec_text(text: str, source: str | None = None) -> Any:
    """Parse YAML or JSON text safely (no tags that construct objects)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(
            [{"path": "", "message": f"not valid YAML/JSON: {where}{problem}"}], source
        ) from None


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
