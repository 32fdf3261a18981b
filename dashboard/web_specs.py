"""The checks a spec submitted over the web passes before anything is stored: the JSON body
itself (valid, not nested too deeply), the spec's rules, the server's size caps (trials,
generated dataset cells) and that an uploaded CSV it names exists and parses. Each failure
is an :class:`APIError` (400/413) naming the field."""

from __future__ import annotations

import csv
from typing import Any

from flask import current_app

from dnnframe.datasets import csv_task, parse_csv, upload_path
from dnnframe.exceptions import DatasetError, SpecError, brief
from dnnframe.spec import ExperimentSpec, parse_spec

from .errors import APIError


def check_web_spec(data: Any) -> ExperimentSpec:
    """Validate a spec that arrived over HTTP: the spec rules plus the server's own limits.

    Web specs may not name server files (``dataset.path``): only built-in datasets or
    ``upload`` ids from ``POST /api/v1/datasets``. Values must have their fields' JSON types, as
    the OpenAPI document says. Every problem is reported at once.
    """
    errors: list[dict[str, str]] = []
    if (
        isinstance(data, dict)
        and isinstance(data.get("dataset"), dict)
        and "path" in data["dataset"]
    ):
        errors.append(
            {
                "path": "dataset.path",
                "message": (
                    "server file paths are not accepted over the web; upload the CSV with "
                    "POST /api/v1/datasets and use dataset.upload with the returned id"
                ),
            }
        )
    spec = None
    try:
        spec = parse_spec(
            data,
            source="request body",
            trial_cap=int(current_app.config["MAX_TRIALS"]),
            json_types=True,
        )
    except SpecError as exc:
        errors.extend(exc.errors)
    if errors:
        raise SpecError(errors, "request body")
    assert spec is not None
    _check_dataset_size(spec, int(current_app.config["MAX_DATASET_CELLS"]))
    _check_upload(spec)
    return spec


def _largest(value: Any, default: float) -> float:
    """The largest number a leaf or a search space over it can take."""
    if isinstance(value, bool):
        return default
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dict) and len(value) == 1:
        kind, arg = next(iter(value.items()))
        if isinstance(arg, list):
            if kind == "int_range" and len(arg) >= 2:
                arg = arg[1:2]
            nums = [v for v in arg if isinstance(v, (int, float)) and not isinstance(v, bool)]
            return float(max(nums)) if nums else default
    return default


# Defaults of the generators' size parameters (dnnframe.datasets.registry), used when a spec omits them.
_SIZE_DEFAULTS = {"mnist1d": (5000, 40), "classification": (1000, 20), "regression": (1000, 10)}


def _check_dataset_size(spec: ExperimentSpec, cap: int) -> None:
    """A generated dataset is built in the server (to fingerprint it) before anything is
    stored, so a web request may not ask for more than ``cap`` feature values."""
    ds = spec.dataset
    params = ds.get("params")
    if not isinstance(params, dict):
        return
    rows_default, cols_default = _SIZE_DEFAULTS.get(str(ds.get("name")), (1000, 2))
    rows = _largest(params.get("n_samples", params.get("num_samples")), rows_default)
    cols = _largest(params.get("n_features"), cols_default)
    if rows * cols > cap:
        raise SpecError(
            [
                {
                    "path": "dataset.params",
                    "message": (
                        f"the generated dataset would hold {int(rows)} x {int(cols)} = "
                        f"{int(rows * cols)} "
                        f"values, more than this server generates per request ({cap}); use fewer "
                        "n_samples/n_features or run it with the CLI"
                    ),
                }
            ],
            "request body",
        )


def _check_upload(spec: ExperimentSpec) -> None:
    """An uploaded CSV must exist and have the chosen label column (checked before storing)."""
    ds = spec.dataset
    if ds.get("name") != "csv" or not isinstance(ds.get("upload"), str):
        return
    path = upload_path(ds["upload"])
    if not path.is_file():
        raise SpecError(
            [
                {
                    "path": "dataset.upload",
                    "message": (
                        f"no uploaded dataset with id {brief(ds['upload'])}; "
                        "upload it with POST /api/v1/datasets"
                    ),
                }
            ],
            "request body",
        )
    label = ds.get("label_column")
    if isinstance(label, str):
        loss = spec.model.get("loss")
        try:
            parse_csv(path.read_bytes(), label, csv_task(str(loss)))
        except csv.Error as exc:
            # uploads are checked when stored, but a file the limit changed under must not 500
            raise SpecError(
                [{"path": "dataset.upload", "message": f"the CSV is malformed: {exc}"}],
                "request body",
            ) from None
        except DatasetError as exc:
            # a text column is only wrong as a feature: choosing it as the label fixes that
            label_related = "label column" in str(exc) or "must be numeric" in str(exc)
            field = "dataset.label_column" if label_related else "dataset.upload"
            raise SpecError([{"path": field, "message": str(exc)}], "request body") from None


# No spec nests more than a handful of levels; deeper bodies are refused before the spec code
# (and pydantic's serializer, which gives up past a few hundred levels) ever sees them.
MAX_JSON_DEPTH = 64


def _json_depth_exceeds(value: Any, limit: int) -> bool:
    """True when ``value`` nests containers more than ``limit`` levels (checked iteratively)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend(
                (child, depth + 1) for child in children if isinstance(child, (dict, list))
            )
    return False


def read_json_body(request) -> Any:
    """The request's JSON body, or a 400 that says why it is not one."""
    if not request.is_json:
        raise APIError(
            400,
            f"the body must be JSON (Content-Type: application/json), but got "
            f"{request.mimetype or 'no content type'!r}",
            [{"path": "", "message": "expected a JSON object"}],
        )
    try:
        data = request.get_json(silent=True)
    except RecursionError:
        # json's C decoder gives up past the interpreter's recursion limit; that is the
        # client's body, not a server fault
        raise APIError(
            400,
            "the JSON body is nested too deeply",
            [{"path": "", "message": "JSON nested too deeply"}],
        ) from None
    if data is None:
        raise APIError(
            400, "the body is not valid JSON", [{"path": "", "message": "not valid JSON"}]
        )
    if _json_depth_exceeds(data, MAX_JSON_DEPTH):
        raise APIError(
            400,
            f"the JSON body is nested too deeply (more than {MAX_JSON_DEPTH} levels)",
            [{"path": "", "message": "JSON nested too deeply"}],
        )
    return data
