"""The REST API through Flask's test client: every endpoint, every error status, auth."""

from __future__ import annotations

import copy
import csv
import io
import json

import pytest
from dashboard_support import TINY_SPEC

from dnnframe.engine.graphkey import compile_key
from dnnframe.store.base import TrialState

IRIS_CSV = b"a,b,c,species\n1,2,3,x\n4,5,6,y\n7,8,9,x\n1.5,2.5,3.5,y\n"


def _submit(client, spec=None, **kw):
    return client.post("/api/v1/experiments", json=spec or TINY_SPEC, **kw)


def _finish(store, trial_id, acc, seconds=1.0, state=TrialState.COMPLETE):
    assert store.claim_trial(trial_id, "w1") is not None
    store.append_metrics(trial_id, {"epoch": 1, "val_accuracy": acc, "val_loss": 1 - acc})
    result = {
        "metrics": {"test_accuracy": acc, "test_loss": 1 - acc},
        "timings": {"train": seconds, "compile": 0.1, "total": seconds + 0.2},
        "epochs_run": 1,
    }
    assert store.finish_trial(trial_id, state, result=result, worker="w1")


# --------------------------------------------------------------------------- meta
def test_health(client):
    r = client.get("/api/v1/health")
    assert r.status_code == 200
    assert r.json["status"] == "ok" and r.json["executor"] == "local"


def test_health_503_when_store_unreachable(make_app):
    client = make_app(STORE_URL="nosuchscheme://x").test_client()
    r = client.get("/api/v1/health")
    assert r.status_code == 503
    assert "store" in r.json["message"] and "nosuchscheme" in r.json["message"]


def test_openapi_schemas_come_from_the_spec_models(client):
    doc = client.get("/api/v1/openapi.json").json
    assert doc["openapi"].startswith("3.1")
    schemas = doc["components"]["schemas"]
    # generated from the spec's pydantic models, refs rewritten into components
    assert {"ExperimentSpec", "ModelConfig", "TrainingConfig", "DatasetConfig"} <= set(schemas)
    assert "#/$defs/" not in json.dumps(doc)
    assert set(schemas["ModelConfig"]["properties"]) >= {"hidden_layers", "width", "activation"}
    # the layer-design options, with their choices
    model = schemas["ModelConfig"]["properties"]
    assert {"rezero", "scaled"} <= set(json.dumps(model["residual"]).replace('"', " ").split())
    assert "layer" in json.dumps(model["normalization"]) and "pre" in json.dumps(
        model["norm_position"]
    )
    assert {"grad_clip", "lr_schedule"} <= set(schemas["TrainingConfig"]["properties"])
    assert "cosine" in json.dumps(schemas["LrSchedule"])
    # that every route is in it: test_dashboard_openapi.py


def test_unknown_api_path_is_json_404(client):
    r = client.get("/api/v1/nothing-here")
    assert r.status_code == 404 and r.is_json and r.json["status"] == 404


def test_wrong_method_is_json_405(client):
    r = client.delete("/api/v1/experiments")
    assert r.status_code == 405 and r.is_json
    assert "POST" in r.headers["Allow"]


def test_unexpected_error_is_json_500_without_details(make_app):
    app = make_app()

    def boom():
        raise RuntimeError("secret internals")

    app.add_url_rule("/api/v1/_boom", view_func=boom)
    r = app.test_client().get("/api/v1/_boom")
    assert r.status_code == 500 and r.is_json
    assert "secret" not in r.get_data(as_text=True)


# --------------------------------------------------------------------------- validate
def test_validate_counts_trials(client):
    r = client.post("/api/v1/validate", json=TINY_SPEC)
    assert r.status_code == 200
    assert r.json["valid"] is True and r.json["n_trials"] == 4
    assert r.json["experiment_id"].startswith("exp-")


def test_validate_names_every_invalid_field(client):
    spec = copy.deepcopy(TINY_SPEC)
    spec["model"]["activation"] = "swish"
    spec["training"]["learning_rate"] = -1
    r = client.post("/api/v1/validate", json=spec)
    assert r.status_code == 400
    paths = {e["path"] for e in r.json["errors"]}
    assert {"model.activation", "training.learning_rate"} <= paths


def test_validate_refuses_server_paths(client):
    spec = {"dataset": {"name": "csv", "path": "/etc/passwd", "label_column": "root"}}
    r = client.post("/api/v1/validate", json=spec)
    assert r.status_code == 400
    assert [e["path"] for e in r.json["errors"]] == ["dataset.path"]


def test_validate_form_fields_map_errors_to_fields(client):
    form = {
        "dataset": "iris",
        "hidden_layers": "1-3",
        "width": "8, 16",
        "activation": ["relu", "tanh"],
        "optimizer": "adam",
        "learning_rate": "0.01",
        "epochs": "2",
        "seeds": "2",
    }
    r = client.post("/api/v1/validate", data=form)
    assert r.status_code == 200 and r.json["n_trials"] == 3 * 2 * 2 * 2
    r = client.post(
        "/api/v1/validate", data={**form, "hidden_layers": "one", "learning_rate": "-0.1"}
    )
    assert r.status_code == 400
    assert "hidden_layers" in r.json["fields"]
    r = client.post("/api/v1/validate", data={**form, "learning_rate": "-0.1", "width": "0"})
    assert r.status_code == 400
    assert set(r.json["fields"]) == {"learning_rate", "width"}


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"data": "not json", "content_type": "text/plain"}, "must be JSON"),
        ({"data": "{broken", "content_type": "application/json"}, "not valid JSON"),
        ({"json": [1, 2]}, "mapping"),
    ],
)
def test_non_spec_bodies_are_400(client, kwargs, needle):
    r = client.post("/api/v1/experiments", **kwargs)
    assert r.status_code == 400 and needle in r.json["message"]


def test_oversized_body_is_413(make_app):
    client = make_app(MAX_CONTENT_LENGTH=1000).test_client()
    spec = {**TINY_SPEC, "description": "x" * 5000}
    r = client.post("/api/v1/experiments", json=spec)
    assert r.status_code == 413 and "1000" in r.json["message"]


def test_sweep_over_server_cap_is_refused_before_storing(make_app, recorder):
    app = make_app(MAX_TRIALS=3)
    client = app.test_client()
    r = _submit(client)
    assert r.status_code == 400
    assert r.json["errors"][0]["path"] == "search" and "4 trials" in r.json["errors"][0]["message"]
    assert app.extensions["dnnframe"].store.list_experiments() == []
    assert recorder.submitted == []


# --------------------------------------------------------------------------- experiments
def test_submit_is_201_then_idempotent_200(client, store, recorder):
    r = _submit(client)
    assert r.status_code == 201, r.json
    exp_id = r.json["id"]
    assert r.json["n_trials"] == 4 and r.json["new_trials"] == 4
    assert r.headers["Location"].endswith(f"/api/v1/experiments/{exp_id}")
    assert len(recorder.submitted) == 1 and len(recorder.submitted[0]) == 4
    r2 = _submit(client)
    assert r2.status_code == 200 and r2.json["id"] == exp_id and r2.json["new_trials"] == 0
    assert len(store.list_trials(exp_id)) == 4
    assert len(store.list_experiments()) == 1


def test_a_submit_stores_and_hands_on_and_recovers_nothing(make_app, recorder):
    """A POST makes the few store round trips a submission needs and none of recovery's:
    a trial left RUNNING by a dead worker (of this experiment or another) is its owner's
    (dnnframe/recovery.py), not the request's."""
    import socket
    import subprocess
    import sys

    from dnnframe.testing.counting import CountingStore

    app = make_app()
    services = app.extensions["dnnframe"]
    real = services.store
    other = copy.deepcopy(TINY_SPEC)
    other["name"], other["model"]["width"] = "other", 5
    client = app.test_client()
    assert _submit(client, other).status_code == 201
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its pid now names no process
    orphan = real.list_trials()[0].id
    assert real.claim_trial(orphan, f"{socket.gethostname()}:{gone.pid}")
    services._store = counting = CountingStore(real)
    recovery = {"running_owners", "requeue_stale", "release_trial", "acquire_lease"}
    for expected, most in ((201, 6), (200, 8)):  # new, then the same spec again
        counting.calls.clear()
        assert _submit(client).status_code == expected
        assert not recovery & set(counting.calls), counting.calls
        assert counting.round_trips <= most, counting.calls
    assert real.get_trial(orphan).state is TrialState.RUNNING


def test_list_and_get_experiment_with_progress_and_best(client, store):
    exp_id = _submit(client).json["id"]
    r = client.get("/api/v1/experiments")
    assert r.status_code == 200 and [e["id"] for e in r.json["experiments"]] == [exp_id]
    body = client.get(f"/api/v1/experiments/{exp_id}").json
    assert body["counts"]["QUEUED"] == 4 and body["best_trial"] is None and body["progress"] == 0
    ids = [t.id for t in store.list_trials(exp_id)]
    _finish(store, ids[0], 0.7)
    _finish(store, ids[1], 0.9)
    body = client.get(f"/api/v1/experiments/{exp_id}").json
    assert body["best_trial"]["id"] == ids[1]
    assert body["best_trial"]["metrics"]["test_accuracy"] == 0.9
    assert body["counts"]["COMPLETE"] == 2 and body["progress"] == 0.5
    assert body["status"] == "RUNNING"


def test_the_listing_gives_each_experiment_its_own_counts(client, store):
    first = _submit(client).json["id"]
    spec = copy.deepcopy(TINY_SPEC)
    spec["name"] = "second"
    spec["model"]["width"] = 5  # trials of its own, none shared with the first
    second = _submit(client, spec).json["id"]
    _finish(store, store.list_trials(second)[0].id, 0.5)
    listed = {e["id"]: e for e in client.get("/api/v1/experiments").json["experiments"]}
    assert listed[first]["counts"]["QUEUED"] == 4 and listed[first]["finished"] == 0
    assert listed[second]["counts"]["COMPLETE"] == 1 and listed[second]["finished"] == 1
    assert sum(listed[second]["counts"].values()) == len(store.list_trials(second))


def test_a_starting_experiment_says_how_many_of_its_graphs_are_built(client, store):
    # relu/tanh × sgd/adam: four graphs; the two seeds of a configuration share its graph.
    spec = copy.deepcopy(TINY_SPEC)
    spec["model"] = {"hidden_layers": 1, "width": 4, "activation": {"grid": ["relu", "tanh"]}}
    spec["training"]["optimizer"] = {"grid": ["sgd", "adam"]}
    exp_id = _submit(client, spec).json["id"]
    trials_url = f"/api/v1/experiments/{exp_id}/trials"
    assert client.get(trials_url).json["graphs"] is None, "nothing runs yet"
    trials = store.list_trials(exp_id)
    assert len(trials) == 8

    first = trials[0]
    [twin] = [
        t for t in trials if compile_key(t.config) == compile_key(first.config) and t.id != first.id
    ]
    other = next(t for t in trials if compile_key(t.config) != compile_key(first.config))
    for t in (first, twin, other):
        assert store.claim_trial(t.id, "w1") is not None
    assert client.get(trials_url).json["graphs"] == {"ready": 0, "total": 4}
    assert client.get(f"/api/v1/experiments/{exp_id}").json["graphs"] == {"ready": 0, "total": 4}
    store.append_metrics(twin.id, {"epoch": 1, "val_accuracy": 0.5, "val_loss": 1.0})
    assert client.get(trials_url).json["graphs"] == {"ready": 1, "total": 4}
    # the page's notice is for the start: once a trial is over the progress bar moves
    store.append_metrics(first.id, {"epoch": 1, "val_accuracy": 0.5, "val_loss": 1.0})
    assert store.finish_trial(
        first.id, TrialState.COMPLETE, result={"metrics": {"test_accuracy": 0.5}}, worker="w1"
    )
    assert client.get(trials_url).json["graphs"] is None


def test_list_experiments_bad_pagination_is_400(client):
    assert client.get("/api/v1/experiments?limit=0").status_code == 400
    r = client.get("/api/v1/experiments?offset=abc")
    assert r.status_code == 400 and r.json["errors"][0]["path"] == "offset"


def test_trials_filter_sort_paginate_and_follow(client, store):
    exp_id = _submit(client).json["id"]
    ids = [t.id for t in store.list_trials(exp_id)]
    base = f"/api/v1/experiments/{exp_id}/trials"
    cursor = client.get(base).json["cursor"]
    _finish(store, ids[0], 0.5)
    _finish(store, ids[2], 0.8)
    _finish(store, ids[3], 0.6, state=TrialState.DIVERGED)
    done = client.get(base + "?state=COMPLETE&sort=test_accuracy&order=desc").json["trials"]
    assert [t["id"] for t in done] == [ids[2], ids[0]]
    asc = client.get(base + "?state=COMPLETE&sort=test_accuracy&order=asc").json["trials"]
    assert [t["id"] for t in asc] == [ids[0], ids[2]]
    page = client.get(base + "?limit=2&offset=1").json
    assert [t["id"] for t in page["trials"]] == ids[1:3] and page["more"] is True
    # the live cursor: only trials changed since, with per-epoch history on request
    changed = client.get(base + f"?since={cursor}&history=1").json
    assert {t["id"] for t in changed["trials"]} == {ids[0], ids[2], ids[3]}
    assert changed["trials"][0]["history"][0]["epoch"] == 1
    assert client.get(base + f"?since={changed['cursor']}").json["trials"] == []
    assert client.get(base + "?state=RUNNING,QUEUED").json["trials"][0]["id"] == ids[1]


@pytest.mark.parametrize(
    "query, field",
    [
        ("state=DONE", "state"),
        ("sort=1abc", "sort"),
        ("sort=config.x;drop", "sort"),
        ("order=sideways", "order"),
        ("limit=100000", "limit"),
        ("since=-1", "since"),
    ],
)
def test_trials_bad_query_is_400_naming_it(client, query, field):
    exp_id = _submit(client).json["id"]
    r = client.get(f"/api/v1/experiments/{exp_id}/trials?{query}")
    assert r.status_code == 400 and r.json["errors"][0]["path"] == field


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/experiments/exp-nope",
        "/api/v1/experiments/exp-nope/trials",
        "/api/v1/experiments/exp-nope/export",
        "/api/v1/trials/t-nope",
    ],
)
def test_unknown_ids_are_json_404(client, path):
    r = client.get(path)
    assert r.status_code == 404 and "nope" in r.json["message"]


def test_get_trial_has_config_history_timings_error(client, store):
    exp_id = _submit(client).json["id"]
    tid = store.list_trials(exp_id)[0].id
    _finish(store, tid, 0.75, seconds=2.5)
    t = client.get(f"/api/v1/trials/{tid}").json
    assert t["config"]["model"]["width"] == 4 and t["history"][0]["val_accuracy"] == 0.75
    assert t["timings"]["train"] == 2.5 and t["state"] == "COMPLETE" and t["error"] is None
    other = store.list_trials(exp_id)[1].id
    store.claim_trial(other, "w1")
    store.finish_trial(
        other, TrialState.FAILED, error="Traceback ...\nValueError: boom", worker="w1"
    )
    assert client.get(f"/api/v1/trials/{other}").json["error"].endswith("ValueError: boom")


def test_export_csv_and_jsonl(client, store):
    exp_id = _submit(client).json["id"]
    _finish(store, store.list_trials(exp_id)[0].id, 0.5)
    r = client.get(f"/api/v1/experiments/{exp_id}/export?format=csv")
    assert r.status_code == 200 and r.mimetype == "text/csv"
    rows = list(csv.DictReader(io.StringIO(r.get_data(as_text=True))))
    assert len(rows) == 4 and "config.model.hidden_layers" in rows[0]
    r = client.get(f"/api/v1/experiments/{exp_id}/export?format=jsonl")
    lines = [json.loads(line) for line in r.get_data(as_text=True).splitlines()]
    assert len(lines) == 4 and {line["state"] for line in lines} == {"QUEUED", "COMPLETE"}
    assert client.get(f"/api/v1/experiments/{exp_id}/export?format=xml").status_code == 400


def test_cancel(client, store, recorder):
    exp_id = _submit(client).json["id"]
    r = client.post(f"/api/v1/experiments/{exp_id}/cancel")
    assert r.status_code == 200 and r.json["cancelled_trials"] == 4
    assert r.json["status"] == "CANCELLED" and recorder.cancelled == [exp_id]
    assert {t.state for t in store.list_trials(exp_id)} == {TrialState.CANCELLED}
    assert client.post("/api/v1/experiments/exp-nope/cancel").status_code == 404


def test_workers_from_store(client, store):
    store.register_worker("host-a:1", host="host-a", pid=1, current_trial="t-1", trials_done=3)
    workers = client.get("/api/v1/workers").json
    assert workers["celery"] is None
    assert workers["workers"][0]["name"] == "host-a:1" and workers["workers"][0]["trials_done"] == 3


# --------------------------------------------------------------------------- datasets
def session_csrf(client) -> str:
    """The CSRF token of the client's dashboard session (what the pages embed)."""
    with client.session_transaction() as sess:
        return sess.setdefault("csrf", "test-session-csrf-token")


def _upload(client, data, label=None, **kw):
    form = {"file": (io.BytesIO(data), "data.csv")}
    if label is not None:
        form["label_column"] = label
    if "headers" not in kw:
        # without an API token a multipart write needs the session's CSRF token
        kw["headers"] = {"X-CSRF-Token": session_csrf(client)}
    return client.post("/api/v1/datasets", data=form, content_type="multipart/form-data", **kw)


def test_upload_csv_and_use_it_in_a_spec(client, data_dir, recorder):
    r = _upload(client, IRIS_CSV)
    assert r.status_code == 201, r.json
    assert r.json["header"] == ["a", "b", "c", "species"] and r.json["rows"] == 4
    assert r.json["label_candidates"] == ["species"]
    upload_id = r.json["id"]
    assert (data_dir / "uploads" / f"{upload_id}.csv").read_bytes() == IRIS_CSV
    assert (
        _upload(client, IRIS_CSV, label="species").json["id"] == upload_id
    )  # same content, same id
    spec = {
        "dataset": {
            "name": "csv",
            "upload": upload_id,
            "label_column": "species",
            "test_fraction": 0.25,
            "validation_fraction": 0.25,
        },
        "model": {"hidden_layers": 1, "width": 2},
        "training": {"max_epochs": 1},
    }
    r = client.post("/api/v1/experiments", json=spec)
    assert r.status_code == 201, r.json
    bad = copy.deepcopy(spec)
    bad["dataset"]["label_column"] = "colour"
    r = client.post("/api/v1/experiments", json=bad)
    assert r.status_code == 400 and r.json["errors"][0]["path"] == "dataset.label_column"
    bad["dataset"].update(upload="ab" * 16, label_column="species")
    r = client.post("/api/v1/experiments", json=bad)
    assert r.status_code == 400 and r.json["errors"][0]["path"] == "dataset.upload"


@pytest.mark.parametrize(
    "data, label, needle",
    [
        (b"", None, "empty"),
        (b"a,b\n", None, "at least one data row"),
        (b"a,b,c\n1,x,y\n", None, "'b', 'c'"),
        (b"a,b,c\n1,x,y\n", "c", "column 'b'"),
        (b"a,b\n1,2\n", "z", "label column 'z'"),
        (b"a,b\n1,2,3\n", None, "row 2"),
        (b"\xff\xfe\x00", None, "UTF-8"),
    ],
)
def test_upload_rejects_bad_csv(client, data, label, needle):
    r = _upload(client, data, label)
    assert r.status_code == 400 and needle in r.json["message"], r.json


def test_upload_without_file_and_oversized(make_app):
    client = make_app(MAX_CONTENT_LENGTH=2000).test_client()
    r = client.post(
        "/api/v1/datasets",
        data={},
        content_type="multipart/form-data",
        headers={"X-CSRF-Token": session_csrf(client)},
    )
    assert r.status_code == 400 and r.json["errors"][0]["path"] == "file"
    big = b"a,b\n" + b"1,2\n" * 1000
    assert _upload(client, big).status_code == 413


# --------------------------------------------------------------------------- auth
WRITES = [
    ("post", "/api/v1/experiments", {"json": TINY_SPEC}),
    ("post", "/api/v1/validate", {"json": TINY_SPEC}),
    ("post", "/api/v1/experiments/exp-x/cancel", {}),
    (
        "post",
        "/api/v1/datasets",
        {"data": {"file": (io.BytesIO(IRIS_CSV), "d.csv")}, "content_type": "multipart/form-data"},
    ),
]


@pytest.mark.parametrize("method, path, kwargs", WRITES, ids=[w[1] for w in WRITES])
@pytest.mark.parametrize("header", [None, "Bearer wrong", "Basic c2VjcmV0", "Bearer "])
def test_write_endpoints_need_the_token(make_app, method, path, kwargs, header):
    client = make_app(API_TOKEN="s3cret").test_client()
    headers = {"Authorization": header} if header else {}
    kwargs = (
        copy.deepcopy(kwargs)
        if "data" not in kwargs
        else {
            "data": {"file": (io.BytesIO(IRIS_CSV), "d.csv")},
            "content_type": "multipart/form-data",
        }
    )
    r = getattr(client, method)(path, headers=headers, **kwargs)
    assert r.status_code == 401 and r.is_json
    assert r.headers["WWW-Authenticate"].startswith("Bearer")


def test_right_token_writes_and_reads_need_none(make_app):
    client = make_app(API_TOKEN="s3cret").test_client()
    auth = {"Authorization": "Bearer s3cret"}
    r = client.post("/api/v1/experiments", json=TINY_SPEC, headers=auth)
    assert r.status_code == 201
    exp_id = r.json["id"]
    for path in [
        "/api/v1/experiments",
        f"/api/v1/experiments/{exp_id}",
        f"/api/v1/experiments/{exp_id}/trials",
        "/api/v1/workers",
        "/api/v1/health",
        "/api/v1/openapi.json",
    ]:
        assert client.get(path).status_code == 200, path
    assert client.post("/api/v1/validate", json=TINY_SPEC, headers=auth).status_code == 200
    assert client.post(f"/api/v1/experiments/{exp_id}/cancel", headers=auth).status_code == 200
    assert _upload(client, IRIS_CSV, headers=auth).status_code == 201


def test_config_from_environment_and_test_config_wins(monkeypatch, make_app):
    monkeypatch.setenv("DNNFRAME_API_TOKEN", "12345")  # looks like JSON; must stay a string
    monkeypatch.setenv("DNNFRAME_MAX_TRIALS", "7")
    monkeypatch.setenv("DNNFRAME_FLOWER_URL", "http://flower:5555")
    app = make_app()
    assert app.config["API_TOKEN"] == "12345" and app.config["MAX_TRIALS"] == 7
    assert app.config["FLOWER_URL"] == "http://flower:5555"
    assert make_app(API_TOKEN=None).config["API_TOKEN"] is None


def test_huge_generated_dataset_is_refused(client, recorder):
    spec = {
        "dataset": {
            "name": "classification",
            "params": {"n_samples": {"grid": [100, 1_000_000]}, "n_features": 10_000},
        }
    }
    r = client.post("/api/v1/experiments", json=spec)
    assert r.status_code == 400 and r.json["errors"][0]["path"] == "dataset.params"
    assert recorder.submitted == []


BROKER = "amqp://guest:guest@127.0.0.1:5672//"


@pytest.mark.broker
def test_with_a_broker_workers_include_celerys_view_and_submits_go_to_celery(make_app, monkeypatch):
    """Against the real RabbitMQ (start it with `rabbitmq-server -detached`)."""
    import socket

    try:
        socket.create_connection(("127.0.0.1", 5672), timeout=2).close()
    except OSError:
        pytest.skip(
            "RabbitMQ is not reachable at 127.0.0.1:5672: start it with rabbitmq-server -detached"
        )
    from dnnframe.executors import CeleryExecutor

    app = make_app(BROKER_URL=BROKER, EXECUTOR=None, CELERY_INSPECT_TIMEOUT=0.5)
    r = app.test_client().get("/api/v1/workers")
    assert r.status_code == 200 and r.json["celery"]["ok"] is True, r.json
    assert isinstance(r.json["celery"]["workers"], list)
    with app.app_context():
        assert isinstance(app.extensions["dnnframe"].executor, CeleryExecutor)
    assert app.test_client().get("/api/v1/health").json["executor"] == "celery"


def test_unreachable_broker_is_reported_not_a_crash(make_app):
    app = make_app(BROKER_URL="amqp://guest:guest@127.0.0.1:1//", CELERY_INSPECT_TIMEOUT=0.5)
    r = app.test_client().get("/api/v1/workers")
    assert r.status_code == 200 and r.json["celery"]["ok"] is False and r.json["celery"]["error"]


def test_a_spec_with_per_layer_widths_is_submitted(client, recorder):
    spec = {**TINY_SPEC, "model": {"hidden_layers": 2, "width": [8, 4]}}
    r = _submit(client, spec)
    assert r.status_code == 201, r.json
    assert len(recorder.submitted[-1]) == 2  # two seeds


# --------------------------------------------------------------------------- the document's word
def test_the_document_says_writes_need_a_token_only_when_one_is_set(make_app):
    for token, security in ((None, [{}, {"bearer": []}]), ("s3cret", [{"bearer": []}])):
        doc = make_app(API_TOKEN=token).test_client().get("/api/v1/openapi.json").json
        writes = [
            op for ops in doc["paths"].values() for m, op in ops.items() if m in ("post", "delete")
        ]
        assert writes and all(op["security"] == security for op in writes)


def test_created_experiments_link_to_the_operations_taking_their_id(client):
    doc = client.get("/api/v1/openapi.json").json
    links = doc["paths"]["/experiments"]["post"]["responses"]["201"]["links"]
    taking_id = {
        op["operationId"]
        for path, ops in doc["paths"].items()
        if "{experiment_id}" in path
        for op in ops.values()
    }
    assert {link["operationId"] for link in links.values()} == taking_id
    assert all(
        link["parameters"]["experiment_id"] == "$response.body#/id" for link in links.values()
    )


@pytest.mark.parametrize(
    "query, name",
    [
        ("q=" + "x" * 201, "q"),
        ("limit=+5", "limit"),
        ("offset=" + "9" * 30, "offset"),
        ("status=done", "status"),
    ],
)
def test_a_query_parameter_beyond_its_documented_limit_is_refused_by_name(client, query, name):
    r = client.get("/api/v1/experiments?" + query)
    assert r.status_code == 400, r.json
    assert [e["path"] for e in r.json["errors"]] == [name]


def test_query_parameters_within_their_documented_limits_are_taken(client):
    exp_id = _submit(client).json["id"]
    assert client.get("/api/v1/experiments?q=" + "x" * 200).status_code == 200
    assert client.get("/api/v1/experiments?status=Queued").status_code == 200
    base = f"/api/v1/experiments/{exp_id}/trials"
    r = client.get(base + "?state=queued,%20running&state=Complete&history=TRUE")
    assert r.status_code == 200 and len(r.json["trials"]) == 4
    r = client.get(base + "?history=maybe")
    assert r.status_code == 400 and r.json["errors"][0]["path"] == "history"
    r = client.get(base + "?sort=config.model.")
    assert r.status_code == 400 and r.json["errors"][0]["path"] == "sort"
