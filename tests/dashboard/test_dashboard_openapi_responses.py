"""Real answers of the API, through the test client, against the OpenAPI document it serves.

A scenario calls every operation of the document (a sweep submitted, trained in part,
followed, cancelled, deleted; every error status an operation documents), and each answer
must be one the document describes: its status is listed for the operation, its JSON body
validates against the documented schema (``jsonschema``, with the document's components),
it carries every header the document says it always carries, with a value the header's
schema allows, and no header the document does not declare (but for HTTP's own, below).
Every header the document declares is seen on some answer.

The schemathesis run (test_dashboard_openapi_fuzz.py) checks generated requests, mostly
refused ones; this checks the answers a client gets when things work.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from dashboard_support import TINY_SPEC
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from dashboard.openapi import SERVER, openapi_document
from dashboard.operations import operation_of
from dnnframe.store.base import TrialState

# HTTP's own headers, which OpenAPI leaves to the protocol: Content-Type is the response's
# content (the document ignores a header of that name), the rest frame and negotiate the
# body (Flask-Compress varies on Accept-Encoding, Flask's session on Cookie).
TRANSPORT = {"content-type", "content-length", "content-encoding", "transfer-encoding", "vary"}
TOKEN = "responses-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
OTHER = {
    **TINY_SPEC,
    "name": "other",
    "model": {"hidden_layers": 3, "width": 4},
    "search": {"seeds": 1},
}
CSV = b"a,b,species\n1,2,x\n4,5,y\n7,8,x\n1.5,2.5,y\n"


class Conformance:
    """Checks answers against the document and records what they covered."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.doc = openapi_document(app, token_required=True)
        self.urls = app.url_map.bind("localhost")
        self.exercised: set[tuple[str, str]] = set()  # (operationId, status)
        self.headers_seen: set[str] = set()

    def _operation(self, method: str, path: str) -> tuple[str, dict[str, Any]]:
        endpoint, _ = self.urls.match(path, method=method)
        op = operation_of(self.app.view_functions[endpoint])
        assert op is not None, f"{method} {path} is no operation of the document"
        for ops in self.doc["paths"].values():
            for item in ops.values():
                if item["operationId"] == op.operation_id:
                    return op.operation_id, item
        raise AssertionError(f"{op.operation_id} is not in the document")

    def _schema(self, schema: dict[str, Any]) -> Draft202012Validator:
        # the document's components go along, so its "#/components/..." references resolve
        return Draft202012Validator({"components": self.doc["components"], "allOf": [schema]})

    def _header(self, declared: dict[str, Any]) -> dict[str, Any]:
        ref = declared.get("$ref")
        return self.doc["components"]["headers"][ref.rsplit("/", 1)[-1]] if ref else declared

    def check(self, response: Any, method: str, path: str) -> None:
        op_id, item = self._operation(method, path)
        status = str(response.status_code)
        where = f"{method} {path} → {status} ({op_id})"
        assert status in item["responses"], f"{where}: status not documented"
        self.exercised.add((op_id, status))
        documented = item["responses"][status]
        declared = {
            name.lower(): self._header(h) for name, h in documented.get("headers", {}).items()
        }
        sent = {name.lower(): value for name, value in response.headers.items()}
        undeclared = set(sent) - set(declared) - TRANSPORT
        assert not undeclared, f"{where}: undeclared headers {sorted(undeclared)}"
        for name, header in declared.items():
            if name not in sent:
                assert not header["required"], f"{where}: no {name} header"
                continue
            self.headers_seen.add(name)
            error = best_match(self._schema(header["schema"]).iter_errors(sent[name]))
            assert error is None, f"{where}: {name}: {sent[name]!r}: {error.message}"
        media = response.mimetype
        if not documented.get("content"):
            assert not response.get_data(), f"{where}: a body where none is documented"
            return
        assert media in documented["content"], f"{where}: {media} is not documented"
        if media == "application/json":
            body = response.get_json()
        elif media == "application/yaml":
            body = yaml.safe_load(response.get_data(as_text=True))
        else:
            return  # text: its schema says only that it is a string
        schema = documented["content"][media]["schema"]
        error = best_match(self._schema(schema).iter_errors(body))
        assert error is None, (
            f"{where}: the body does not fit its schema at "
            f"/{'/'.join(map(str, error.absolute_path))}: {error.message}"
        )

    def declared_headers(self) -> set[str]:
        return {
            name.lower()
            for ops in self.doc["paths"].values()
            for item in ops.values()
            for response in item["responses"].values()
            for name in response.get("headers", {})
        }


class Client:
    """A test client whose every answer is checked against the document."""

    def __init__(self, app: Any, conformance: Conformance) -> None:
        self.client = app.test_client()
        self.conformance = conformance

    def __call__(self, method: str, path: str, expect: int, **kwargs: Any) -> Any:
        response = self.client.open(SERVER + path, method=method, **kwargs)
        assert response.status_code == expect, (method, path, response.get_data(as_text=True))
        self.conformance.check(response, method, SERVER + path.split("?")[0])
        return response


@pytest.fixture
def apps(make_app) -> Iterator[tuple[Any, Conformance]]:
    # one document for every app: the routes are the same; a token makes writes need it
    app = make_app(API_TOKEN=TOKEN, TOKEN_GUESS_LIMIT="2 per minute")
    yield app, Conformance(app)


def _train_part_of(store, exp_id: str) -> str:
    """Two trials complete, one failed, one running with an epoch: the one running."""
    ids = [t.id for t in store.list_trials(exp_id)]
    for n, tid in enumerate(ids):
        assert store.claim_trial(tid, "w1") is not None
        store.append_metrics(tid, {"epoch": 1, "val_accuracy": 0.5 + n / 10, "val_loss": 0.5})
        if n < 2:
            result = {
                "metrics": {"test_accuracy": 0.8 + n / 10, "test_loss": 0.2},
                "timings": {"train": 1.0, "compile": 0.1, "total": 1.2},
                "epochs_run": 1,
            }
            assert store.finish_trial(tid, TrialState.COMPLETE, result=result, worker="w1")
        elif n == 2:
            assert store.finish_trial(tid, TrialState.FAILED, error="Traceback\nboom", worker="w1")
    store.register_worker("w1", host="elsewhere", pid=123, current_trial=ids[3])
    return ids[3]


def test_every_answer_is_one_the_document_describes(apps, make_app):
    app, conformance = apps
    call = Client(app, conformance)
    store = app.extensions["dnnframe"].store

    call("GET", "/health", 200)
    call("GET", "/openapi.json", 200)
    call("POST", "/validate", 200, json=TINY_SPEC, headers=AUTH)
    call(
        "POST",
        "/validate",
        400,
        data={"dataset": "iris", "width": "0", "epochs": "two"},
        headers=AUTH,
    )
    call("POST", "/validate", 400, json={**TINY_SPEC, "model": {"width": "wide"}}, headers=AUTH)
    exp_id = call("POST", "/experiments", 201, json=TINY_SPEC, headers=AUTH).json["id"]
    call("POST", "/experiments", 200, json=TINY_SPEC, headers=AUTH)
    other = call("POST", "/experiments", 201, json=OTHER, headers=AUTH).json["id"]
    running = _train_part_of(store, exp_id)

    call("GET", "/experiments", 200)
    call("GET", "/experiments?q=tiny&status=running&limit=1", 200)
    call("GET", "/experiments?limit=0", 400)
    call("GET", f"/experiments/{exp_id}", 200)
    call("GET", f"/experiments/{other}", 200)
    call("GET", "/experiments/exp-nope", 404)
    call("GET", f"/experiments/{exp_id}/trials?history=1&sort=test_accuracy", 200)
    call("GET", f"/experiments/{exp_id}/trials?since=0&limit=2", 200)
    call("GET", f"/experiments/{exp_id}/trials?state=bogus", 400)
    for trial in store.list_trials(exp_id):
        call("GET", f"/trials/{trial.id}", 200)
    call("GET", "/trials/t-nope", 404)
    call("GET", f"/experiments/{exp_id}/importance", 200)
    call("GET", f"/experiments/{exp_id}/importance?evaluator=fanova&metric=train_seconds", 200)
    call("GET", f"/experiments/{other}/importance", 200)  # nothing to rank yet: a note
    call("GET", f"/experiments/{exp_id}/importance?metric=nope", 400)
    call("GET", f"/experiments/{exp_id}/spec", 200)
    call("GET", f"/experiments/{exp_id}/spec?format=yaml", 200)
    # a spec stored by a run from the command line may name a file on the server
    from_cli = {
        **TINY_SPEC,
        "name": "from-cli",
        "dataset": {"name": "csv", "path": "/data/x.csv", "label_column": "y"},
    }
    store.create_experiment("exp-cli", "from-cli", from_cli, 0)
    for fmt in ("json", "yaml"):
        call("GET", f"/experiments/exp-cli/spec?format={fmt}", 200)
    call("GET", f"/experiments/{exp_id}/export", 200)
    call("GET", f"/experiments/{exp_id}/export?format=jsonl", 200)
    call("GET", "/workers", 200)

    # notes: read, saved, refused by field, by version and for unknown ids
    for note in (f"/experiments/{exp_id}/note", f"/trials/{running}/note"):
        call("GET", note, 200)
        call("PUT", note, 200, json={"text": "**wider** helps", "version": 0}, headers=AUTH)
        call("PUT", note, 200, json={"text": "replaced"}, headers=AUTH)
        call("PUT", note, 409, json={"text": "stale", "version": 1}, headers=AUTH)
        call("PUT", note, 400, json={"text": "x" * 10_001}, headers=AUTH)
        call("PUT", note, 401, json={"text": "no token"})
    for note in ("/experiments/exp-nope/note", "/trials/t-nope/note"):
        call("GET", note, 404)
        call("PUT", note, 404, json={"text": "x"}, headers=AUTH)
    call(
        "POST",
        "/datasets",
        201,
        headers=AUTH,
        data={"file": (io.BytesIO(CSV), "data.csv"), "label_column": "species"},
    )
    call("POST", "/datasets", 400, headers=AUTH, data={"file": (io.BytesIO(b"x"), "d.csv")})

    # live updates: a stream while a trial runs, none once the experiment is over
    stream = call("GET", f"/experiments/{exp_id}/events?since=0", 200, buffered=False)
    stream.close()
    stream = call("GET", f"/events?experiment={exp_id}&experiment=exp-gone", 200, buffered=False)
    stream.close()
    call("GET", f"/experiments/{exp_id}/events?since=x", 400)
    call("GET", "/events", 400)
    call("DELETE", f"/experiments/{exp_id}?confirm={exp_id}", 409, headers=AUTH)
    assert store.finish_trial(
        running,
        TrialState.COMPLETE,
        worker="w1",
        result={"metrics": {"test_accuracy": 0.7}, "epochs_run": 1},
    )
    call("GET", f"/experiments/{exp_id}/events", 204)
    call("GET", f"/events?experiment={exp_id}", 204)
    call("POST", f"/experiments/{exp_id}/cancel", 409, headers=AUTH)
    call("POST", f"/experiments/{other}/cancel", 200, headers=AUTH)
    call("DELETE", f"/experiments/{exp_id}?confirm=no", 400, headers=AUTH)
    call("DELETE", f"/experiments/{exp_id}?confirm={exp_id}", 200, headers=AUTH)

    # the guard: no token, a wrong one, and too many wrong ones (the limit is 2 a minute)
    call("POST", "/experiments", 401, json=TINY_SPEC)
    for _ in range(2):
        call("POST", f"/experiments/{other}/cancel", 401, headers={"Authorization": "Bearer x"})
    call("DELETE", f"/experiments/{other}?confirm={other}", 429, headers=AUTH)

    # servers configured otherwise: no token (a cross-site write), a small body limit, a
    # store that is not there, no event streams to give
    open_app = make_app()
    Client(open_app, conformance)(
        "POST", f"/experiments/{other}/cancel", 403, headers={"Origin": "http://elsewhere.example"}
    )
    Client(make_app(MAX_CONTENT_LENGTH=100), conformance)(
        "POST", "/validate", 413, json={**TINY_SPEC, "description": "x" * 200}
    )
    Client(make_app(STORE_URL="nosuchscheme://x"), conformance)("GET", "/health", 503)
    second = Client(open_app, conformance)(
        "POST", "/experiments", 201, json=OTHER | {"name": "third"}
    ).json["id"]
    Client(make_app(EVENT_STREAMS=0), conformance)("GET", f"/experiments/{second}/events", 503)

    documented = {
        item["operationId"] for ops in conformance.doc["paths"].values() for item in ops.values()
    }
    assert documented == {op for op, _ in conformance.exercised}, (
        "operations this scenario does not call: "
        f"{sorted(documented - {op for op, _ in conformance.exercised})}"
    )
    assert conformance.declared_headers() <= conformance.headers_seen, (
        f"declared, never sent: {sorted(conformance.declared_headers() - conformance.headers_seen)}"
    )


def test_a_method_a_path_does_not_document_is_405_with_the_methods_it_does(client, app):
    """405 answers no operation (the document lists what each path takes); its Allow
    header names the documented methods, and the implied HEAD and OPTIONS."""
    doc = openapi_document(app)
    for path, ops in doc["paths"].items():
        url = SERVER + path.replace("{", "").replace("}", "")
        methods = {m.upper() for m in ops}
        absent = sorted({"GET", "POST", "PUT", "DELETE", "PATCH"} - methods)
        r = client.open(url, method=absent[0])
        assert r.status_code == 405, (url, absent[0])
        implied = {"HEAD", "OPTIONS"} | methods if "GET" in methods else {"OPTIONS"} | methods
        assert set(r.headers["Allow"].split(", ")) == implied, url
