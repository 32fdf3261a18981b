"""Notes through the REST API: read and saved on an experiment and on a trial, every wrong
body refused by field name, unknown ids 404, a stale save 409, saves guarded like every
other write (the token when one is set, a signed-in page session with its CSRF token, no
cross-site writes), results untouched, and the pages embedding a note as inert data."""

from __future__ import annotations

import re

import pytest
from dashboard_support import TINY_SPEC

from dnnframe.store import MAX_NOTE_CHARS, TrialState

TOKEN = "s3cret"


def _submitted(client, store) -> tuple[str, list[str]]:
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    return exp_id, [t.id for t in store.list_trials(exp_id)]


def _paths(client, store) -> list[str]:
    exp_id, trial_ids = _submitted(client, store)
    return [f"/api/v1/experiments/{exp_id}/note", f"/api/v1/trials/{trial_ids[0]}/note"]


def test_a_note_is_read_saved_and_replaced_on_an_experiment_and_a_trial(client, store):
    for path in _paths(client, store):
        assert client.get(path).json == {"text": "", "version": 0, "updated_at": None}
        r = client.put(path, json={"text": "# Finding\n- width 4 **wins**", "version": 0})
        assert r.status_code == 200, r.json
        assert r.json["text"] == "# Finding\n- width 4 **wins**" and r.json["version"] == 1
        assert isinstance(r.json["updated_at"], float)
        assert client.put(path, json={"text": "replaced", "version": 1.0}).json["version"] == 2
        assert client.get(path).json["text"] == "replaced"
        # the same text again (a retried save) changes nothing
        assert client.put(path, json={"text": "replaced", "version": 1}).json["version"] == 2
        assert client.put(path, json={"text": ""}).json == {
            **client.get(path).json,
            "text": "",
            "version": 3,
        }


def test_a_save_from_a_stale_version_is_409_and_keeps_the_newer_note(client, store):
    for path in _paths(client, store):
        client.put(path, json={"text": "mine", "version": 0})
        client.put(path, json={"text": "theirs", "version": 1})
        r = client.put(path, json={"text": "mine, edited", "version": 1})
        assert r.status_code == 409 and r.is_json
        assert "saved by someone else since version 1" in r.json["message"]
        assert "at version 2" in r.json["message"]
        assert client.get(path).json["text"] == "theirs"


@pytest.mark.parametrize(
    "body, fields",
    [
        ({"text": "x" * (MAX_NOTE_CHARS + 1)}, {"text": "at most 10,000 characters, got 10,001"}),
        ({"text": 7}, {"text": "note text must be a string, got int"}),
        ({"text": None}, {"text": "must be a string, got NoneType"}),
        ({"text": "nul \u0000 here"}, {"text": "control characters"}),
        ({"text": "half \ud800 a pair"}, {"text": "lone surrogate"}),
        ({}, {"text": "required"}),
        ({"text": "ok", "version": -1}, {"version": "integer from 0"}),
        ({"text": "ok", "version": True}, {"version": "integer from 0"}),
        ({"text": "ok", "version": "1"}, {"version": "integer from 0"}),
        ({"text": "ok", "version": 1.5}, {"version": "integer from 0"}),
        ({"text": "ok", "version": None}, {"version": "got null"}),
        ({"text": "ok", "colour": "red"}, {"colour": "unknown field"}),
        (
            {"text": 1, "version": -1, "x": 0},
            {"text": "string", "version": "integer", "x": "unknown"},
        ),
        (["text"], {"": "expected a JSON object"}),
        ("just text", {"": "expected a JSON object"}),
    ],
)
def test_a_bad_body_is_400_naming_each_field_and_saves_nothing(client, store, body, fields):
    for path in _paths(client, store):
        r = client.put(path, json=body)
        assert r.status_code == 400, r.json
        got = {e["path"]: e["message"] for e in r.json["errors"]}
        assert set(got) == set(fields), got
        for field, needle in fields.items():
            assert needle in got[field], (field, got[field])
        assert client.get(path).json["version"] == 0


def test_a_body_that_is_not_json_is_400(client, store):
    for path in _paths(client, store):
        for kwargs in (
            {"data": "text=hi", "content_type": "text/plain"},
            {"data": "{not json", "content_type": "application/json"},
            {"data": {"text": "hi"}},
        ):
            r = client.put(path, **kwargs)
            assert r.status_code == 400 and r.is_json, kwargs


def test_the_longest_note_is_taken_whole(client, store):
    for path in _paths(client, store):
        text = "é🙂\t\r\n" * (MAX_NOTE_CHARS // 5)
        assert len(text) == MAX_NOTE_CHARS
        assert client.put(path, json={"text": text}).status_code == 200
        assert client.get(path).json["text"] == text


@pytest.mark.parametrize(
    "path", ["/api/v1/experiments/exp-nope/note", "/api/v1/trials/t-nope/note"]
)
def test_unknown_ids_are_404_for_reads_and_saves(client, path):
    for r in (
        client.get(path),
        client.put(path, json={"text": "x"}),
        client.put(path, json={"text": "x", "version": 0}),
    ):
        assert r.status_code == 404 and r.is_json
        assert "nope" in r.json["message"] and "not found" in r.json["message"]


def test_a_note_changes_no_trial_and_moves_no_cursor(client, store):
    exp_id, trial_ids = _submitted(client, store)
    store.claim_trial(trial_ids[0], "w")
    store.append_metrics(trial_ids[0], {"epoch": 1, "val_loss": 0.4}, worker="w")
    page = client.get(f"/api/v1/experiments/{exp_id}/trials?since=0").json
    trials_before = [client.get(f"/api/v1/trials/{t}").json for t in trial_ids]
    for t in trial_ids:
        assert (
            client.put(f"/api/v1/trials/{t}/note", json={"text": f"about {t}"}).status_code == 200
        )
    client.put(f"/api/v1/experiments/{exp_id}/note", json={"text": "about the sweep"})
    after = client.get(f"/api/v1/experiments/{exp_id}/trials?since={page['cursor']}").json
    assert after["trials"] == [] and after["cursor"] == page["cursor"]
    assert [client.get(f"/api/v1/trials/{t}").json for t in trial_ids] == trials_before
    assert store.finish_trial(trial_ids[0], TrialState.COMPLETE, result={}, worker="w")


def test_a_deleted_experiment_takes_its_notes_along(client, store):
    exp_id, trial_ids = _submitted(client, store)
    client.put(f"/api/v1/experiments/{exp_id}/note", json={"text": "gone soon"})
    client.put(f"/api/v1/trials/{trial_ids[0]}/note", json={"text": "gone soon too"})
    client.post(f"/api/v1/experiments/{exp_id}/cancel")
    assert client.delete(f"/api/v1/experiments/{exp_id}?confirm={exp_id}").status_code == 200
    assert client.get(f"/api/v1/experiments/{exp_id}/note").status_code == 404
    assert client.get(f"/api/v1/trials/{trial_ids[0]}/note").status_code == 404
    again, _ = _submitted(client, store)  # the same spec again: a fresh start
    assert again == exp_id and client.get(f"/api/v1/experiments/{again}/note").json["version"] == 0


# --------------------------------------------------------------------------- who may save


def _signed_in(client) -> str:
    """Sign the test client's session in; returns its CSRF token."""
    html = client.get("/login").get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)
    assert client.post("/login", data={"csrf_token": csrf, "token": TOKEN}).status_code == 303
    return csrf


def test_with_a_token_saves_need_it_or_a_signed_in_page_session(make_app):
    app = make_app(API_TOKEN=TOKEN)
    client, store = app.test_client(), app.extensions["dnnframe"].store
    exp_id = client.post(
        "/api/v1/experiments", json=TINY_SPEC, headers={"Authorization": f"Bearer {TOKEN}"}
    ).json["id"]
    trial_id = store.list_trials(exp_id)[0].id
    for path in (f"/api/v1/experiments/{exp_id}/note", f"/api/v1/trials/{trial_id}/note"):
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            r = client.put(path, json={"text": "x"}, headers=headers)
            assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
        assert client.get(path).json["version"] == 0  # reads are public
        r = client.put(
            path, json={"text": "by token"}, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert r.status_code == 200
    # the pages' own session: signed in, and its CSRF token with each save
    page = make_app(API_TOKEN=TOKEN).test_client()
    assert 'id="note-sign-in"' in page.get(f"/experiments/{exp_id}").get_data(as_text=True)
    csrf = _signed_in(page)
    path = f"/api/v1/experiments/{exp_id}/note"
    assert page.put(path, json={"text": "by page"}).status_code == 401  # no CSRF token
    r = page.put(path, json={"text": "by page"}, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 200 and r.json["text"] == "by page"
    assert 'id="note-edit"' in page.get(f"/experiments/{exp_id}").get_data(as_text=True)


def test_without_a_token_a_cross_site_save_is_refused(client, store):
    for path in _paths(client, store):
        r = client.put(path, json={"text": "x"}, headers={"Origin": "http://elsewhere.example"})
        assert r.status_code == 403 and r.json["errors"][0]["path"] == "Origin"
        ok = client.put(path, json={"text": "x"}, headers={"Origin": "http://localhost"})
        assert ok.status_code == 200


# --------------------------------------------------------------------------- the pages


ATTACK = '</script><script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'


def test_pages_embed_the_note_as_data_never_as_markup(client, store):
    exp_id, trial_ids = _submitted(client, store)
    client.put(f"/api/v1/experiments/{exp_id}/note", json={"text": ATTACK})
    client.put(f"/api/v1/trials/{trial_ids[0]}/note", json={"text": ATTACK})
    for page in (f"/experiments/{exp_id}", f"/trials/{trial_ids[0]}"):
        html = client.get(page).get_data(as_text=True)
        assert "window.pwned" in html  # the text is there, as JSON ...
        assert "<img src=x" not in html and "<script>window" not in html  # ... never as markup
        data = re.search(
            r'<script id="note-data" type="application/json">(.*?)</script>', html, re.S
        )
        assert data and "\\u003cimg src=x onerror" in data.group(1)
