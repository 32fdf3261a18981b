"""REST API, JSON under ``/api/v1`` (described by ``/api/v1/openapi.json``)."""

from __future__ import annotations

import functools
import hmac
import time
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request, session, url_for

from dnnframe import __version__
from dnnframe.exceptions import DnnframeError, NotFoundError, SpecError
from dnnframe.spec import count_trials

from . import services
from .errors import APIError
from .forms import FormErrors, errors_by_field, form_to_spec
from .service import (
    check_web_spec,
    experiment_json,
    read_json_body,
    store_upload,
    trial_json,
)

bp = Blueprint("api", __name__, url_prefix="/api/v1")

STATES = ("QUEUED", "RUNNING", "COMPLETE", "FAILED", "DIVERGED", "PRUNED", "CANCELLED")
MAX_PAGE = 1000
# SQLite stores 64-bit signed integers; a larger offset or cursor cannot even be bound.
MAX_INT_ARG = 2**63 - 1


def require_token(view: Callable[..., Any] | None = None, *,
                  json_only: bool = False) -> Callable[..., Any]:
    """Write endpoints need ``Authorization: Bearer <DNNFRAME_API_TOKEN>`` when one is set.

    Without a configured token a browser could still be made to write from another site
    (cookies play no part, so SameSite does not help), so such requests must come from this
    site (Origin/Referer) and a body a cross-site form can send must carry the session's
    CSRF token; JSON bodies need no token (a cross-site page cannot send one without CORS).
    ``json_only`` endpoints refuse any other body themselves, with a clearer 400.
    """
    if view is None:
        return functools.partial(require_token, json_only=json_only)

    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        expected = current_app.config.get("API_TOKEN")
        if expected:
            header = request.headers.get("Authorization", "")
            scheme, _, given = header.partition(" ")
            challenge = {"WWW-Authenticate": 'Bearer realm="dnnframe"'}
            if scheme.lower() != "bearer" or not given:
                raise APIError(401, "this endpoint needs an API token: send "
                                    "'Authorization: Bearer <token>'", headers=challenge)
            if not hmac.compare_digest(given.strip().encode(), str(expected).encode()):
                raise APIError(401, "the API token is wrong", headers=challenge)
        else:
            check_same_site(check_body=not json_only)
        return view(*args, **kwargs)

    return wrapped


def _netloc(url: str) -> tuple[str, int] | None:
    """(host, port) of an absolute http(s) URL, or None when it is not one (e.g. Origin: null)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80)


def _same_host(url: str) -> bool:
    origin = _netloc(url)
    if origin is None:
        return False
    # request.host omits a default port; take the origin's scheme for it (a TLS proxy in
    # front makes request.scheme "http" while the browser's origin is https)
    scheme = url.split(":", 1)[0].lower()
    own = _netloc(f"{scheme}://{request.host}")
    return own == origin


def check_same_site(check_body: bool = True) -> None:
    """Refuse a write that a browser sent from another site (unauthenticated API only).

    Browsers send Origin on every cross-origin POST (Referer when an old one does not), so
    a header naming another host (or ``Origin: null``) is refused. Clients such as curl send
    neither and pass: ``curl -F file=@data.csv …/datasets`` works on a token-less server.
    A browser request from this site with a body other than JSON must also echo the
    session's CSRF token, as the dashboard's own forms do.
    """
    origin = request.headers.get("Origin")
    header, value = ("Origin", origin) if origin is not None else ("Referer", request.headers.get("Referer"))
    if value is not None and not _same_host(value):
        raise APIError(403, f"cross-site request refused: the {header} header ({value[:200]!r}) names "
                            f"another site than this server ({request.host!r})",
                       [{"path": header, "message": "must name this server"}])
    has_body = bool(request.content_length) or bool(request.mimetype)
    if not check_body or value is None or request.is_json or not has_body:
        return
    given = request.headers.get("X-CSRF-Token") or request.form.get("csrf_token") or ""
    expected = session.get("csrf") or ""
    if not expected or not hmac.compare_digest(given.encode(), expected.encode()):
        raise APIError(403, f"a {request.mimetype or 'non-JSON'} body needs the dashboard session's "
                            "CSRF token (field csrf_token or header X-CSRF-Token) while no API token "
                            "is configured; send JSON, or set DNNFRAME_API_TOKEN and send "
                            "'Authorization: Bearer <token>'",
                       [{"path": "csrf_token", "message": "missing or stale"}])


def _int_arg(name: str, default: int | None, low: int = 0, high: int | None = None) -> int | None:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise APIError(400, f"query parameter {name} must be an integer, but got {raw!r}",
                       [{"path": name, "message": "must be an integer"}]) from None
    high = MAX_INT_ARG if high is None else min(high, MAX_INT_ARG)
    if value < low or value > high:
        bound = f"between {low} and {high}"
        raise APIError(400, f"query parameter {name} must be {bound}, but got {value}",
                       [{"path": name, "message": f"must be {bound}"}])
    return value


def _experiment(experiment_id: str) -> Any:
    try:
        return services().store.get_experiment(experiment_id)
    except NotFoundError:
        raise APIError(404, f"no experiment with id {experiment_id!r}") from None


# --------------------------------------------------------------------------- meta


@bp.get("/health")
def health() -> Any:
    """Liveness plus whether the store answers."""
    started = time.perf_counter()
    try:
        services().store.list_experiments(limit=1)
    except DnnframeError as exc:
        raise APIError(503, f"the result store is unavailable: {exc}") from None
    return jsonify({"status": "ok", "version": __version__,
                    "store_ms": round((time.perf_counter() - started) * 1000, 2),
                    "executor": "celery" if current_app.config.get("BROKER_URL") else "local"})


@bp.get("/openapi.json")
def openapi() -> Any:
    """The OpenAPI 3.1 document of this API."""
    from .openapi import openapi_document

    return jsonify(openapi_document())


# --------------------------------------------------------------------------- experiments


@bp.post("/validate")
def validate() -> Any:
    """Check a spec (JSON) or the sweep form's fields (form-encoded) without storing anything."""
    form_mode = request.mimetype in ("application/x-www-form-urlencoded", "multipart/form-data")
    if form_mode:
        try:
            data = form_to_spec(request.form)
        except FormErrors as exc:
            errors = [{"path": k, "message": v} for k, v in exc.fields.items()]
            body = APIError(400, "the form has invalid fields", errors).to_dict()
            body["fields"] = exc.fields
            return jsonify(body), 400
    else:
        data = read_json_body(request)
    try:
        spec = check_web_spec(data)
    except SpecError as exc:
        if not form_mode:
            raise
        body = APIError(400, "the spec is invalid", exc.errors).to_dict()
        body["fields"] = errors_by_field(exc.errors)
        body["spec"] = data
        return jsonify(body), 400
    return jsonify({"valid": True, "n_trials": count_trials(spec), "experiment_id": spec.experiment_id,
                    "spec": spec.to_dict()})


@bp.post("/experiments")
@require_token(json_only=True)
def create_experiment() -> Any:
    """Store a sweep and queue its trials; the same spec again is the same experiment."""
    spec = check_web_spec(read_json_body(request))
    result, created = submit_spec(spec)
    body = {"id": result.experiment.id, "name": result.experiment.name,
            "n_trials": result.experiment.n_trials, "new_trials": len(result.new_trial_ids),
            "queued_trials": len(result.submitted_trial_ids), "created": created,
            "url": url_for("ui.experiment_page", experiment_id=result.experiment.id),
            "api_url": url_for("api.get_experiment", experiment_id=result.experiment.id)}
    response = jsonify(body)
    response.status_code = 201 if created else 200
    response.headers["Location"] = body["api_url"]
    return response


def submit_spec(spec: Any) -> tuple[Any, bool]:
    """Submit through the configured executor; True when the experiment is new."""
    from dnnframe.submit import submit_experiment

    svc = services()
    store = svc.store
    try:
        store.get_experiment(spec.experiment_id)
        created = False
    except NotFoundError:
        created = True
    try:
        executor = svc.executor
    except DnnframeError as exc:
        raise APIError(503, f"cannot reach the executor: {exc}") from None
    return submit_experiment(spec, store, executor), created


@bp.get("/experiments")
def list_experiments() -> Any:
    """Experiments, newest first (paginated)."""
    limit = _int_arg("limit", 100, 1, MAX_PAGE)
    offset = _int_arg("offset", 0, 0)
    store = services().store
    exps = store.list_experiments(limit=limit, offset=offset)
    return jsonify({"experiments": [experiment_json(e) for e in exps], "limit": limit, "offset": offset})


@bp.get("/experiments/<experiment_id>")
def get_experiment(experiment_id: str) -> Any:
    """One experiment: its spec, progress by state and best trial so far."""
    store = services().store
    return jsonify(experiment_json(_experiment(experiment_id), store, best=True))


@bp.get("/experiments/<experiment_id>/trials")
def list_trials(experiment_id: str) -> Any:
    """Trials of an experiment: filter by state, sort by a metric, paginate, or follow changes.

    ``since=<cursor>`` returns trials changed after that cursor in change order, with the
    next cursor — poll it for live updates.
    """
    store = services().store
    exp = _experiment(experiment_id)
    states = [s.strip().upper() for v in request.args.getlist("state") for s in v.split(",") if s.strip()]
    bad = [s for s in states if s not in STATES]
    if bad:
        raise APIError(400, f"unknown state {bad[0]!r}; known: {', '.join(STATES)}",
                       [{"path": "state", "message": f"must be one of {', '.join(STATES)}"}])
    sort = request.args.get("sort") or None
    if sort is not None:
        from dnnframe.store.base import resolve_sort_path

        try:
            resolve_sort_path(sort)
        except ValueError as exc:
            raise APIError(400, str(exc), [{"path": "sort", "message": str(exc)}]) from None
    order = (request.args.get("order") or ("desc" if sort else "asc")).lower()
    if order not in ("asc", "desc"):
        raise APIError(400, f"order must be asc or desc, but got {order!r}",
                       [{"path": "order", "message": "must be asc or desc"}])
    limit = _int_arg("limit", 100 if sort else MAX_PAGE, 1, MAX_PAGE)
    offset = _int_arg("offset", 0, 0)
    since = _int_arg("since", None, 0)
    history = request.args.get("history", "").lower() in ("1", "true", "yes")
    from dnnframe.store.base import TrialState

    trials = store.list_trials(
        experiment_id, state=[TrialState(s) for s in states] or None,
        sort_by=sort, descending=(order == "desc"), limit=limit, offset=offset, since=since)
    cursor = max([t.seq for t in trials], default=since or 0)
    exp_json = experiment_json(exp)
    return jsonify({"experiment_id": experiment_id, "trials": [trial_json(t, history=history) for t in trials],
                    "cursor": cursor, "limit": limit, "offset": offset,
                    "more": len(trials) == limit, "counts": exp_json["counts"],
                    "n_trials": exp.n_trials, "status": exp_json["status"]})


@bp.get("/experiments/<experiment_id>/export")
def export(experiment_id: str) -> Response:
    """All trials as CSV (one row per trial) or JSON Lines (one full record per line)."""
    import io

    fmt = (request.args.get("format") or "csv").lower()
    if fmt not in ("csv", "jsonl"):
        raise APIError(400, f"format must be csv or jsonl, but got {fmt!r}",
                       [{"path": "format", "message": "must be csv or jsonl"}])
    store = services().store
    _experiment(experiment_id)
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
    _experiment(experiment_id)
    n = svc.store.cancel_experiment(experiment_id)
    if svc.has_executor:
        svc.executor.cancel(experiment_id)
    return jsonify({"id": experiment_id, "cancelled_trials": n,
                    **experiment_json(svc.store.get_experiment(experiment_id))})


# --------------------------------------------------------------------------- trials, workers, data


@bp.get("/trials/<trial_id>")
def get_trial(trial_id: str) -> Any:
    """One trial: config, per-epoch metrics, timings, environment, error."""
    try:
        trial = services().store.get_trial(trial_id)
    except NotFoundError:
        raise APIError(404, f"no trial with id {trial_id!r}") from None
    return jsonify(trial_json(trial, full=True))


@bp.get("/workers")
def workers() -> Any:
    """Workers seen by the store (host, pid, current trial, trials done, last seen), plus
    Celery's own view when a broker is configured and answers quickly."""
    store = services().store
    rows = [_plain(w) for w in store.list_workers()]
    body: dict[str, Any] = {"workers": rows, "celery": None}
    broker = current_app.config.get("BROKER_URL")
    if broker:
        body["celery"] = _celery_inspect(broker, float(current_app.config["CELERY_INSPECT_TIMEOUT"]))
    return jsonify(body)


def _plain(value: Any) -> Any:
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


@functools.lru_cache(maxsize=4)
def _celery_app(broker: str) -> Any:
    # one client app per broker, so its connection pool is reused across requests
    from celery import Celery

    app = Celery("dnnframe-dashboard", broker=broker)
    # a page must not hang on a broker that is down: fail fast instead of retrying
    app.conf.broker_connection_timeout = 1.0
    app.conf.broker_connection_max_retries = 1
    app.conf.broker_transport_options = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2}
    return app


def _celery_inspect(broker: str, timeout: float) -> dict[str, Any]:
    try:
        inspect = _celery_app(broker).control.inspect(timeout=timeout)
        active = inspect.active() or {}
        return {"ok": True, "workers": sorted(active),
                "active": {name: [t.get("args") for t in tasks] for name, tasks in active.items()}}
    except Exception as exc:  # noqa: BLE001 - a broker hiccup must not break the page
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


@bp.post("/datasets")
@require_token
def upload_dataset() -> Any:
    """Upload a CSV (multipart field ``file``, optional ``label_column``) → an id for specs."""
    return _upload_response()


def _upload_response() -> Any:
    file = request.files.get("file")
    if file is None:
        raise APIError(400, "send the CSV as multipart/form-data field 'file'",
                       [{"path": "file", "message": "missing"}])
    data = file.read()
    info = store_upload(data, file.filename, (request.form.get("label_column") or "").strip() or None)
    return jsonify(info), 201
