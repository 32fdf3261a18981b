"""What the API and the pages share: spec checks for web submissions, CSV uploads, JSON views
of store records. Views stay thin; everything here raises :class:`APIError` or dnnframe errors.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import os
import tempfile
from typing import Any

from flask import current_app, jsonify, request

from dnnframe.exceptions import DatasetError, DnnframeError, NotFoundError, SpecError
from dnnframe.spec import ExperimentSpec, count_trials, parse_spec
from dnnframe.store import TrialState
from dnnframe.store.base import SORT_ALIASES, SORT_COLUMNS
from dnnframe.submit import submit_experiment

from . import services
from .errors import APIError

# --------------------------------------------------------------------------- specs


def check_web_spec(data: Any) -> ExperimentSpec:
    """Validate a spec that arrived over HTTP: the spec rules plus the server's own limits.

    Web specs may not name server files (``dataset.path``): only built-in datasets or
    ``upload`` ids from ``POST /api/v1/datasets``. Every problem is reported at once.
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
        spec = parse_spec(data, source="request body")
    except SpecError as exc:
        errors.extend(exc.errors)
    if errors:
        raise SpecError(errors, "request body")
    assert spec is not None
    cap = int(current_app.config["MAX_TRIALS"])
    n = count_trials(spec)
    if n > cap:
        raise SpecError(
            [
                {
                    "path": "search",
                    "message": (
                        f"the sweep has {n} trials, more than this server accepts ({cap}); "
                        "narrow the search spaces or use fewer seeds"
                    ),
                }
            ],
            "request body",
        )
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


# Defaults of the generators' size parameters (dnnframe.datasets), used when a spec omits them.
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
    from dnnframe.datasets import parse_csv, upload_path

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
                        f"no uploaded dataset with id {ds['upload']!r}; "
                        "upload it with POST /api/v1/datasets"
                    ),
                }
            ],
            "request body",
        )
    label = ds.get("label_column")
    if isinstance(label, str):
        loss = spec.model.get("loss")
        task = "regression" if loss == "squared_error" else "classification"
        try:
            parse_csv(path.read_bytes(), label, task)
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


# --------------------------------------------------------------------------- submitting


def submit_spec(spec: Any) -> tuple[Any, bool]:
    """Submit through the configured executor; True when the experiment is new."""
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


# --------------------------------------------------------------------------- uploads


def upload_response() -> Any:
    """Answer a CSV upload (multipart field ``file``, optional ``label_column``) with its id."""
    file = request.files.get("file")
    if file is None:
        raise APIError(
            400,
            "send the CSV as multipart/form-data field 'file'",
            [{"path": "file", "message": "missing"}],
        )
    info = store_upload(
        file.read(), file.filename, (request.form.get("label_column") or "").strip() or None
    )
    return jsonify(info), 201


def store_upload(data: bytes, filename: str | None, label_column: str | None) -> dict[str, Any]:
    """Validate CSV bytes and keep them under ``$DNNFRAME_DATA_DIR/uploads/<id>.csv``.

    The id is a hash of the content, so uploading the same file twice gives the same id.
    Without ``label_column`` at most one column may be non-numeric (it must be the label).
    """
    from dnnframe.datasets import parse_csv, upload_path

    cap = int(
        current_app.config.get("MAX_UPLOAD_BYTES") or current_app.config["MAX_CONTENT_LENGTH"]
    )
    if len(data) > cap:
        raise APIError(413, f"the CSV is {len(data)} bytes, more than the limit of {cap} bytes")
    if not data.strip():
        raise APIError(400, "the CSV file is empty", [{"path": "file", "message": "empty file"}])
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise APIError(
            400, "the CSV must be UTF-8 text", [{"path": "file", "message": "not UTF-8 text"}]
        ) from None
    try:
        rows = [r for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
    except csv.Error as exc:
        raise _csv_error(exc) from None
    if len(rows) < 2:
        raise APIError(
            400,
            "the CSV needs a header row and at least one data row",
            [{"path": "file", "message": "needs a header row and at least one data row"}],
        )
    header = [h.strip() for h in rows[0]]
    if label_column:
        try:
            parse_csv(data, label_column, "classification")
        except csv.Error as exc:
            raise _csv_error(exc) from None
        except DatasetError as exc:
            field = "label_column" if "label column" in str(exc) else "file"
            raise APIError(400, str(exc), [{"path": field, "message": str(exc)}]) from None
        candidates = [label_column]
    else:
        candidates = _label_candidates(rows, header)
    upload_id = hashlib.sha256(data).hexdigest()[:32]
    path = upload_path(upload_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        # write-then-rename: a worker never reads a half-written upload
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".part")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    return {
        "id": upload_id,
        "filename": filename,
        "header": header,
        "rows": len(rows) - 1,
        "label_candidates": candidates,
        "bytes": len(data),
    }


def _csv_error(exc: csv.Error) -> APIError:
    """A 400 for what Python's csv module refuses (a cell over its field size limit, ...)."""
    text = str(exc)
    if "field larger than field limit" in text:
        text = f"a cell is longer than the limit of {csv.field_size_limit()} characters ({text})"
    msg = "the CSV is malformed: " + text
    return APIError(400, msg, [{"path": "file", "message": text}])


def _label_candidates(rows: list[list[str]], header: list[str]) -> list[str]:
    if len(header) < 2:
        raise APIError(
            400,
            "the CSV needs at least two columns (features and a label)",
            [{"path": "file", "message": "needs at least two columns"}],
        )
    if len(set(header)) != len(header):
        raise APIError(
            400,
            f"the CSV header has duplicate column names: {header}",
            [{"path": "file", "message": "duplicate column names"}],
        )
    non_numeric: list[str] = []
    for r, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            msg = f"row {r} has {len(row)} fields, the header has {len(header)}"
            raise APIError(400, "the CSV is malformed: " + msg, [{"path": "file", "message": msg}])
        for name, cell in zip(header, row):
            if name in non_numeric:
                continue
            try:
                ok = math.isfinite(float(cell))
            except ValueError:
                ok = False
            if not ok:
                non_numeric.append(name)
    if len(non_numeric) > 1:
        msg = (
            f"feature columns must be numeric, but {', '.join(map(repr, non_numeric))} are not "
            "(only the label column may hold text)"
        )
        raise APIError(400, msg, [{"path": "file", "message": msg}])
    return non_numeric or list(header)


# --------------------------------------------------------------------------- JSON views

FINAL_METRICS = (
    "test_accuracy",
    "test_loss",
    "val_accuracy",
    "val_loss",
    "train_accuracy",
    "train_loss",
)
TRIAL_STATES = tuple(state.value for state in TrialState)
# short sort keys: store columns, timing aliases and the final metrics every trial records
SORT_KEYS = frozenset((*SORT_COLUMNS, *SORT_ALIASES, *FINAL_METRICS))


def _state(value: Any) -> str:
    return getattr(value, "value", value)


def experiment_json(exp: Any, store: Any | None = None, best: bool = False) -> dict[str, Any]:
    """An experiment with its progress (trials by state) and, on request, its best trial."""
    counts = {(_state(k)): int(v) for k, v in (exp.counts or {}).items()}
    finished = sum(v for k, v in counts.items() if k not in ("QUEUED", "RUNNING"))
    out: dict[str, Any] = {
        "id": exp.id,
        "name": exp.name,
        "n_trials": exp.n_trials,
        "created_at": exp.created_at,
        "cancel_requested": bool(exp.cancel_requested),
        "counts": counts,
        "finished": finished,
        "progress": (finished / exp.n_trials) if exp.n_trials else 1.0,
        "status": exp.status,
        "status_text": status_text(exp.status, counts, exp.n_trials),
    }
    if best and store is not None:
        out["spec"] = exp.spec
        objective = (exp.spec.get("search") or {}).get("objective") or {}
        metric = objective.get("metric", "test_accuracy")
        mode = objective.get("mode", "max")
        try:
            trial = store.best_trial(exp.id, metric, mode)
        except Exception:  # noqa: BLE001 - a missing metric means "no best yet", not an error
            current_app.logger.debug("best_trial failed", exc_info=True)
            trial = None
        out["objective"] = {"metric": metric, "mode": mode}
        out["best_trial"] = trial_json(trial) if trial is not None else None
    return out


def status_text(status: str, counts: dict[str, int], n_trials: int) -> str:
    """The experiment's status in words, saying how many trials failed once it is over."""
    failed = counts.get("FAILED", 0)
    if status == "FAILED":
        return f"failed: all {failed} trials failed" if failed != 1 else "failed: the trial failed"
    if status == "COMPLETE_WITH_FAILURES":
        return f"finished, {failed} of {n_trials} failed"
    return {"COMPLETE": "finished"}.get(status, status.lower())


def trial_json(trial: Any, history: bool = False, full: bool = False) -> dict[str, Any]:
    """A trial as JSON: flat hyperparameters and final metrics for tables and charts."""
    cfg = trial.config or {}
    model, training = cfg.get("model", {}), cfg.get("training", {})
    result = trial.result or {}
    final = result.get("metrics") or {}
    timings = result.get("timings") or {}
    last = trial.metrics[-1] if trial.metrics else {}
    out: dict[str, Any] = {
        "id": trial.id,
        "state": _state(trial.state),
        "seq": trial.seq,
        "params": {
            "hidden_layers": model.get("hidden_layers"),
            "width": model.get("width"),
            "activation": model.get("activation"),
            "optimizer": training.get("optimizer"),
            "learning_rate": training.get("learning_rate"),
            "batch_size": training.get("batch_size"),
            "max_epochs": training.get("max_epochs"),
            "seed": cfg.get("seed"),
            "dataset": (cfg.get("dataset") or {}).get("name"),
        },
        "metrics": {k: final.get(k) for k in FINAL_METRICS if k in final},
        "epoch": last.get("epoch") if last else None,
        "epochs_run": result.get("epochs_run", len(trial.metrics)),
        "train_seconds": timings.get("train"),
        "compile_seconds": timings.get("compile"),
        "total_seconds": timings.get("total"),
        "n_params": result.get("n_params"),
        "worker": trial.worker,
        "attempts": trial.attempts,
        "started_at": trial.started_at,
        "finished_at": trial.finished_at,
    }
    if not out["metrics"] and last:
        # a running trial shows its latest epoch so the table moves before it finishes
        out["metrics"] = {
            k: last[k]
            for k in ("val_accuracy", "val_loss", "train_accuracy", "train_loss")
            if k in last
        }
    if history or full:
        out["history"] = list(trial.metrics)
    if full:
        out.update(
            {
                "config": cfg,
                "result": trial.result,
                "error": trial.error,
                "experiment_ids": list(trial.experiment_ids),
                "created_at": trial.created_at,
                "heartbeat_at": trial.heartbeat_at,
                "timings": timings,
                "environment": result.get("environment"),
            }
        )
    if trial.error and not full:
        out["error"] = trial.error.strip().splitlines()[-1][:300]
    return out
