"""REST API, JSON under ``/api/v1``: each route with the operation it is in the document
``/api/v1/openapi.json`` serves (:mod:`.operations`): its parameters (the view takes the query
parameters' values), body and answers; its docstring is the operation's summary and
description there."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

from flask import Blueprint, Response, current_app, jsonify, request, url_for

from dnnframe import __version__
from dnnframe.exceptions import DnnframeError
from dnnframe.spec import count_trials
from dnnframe.states import EXPERIMENT_STATUSES

from .celery_view import celery_inspect, wrong_store
from .context import services
from .errors import APIError
from .forms import check_form, form_schema
from .graphs import graphs_progress
from .headers import Header
from .importance import DEFAULT_EVALUATOR, EVALUATORS, experiment_importances
from .openapi import openapi_document
from .openapi_schemas import STORED
from .operations import answer, content, json_content, operation
from .params import VALUE_NAMES
from .query_args import (
    LIMIT,
    MAX_SEARCH_TEXT,
    OFFSET,
    TRIALS_ARGS,
    ChoiceArg,
    TextArg,
    trials_query,
)
from .security import require_token
from .service import (
    cancel_experiment,
    delete_experiment,
    experiment_json,
    find_experiments,
    spec_yaml,
    submit_spec,
    trial_json,
    trials_page,
)
from .uploads import UPLOAD_FORM, upload_response
from .web_specs import check_web_spec, read_json_body
from .worker_status import workers_with_status

if TYPE_CHECKING:
    from .experiment_responses import (
        Cancelled,
        Deleted,
        Experiment,
        ExperimentList,
        Submitted,
        Validated,
    )
    from .responses import Health, Worker, Workers

bp = Blueprint("api", __name__, url_prefix="/api/v1")

EXPERIMENT = {"experiment_id": "experiment id (exp-…)"}
TRIAL = {"trial_id": "trial id (t-…)"}
SPEC_FORMATS = ("json", "yaml")
EXPORT_FORMATS = ("csv", "jsonl")
LOCATION = Header("Location", "the experiment in this API (its api_url)")
SPEC_FILE = Header(
    "Content-Disposition", "with format=yaml: inline, named <experiment id>.yaml", required=False
)
EXPORT_FILE = Header("Content-Disposition", "an attachment, named <experiment id>.<format>")

# --------------------------------------------------------------------------- meta


@bp.get("/health")
@operation("health", responses={200: answer("ok", "Health")}, errors=(503,))
def health() -> Any:
    """Liveness and store check.

    The server's version and executor, and how long the store took to answer (503 when it
    does not)."""
    started = time.perf_counter()
    try:
        services().store.list_experiments(limit=1)
    except DnnframeError as exc:
        raise APIError(503, "the result store is unavailable", details=str(exc)) from None
    body: Health = {
        "status": "ok",
        "version": __version__,
        "store_ms": round((time.perf_counter() - started) * 1000, 2),
        "executor": "celery" if current_app.config.get("BROKER_URL") else "local",
    }
    return jsonify(body)


@bp.get("/openapi.json")
@operation("openapi", responses={200: answer("OpenAPI document")})
def openapi() -> Any:
    """This document.

    The OpenAPI 3.1 document of this API, as this server is configured (whether writes need
    the API token)."""
    return jsonify(openapi_document(token_required=bool(current_app.config.get("API_TOKEN"))))


# --------------------------------------------------------------------------- experiments


@bp.post("/validate")
@require_token(allow_session=True)
@operation(
    "validate",
    body={
        **json_content("ExperimentSpec"),
        "application/x-www-form-urlencoded": {"schema": form_schema()},
        "multipart/form-data": {"schema": form_schema()},
    },
    responses={200: answer("valid: the trial count", "Validated")},
)
def validate() -> Any:
    """Validate a spec (JSON) or the sweep form's fields (form-encoded); stores nothing.

    Validating costs the server work, so it needs the API token when one is set (the sweep
    form's session, signed in at /login, counts).
    """
    if request.mimetype in ("application/x-www-form-urlencoded", "multipart/form-data"):
        spec, data, fields = check_form(request.form)
        if spec is None:
            errors = [{"path": k, "message": v} for k, v in fields.items()]
            body = APIError(400, "the form has invalid fields", errors).to_dict()
            body["fields"] = fields
            body["spec"] = data
            return jsonify(body), 400
    else:
        spec = check_web_spec(read_json_body(request))
    valid: Validated = {
        "valid": True,
        "n_trials": count_trials(spec),
        "experiment_id": spec.experiment_id,
        "spec": spec.to_dict(),
    }
    return jsonify(valid)


@bp.get("/experiments")
@operation(
    "listExperiments",
    query=[
        TextArg(
            "q",
            "only experiments whose name or id contains this (any case)",
            max_length=MAX_SEARCH_TEXT,
        ),
        ChoiceArg("status", "only experiments with this status", EXPERIMENT_STATUSES),
        LIMIT,
        OFFSET,
    ],
    responses={200: answer("experiments", "ExperimentList")},
)
def list_experiments(q: str, status: str | None, limit: int, offset: int) -> Any:
    """List experiments, newest first."""
    exps, more = find_experiments(services().store, q, status or "", limit, offset)
    body: ExperimentList = {
        "experiments": [experiment_json(e) for e in exps],
        "limit": limit,
        "offset": offset,
        "more": more,
    }
    return jsonify(body)


@bp.post("/experiments")
@require_token(json_only=True)
@operation(
    "createExperiment",
    body=json_content("ExperimentSpec"),
    responses={
        201: answer("created and queued", "Submitted", [LOCATION]),
        200: answer("already submitted: the existing experiment", "Submitted", [LOCATION]),
    },
    errors=(503,),
    # the new id is what every per-experiment operation takes, and what deleting confirms
    links={"experiment_id": "$response.body#/id", "confirm": "$response.body#/id"},
)
def create_experiment() -> Any:
    """Submit a sweep (idempotent: the same spec is the same experiment).

    The sweep is stored and its trials queued (201); a spec submitted before answers its
    existing experiment (200). Either way the Location header is the experiment's URL."""
    spec = check_web_spec(read_json_body(request))
    result, created = submit_spec(spec)
    body: Submitted = {
        "id": result.experiment.id,
        "name": result.experiment.name,
        "n_trials": result.experiment.n_trials,
        "new_trials": len(result.new_trial_ids),
        "queued_trials": len(result.submitted_trial_ids),
        "created": created,
        "url": url_for("ui.experiment_page", experiment_id=result.experiment.id),
        "api_url": url_for("api.get_experiment", experiment_id=result.experiment.id),
    }
    response = jsonify(body)
    response.status_code = 201 if created else 200
    response.headers.update(LOCATION.pair(body["api_url"]))
    return response


@bp.get("/experiments/<experiment_id>")
@operation("getExperiment", path=EXPERIMENT, responses={200: answer("experiment", "Experiment")})
def get_experiment(experiment_id: str) -> Any:
    """An experiment: spec, progress by state, best trial."""
    store = services().store
    exp = store.get_experiment(experiment_id)
    out: Experiment = experiment_json(exp, store, best=True)
    out["graphs"] = graphs_progress(exp, out["counts"], store)
    return jsonify(out)


@bp.delete("/experiments/<experiment_id>")
@require_token
@operation(
    "deleteExperiment",
    path=EXPERIMENT,
    query=[
        TextArg(
            "confirm",
            "the experiment's id or its name again, to confirm; anything else is refused with 400",
            required=True,
        )
    ],
    responses={200: answer("deleted: how many trials went with it", "Deleted")},
    errors=(409,),
    conflict="the experiment still has trials queued or running: cancel it first",
)
def delete_experiment_route(experiment_id: str, confirm: str) -> Any:
    """Delete an experiment that is over, with the trials no other experiment shares.

    Trials it shares with other experiments stay theirs."""
    removed = delete_experiment(experiment_id, confirm)
    body: Deleted = {"id": experiment_id, "deleted": True, "deleted_trials": removed}
    return jsonify(body)


@bp.get("/experiments/<experiment_id>/trials")
@operation(
    "listTrials",
    path=EXPERIMENT,
    query=TRIALS_ARGS,
    responses={200: answer("trials and the next cursor", "TrialList")},
    links={"trial_id": "$response.body#/trials/0/id"},
)
def list_trials(experiment_id: str, **args: Any) -> Any:
    """Trials: filter by state, sort by a metric, paginate; since=<cursor> for live updates.

    With `since` the trials changed after that cursor come in change order, with the next
    cursor: poll it to follow the experiment."""
    q = trials_query(args)
    store = services().store
    exp = store.get_experiment(experiment_id)
    # one row more than asked says whether another page exists
    rows = store.list_trials(
        experiment_id,
        state=q.states or None,
        sort_by=q.sort,
        descending=q.descending,
        limit=q.limit + 1,
        offset=q.offset,
        since=q.since,
    )
    return jsonify(trials_page(store, exp, rows, q.limit, q.offset, q.since, q.history))


@bp.get("/experiments/<experiment_id>/importance")
@operation(
    "getImportance",
    path=EXPERIMENT,
    query=[
        # an unknown metric has no values, which would read as "nothing is important"
        ChoiceArg(
            "metric",
            "a final metric (default: the objective), a timing, epochs_run or "
            "n_params; any other name is a 400",
            VALUE_NAMES,
            exact=True,
        ),
        ChoiceArg(
            "mode",
            "which way is better (default: the objective's, else max for "
            "accuracies and min otherwise)",
            ("max", "min"),
        ),
        ChoiceArg(
            "evaluator",
            "Optuna importance evaluator (default ped_anova; the forests, "
            "fanova and mean_decrease_impurity, see a seeded sample of at most 1,000 "
            "trials)",
            EVALUATORS,
            default=DEFAULT_EVALUATOR,
        ),
    ],
    responses={
        200: answer(
            "importances (empty, with a note, while fewer than two trials count)", "Importance"
        )
    },
)
def importance(experiment_id: str, metric: str | None, mode: str | None, evaluator: str) -> Any:
    """Parameter importance: each parameter the trials vary → its share of the metric's
    variation (Optuna's evaluators), a diverged trial counted as the worst value and the
    seed as the noise floor, never ranked."""
    store = services().store
    exp = store.get_experiment(experiment_id)
    return jsonify(experiment_importances(store, exp, metric, mode, evaluator))


@bp.get("/experiments/<experiment_id>/spec")
@operation(
    "getExperimentSpec",
    path=EXPERIMENT,
    query=[ChoiceArg("format", "file format (default json)", SPEC_FORMATS, default="json")],
    responses={
        200: content(
            "the spec",
            {
                kind: {"$ref": f"#/components/schemas/{STORED}ExperimentSpec"}
                for kind in ("application/json", "application/yaml")
            },
            [SPEC_FILE],
        )
    },
)
def experiment_spec(experiment_id: str, format: str) -> Response:
    """The stored spec: JSON for POST /experiments, YAML for dnnframe run.

    Either submits the same experiment again, but for a spec a run from the command line
    stored with ``dataset.path`` (a file on the server): the web refuses those."""
    spec = services().store.get_experiment(experiment_id).spec
    if format == "json":
        return jsonify(spec)
    response = Response(spec_yaml(spec), mimetype="application/yaml")
    response.headers.update(SPEC_FILE.pair(f'inline; filename="{experiment_id}.yaml"'))
    return response


@bp.get("/experiments/<experiment_id>/export")
@operation(
    "exportExperiment",
    path=EXPERIMENT,
    query=[ChoiceArg("format", "file format", EXPORT_FORMATS, default="csv")],
    responses={
        200: content(
            "the file",
            {"text/csv": {"type": "string"}, "application/x-ndjson": {"type": "string"}},
            [EXPORT_FILE],
        )
    },
)
def export(experiment_id: str, format: str) -> Response:
    """Export trials as CSV or JSON Lines.

    CSV has one row per trial, JSON Lines one full record per line."""
    import io

    store = services().store
    store.get_experiment(experiment_id)  # 404 for an unknown id
    buffer = io.StringIO()
    if format == "csv":
        store.export_csv(buffer, experiment_id)
        mimetype = "text/csv"
    else:
        store.export_jsonl(buffer, experiment_id)
        mimetype = "application/x-ndjson"
    response = Response(buffer.getvalue(), mimetype=mimetype)
    response.headers.update(EXPORT_FILE.pair(f'attachment; filename="{experiment_id}.{format}"'))
    return response


@bp.post("/experiments/<experiment_id>/cancel")
@require_token
@operation(
    "cancelExperiment",
    path=EXPERIMENT,
    responses={200: answer("cancelled", "Cancelled")},
    errors=(409,),
    conflict="the experiment has finished: nothing is left to cancel",
)
def cancel(experiment_id: str) -> Any:
    """Cancel: queued trials are cancelled, running ones stop after their epoch."""
    svc = services()
    n = cancel_experiment(experiment_id)
    body: Cancelled = {
        "id": experiment_id,
        "cancelled_trials": n,
        **experiment_json(svc.store.get_experiment(experiment_id)),
    }
    return jsonify(body)


# --------------------------------------------------------------------------- trials, workers, data


@bp.get("/trials/<trial_id>")
@operation("getTrial", path=TRIAL, responses={200: answer("trial", "Trial")})
def get_trial(trial_id: str) -> Any:
    """A trial: config, per-epoch metrics, timings, environment, error."""
    return jsonify(trial_json(services().store.get_trial(trial_id), full=True))


@bp.get("/workers")
@operation("listWorkers", responses={200: answer("workers", "Workers")})
def workers() -> Any:
    """Worker state (from the store; Celery's view when a broker is set).

    The workers the store has seen (host, pid, current trial, trials done, last seen, and
    whether each is alive: live ones first), plus Celery's own view when a broker is
    configured and answers quickly."""
    store = services().store
    # rows of dnnframe's worker records (dnnframe.store.records.WorkerRecord) with "alive"
    rows = cast("list[Worker]", workers_with_status(store))
    body: Workers = {"workers": rows, "celery": None, "wrong_store": []}
    broker = current_app.config.get("BROKER_URL")
    if broker:
        timeout = float(current_app.config["CELERY_INSPECT_TIMEOUT"])
        body["celery"] = celery_inspect(broker, timeout)
        body["wrong_store"] = wrong_store(broker, timeout, store, services().store_url())
    return jsonify(body)


@bp.post("/datasets")
@require_token
@operation(
    "uploadDataset",
    body={"multipart/form-data": {"schema": UPLOAD_FORM}},
    responses={201: answer("stored", "Upload")},
)
def upload_dataset() -> Any:
    """Upload a CSV dataset → an id for dataset.upload."""
    return upload_response()
