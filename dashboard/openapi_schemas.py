"""The OpenAPI document's component schemas: the spec's, generated from its pydantic models
(their ``$defs`` become components), and the API's own response objects."""

from __future__ import annotations

from typing import Any

from dnnframe.spec import spec_json_schema
from dnnframe.states import EXPERIMENT_STATUSES

from .importance import EVALUATORS
from .service import TRIAL_STATES


def _object(required: dict[str, Any], **optional: Any) -> dict[str, Any]:
    """An object with these ``required`` properties (and ``optional`` ones); more may come."""
    return {"type": "object", "required": list(required),
            "properties": {**required, **optional}}


_INT, _STR, _BOOL = {"type": "integer"}, {"type": "string"}, {"type": "boolean"}
_EXPERIMENT = _object(
    {"id": _STR, "name": _STR, "n_trials": _INT, "status": {"enum": list(EXPERIMENT_STATUSES)},
     "status_text": _STR, "can_cancel": _BOOL,
     "counts": {"type": "object", "additionalProperties": _INT,
                "description": "trial state → how many"}},
    finished=_INT, progress={"type": "number"}, cancel_requested=_BOOL,
    reruns={**_INT, "description": "trials trained again after their worker was lost "
            "(claimed more than once); `status_text` says so too"},
    best_configuration={
        "type": ["object", "null"],
        "description": "GET of one experiment: the configuration (every parameter but the "
        "seed) with the best mean of the objective over its seeds, its sd, seed count and "
        "trials; `ties`: the configurations with the same mean, which only the order's rule "
        "(more seeds, smaller sd, smallest trial id) puts after it",
    },
)
_TRIAL = _object({"id": _STR, "state": {"enum": list(TRIAL_STATES)},
                  "params": {"type": "object"}, "metrics": {"type": "object"}},
                 seq=_INT, attempts=_INT)
_PAGE = {"limit": _INT, "offset": _INT, "more": _BOOL}


def _rewrite_refs(node: Any) -> Any:
    # pydantic points into its own $defs; the document keeps them under components
    if isinstance(node, dict):
        return {
            k: (
                "#/components/schemas/" + v.split("/")[-1]
                if k == "$ref" and isinstance(v, str)
                else _rewrite_refs(v)
            )
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_rewrite_refs(v) for v in node]
    return node



def component_schemas() -> dict[str, Any]:
    """Every schema of ``components.schemas``, by name."""
    # web specs may not name files on the server
    spec_schema = spec_json_schema(server_files=False)
    defs = spec_schema.pop("$defs", {})
    schemas: dict[str, Any] = {name: _rewrite_refs(s) for name, s in defs.items()}
    for sub in schemas.values():
        sub.pop("$defs", None)
    schemas["ExperimentSpec"] = _rewrite_refs(spec_schema)
    schemas.update(
        {
            "Object": {"type": "object"},
            "Health": _object({"status": {"enum": ["ok"]}, "version": _STR,
                               "executor": {"enum": ["local", "celery"]}},
                              store_ms={"type": "number"}),
            "Experiment": _EXPERIMENT,
            "ExperimentList": _object(
                {"experiments": {"type": "array", "items": {"$ref": "#/components/schemas/"
                                                                    "Experiment"}},
                 **_PAGE}),
            "Trial": _TRIAL,
            "TrialList": _object(
                {"experiment_id": _STR, "cursor": _INT, "n_trials": _INT,
                 "trials": {"type": "array", "items": {"$ref": "#/components/schemas/Trial"}},
                 **_PAGE},
                counts=_EXPERIMENT["properties"]["counts"],
                status=_EXPERIMENT["properties"]["status"], can_cancel=_BOOL,
                status_text=_STR, reruns=_EXPERIMENT["properties"]["reruns"]),
            "Deleted": _object({"id": _STR, "deleted": {"const": True}, "deleted_trials": _INT}),
            "Cancelled": {"allOf": [{"$ref": "#/components/schemas/Experiment"},
                                    _object({"cancelled_trials": _INT})]},
            "Workers": _object({"workers": {"type": "array", "items": {"type": "object"}},
                                "celery": {"type": ["object", "null"]},
                                "wrong_store": {"type": "array"}}),
            "Importance": {
                "type": "object",
                "required": ["experiment_id", "metric", "mode", "evaluator", "importances"],
                "properties": {
                    "experiment_id": {"type": "string"},
                    "metric": {"type": "string"},
                    "mode": {"type": "string", "enum": ["max", "min"]},
                    "evaluator": {"type": "string", "enum": list(EVALUATORS)},
                    "importances": {
                        "type": "object",
                        "additionalProperties": {"type": "number"},
                        "description": "parameter → importance",
                    },
                    "ranking": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "the parameters, most important first",
                    },
                    "params": {"type": "array", "items": {"type": "string"}},
                    "n_trials": {"type": "integer"},
                    "sampled": {
                        "type": "integer",
                        "description": "how many of the trials a forest evaluator saw",
                    },
                    "note": {"type": "string"},
                    "few_trials": {
                        "type": "boolean",
                        "description": "fewer than 5 complete trials a varied parameter: a "
                        "rough guide",
                    },
                    "noise_floor": {
                        "type": "number",
                        "description": "the seed's importance: what the draw alone explains",
                    },
                    "below_noise": {
                        "type": "array", "items": {"type": "string"},
                        "description": "parameters that matter no more than the seed",
                    },
                    "n_diverged": {
                        "type": "integer",
                        "description": "DIVERGED trials: not ranked, for they have no value",
                    },
                    "diverged_at": {
                        "type": "object",
                        "additionalProperties": {"type": "array"},
                        "description": "parameter → the values at which every trial diverged "
                        "(while trials at another value trained)",
                    },
                },
            },
            "Error": {
                "type": "object",
                "required": ["status", "error", "message"],
                "properties": {
                    "status": {"type": "integer"},
                    "error": {"type": "string"},
                    "message": {"type": "string"},
                    "errors": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["path", "message"],
                            "properties": {
                                "path": {"type": "string"},
                                "message": {"type": "string"},
                            },
                        },
                    },
                },
            },
            "Submitted": {
                "type": "object",
                "required": ["id", "n_trials"],
                "properties": {
                    "id": {"type": "string"},
                    "name": {"type": "string"},
                    "n_trials": {"type": "integer"},
                    "new_trials": {"type": "integer"},
                    "queued_trials": {"type": "integer"},
                    "created": {"type": "boolean"},
                    "url": {"type": "string"},
                    "api_url": {"type": "string"},
                },
            },
            "Validated": {
                "type": "object",
                "required": ["valid", "n_trials"],
                "properties": {
                    "valid": {"type": "boolean"},
                    "n_trials": {"type": "integer"},
                    "experiment_id": {"type": "string"},
                    "spec": {"type": "object"},
                },
            },
            "Upload": {
                "type": "object",
                "required": ["id", "header", "rows"],
                "properties": {
                    "id": {"type": "string"},
                    "header": {"type": "array", "items": {"type": "string"}},
                    "rows": {"type": "integer"},
                    "label_candidates": {"type": "array", "items": {"type": "string"}},
                },
            },
        }
    )
    return schemas
