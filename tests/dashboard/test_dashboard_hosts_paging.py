"""Allowed hosts (DNS rebinding), paging that cannot lose rows, status words, JSON errors for
the form's fetches, and one home per security check."""

from __future__ import annotations

import io
import re

import pytest
from dashboard_support import TINY_SPEC

from dnnframe.store.base import TrialState

SIX_SPEC = {**TINY_SPEC, "model": {"hidden_layers": {"grid": [1, 2, 3]}, "width": 4}}


def _finish(store, trial_id, acc, state=TrialState.COMPLETE):
    assert store.claim_trial(trial_id, "w1") is not None
    result = {"metrics": {"test_accuracy": acc, "test_loss": 1 - acc}, "timings": {"train": 1.0}}
    assert store.finish_trial(
        trial_id,
        state,
        result=result,
        worker="w1",
        error="RuntimeError: boom" if state == TrialState.FAILED else None,
    )


# --------------------------------------------------------------------------- allowed hosts
def test_foreign_host_with_matching_origin_is_refused_naming_the_host(client, recorder):
    # a rebinding page at evil.example:5000 resolves to this server: its requests say so
    headers = {"Host": "evil.example:5000", "Origin": "http://evil.example:5000"}
    r = client.post("/api/v1/experiments", json=TINY_SPEC, headers=headers)
    assert r.status_code == 400 and "'evil.example:5000'" in r.json["message"]
    assert "DNNFRAME_ALLOWED_HOSTS" in r.json["message"] and r.json["errors"][0]["path"] == "Host"
    assert recorder.submitted == []
    # reads too: a rebinding page must not read results either
    assert client.get("/api/v1/experiments", headers={"Host": "evil.example"}).status_code == 400
    assert client.get("/", headers={"Host": "evil.example"}).status_code == 400


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:5000", "127.0.0.1:8000", "[::1]:5000", "LOCALHOST"]
)
def test_local_names_are_allowed_by_default(client, host):
    assert client.get("/api/v1/health", headers={"Host": host}).status_code == 200


def test_allowed_hosts_from_the_environment_replace_the_default(monkeypatch, make_app):
    monkeypatch.setenv("DNNFRAME_ALLOWED_HOSTS", "dash.example.org, 10.0.0.5")
    client = make_app().test_client()
    assert (
        client.get("/api/v1/health", headers={"Host": "dash.example.org:8000"}).status_code == 200
    )
    assert client.get("/api/v1/health", headers={"Host": "10.0.0.5"}).status_code == 200
    r = client.get("/api/v1/health", headers={"Host": "localhost"})
    assert r.status_code == 400 and "dash.example.org, 10.0.0.5" in r.json["message"]


def test_the_bound_address_is_allowed_and_star_allows_any(make_app):
    bound = make_app(BIND_HOST="192.168.7.9").test_client()
    assert bound.get("/api/v1/health", headers={"Host": "192.168.7.9:5000"}).status_code == 200
    assert bound.get("/api/v1/health", headers={"Host": "192.168.7.10:5000"}).status_code == 400
    anyone = make_app(ALLOWED_HOSTS="*").test_client()
    assert anyone.get("/api/v1/health", headers={"Host": "whatever.example"}).status_code == 200


def test_validate_needs_the_token_when_one_is_set_or_a_signed_in_session(make_app):
    client = make_app(API_TOKEN="s3cret").test_client()
    r = client.post("/api/v1/validate", json=TINY_SPEC)
    assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
    r = client.post("/api/v1/validate", json=TINY_SPEC, headers={"Authorization": "Bearer s3cret"})
    assert r.status_code == 200 and r.json["n_trials"] == 4
    # the sweep form's own validation: a session that signed in, echoing its CSRF token
    html = client.get("/login").get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)
    form = {
        "dataset": "iris",
        "hidden_layers": "1",
        "width": "4",
        "activation": "relu",
        "optimizer": "adam",
        "learning_rate": "0.01",
        "epochs": "2",
        "seeds": "1",
    }
    assert (
        client.post("/api/v1/validate", data=form, headers={"X-CSRF-Token": csrf}).status_code
        == 401
    )
    client.post("/login", data={"csrf_token": csrf, "token": "s3cret", "next": "/"})
    assert client.post("/api/v1/validate", data=form).status_code == 401  # no CSRF token
    r = client.post("/api/v1/validate", data=form, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 200 and r.json["n_trials"] == 1


# --------------------------------------------------------------------------- paging
def test_since_with_a_metric_sort_is_refused_naming_the_rule(client):
    exp_id = client.post("/api/v1/experiments", json=SIX_SPEC).json["id"]
    r = client.get(f"/api/v1/experiments/{exp_id}/trials?since=0&sort=test_accuracy&limit=2")
    assert r.status_code == 400 and r.json["errors"][0]["path"] == "sort"
    assert "change order" in r.json["message"] and "test_accuracy" in r.json["message"]
    r = client.get(f"/api/v1/experiments/{exp_id}/trials?since=0&order=desc")
    assert r.status_code == 400 and r.json["errors"][0]["path"] == "order"


def test_unknown_sort_key_is_400_naming_the_allowed_keys(client):
    exp_id = client.post("/api/v1/experiments", json=SIX_SPEC).json["id"]
    r = client.get(f"/api/v1/experiments/{exp_id}/trials?sort=accuracy")
    assert r.status_code == 400 and r.json["errors"][0]["path"] == "sort"
    for key in ("test_accuracy", "train_seconds", "created_at", "'config.'"):
        assert key in r.json["message"], key
    assert (
        client.get(
            f"/api/v1/experiments/{exp_id}/trials?sort=config.model.hidden_layers"
        ).status_code
        == 200
    )


def test_following_changes_in_pages_of_two_returns_every_trial_once(client, store):
    exp_id = client.post("/api/v1/experiments", json=SIX_SPEC).json["id"]
    ids = [t.id for t in store.list_trials(exp_id)]
    assert len(ids) == 6
    for trial_id, acc in zip(ids, [0.3, 0.9, 0.1, 0.7, 0.5, 0.8]):
        _finish(store, trial_id, acc)
    seen, cursor, pages = [], 0, []
    while True:
        page = client.get(f"/api/v1/experiments/{exp_id}/trials?since={cursor}&limit=2").json
        pages.append((len(page["trials"]), page["more"]))
        seen += [t["id"] for t in page["trials"]]
        cursor = page["cursor"]
        if not page["more"]:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 6
    # the last full page already knows nothing follows
    assert pages == [(2, True), (2, True), (2, False)]


def test_more_is_false_when_the_next_page_would_be_empty(client):
    exp_id = client.post("/api/v1/experiments", json=SIX_SPEC).json["id"]
    base = f"/api/v1/experiments/{exp_id}/trials"
    assert client.get(base + "?limit=3").json["more"] is True
    assert client.get(base + "?limit=3&offset=3").json["more"] is False
    assert client.get(base + "?limit=6").json["more"] is False
    assert client.get(base + "?limit=5").json["more"] is True


# --------------------------------------------------------------------------- status words
def test_all_failed_is_failed_and_some_failed_says_how_many(client, store):
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    ids = [t.id for t in store.list_trials(exp_id)]
    for trial_id in ids:
        _finish(store, trial_id, 0.0, TrialState.FAILED)
    body = client.get(f"/api/v1/experiments/{exp_id}").json
    assert body["status"] == "FAILED" and body["status_text"] == "failed: all 4 trials failed"
    assert "all 4 trials failed" in client.get(f"/experiments/{exp_id}").get_data(as_text=True)

    mixed = {
        **TINY_SPEC,
        "model": {"hidden_layers": {"grid": [1, 2]}, "width": 5},
        "search": {"seeds": 1},
    }
    other = client.post("/api/v1/experiments", json=mixed).json["id"]
    first, second = [t.id for t in store.list_trials(other)]
    _finish(store, first, 0.9)
    _finish(store, second, 0.0, TrialState.FAILED)
    body = client.get(f"/api/v1/experiments/{other}/trials").json
    assert body["status"] == "COMPLETE_WITH_FAILURES"
    assert body["status_text"] == "finished, 1 of 2 failed"
    assert "finished, 1 of 2 failed" in client.get("/").get_data(as_text=True)


def test_the_status_says_how_many_trials_were_re_run(client, store):
    # Trials whose worker died are released and claimed again: the experiment may end
    # "finished" with every trial COMPLETE, and its status still says they ran twice.
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    ids = [t.id for t in store.list_trials(exp_id)]
    for trial_id in ids[:2]:
        assert store.claim_trial(trial_id, "lost:1") is not None
        assert store.release_trial(trial_id, "lost:1")
    body = client.get(f"/api/v1/experiments/{exp_id}").json
    assert body["reruns"] == 0 and body["status_text"] == "queued"
    for trial_id in ids:
        _finish(store, trial_id, 0.9)
    body = client.get(f"/api/v1/experiments/{exp_id}").json
    assert body["reruns"] == 2
    assert body["status_text"] == "finished; 2 trials re-run (their worker was lost)"
    page = client.get(f"/api/v1/experiments/{exp_id}/trials").json
    assert (page["reruns"], page["status_text"]) == (body["reruns"], body["status_text"])
    html = client.get(f"/experiments/{exp_id}").get_data(as_text=True)
    assert "finished; 2 trials re-run (their worker was lost)" in html


# --------------------------------------------------------------------------- errors
def test_the_forms_upload_errors_are_json_whatever_accept_says(make_app):
    client = make_app(MAX_CONTENT_LENGTH=2000).test_client()
    html = client.get("/experiments/new").get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)
    headers = {"X-CSRF-Token": csrf, "Accept": "*/*"}  # what fetch() sends by default
    r = client.post(
        "/uploads",
        data={"file": (io.BytesIO(b"only\n1\n2\n"), "one.csv")},
        content_type="multipart/form-data",
        headers=headers,
    )
    assert r.status_code == 400 and r.is_json and "at least one feature column" in r.json["message"]
    big = b"a,b\n" + b"1,2\n" * 1000
    r = client.post(
        "/uploads",
        data={"file": (io.BytesIO(big), "big.csv")},
        content_type="multipart/form-data",
        headers=headers,
    )
    assert r.status_code == 413 and r.is_json and "2000 bytes" in r.json["message"]


def test_not_found_names_the_id_but_not_the_store(client, tmp_path):
    for path in ("/api/v1/experiments/exp-nope", "/api/v1/trials/t-nope"):
        r = client.get(path)
        assert r.status_code == 404 and "nope" in r.json["message"]
        assert str(tmp_path) not in r.json["message"] and "sqlite" not in r.json["message"]
    page = client.get("/experiments/exp-nope").get_data(as_text=True)
    assert "exp-nope" in page and str(tmp_path) not in page
