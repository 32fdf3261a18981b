"""The JSON Schema (2020-12) of a spec document, generated from the pydantic models that
validate it.

A spec's ``dataset``, ``model`` and ``training`` sections are kept as plain JSON by
:class:`~dnnframe.spec.models.ExperimentSpec` because any value in them may be a search
space; their rules live on :class:`~dnnframe.spec.models.TrialConfig`'s models. This module
writes those rules into the schema: each section follows its model, and each value in it is
either what the model takes or a search space over such values (see
:mod:`dnnframe.spec.spaces`). What the schema cannot say, because it relates several values,
is listed in the spec's description.

>>> schema = spec_json_schema()
>>> schema["required"], schema["properties"]["model"]["anyOf"][0]
(['dataset'], {'$ref': '#/$defs/ModelSection'})
>>> sorted(schema["$defs"]["ModelSection"]["properties"]["hidden_layers"]["anyOf"][0])
['default', 'description', 'maximum', 'minimum', 'title', 'type']
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from ..datasets import MAX_HELD_OUT, REGISTRY, UPLOAD_ID, DatasetConfig
from ..vocabulary import LR_SCHEDULES
from .models import MAX_HIDDEN_WEIGHTS, ExperimentSpec, ModelConfig, TrainingConfig
from .spaces import MAX_SPACE_VALUES
from .validate import MAX_LISTED_VALUES

# Strings in a spec may not hold control characters (the description may hold line breaks).
PLAIN_TEXT = "^[^\\x00-\\x1f\\x7f]*$"

# Rules over several values, which the server checks and a JSON Schema cannot express.
CROSS_FIELD_RULES = (
    "dataset: a csv dataset needs upload and label_column and takes no params; other "
    "datasets take neither, and their params follow their own model (one of the params "
    f"schemas listed); test_fraction + validation_fraction < {MAX_HELD_OUT}",
    "model: a width list has one entry per hidden layer; the hidden layers hold at most "
    f"{MAX_HIDDEN_WEIGHTS:,} weights; residual_learnable needs residual: scaled; "
    "norm_position: pre needs a normalization; a regression dataset needs loss: squared_error",
    "search spaces: int_range and uniform/loguniform need low <= high; uniform and "
    "loguniform need a method other than grid; the sweep has at most search.max_trials "
    "trials (and at most the server's cap), the spec lists at most "
    f"{MAX_LISTED_VALUES:,} values in grid and choice spaces, an int_range at most "
    f"{MAX_SPACE_VALUES:,}",
    "search: tpe and cmaes take one seed; with ASHA pruning, min_epochs < max_epochs, the "
    "objective is a per-epoch metric and training.max_epochs is not a search space",
)


def spec_json_schema(server_files: bool = True) -> dict[str, Any]:
    """The JSON Schema of a spec document, with every rule of its models.

    ``server_files=False`` leaves out ``dataset.path`` (a file on the server), which specs
    submitted over the web may not use. References point into the schema's ``$defs``.
    """
    defs: dict[str, Any] = {}
    top = _model_schema(ExperimentSpec, defs)
    dataset = _model_schema(DatasetConfig, defs)
    dataset["properties"]["name"] = {
        "type": "string",
        "enum": [*REGISTRY, "csv"],
        "description": "a built-in dataset, or csv for an uploaded file",
    }
    # an upload the server takes is an upload id (or empty, which other datasets ignore)
    dataset["properties"]["upload"]["anyOf"][0]["pattern"] = (
        "^(?:" + UPLOAD_ID.pattern.strip("^$") + ")?$"
    )
    if not server_files:
        del dataset["properties"]["path"]
    resolved, sectioned = [], []
    for info in REGISTRY.values():
        params_name = info.params.__name__.lstrip("_")
        if params_name not in defs:
            defs[params_name] = _model_schema(info.params, defs)
            defs[params_name + "Section"] = _sectioned(defs[params_name], defs)
            resolved.append({"$ref": f"#/$defs/{params_name}"})
            sectioned.append({"$ref": f"#/$defs/{params_name}Section"})
    about = "the named dataset's generator parameters"
    dataset["properties"]["params"] = {"anyOf": resolved, "description": about}
    defs["DatasetConfig"] = dataset
    defs["DatasetSection"] = _sectioned(dataset, defs)
    # each parameter may be a space, the mapping as a whole may not
    defs["DatasetSection"]["properties"]["params"] = {"anyOf": sectioned, "description": about}
    for model in (ModelConfig, TrainingConfig):
        defs[model.__name__] = _model_schema(model, defs)
    _add_shorthands(defs)
    for name in ("ModelConfig", "TrainingConfig"):
        defs[name.replace("Config", "Section")] = _sectioned(defs[name], defs)
    props = top["properties"]
    props["dataset"] = {
        "anyOf": [
            {"type": "string", "enum": [*REGISTRY], "description": "short for {name: …}"},
            {"$ref": "#/$defs/DatasetSection"},
            _space({"$ref": "#/$defs/DatasetConfig"}, defs),
        ]
    }
    for section in ("model", "training"):
        name = section.capitalize()
        props[section] = {
            "anyOf": [
                {"$ref": f"#/$defs/{name}Section"},
                _space({"$ref": f"#/$defs/{name}Config"}, defs),
            ],
        }
    # free text: line breaks and tabs are expected
    props["description"].pop("pattern", None)
    top["$defs"] = defs
    top["description"] = (
        "A dnnframe sweep. dataset, model and training follow DatasetConfig, ModelConfig and "
        "TrainingConfig, where any value may instead be a search space over such values: "
        "{grid|choice: [...]}, {int_range: [low, high, step]}, {uniform|loguniform: "
        "[low, high]}. Rules over several values, checked by the server (400 naming the "
        "field): " + "; ".join(CROSS_FIELD_RULES) + "."
    )
    top["examples"] = [
        {
            "name": "tiny",
            "dataset": {"name": "iris"},
            "model": {"hidden_layers": {"grid": [1, 2]}, "width": 8},
            "training": {"max_epochs": 2, "learning_rate": 0.01},
            "search": {"seeds": 2},
        }
    ]
    return top


def _model_schema(model: type[BaseModel], defs: dict[str, Any]) -> dict[str, Any]:
    """``model``'s JSON Schema with its own ``$defs`` moved into ``defs``; plain strings
    may not hold control characters."""
    schema = model.model_json_schema()
    defs.update(schema.pop("$defs", {}))
    _plain_text(schema)
    for sub in defs.values():
        _plain_text(sub)
    return schema


def _plain_text(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") == "string" and "enum" not in node:
            node.setdefault("pattern", PLAIN_TEXT)
        if node.get("type") == "object" and node.get("additionalProperties") is True:
            node.setdefault("propertyNames", {"pattern": PLAIN_TEXT})
        for key, value in node.items():
            if key != "properties" or not isinstance(value, dict):
                _plain_text(value)
            else:
                for prop in value.values():
                    _plain_text(prop)
    elif isinstance(node, list):
        for value in node:
            _plain_text(value)


def _add_shorthands(defs: dict[str, Any]) -> None:
    # spellings the models turn into their canonical form before validating
    residual = defs["ModelConfig"]["properties"]["residual"]
    defs["ModelConfig"]["properties"]["residual"] = {
        "anyOf": [
            {k: v for k, v in residual.items() if k in ("type", "enum")},
            {"type": "boolean", "description": "true: identity, false: none"},
        ],
        **{k: v for k, v in residual.items() if k not in ("type", "enum")},
    }
    schedule = defs["TrainingConfig"]["properties"]["lr_schedule"]
    defs["TrainingConfig"]["properties"]["lr_schedule"] = {
        "anyOf": [
            {"$ref": "#/$defs/LrSchedule"},
            {"type": "string", "enum": list(LR_SCHEDULES), "description": "short for {kind: …}"},
        ],
        **{k: v for k, v in schedule.items() if k != "$ref"},
    }


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    return defs[ref.rsplit("/", 1)[-1]] if isinstance(ref, str) else node


def _sectioned(model: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """``model``'s schema where every value may also be a search space over its values."""
    out = copy.deepcopy(model)
    out["properties"] = {
        key: {"anyOf": [_value_or_section(prop, defs), _space(prop, defs)]}
        for key, prop in model["properties"].items()
    }
    return out


def _value_or_section(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A plain value of ``prop``; a nested model's own values may be spaces in turn."""
    if "anyOf" in prop:
        return {**prop, "anyOf": [_value_or_section(p, defs) for p in prop["anyOf"]]}
    target = _resolve(prop, defs)
    if target.get("type") == "object" and "properties" in target and target is not prop:
        return _sectioned(target, defs)
    return prop


def _admits(node: Any, types: tuple[str, ...], defs: dict[str, Any]) -> bool:
    """Whether a value of one of ``types`` may satisfy ``node``."""
    if not isinstance(node, dict):
        return False
    node = _resolve(node, defs)
    if node.get("type") in types and "enum" not in node:
        return True
    return any(_admits(n, types, defs) for n in node.get("anyOf", []))


def _space(value: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A search space whose every value satisfies ``value``."""
    listed = {"type": "array", "items": value, "minItems": 1, "maxItems": MAX_LISTED_VALUES}
    kinds: dict[str, Any] = {"grid": listed, "choice": listed}
    if _admits(value, ("integer", "number"), defs):
        integer = {"allOf": [value, {"type": "integer"}]}
        kinds["int_range"] = {
            "type": "array",
            "prefixItems": [integer, integer, {"type": "integer", "minimum": 1}],
            "minItems": 2,
            "maxItems": 3,
            "description": "[low, high] or [low, high, step]: low, low + step, … up to high",
        }
    if _admits(value, ("number",), defs):
        number = {"allOf": [value, {"type": "number"}]}
        bounds = {"type": "array", "minItems": 2, "maxItems": 2}
        kinds["uniform"] = {**bounds, "prefixItems": [number, number]}
        kinds["loguniform"] = {
            **bounds,
            "prefixItems": [{"allOf": [number, {"exclusiveMinimum": 0}]}, number],
        }
    return {
        "title": "search space",
        "anyOf": [
            {
                "type": "object",
                "properties": {kind: schema},
                "required": [kind],
                "additionalProperties": False,
            }
            for kind, schema in kinds.items()
        ],
    }
