"""The OpenAPI 3.1 document: its paths here, its schemas (built from the spec's own pydantic
models, one source of truth) in :mod:`.openapi_schemas`."""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

from dnnframe import __version__
from dnnframe.states import EXPERIMENT_STATUSES

from .importance import EVALUATORS
from .openapi_schemas import component_schemas
from .params import VALUE_NAMES
from .service import SORT_KEYS, TRIAL_STATES


def _json(schema: str | dict[str, Any]) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{schema}"} if isinstance(schema, str) else schema
    return {"application/json": {"schema": ref}}


def _resp(description: str, schema: str | dict[str, Any] = "Object") -> dict[str, Any]:
    return {"description": description, "content": _json(schema)}


def _errors(*codes: int, conflict: str = "") -> dict[str, Any]:
    """Error responses for ``codes``; ``conflict`` says what a 409 means for this operation."""
    text = {
        400: "invalid input; `errors` names every invalid field",
        401: "missing or wrong API token",
        403: "cross-site request, or a form body without the session's CSRF token "
        "(no API token set)",
        404: "unknown id",
        409: conflict,
        413: "request body too large",
        429: "too many wrong API tokens from this client: wait Retry-After seconds",
        503: "store or executor unavailable",
    }
    if 401 in codes:  # wrong tokens are throttled per client
        codes = (*codes, 429)
    return {str(c): _resp(text[c], "Error") for c in codes}


def _param(
    name: str, where: str, schema: dict[str, Any], description: str, required: bool = False
) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": required or where == "path",
        "schema": schema,
        "description": description,
    }


_EXP_ID = _param("experiment_id", "path", {"type": "string"}, "experiment id (exp-…)")
_SECURED = [{"bearer": []}]


@functools.lru_cache(maxsize=1)
def _document() -> str:
    schemas = component_schemas()
    form_fields = {
        "type": "object",
        "properties": {
            k: {"type": "string"}
            for k in (
                "name",
                "dataset",
                "upload",
                "label_column",
                "hidden_layers",
                "width",
                "activation",
                "residual",
                "normalization",
                "norm_position",
                "optimizer",
                "learning_rate",
                "epochs",
                "batch_size",
                "grad_clip",
                "lr_schedule",
                "warmup_epochs",
                "seeds",
            )
        },
    }
    paths: dict[str, Any] = {
        "/health": {
            "get": {
                "summary": "Liveness and store check",
                "operationId": "health",
                "responses": {"200": _resp("ok"), **_errors(503)},
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "operationId": "openapi",
                "responses": {"200": _resp("OpenAPI document")},
            }
        },
        "/validate": {
            "post": {
                "summary": "Validate a spec (JSON) or the sweep form's fields (form-encoded); "
                "stores nothing",
                "operationId": "validate",
                "security": _SECURED,
                "requestBody": {
                    "required": True,
                    "content": {
                        **_json("ExperimentSpec"),
                        "application/x-www-form-urlencoded": {"schema": form_fields},
                    },
                },
                "responses": {
                    "200": _resp("valid: the trial count", "Validated"),
                    **_errors(400, 401, 403, 413),
                },
            }
        },
        "/experiments": {
            "get": {
                "summary": "List experiments, newest first",
                "operationId": "listExperiments",
                "parameters": [
                    _param(
                        "q",
                        "query",
                        {"type": "string", "maxLength": 200},
                        "only experiments whose name or id contains this (any case)",
                    ),
                    _param(
                        "status",
                        "query",
                        {"type": "string", "enum": list(EXPERIMENT_STATUSES)},
                        "only experiments with this status",
                    ),
                    _param(
                        "limit",
                        "query",
                        {"type": "integer", "minimum": 1, "maximum": 1000},
                        "page size",
                    ),
                    _param(
                        "offset",
                        "query",
                        {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
                        "skip this many",
                    ),
                ],
                "responses": {"200": _resp("experiments"), **_errors(400)},
            },
            "post": {
                "summary": "Submit a sweep (idempotent: the same spec is the same experiment)",
                "operationId": "createExperiment",
                "security": _SECURED,
                "requestBody": {"required": True, "content": _json("ExperimentSpec")},
                "responses": {
                    "201": _resp("created and queued", "Submitted"),
                    "200": _resp("already submitted: the existing experiment", "Submitted"),
                    **_errors(400, 401, 403, 413, 503),
                },
            },
        },
        "/experiments/{experiment_id}": {
            "get": {
                "summary": "An experiment: spec, progress by state, best trial",
                "operationId": "getExperiment",
                "parameters": [_EXP_ID],
                "responses": {"200": _resp("experiment"), **_errors(404)},
            },
            "delete": {
                "summary": "Delete an experiment that is over, with the trials no other "
                "experiment shares",
                "operationId": "deleteExperiment",
                "security": _SECURED,
                "parameters": [
                    _EXP_ID,
                    _param(
                        "confirm",
                        "query",
                        {"type": "string"},
                        "the experiment's id or its name again, to confirm",
                        required=True,
                    ),
                ],
                "responses": {
                    "200": _resp("deleted: how many trials went with it"),
                    **_errors(400, 401, 403, 404, 409, conflict="the experiment still has "
                              "trials queued or running: cancel it first"),
                },
            },
        },
        "/experiments/{experiment_id}/trials": {
            "get": {
                "summary": "Trials: filter by state, sort by a metric, paginate; "
                "since=<cursor> for live updates",
                "operationId": "listTrials",
                "parameters": [
                    _EXP_ID,
                    _param(
                        "state",
                        "query",
                        {"type": "string", "enum": list(TRIAL_STATES)},
                        "only trials in this state",
                    ),
                    _param(
                        "sort",
                        "query",
                        {"type": "string", "examples": sorted(SORT_KEYS)},
                        "one of the listed keys or a dotted path (config.model.hidden_layers); "
                        "not with since, which pages in change order",
                    ),
                    _param(
                        "order", "query", {"type": "string", "enum": ["asc", "desc"]}, "sort order"
                    ),
                    _param(
                        "limit",
                        "query",
                        {"type": "integer", "minimum": 1, "maximum": 1000},
                        "page size",
                    ),
                    _param(
                        "offset",
                        "query",
                        {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
                        "skip this many",
                    ),
                    _param(
                        "since",
                        "query",
                        {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
                        "change cursor from the previous answer (pages in change order: no sort)",
                    ),
                    _param(
                        "history",
                        "query",
                        {"type": "string", "enum": ["0", "1"]},
                        "include per-epoch metrics",
                    ),
                ],
                "responses": {"200": _resp("trials and the next cursor"), **_errors(400, 404)},
            }
        },
        "/experiments/{experiment_id}/events": {
            "get": {
                "summary": "Server-sent events: `trials` (the changed trials and the "
                "experiment's counts) as they change; `change`: catch up with trials?since=; "
                "`end`: the experiment is finished and the stream closes",
                "operationId": "experimentEvents",
                "parameters": [
                    _EXP_ID,
                    _param(
                        "since",
                        "query",
                        {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
                        "the reader's cursor: the first event announces it at once",
                    ),
                ],
                "responses": {
                    "200": {
                        "description": "an event stream (text/event-stream)",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    "204": {"description": "the experiment is finished: nothing to stream"},
                    **_errors(400, 404, 503),
                },
            }
        },
        "/experiments/{experiment_id}/importance": {
            "get": {
                "summary": "Parameter importance: each parameter the complete trials vary → "
                "its share of the metric's variation (Optuna's evaluators; sums to 1)",
                "operationId": "getImportance",
                "parameters": [
                    _EXP_ID,
                    _param(
                        "metric",
                        "query",
                        {"type": "string", "enum": list(VALUE_NAMES)},
                        "a final metric (default: the objective), a timing, epochs_run or "
                        "n_params; any other name is a 400",
                    ),
                    _param(
                        "mode",
                        "query",
                        {"type": "string", "enum": ["max", "min"]},
                        "which way is better (default: the objective's, else max for "
                        "accuracies and min otherwise)",
                    ),
                    _param(
                        "evaluator",
                        "query",
                        {"type": "string", "enum": list(EVALUATORS)},
                        "Optuna importance evaluator (default ped_anova; the forests, fanova "
                        "and mean_decrease_impurity, see a seeded sample of at most 1,000 "
                        "trials)",
                    ),
                ],
                "responses": {
                    "200": _resp(
                        "importances (empty, with a note, while fewer than two complete "
                        "trials have the metric)",
                        "Importance",
                    ),
                    **_errors(400, 404),
                },
            }
        },
        "/experiments/{experiment_id}/spec": {
            "get": {
                "summary": "The stored spec: JSON for POST /experiments, YAML for dnnframe run",
                "operationId": "getExperimentSpec",
                "parameters": [
                    _EXP_ID,
                    _param(
                        "format",
                        "query",
                        {"type": "string", "enum": ["json", "yaml"]},
                        "file format (default json)",
                    ),
                ],
                "responses": {
                    "200": {
                        "description": "the spec",
                        "content": {
                            **_json("ExperimentSpec"),
                            "application/yaml": {"schema": {"type": "string"}},
                        },
                    },
                    **_errors(400, 404),
                },
            }
        },
        "/experiments/{experiment_id}/export": {
            "get": {
                "summary": "Export trials as CSV or JSON Lines",
                "operationId": "exportExperiment",
                "parameters": [
                    _EXP_ID,
                    _param(
                        "format",
                        "query",
                        {"type": "string", "enum": ["csv", "jsonl"]},
                        "file format",
                    ),
                ],
                "responses": {
                    "200": {
                        "description": "the file",
                        "content": {
                            "text/csv": {"schema": {"type": "string"}},
                            "application/x-ndjson": {"schema": {"type": "string"}},
                        },
                    },
                    **_errors(400, 404),
                },
            }
        },
        "/experiments/{experiment_id}/cancel": {
            "post": {
                "summary": "Cancel: queued trials are cancelled, "
                "running ones stop after their epoch",
                "operationId": "cancelExperiment",
                "security": _SECURED,
                "parameters": [_EXP_ID],
                "responses": {
                    "200": _resp("cancelled"),
                    **_errors(401, 403, 404, 409,
                              conflict="the experiment has finished: nothing is left to cancel"),
                },
            }
        },
        "/trials/{trial_id}": {
            "get": {
                "summary": "A trial: config, per-epoch metrics, timings, environment, error",
                "operationId": "getTrial",
                "parameters": [_param("trial_id", "path", {"type": "string"}, "trial id (t-…)")],
                "responses": {"200": _resp("trial"), **_errors(404)},
            }
        },
        "/workers": {
            "get": {
                "summary": "Worker state (from the store; Celery's view when a broker is set)",
                "operationId": "listWorkers",
                "responses": {"200": _resp("workers")},
            }
        },
        "/datasets": {
            "post": {
                "summary": "Upload a CSV dataset → an id for dataset.upload",
                "operationId": "uploadDataset",
                "security": _SECURED,
                "requestBody": {
                    "required": True,
                    "content": {
                        "multipart/form-data": {
                            "schema": {
                                "type": "object",
                                "required": ["file"],
                                "properties": {
                                    "file": {"type": "string", "format": "binary"},
                                    "label_column": {"type": "string"},
                                },
                            }
                        }
                    },
                },
                "responses": {"201": _resp("stored", "Upload"), **_errors(400, 401, 403, 413)},
            }
        },
    }
    doc = {
        "openapi": "3.1.0",
        "info": {
            "title": "dnnframe API",
            "version": __version__,
            "description": "Submit neural-network layer-design sweeps and follow their results. "
            "Errors are JSON ({status, error, message, errors[{path, message}]}).",
        },
        "servers": [{"url": "/api/v1"}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "DNNFRAME_API_TOKEN, when the server sets one",
                }
            },
        },
    }
    return json.dumps(doc)


def openapi_document() -> dict[str, Any]:
    """A fresh copy of the OpenAPI document (built once per process)."""
    return copy.deepcopy(json.loads(_document()))
