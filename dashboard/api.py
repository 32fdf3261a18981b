"""REST API, JSON under ``/api/v1`` (described by ``/api/v1/openapi.json``)."""

from __future__ import annotations

import time
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request, url_for

from dnnframe import __version__
from dnnframe.exceptions import DnnframeError, NotFoundError, brief
from dnnframe.spec import count_trials
from dnnframe.states import EXPERIMENT_STATUSES
from dnnframe.worker_status import workers_with_status

from .celery_view import celery_inspect, wrong_store
from .context import services
from .errors import APIError
from .events import MAX_STREAMED
from .events import stream as event_stream
from .forms import check_form
from .graphs import graphs_progress
from .importance import DEFAULT_EVALUATOR, EVALUATORS, cached_importances
from .openapi import openapi_document
from .params import VALUE_NAMES, value_direction
from .query_args import (
    EXPORT_FORMATS,
    MAX_PAGE,
    MAX_SEARCH_TEXT,
    SPEC_FORMATS,
    choice_arg,
    int_arg,
    text_arg,
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
    update_json,
)
from .uploads import upload_response
from .web_specs import check_web_spec, read_json_body

bp = Blueprint("api", __name__, url_prefix="/api/v1")

# --------------------------------------------------------------------------- meta


@bp.get("/health")
def health() -> Any:
    """Liveness plus whether the store answers."""
    started = time.perf_counter()
    try:
        services().store.list_experiments(limit=1)
    except DnnframeError as exc:
        raise APIError(503, "the result store is unavailable", details=str(exc)) from None
    return jsonify(
        {
            "status": "ok",
            "version": __version__,
            "store_ms": round((time.perf_counter() - started) * 1000, 2),
            "executor": "celery" if current_app.config.get("BROKER_URL") else "local",
        }
    )


@bp.get("/openapi.json")
def openapi() -> Any:
    """The OpenAPI 3.1 document of this API, as this server is configured (whether writes
    need the API token)."""
    return jsonify(openapi_document(token_required=bool(current_app.config.get("API_TOKEN"))))


# --------------------------------------------------------------------------- experiments


@bp.post("/validate")
@require_token(allow_session=True)
def validate() -> Any:
    """Check a spec (JSON) or the sweep form's fields (form-encoded) without storing anything.

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
    return jsonify(
        {
            "valid": True,
            "n_trials": count_trials(spec),
            "experiment_id": spec.experiment_id,
            "spec": spec.to_dict(),
        }
    )


@bp.post("/experiments")
@require_token(json_only=True)
def create_experiment() -> Any:
    """Store a sweep and queue its trials; the same spec again is the same experiment."""
    spec = check_web_spec(read_json_body(request))
    result, created = submit_spec(spec)
    body = {
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
    response.headers["Location"] = body["api_url"]
    return response


@bp.get("/experiments")
def list_experiments() -> Any:
    """Experiments, newest first (paginated)."""
    limit = int_arg("limit", 100, 1, MAX_PAGE)
    offset = int_arg("offset", 0, 0)
    query = text_arg("q", MAX_SEARCH_TEXT)
    status = choice_arg("status", EXPERIMENT_STATUSES, "")
    exps, more = find_experiments(services().store, query, status, limit, offset)
    return jsonify(
        {
            "experiments": [experiment_json(e) for e in exps],
            "limit": limit,
            "offset": offset,
            "more": more,
        }
    )


@bp.get("/experiments/<experiment_id>")
def get_experiment(experiment_id: str) -> Any:
    """One experiment: its spec, progress by state and best trial so far."""
    store = services().store
    exp = store.get_experiment(experiment_id)
    out = experiment_json(exp, store, best=True)
    return jsonify({**out, "graphs": graphs_progress(exp, out["counts"], store)})


@bp.delete("/experiments/<experiment_id>")
@require_token
def delete_experiment_route(experiment_id: str) -> Any:
    """Delete an experiment that is over (``confirm=<its id or name>``): its own trials go with it,
    trials it shares with other experiments stay theirs."""
    removed = delete_experiment(experiment_id, request.args.get("confirm", ""))
    return jsonify({"id": experiment_id, "deleted": True, "deleted_trials": removed})


@bp.get("/experiments/<experiment_id>/trials")
def list_trials(experiment_id: str) -> Any:
    """Trials of an experiment: filter by state, sort by a metric, paginate, or follow changes.

    ``since=<cursor>`` returns trials changed after that cursor in change order, with the
    next cursor — poll it for live updates.
    """
    store = services().store
    exp = store.get_experiment(experiment_id)
    q = trials_query()
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
    more = len(rows) > q.limit
    trials = rows[:q.limit]
    cursor = max([t.seq for t in trials], default=q.since or 0)
    exp_json = experiment_json(exp)
    return jsonify(
        {
            "experiment_id": experiment_id,
            "trials": [trial_json(t, history=q.history) for t in trials],
            "cursor": cursor,
            "limit": q.limit,
            "offset": q.offset,
            "more": more,
            "counts": exp_json["counts"],
            "n_trials": exp.n_trials,
            "status": exp_json["status"],
            "status_text": exp_json["status_text"],
            "reruns": exp_json["reruns"],
            "can_cancel": exp_json["can_cancel"],
            "graphs": graphs_progress(exp, exp_json["counts"], store),
        }
    )


@bp.get("/experiments/<experiment_id>/events")
def experiment_events(experiment_id: str) -> Response:
    """Server-sent events: ``trials`` with the trials that changed (and the experiment's
    counts) as they change; ``change`` when the reader should catch up with ``trials?since=``
    itself; ``end`` when the experiment is finished, and the stream closes. 204 for an
    experiment that is already finished (EventSource does not reconnect then). 503 when this
    process streams to as many pages as it may: poll instead."""
    svc = services()
    since = int_arg("since", 0, 0)  # a bad cursor is a 400 whatever the experiment's state
    if svc.store.get_experiment(experiment_id).is_finished:  # 404 for an unknown id
        return Response(status=204)
    return _event_response([experiment_id], [], since or 0)


@bp.get("/events")
def events() -> Response:
    """One event stream for several experiments (``experiment=<id>``, repeated), as the
    experiment stream gives each, every event naming its ``experiment_id``: all the tabs of a
    browser share one. An experiment that is finished or unknown gets ``end`` at once; 204
    when none is left to follow."""
    given = request.args.getlist("experiment")
    ids = list(dict.fromkeys(given))
    if not given or len(given) > MAX_STREAMED or not all(given):
        rule = f"must name between 1 and {MAX_STREAMED} experiments, none of them empty"
        raise APIError(400, f"query parameter experiment {rule}",
                       [{"path": "experiment", "message": rule}])
    store = services().store
    live, ended = [], []
    for experiment_id in ids:
        try:
            (ended if store.get_experiment(experiment_id).is_finished else live).append(
                experiment_id)
        except NotFoundError:  # gone: its tab stops listening, the others go on
            ended.append(experiment_id)
    if not live:
        return Response(status=204)
    return _event_response(live, ended, None)


def _event_response(live: list[str], ended: list[str], since: int | None) -> Response:
    svc = services()
    svc.feed.describe = update_json
    starts = svc.feed.open_stream(live)
    if starts is None:
        raise APIError(
            503,
            f"this server already streams to {svc.feed.max_streams} pages; poll "
            "trials?since= instead",
            headers={"Retry-After": "30"},
        )
    response = Response(
        event_stream(svc.feed, starts, since, ended), mimetype="text/event-stream"
    )
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"  # nginx: pass events on at once
    return response


@bp.get("/experiments/<experiment_id>/importance")
def importance(experiment_id: str) -> Any:
    """Each parameter the experiment's complete trials vary → its importance for a metric
    (Optuna's fANOVA by default), normalised to sum to 1."""
    store = services().store
    exp = store.get_experiment(experiment_id)
    objective, objective_mode = exp.objective
    metric = request.args.get("metric") or objective
    if metric not in VALUE_NAMES:
        # an unknown metric has no values, which would read as "nothing is important"
        raise APIError(
            400,
            f"metric must be one of {', '.join(VALUE_NAMES)}, but got {brief(metric)}",
            [{"path": "metric", "message": f"must be one of {', '.join(VALUE_NAMES)}"}],
        )
    default_mode = objective_mode if metric == objective else value_direction(metric)
    mode = choice_arg("mode", ("max", "min"), default_mode)
    evaluator = choice_arg("evaluator", tuple(EVALUATORS), DEFAULT_EVALUATOR)
    body = cached_importances(store, experiment_id, metric, mode, evaluator)
    return jsonify(
        {"experiment_id": experiment_id, "metric": metric, "mode": mode, "evaluator": evaluator,
         **body}
    )


@bp.get("/experiments/<experiment_id>/spec")
def experiment_spec(experiment_id: str) -> Response:
    """The experiment's spec as stored, in JSON (what POST /experiments takes) or YAML (what
    ``dnnframe run`` takes); either submits the same experiment again."""
    fmt = choice_arg("format", SPEC_FORMATS, "json")
    spec = services().store.get_experiment(experiment_id).spec
    if fmt == "json":
        return jsonify(spec)
    response = Response(spec_yaml(spec), mimetype="application/yaml")
    response.headers["Content-Disposition"] = f'inline; filename="{experiment_id}.yaml"'
    return response


@bp.get("/experiments/<experiment_id>/export")
def export(experiment_id: str) -> Response:
    """All trials as CSV (one row per trial) or JSON Lines (one full record per line)."""
    import io

    fmt = choice_arg("format", EXPORT_FORMATS, "csv")
    store = services().store
    store.get_experiment(experiment_id)  # 404 for an unknown id
    buffer = io.StringIO()
    if fmt == "csv":
        store.export_csv(buffer, experiment_id)
        mimetype = "text/csv"
    else:
        store.export_jsonl(buffer, experiment_id)
        mimetype = "application/x-ndjson"
    response = Response(buffer.getvalue(), mimetype=mimetype)
    response.headers["Content-Disposition"] = f'attachment; filename="{experiment_id}.{fmt}"'
    return response


@bp.post("/experiments/<experiment_id>/cancel")
@require_token
def cancel(experiment_id: str) -> Any:
    """Cancel: queued trials become CANCELLED, running ones stop after their current epoch."""
    svc = services()
    n = cancel_experiment(experiment_id)
    return jsonify(
        {
            "id": experiment_id,
            "cancelled_trials": n,
            **experiment_json(svc.store.get_experiment(experiment_id)),
        }
    )


# --------------------------------------------------------------------------- trials, workers, data


@bp.get("/trials/<trial_id>")
def get_trial(trial_id: str) -> Any:
    """One trial: config, per-epoch metrics, timings, environment, error."""
    return jsonify(trial_json(services().store.get_trial(trial_id), full=True))


@bp.get("/workers")
def workers() -> Any:
    """Workers seen by the store (host, pid, current trial, trials done, last seen, and
    whether each is alive: live ones first), plus Celery's own view when a broker is
    configured and answers quickly."""
    store = services().store
    rows = workers_with_status(store)
    body: dict[str, Any] = {"workers": rows, "celery": None, "wrong_store": []}
    broker = current_app.config.get("BROKER_URL")
    if broker:
        timeout = float(current_app.config["CELERY_INSPECT_TIMEOUT"])
        body["celery"] = celery_inspect(broker, timeout)
        body["wrong_store"] = wrong_store(broker, timeout, store, services().store_url())
    return jsonify(body)


@bp.post("/datasets")
@require_token
def upload_dataset() -> Any:
    """Upload a CSV (multipart field ``file``, optional ``label_column``) → an id for specs."""
    return upload_response()
