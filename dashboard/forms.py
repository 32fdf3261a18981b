"""The sweep form: its fields turned into a spec (the same JSON the REST API accepts), and
spec error paths mapped back onto the form's fields.

Ranges and lists are typed the way people write them: ``1-4`` (every integer), ``2-16:2``
(a step), ``1, 2, 4`` (a list), ``32`` (one value).

The form's fields cover the usual sweep; the whole spec (any field the spec's models have:
loss, objective, search method, early stopping, dropout, L2, init, ...) is written in its
``spec_text`` box as YAML or JSON. When that box holds text it is the spec, and the fields
are not read; both are checked by the same ``POST /api/v1/validate``.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from flask import current_app
from werkzeug.datastructures import MultiDict

from dnnframe.datasets import list_datasets
from dnnframe.exceptions import SpecError, brief
from dnnframe.spec import ExperimentSpec, parse_spec_text

from .web_specs import check_web_spec

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# spec path prefix → form field (longest prefix first)
_PATH_TO_FIELD = [
    ("dataset.label_column", "label_column"),
    ("dataset.upload", "upload"),
    ("dataset.path", "dataset"),
    ("dataset", "dataset"),
    ("model.hidden_layers", "hidden_layers"),
    ("model.width", "width"),
    ("model.activation", "activation"),
    ("model.residual", "residual"),
    ("model.normalization", "normalization"),
    ("model.norm_position", "norm_position"),
    ("model", "hidden_layers"),
    ("training.optimizer", "optimizer"),
    ("training.learning_rate", "learning_rate"),
    ("training.max_epochs", "epochs"),
    ("training.batch_size", "batch_size"),
    ("training.grad_clip", "grad_clip"),
    ("training.lr_schedule.warmup_epochs", "warmup_epochs"),
    ("training.lr_schedule", "lr_schedule"),
    ("training", "optimizer"),
    ("search.seeds", "seeds"),
    ("search", "seeds"),
    ("name", "name"),
]

_RANGE = re.compile(r"^\s*(-?\d+)\s*(?:-|\.\.)\s*(-?\d+)\s*(?::\s*(\d+)\s*)?$")

DEFAULT_FORM = {
    "name": "layer-sweep",
    "dataset": "iris",
    "hidden_layers": "1-3",
    "width": "16",
    "activation": ["relu"],
    "residual": ["none"],
    "normalization": ["none"],
    "norm_position": "post",
    "optimizer": ["adam"],
    "learning_rate": "0.01",
    "epochs": "10",
    "batch_size": "32",
    "seeds": "2",
    "grad_clip": "",
    "lr_schedule": "none",
    "warmup_epochs": "0",
}
# form fields that are lists of checked boxes (each becomes a grid over its values)
CHECKBOX_FIELDS = ("activation", "optimizer", "residual", "normalization")
# the spec box: YAML or JSON text that replaces the fields when it is not empty
SPEC_TEXT_FIELD = "spec_text"
# every field the form posts: those spec errors map back to, and the spec box
FORM_FIELDS = (*dict.fromkeys(field for _, field in _PATH_TO_FIELD), SPEC_TEXT_FIELD)
MAX_SPEC_TEXT = 1_000_000  # characters; a sweep's spec is a few hundred
# what a regression dataset chosen in the form implies (the fields have no loss of their own)
REGRESSION_MODEL = {"loss": "squared_error"}
REGRESSION_OBJECTIVE = {"metric": "test_loss", "mode": "min"}


def form_schema() -> dict[str, Any]:
    """The form's fields as the schema of a form body (the API document's): text, and a
    list for each group of checkboxes."""
    many = {"type": "array", "items": {"type": "string"}}
    return {
        "type": "object",
        "properties": {
            f: many if f in CHECKBOX_FIELDS else {"type": "string"} for f in FORM_FIELDS
        },
    }


class FormErrors(Exception):
    """Fields that cannot even be turned into a spec (``{field: message}``)."""

    def __init__(self, fields: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in fields.items()))
        self.fields = fields


def _split(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"[,\s]+", text.strip()) if p.strip()]


def _one_or_grid(values: list[Any]) -> Any:
    return values[0] if len(values) == 1 else {"grid": values}


def _ints(field: str, text: str, errors: dict[str, str], allow_range: bool = True) -> Any:
    text = (text or "").strip()
    if not text:
        errors[field] = "required"
        return None
    m = _RANGE.match(text) if allow_range else None
    if m:
        low, high, step = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
        return {"int_range": [low, high, step]} if low != high else low
    try:
        return _one_or_grid([int(p) for p in _split(text)])
    except ValueError:
        hint = (
            "a number, a range like 1-4 or 2-16:2, or a list like 1, 2, 4"
            if allow_range
            else "a number or a list like 16, 32"
        )
        errors[field] = f"must be {hint}, but got {brief(text)}"
        return None


def _floats(field: str, text: str, errors: dict[str, str]) -> Any:
    text = (text or "").strip()
    if not text:
        errors[field] = "required"
        return None
    try:
        return _one_or_grid([float(p) for p in _split(text)])
    except ValueError:
        errors[field] = f"must be a number or a list like 0.001, 0.01, but got {brief(text)}"
        return None


def form_to_spec(form: MultiDict) -> dict[str, Any]:
    """Build a spec document from the form's fields.

    Raises:
        FormErrors: naming each field that is not even well-formed.
    """
    spec, errors = _read_form(form)
    if errors:
        raise FormErrors(errors)
    return spec


def check_form(form: MultiDict) -> tuple[ExperimentSpec | None, dict[str, Any], dict[str, str]]:
    """Check every field at once: ``(spec or None, the spec document, {field: message})``.

    A field that is not even well-formed (``abc`` as a width) is left out of the document,
    so the spec rules still judge every other field (``0`` as the number of epochs) and the
    form shows all its errors in one round.
    """
    if (form.get(SPEC_TEXT_FIELD) or "").strip():
        return _check_spec_text(form[SPEC_TEXT_FIELD])
    data, errors = _read_form(form)
    # the server's cap is the one that applies to a sweep from the form: its spec says so
    data["search"]["max_trials"] = int(current_app.config["MAX_TRIALS"])
    try:
        spec = check_web_spec(data)
    except SpecError as exc:
        for field, message in errors_by_field(exc.errors).items():
            errors.setdefault(field, message)
        return None, data, errors
    if errors:
        return None, data, errors
    return spec, data, {}


def _check_spec_text(text: str) -> tuple[ExperimentSpec | None, dict[str, Any], dict[str, str]]:
    """The spec box's YAML/JSON checked like a REST body; its errors all go to the box, each
    naming its spec path."""
    if len(text) > MAX_SPEC_TEXT:
        return None, {}, {SPEC_TEXT_FIELD: f"the spec is longer than {MAX_SPEC_TEXT} characters"}
    if _has_yaml_alias(text):
        # an alias can make a short text stand for an exponentially large document
        return (
            None,
            {},
            {
                SPEC_TEXT_FIELD: "YAML anchors and aliases (&name, *name) are not "
                "accepted here; write the values out"
            },
        )
    try:
        data = parse_spec_text(text, "spec box")
    except SpecError as exc:
        return None, {}, {SPEC_TEXT_FIELD: _spec_messages(exc.errors)}
    if not isinstance(data, dict):
        return (
            None,
            {},
            {
                SPEC_TEXT_FIELD: f"the spec must be a mapping (name:, dataset:, "
                f"model:, ...), but got {brief(data)}"
            },
        )
    try:
        spec = check_web_spec(data)
    except SpecError as exc:
        return None, data, {SPEC_TEXT_FIELD: _spec_messages(exc.errors)}
    return spec, data, {}


def _has_yaml_alias(text: str) -> bool:
    if text.lstrip()[:1] in ("{", "[") or "*" not in text:
        return False
    try:
        return any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=_YAML_LOADER))
    except yaml.YAMLError:
        return False  # the spec reader says what is wrong with it


def _spec_messages(errors: list[dict[str, str]]) -> str:
    return "; ".join(
        f"{e['path']}: {e['message']}" if e.get("path") else e["message"] for e in errors
    )


def _regression(dataset_name: str) -> bool:
    return any(d["name"] == dataset_name and d.get("task") == "regression" for d in list_datasets())


def _read_form(form: MultiDict) -> tuple[dict[str, Any], dict[str, str]]:
    """The spec document of the well-formed fields, and a message for each malformed one."""
    errors: dict[str, str] = {}
    dataset_name = (form.get("dataset") or "").strip()
    if not dataset_name:
        errors["dataset"] = "choose a dataset"
    dataset: dict[str, Any] = {"name": dataset_name}
    if dataset_name == "csv":
        upload = (form.get("upload") or "").strip()
        if not upload:
            errors["upload"] = "upload a CSV file first"
        dataset["upload"] = upload
        label = (form.get("label_column") or "").strip()
        if not label:
            errors["label_column"] = "choose the label column"
        dataset["label_column"] = label
    activations = [a for a in form.getlist("activation") if a]
    optimizers = [o for o in form.getlist("optimizer") if o]
    if not activations:
        errors["activation"] = "choose at least one activation"
    if not optimizers:
        errors["optimizer"] = "choose at least one optimiser"
    seeds_text = (form.get("seeds") or "1").strip()
    try:
        seeds = int(seeds_text)
    except ValueError:
        errors["seeds"] = f"must be a whole number of seeds, but got {brief(seeds_text)}"
        seeds = 1
    model = {
        "hidden_layers": _ints("hidden_layers", form.get("hidden_layers", ""), errors),
        "width": _ints("width", form.get("width", ""), errors, allow_range=False),
        "activation": _one_or_grid(activations) if activations else None,
        **_layer_design(form),
        **(REGRESSION_MODEL if _regression(dataset_name) else {}),
    }
    training = {
        "optimizer": _one_or_grid(optimizers) if optimizers else None,
        "learning_rate": _floats("learning_rate", form.get("learning_rate", ""), errors),
        "max_epochs": _ints("epochs", form.get("epochs", ""), errors),
        "batch_size": _ints(
            "batch_size", form.get("batch_size") or "32", errors, allow_range=False
        ),
    }
    training.update(_training_extras(form, errors))
    search: dict[str, Any] = {"seeds": seeds}
    if _regression(dataset_name):
        search["objective"] = dict(REGRESSION_OBJECTIVE)
    spec = {
        "name": (form.get("name") or "").strip() or "experiment",
        "dataset": dataset,
        # a malformed field is left out: its own message says what is wrong with it
        "model": {k: v for k, v in model.items() if v is not None},
        "training": {k: v for k, v in training.items() if v is not None},
        "search": search,
    }
    return spec, errors


def _layer_design(form: MultiDict) -> dict[str, Any]:
    """Residual kinds, normalisations (checkboxes: a grid) and the norm's position; a field
    left empty keeps the spec's default."""
    out: dict[str, Any] = {}
    for field in ("residual", "normalization"):
        values = [v for v in form.getlist(field) if v]
        if values:
            out[field] = _one_or_grid(values)
    position = (form.get("norm_position") or "").strip()
    if position:
        out["norm_position"] = position
    return out


def _training_extras(form: MultiDict, errors: dict[str, str]) -> dict[str, Any]:
    """Gradient clipping (empty: off) and the learning-rate schedule with its warm-up."""
    out: dict[str, Any] = {}
    clip = (form.get("grad_clip") or "").strip()
    if clip:
        value = _floats("grad_clip", clip, errors)
        if value is not None:
            out["grad_clip"] = value
    kind = (form.get("lr_schedule") or "").strip()
    warmup_text = (form.get("warmup_epochs") or "").strip()
    if kind or warmup_text:
        schedule: dict[str, Any] = {"kind": kind or "none"}
        if warmup_text:
            warmup = _ints("warmup_epochs", warmup_text, errors, allow_range=False)
            if warmup is not None:
                schedule["warmup_epochs"] = warmup
        out["lr_schedule"] = schedule
    return out


def field_for_path(path: str) -> str:
    """The form field a spec error path belongs to (``model.width.grid[1]`` → ``width``)."""
    for prefix, field in _PATH_TO_FIELD:
        if path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "["):
            return field
    return "name" if not path else "form"


def errors_by_field(errors: list[dict[str, str]]) -> dict[str, str]:
    """Group spec errors by form field, one message per spec path.

    A value that fails every alternative of a union (a number, or a list of numbers) is
    reported once per alternative at the same path; the first one is about the value as the
    form wrote it, the others only repeat it.
    """
    out: dict[str, str] = {}
    seen: set[str] = set()
    for e in errors:
        path = e.get("path", "")
        if path in seen:
            continue
        seen.add(path)
        field = field_for_path(path)
        msg = e["message"]
        out[field] = f"{out[field]}; {msg}" if field in out else msg
    return out
