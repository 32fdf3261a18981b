"""Review findings: token rotation signs browsers out, oversized/overdeep input is a 4xx, and the
token-less API refuses cross-site writes (Origin/Referer, CSRF token for form bodies)."""

from __future__ import annotations

import csv
import io
import re

import pytest
from dashboard_support import TINY_SPEC

from dnnframe.store.base import TrialState

HUGE = "99999999999999999999"  # past SQLite's 64-bit integers


def _session_csrf(client) -> str:
    html = client.get("/experiments/new").get_data(as_text=True)
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


# --------------------------------------------------------------------------- token rotation
def test_changing_the_api_token_signs_browser_sessions_out(make_app, recorder):
    old = make_app(API_TOKEN="token-A", SECRET_KEY="k" * 32)
    client = old.test_client()
    client.get("/login")
    with client.session_transaction() as sess:
        token = sess["csrf"]
    r = client.post("/login", data={"csrf_token": token, "token": "token-A", "next": "/"})
    assert r.status_code == 303
    with client.session_transaction() as sess:
        # the session keeps a keyed digest, never the token or a bare "signed in" flag
        assert "token-A" not in str(dict(sess)) and "token_ok" not in sess
    exp_id = client.post(
        "/api/v1/experiments", json=TINY_SPEC, headers={"Authorization": "Bearer token-A"}
    ).json["id"]
    cookie = client.get_cookie("session").value

    # same signing key, new token: the old session cookie no longer allows writes
    rotated = make_app(API_TOKEN="token-B", SECRET_KEY="k" * 32).test_client()
    rotated.set_cookie("session", cookie)
    r = rotated.post(f"/experiments/{exp_id}/cancel", data={"csrf_token": token})
    assert r.status_code == 401
    assert rotated.get("/experiments/new").status_code == 302  # back to /login
    assert recorder.cancelled == []

    # the unchanged token still works with the same cookie
    same = make_app(API_TOKEN="token-A", SECRET_KEY="k" * 32).test_client()
    same.set_cookie("session", cookie)
    assert same.post(f"/experiments/{exp_id}/cancel", data={"csrf_token": token}).status_code == 303


# --------------------------------------------------------------------------- 4xx, not 500
@pytest.mark.parametrize(
    "path",
    [
        f"/api/v1/experiments?offset={HUGE}",
        "/api/v1/experiments/{exp}/trials?offset=" + HUGE,
        "/api/v1/experiments/{exp}/trials?since=" + HUGE,
    ],
)
def test_integers_past_the_store_range_are_400_naming_the_parameter(client, path):
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    r = client.get(path.format(exp=exp_id))
    name = path.rsplit("?", 1)[1].split("=")[0]
    assert r.status_code == 400, r.json
    assert name in r.json["message"] and r.json["errors"][0]["path"] == name
    # the largest value SQLite can hold is still accepted
    assert client.get(path.format(exp=exp_id).replace(HUGE, str(2**63 - 1))).status_code == 200


@pytest.mark.parametrize("path", ["/api/v1/validate", "/api/v1/experiments"])
@pytest.mark.parametrize(
    "template, depth",
    [
        ("{}", 100_000),  # past the JSON decoder's recursion limit
        ("{}", 5_000),
        (
            '{{"dataset": {{"name": "iris", "params": {{"x": {}}}}}}}',
            300,
        ),  # parses, then deep in the spec
        ('{{"dataset": "iris", "model": {{"width": {{"grid": {}}}}}}}', 300),
    ],
)
def test_deeply_nested_json_is_400(client, recorder, path, template, depth):
    body = template.format("[" * depth + "]" * depth)
    r = client.post(path, data=body, content_type="application/json")
    assert r.status_code == 400 and "nested too deeply" in r.json["message"], r.json
    assert recorder.submitted == []


def test_csv_cell_over_the_field_limit_is_400(client, data_dir):
    big = b"a,b\n1," + b"9" * (csv.field_size_limit() + 10) + b"\n2,3\n"
    headers = {"X-CSRF-Token": _session_csrf(client)}
    for form in ({}, {"label_column": "b"}):
        r = client.post(
            "/api/v1/datasets",
            data={"file": (io.BytesIO(big), "a.csv"), **form},
            content_type="multipart/form-data",
            headers=headers,
        )
        assert r.status_code == 400, r.json
        assert "cells are limited to" in r.json["message"] and r.json["errors"][0]["path"] == "file"
    assert not (data_dir / "uploads").exists() or not list((data_dir / "uploads").iterdir())


# --------------------------------------------------------------------------- CSRF without a token
def _upload_form():
    return {"file": (io.BytesIO(b"a,b\n1,x\n2,y\n"), "a.csv")}


def test_cross_site_form_post_cannot_cancel(client, store, recorder):
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    evil = {"Origin": "https://evil.example"}
    for kwargs in (
        {"data": {}},
        {"data": {"x": "1"}, "content_type": "multipart/form-data"},
        {"data": "x=1", "content_type": "text/plain"},
    ):
        r = client.post(f"/api/v1/experiments/{exp_id}/cancel", headers=evil, **kwargs)
        assert r.status_code == 403 and "Origin" in r.json["message"], r.json
    r = client.post(
        f"/api/v1/experiments/{exp_id}/cancel",
        headers={"Referer": "https://evil.example/page"},
        data={},
    )
    assert r.status_code == 403 and "Referer" in r.json["message"]
    r = client.post(f"/api/v1/experiments/{exp_id}/cancel", headers={"Origin": "null"}, data={})
    assert r.status_code == 403
    # a same-site browser form body needs the session's CSRF token
    r = client.post(
        f"/api/v1/experiments/{exp_id}/cancel",
        data={"x": "1"},
        headers={"Origin": "http://localhost"},
    )
    assert r.status_code == 403 and "CSRF" in r.json["message"]
    r = client.post("/api/v1/experiments", json=TINY_SPEC, headers=evil)
    assert r.status_code == 403
    assert recorder.cancelled == []
    assert all(t.state == TrialState.QUEUED for t in store.list_trials(exp_id))
    # same-site (with the port), JSON, bodyless (curl -X POST) and CSRF-token posts still work
    same = {"Origin": "http://localhost"}
    assert client.post(f"/api/v1/experiments/{exp_id}/cancel", headers=same).status_code == 200
    assert client.post(f"/api/v1/experiments/{exp_id}/cancel", json={}).status_code == 200
    token = _session_csrf(client)
    r = client.post(
        f"/api/v1/experiments/{exp_id}/cancel",
        data={"csrf_token": token},
        headers={"Referer": "http://localhost/experiments/" + exp_id},
    )
    assert r.status_code == 200 and recorder.cancelled == [exp_id] * 3


def test_cross_site_multipart_upload_is_refused(client, data_dir):
    r = client.post(
        "/api/v1/datasets",
        data=_upload_form(),
        content_type="multipart/form-data",
        headers={"Origin": "https://evil.example"},
    )
    assert r.status_code == 403
    r = client.post(
        "/api/v1/datasets",
        data=_upload_form(),
        content_type="multipart/form-data",
        headers={"Origin": "http://localhost"},
    )
    assert r.status_code == 403 and r.json["errors"][0]["path"] == "csrf_token"
    assert not (data_dir / "uploads").exists()
    # a client that is no browser (curl -F file=@data.csv) states no origin and may upload
    r = client.post("/api/v1/datasets", data=_upload_form(), content_type="multipart/form-data")
    assert r.status_code == 201, r.json
    token = _session_csrf(client)
    r = client.post(
        "/api/v1/datasets",
        data={**_upload_form(), "csrf_token": token},
        content_type="multipart/form-data",
        headers={"Origin": "http://localhost"},
    )
    assert r.status_code == 201, r.json


def test_bearer_token_requests_skip_the_browser_checks(make_app):
    client = make_app(API_TOKEN="s3cret").test_client()
    auth = {"Authorization": "Bearer s3cret", "Origin": "https://tool.example"}
    r = client.post(
        "/api/v1/datasets", data=_upload_form(), content_type="multipart/form-data", headers=auth
    )
    assert r.status_code == 201, r.json
