"""The OpenAPI 3.1 document: its paths here, its schemas (built from the spec's own pydantic
models, one source of truth) in :mod:`.openapi_schemas`."""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterable
from typing import Any

from dnnframe import __version__
from dnnframe.states import EXPERIMENT_STATUSES

from .events import MAX_STREAMED
from .importance import EVALUATORS
from .openapi_schemas import component_schemas
from .params import VALUE_NAMES
from .query_args import (
    EXPORT_FORMATS,
    HISTORY_CHOICES,
    MAX_INT_ARG,
    MAX_PAGE,
    MAX_SEARCH_TEXT,
    SORT_PATH,
    SPEC_FORMATS,
)
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


def _any_case(words: Iterable[str]) -> str:
    """A pattern matching one of ``words`` in any mix of cases."""
    return "|".join(
        "".join(f"[{c.upper()}{c.lower()}]" if c.upper() != c.lower() else re.escape(c)
                for c in word)
        for word in words
    )


def _choice(choices: Iterable[str]) -> dict[str, Any]:
    """A query parameter the server takes in any case; empty is the same as absent."""
    choices = list(choices)
    return {
        "type": "string",
        "pattern": f"^(?:{_any_case(choices)})?$",
        "description": f"one of {', '.join(choices)} (any case)",
    }


_EXP_ID = _param("experiment_id", "path", {"type": "string"}, "experiment id (exp-…)")
_INT_ARG = {"type": "integer", "minimum": 0, "maximum": MAX_INT_ARG}
_PAGE = {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}
_EVENT = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"enum": ["trials", "change", "end"]},
        "data": {"type": "string", "description": "JSON"},
    },
}
# POST /experiments answers the id every per-experiment operation takes
_EXPERIMENT_LINKS = {
    op: {"operationId": op, "parameters": {"experiment_id": "$response.body#/id"}}
    for op in ("getExperiment", "listTrials", "experimentEvents", "getImportance",
               "getExperimentSpec", "exportExperiment", "cancelExperiment")
}
_EXPERIMENT_LINKS["deleteExperiment"] = {
    "operationId": "deleteExperiment",
    "parameters": {"experiment_id": "$response.body#/id", "confirm": "$response.body#/id"},
}


def _security(token_required: bool) -> list[dict[str, list[str]]]:
    # without a configured token, writes need no Authorization header (and ignore one)
    return [{"bearer": []}] if token_required else [{}, {"bearer": []}]


@functools.lru_cache(maxsize=2)
def _document(token_required: bool) -> str:
    schemas = component_schemas()
    secured = _security(token_required)
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
                "responses": {"200": _resp("ok", "Health"), **_errors(503)},
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
                "security": secured,
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
                        {"type": "string", "maxLength": MAX_SEARCH_TEXT},
                        "only experiments whose name or id contains this (any case)",
                    ),
                    _param(
                        "status",
                        "query",
                        _choice(EXPERIMENT_STATUSES),
                        "only experiments with this status",
                    ),
                    _param("limit", "query", _PAGE, "page size"),
                    _param("offset", "query", _INT_ARG, "skip this many"),
                ],
                "responses": {"200": _resp("experiments", "ExperimentList"), **_errors(400)},
            },
            "post": {
                "summary": "Submit a sweep (idempotent: the same spec is the same experiment)",
                "operationId": "createExperiment",
                "security": secured,
                "requestBody": {"required": True, "content": _json("ExperimentSpec")},
                "responses": {
                    "201": {**_resp("created and queued", "Submitted"),
                            "links": _EXPERIMENT_LINKS},
                    "200": {**_resp("already submitted: the existing experiment", "Submitted"),
                            "links": _EXPERIMENT_LINKS},
                    **_errors(400, 401, 403, 413, 503),
                },
            },
        },
        "/experiments/{experiment_id}": {
            "get": {
                "summary": "An experiment: spec, progress by state, best trial",
                "operationId": "getExperiment",
                "parameters": [_EXP_ID],
                "responses": {"200": _resp("experiment", "Experiment"), **_errors(404)},
            },
            "delete": {
                "summary": "Delete an experiment that is over, with the trials no other "
                "experiment shares",
                "operationId": "deleteExperiment",
                "security": secured,
                "parameters": [
                    _EXP_ID,
                    _param(
                        "confirm",
                        "query",
                        {"type": "string"},
                        "the experiment's id or its name again, to confirm; anything else is "
                        "refused with 400",
                        required=True,
                    ),
                ],
                "responses": {
                    "200": _resp("deleted: how many trials went with it", "Deleted"),
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
                    {
                        **_param(
                            "state",
                            "query",
                            {
                                "type": "array",
                                "items": {
                                    "type": "string",
                                    "pattern": f"^(?: *(?:{_any_case(TRIAL_STATES)})? *"
                                    f"(?:, *(?:{_any_case(TRIAL_STATES)})? *)*)$",
                                },
                            },
                            f"only trials in these states: {', '.join(TRIAL_STATES)} (any "
                            "case), repeated or comma-separated",
                        ),
                        "style": "form",
                        "explode": True,
                    },
                    _param(
                        "sort",
                        "query",
                        {
                            "type": "string",
                            "anyOf": [{"enum": ["", *sorted(SORT_KEYS)]},
                                      {"pattern": f"^{SORT_PATH}$"}],
                        },
                        "one of the listed keys or a dotted path (config.model.hidden_layers); "
                        "with since only seq (400 otherwise: since pages in change order)",
                    ),
                    _param(
                        "order",
                        "query",
                        _choice(("asc", "desc")),
                        "sort order (default desc with sort, else asc); with since only asc "
                        "(400 otherwise)",
                    ),
                    _param("limit", "query", _PAGE, "page size"),
                    _param("offset", "query", _INT_ARG, "skip this many"),
                    _param(
                        "since",
                        "query",
                        _INT_ARG,
                        "change cursor from the previous answer (pages in change order: no sort)",
                    ),
                    _param(
                        "history",
                        "query",
                        _choice(HISTORY_CHOICES),
                        "include per-epoch metrics (1, true, yes)",
                    ),
                ],
                "responses": {
                    "200": {
                        **_resp("trials and the next cursor", "TrialList"),
                        "links": {"getTrial": {
                            "operationId": "getTrial",
                            "parameters": {"trial_id": "$response.body#/trials/0/id"},
                        }},
                    },
                    **_errors(400, 404),
                },
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
                        _INT_ARG,
                        "the reader's cursor: the first event announces it at once",
                    ),
                ],
                "responses": {
                    "200": {
                        "description": "an event stream (text/event-stream)",
                        "content": {"text/event-stream": {"schema": _EVENT}},
                    },
                    "204": {"description": "the experiment is finished: nothing to stream"},
                    **_errors(400, 404, 503),
                },
            }
        },
        "/events": {
            "get": {
                "summary": "One event stream for several experiments, as each experiment's own "
                "stream gives them, every event naming its `experiment_id` (a browser's tabs "
                "share one); `end` at once for an experiment finished or unknown",
                "operationId": "events",
                "parameters": [{
                    **_param("experiment", "query", {
                        "type": "array", "minItems": 1, "maxItems": MAX_STREAMED,
                        "items": {"type": "string", "minLength": 1}},
                        "an experiment id (repeated for each)", required=True),
                    "style": "form", "explode": True,
                }],
                "responses": {
                    "200": {"description": "an event stream (text/event-stream)",
                            "content": {"text/event-stream": {"schema": _EVENT}}},
                    "204": {"description": "every experiment is finished: nothing to stream"},
                    **_errors(400, 503),
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
                        _choice(("max", "min")),
                        "which way is better (default: the objective's, else max for "
                        "accuracies and min otherwise)",
                    ),
                    _param(
                        "evaluator",
                        "query",
                        _choice(EVALUATORS),
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
                        _choice(SPEC_FORMATS),
                        "file format (default json)",
                    ),
                ],
                "responses": {
                    "200": {
                        "description": "the spec",
                        "content": {
                            **_json("ExperimentSpec"),
                            "application/yaml": {
                                "schema": {"$ref": "#/components/schemas/ExperimentSpec"}
                            },
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
                        _choice(EXPORT_FORMATS),
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
                "security": secured,
                "parameters": [_EXP_ID],
                "responses": {
                    "200": _resp("cancelled", "Cancelled"),
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
                "responses": {"200": _resp("trial", "Trial"), **_errors(404)},
            }
        },
        "/workers": {
            "get": {
                "summary": "Worker state (from the store; Celery's view when a broker is set)",
                "operationId": "listWorkers",
                "responses": {"200": _resp("workers", "Workers")},
            }
        },
        "/datasets": {
            "post": {
                "summary": "Upload a CSV dataset → an id for dataset.upload",
                "operationId": "uploadDataset",
                "security": secured,
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


def openapi_document(token_required: bool = False) -> dict[str, Any]:
    """A fresh copy of the OpenAPI document (built once per process and configuration):
    with ``token_required`` the write operations need the bearer token, else it is optional."""
    return copy.deepcopy(json.loads(_document(token_required)))
