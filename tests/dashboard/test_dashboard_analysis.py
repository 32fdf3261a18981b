"""The analysis endpoints through Flask's test client: parameter importance, the stored spec,
every recorded parameter and metric in the trial JSON, and status words that name outcomes."""

from __future__ import annotations

import re

import pytest
import yaml

from dnnframe.spec import parse_spec
from dnnframe.store.base import TrialState

# learning rate decides the accuracy; depth and seed barely move it
LR_SPEC = {
    "name": "lr-matters",
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": {"grid": [1, 2, 3]}, "width": 4},
    "training": {"max_epochs": 2, "learning_rate": {"grid": [0.001, 0.01, 0.1]}},
    "search": {"seeds": 2},
}
REGRESSION_SPEC = {
    "name": "regress",
    "dataset": {"name": "diabetes"},
    "model": {"hidden_layers": {"grid": [1, 2]}, "width": 4, "loss": "squared_error"},
    "training": {"max_epochs": 2},
    "search": {"seeds": 1},
}


def _finish(store, trial_id, metrics, state=TrialState.COMPLETE, seconds=1.0):
    assert store.claim_trial(trial_id, "w1") is not None
    result = {"metrics": metrics, "timings": {"train": seconds, "compile": 0.25}, "epochs_run": 2}
    assert store.finish_trial(trial_id, state, result=result, worker="w1")


def _lr_experiment(client, store):
    exp_id = client.post("/api/v1/experiments", json=LR_SPEC).json["id"]
    for t in store.list_trials(exp_id):
        lr, depth = t.config["training"]["learning_rate"], t.config["model"]["hidden_layers"]
        acc = {0.001: 0.35, 0.01: 0.6, 0.1: 0.9}[lr] + 0.01 * depth + 0.001 * t.config["seed"]
        _finish(store, t.id, {"test_accuracy": acc, "test_loss": 1 - acc})
    return exp_id


@pytest.mark.parametrize("evaluator", ["fanova", "ped_anova", "mean_decrease_impurity"])
def test_importance_ranks_the_parameter_that_decides_the_metric_first(client, store, evaluator):
    exp_id = _lr_experiment(client, store)
    r = client.get(f"/api/v1/experiments/{exp_id}/importance?evaluator={evaluator}")
    assert r.status_code == 200, r.json
    body = r.json
    assert body["metric"] == "test_accuracy" and body["mode"] == "max"
    assert body["evaluator"] == evaluator and body["n_trials"] == 18
    # only what the sweep varies is ranked: depth and learning rate (the seed is the noise floor)
    assert body["params"] == ["hidden_layers", "learning_rate"] and "noise_floor" in body
    assert body["ranking"][0] == "learning_rate", body
    assert sorted(body["ranking"]) == sorted(body["importances"])
    assert body["importances"]["learning_rate"] > 0.5


def test_importance_for_another_metric_and_its_errors(client, store):
    exp_id = _lr_experiment(client, store)
    base = f"/api/v1/experiments/{exp_id}/importance"
    body = client.get(base + "?metric=test_loss").json
    assert body["mode"] == "min" and body["ranking"][0] == "learning_rate"
    for query, path in [
        ("metric=no;such", "metric"),
        ("metric=bogus", "metric"),
        ("mode=up", "mode"),
        ("evaluator=shap", "evaluator"),
    ]:
        r = client.get(base + "?" + query)
        assert r.status_code == 400 and r.json["errors"][0]["path"] == path, r.json
    assert "ped_anova, fanova" in client.get(base + "?evaluator=shap").json["message"]
    assert client.get("/api/v1/experiments/exp-nope/importance").status_code == 404
    assert "test_accuracy, test_loss" in client.get(base + "?metric=bogus").json["message"]
    # a known metric no trial recorded: nothing to rank, and the answer says why
    body = client.get(base + "?metric=val_accuracy").json
    assert body["importances"] == {} and "has 0" in body["note"] and body["mode"] == "max"


def test_forest_evaluators_see_a_seeded_sample_of_a_large_sweep(client, store, monkeypatch):
    import dashboard.importance

    monkeypatch.setattr(dashboard.importance, "FOREST_MAX_TRIALS", 12)
    exp_id = _lr_experiment(client, store)
    base = f"/api/v1/experiments/{exp_id}/importance"
    body = client.get(base + "?evaluator=fanova").json
    assert body["n_trials"] == 18 and body["sampled"] == 12
    assert body["ranking"][0] == "learning_rate"
    body = client.get(base).json  # PED-ANOVA, the default, sees them all
    assert body["evaluator"] == "ped_anova" and "sampled" not in body


def test_importance_waits_for_two_finished_trials(client, store):
    exp_id = client.post("/api/v1/experiments", json=LR_SPEC).json["id"]
    first = store.list_trials(exp_id)[0]
    _finish(store, first.id, {"test_accuracy": 0.5})
    body = client.get(f"/api/v1/experiments/{exp_id}/importance").json
    assert body["importances"] == {} and body["n_trials"] == 1
    assert body["note"] == "needs at least 2 finished trials with a value of test_accuracy, has 1"


def test_importance_is_documented_in_the_openapi(client):
    paths = client.get("/api/v1/openapi.json").json["paths"]
    op = paths["/experiments/{experiment_id}/importance"]["get"]
    names = {p["name"] for p in op["parameters"]}
    assert {"experiment_id", "metric", "mode", "evaluator"} <= names
    assert "/experiments/{experiment_id}/spec" in paths


def test_the_stored_spec_as_yaml_and_json_submits_the_same_experiment(client):
    exp_id = client.post("/api/v1/experiments", json=LR_SPEC).json["id"]
    as_json = client.get(f"/api/v1/experiments/{exp_id}/spec").json
    r = client.get(f"/api/v1/experiments/{exp_id}/spec?format=yaml")
    assert r.status_code == 200 and r.mimetype == "application/yaml"
    from_yaml = yaml.safe_load(r.get_data(as_text=True))
    assert from_yaml == as_json
    assert list(from_yaml)[:2] == ["name", "description"]  # the spec's own order
    assert parse_spec(from_yaml).experiment_id == exp_id
    again = client.post("/api/v1/experiments", json=as_json)
    assert again.status_code == 200 and again.json["id"] == exp_id
    bad = client.get(f"/api/v1/experiments/{exp_id}/spec?format=toml")
    assert bad.status_code == 400 and bad.json["errors"][0]["path"] == "format"


def test_trial_json_carries_every_parameter_and_regression_metrics(client, store):
    exp_id = client.post("/api/v1/experiments", json=REGRESSION_SPEC).json["id"]
    first = store.list_trials(exp_id)[0]
    _finish(store, first.id, {"test_loss": 0.7, "val_loss": 0.8, "test_accuracy": None})
    trials = client.get(f"/api/v1/experiments/{exp_id}/trials").json["trials"]
    done = next(t for t in trials if t["id"] == first.id)
    assert done["metrics"] == {"test_loss": 0.7, "val_loss": 0.8}
    assert done["train_seconds"] == 1.0 and done["compile_seconds"] == 0.25
    params = done["params"]
    assert params["loss"] == "squared_error" and params["dataset"] == "diabetes"
    assert {"residual", "normalization", "dropout", "lr_schedule.kind", "l2"} <= set(params)
    body = client.get(f"/api/v1/experiments/{exp_id}").json
    assert body["objective"] == {"metric": "test_loss", "mode": "min"}
    assert body["best_trial"]["id"] == first.id


def test_a_cancelled_experiment_says_how_many_were_cancelled(client, store):
    exp_id = client.post("/api/v1/experiments", json=LR_SPEC).json["id"]
    ids = [t.id for t in store.list_trials(exp_id)]
    _finish(store, ids[0], {"test_accuracy": 0.5})
    _finish(store, ids[1], {"test_accuracy": 0.5}, state=TrialState.PRUNED)
    client.post(f"/api/v1/experiments/{exp_id}/cancel")
    body = client.get(f"/api/v1/experiments/{exp_id}").json
    assert body["status"] == "CANCELLED"
    assert body["status_text"] == "cancelled: 1 of 18 complete, 1 pruned, 16 cancelled"


# --------------------------------------------------------------------------- experiment list
def _named(name, width):
    return {
        **LR_SPEC,
        "name": name,
        "model": {"hidden_layers": 1, "width": width},
        "training": {"max_epochs": 2},
        "search": {"seeds": 1},
    }


def test_the_list_pages_searches_and_filters_by_status(client, store):
    ids = {}
    for i in range(7):
        name = f"{'alpha' if i % 2 else 'beta'}-{i}"
        ids[name] = client.post("/api/v1/experiments", json=_named(name, 4 + i)).json["id"]
    done = ids["alpha-3"]
    _finish(store, store.list_trials(done)[0].id, {"test_accuracy": 0.5})
    first = client.get("/api/v1/experiments?limit=5").json
    assert len(first["experiments"]) == 5 and first["more"] is True
    rest = client.get("/api/v1/experiments?limit=5&offset=5").json
    assert len(rest["experiments"]) == 2 and rest["more"] is False
    found = client.get("/api/v1/experiments?q=ALPHA&limit=2").json
    assert [e["name"] for e in found["experiments"]] == ["alpha-5", "alpha-3"]
    assert found["more"] is True
    complete = client.get("/api/v1/experiments?status=complete").json["experiments"]
    assert [e["id"] for e in complete] == [done]
    bad = client.get("/api/v1/experiments?status=done")
    assert bad.status_code == 400 and bad.json["errors"][0]["path"] == "status"
    # the index page: a search box, a status filter and pages of 50
    html = client.get("/?q=beta").get_data(as_text=True)
    assert "beta-0" in html and "alpha-1" not in html
    html = client.get("/?status=COMPLETE").get_data(as_text=True)
    assert "alpha-3" in html and "beta-0" not in html


def test_the_index_pages_past_fifty(client):
    for i in range(52):
        client.post("/api/v1/experiments", json=_named(f"e{i:02d}", 1 + i))
    first = client.get("/").get_data(as_text=True)
    assert first.count("data-experiment=") == 50 and 'id="older"' in first
    second = client.get("/?offset=50").get_data(as_text=True)
    assert second.count("data-experiment=") == 2 and 'id="newer"' in second
    assert "e00" in second and "e51" in first


# --------------------------------------------------------------------------- experiment page
def test_the_experiment_page_shows_spec_dataset_and_the_commands_to_run_it_again(client):
    exp_id = client.post("/api/v1/experiments", json=LR_SPEC).json["id"]
    html = client.get(f"/experiments/{exp_id}").get_data(as_text=True)
    assert "name: lr-matters" in html and "learning_rate:" in html  # the YAML spec
    assert "105 train · 15 validation · 30 test" in html  # iris, split 70/10/20
    assert f"/api/v1/experiments/{exp_id}/spec?format=yaml" in html
    assert "dnnframe run lr-matters.yaml" in html
    assert "--data-binary @- http://localhost/api/v1/experiments" in html
    assert "Authorization" not in html  # no token on this server


def _csrf(client, path="/experiments/new"):
    html = client.get(path).get_data(as_text=True)
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def _spec_box(html):
    import html as html_lib

    text = re.search(r'<textarea id="spec_text"[^>]*>(.*?)</textarea>', html, re.S).group(1)
    return yaml.safe_load(html_lib.unescape(text))


def test_sweep_again_around_the_best_fills_the_spec_box_from_the_best_trial(client, store):
    exp_id = _lr_experiment(client, store)  # best: 3 layers, lr 0.1, seed 1
    spec = _spec_box(client.get(f"/experiments/new?around={exp_id}").get_data(as_text=True))
    assert spec["name"] == "lr-matters-around-best"
    assert spec["model"] == {
        "hidden_layers": {"int_range": [2, 4, 1]},
        "width": {"grid": [2, 4, 8]},
    }
    assert spec["training"] == {"max_epochs": 2, "learning_rate": {"grid": [0.0333, 0.1, 0.3]}}
    assert spec["search"]["seeds"] == 2
    assert client.get("/experiments/new?around=exp-nope").status_code == 404


def test_sweep_again_centres_on_the_best_mean_over_seeds_not_a_lucky_seed(client, store):
    spec = {**LR_SPEC, "model": {"hidden_layers": 2, "width": 4}}
    exp_id = client.post("/api/v1/experiments", json=spec).json["id"]
    scores = {
        (0.1, 0): 0.9721,
        (0.1, 1): 0.9721,  # the best mean, on both seeds
        (0.01, 0): 0.99,
        (0.01, 1): 0.90,  # one lucky seed
        (0.001, 0): 0.9721,
        (0.001, 1): 0.95,
    }
    for t in store.list_trials(exp_id):
        acc = scores[(t.config["training"]["learning_rate"], t.config["seed"])]
        _finish(store, t.id, {"test_accuracy": acc, "test_loss": 1 - acc})
    spec = _spec_box(client.get(f"/experiments/new?around={exp_id}").get_data(as_text=True))
    assert spec["training"]["learning_rate"] == {"grid": [0.0333, 0.1, 0.3]}


def test_sweep_again_and_the_best_configuration_count_a_diverged_seed_as_the_worst(client, store):
    spec = {**LR_SPEC, "model": {"hidden_layers": 2, "width": 4}, "search": {"seeds": 3}}
    exp_id = client.post("/api/v1/experiments", json=spec).json["id"]
    # lr 0.01 scores best on two seeds and blows up on the third: its mean counts an
    # accuracy of 0 there, so the steady lr 0.1 is the best configuration
    steady = {0.001: 0.5, 0.1: 0.9}
    for t in store.list_trials(exp_id):
        lr, seed = t.config["training"]["learning_rate"], t.config["seed"]
        if lr == 0.01 and seed == 2:
            _finish(store, t.id, {"test_loss": float("nan")}, TrialState.DIVERGED)
        elif lr == 0.01:
            _finish(store, t.id, {"test_accuracy": 0.99, "test_loss": 0.01})
        else:
            acc = steady[lr]
            _finish(store, t.id, {"test_accuracy": acc, "test_loss": 1 - acc})
    best = client.get(f"/api/v1/experiments/{exp_id}").json["best_configuration"]
    assert best["params"]["learning_rate"] == 0.1
    assert (best["n"], best["n_diverged"], best["n_pruned"]) == (3, 0, 0)
    sweep = _spec_box(client.get(f"/experiments/new?around={exp_id}").get_data(as_text=True))
    assert sweep["training"]["learning_rate"] == {"grid": [0.0333, 0.1, 0.3]}


def test_a_diverged_seed_counts_as_the_worst_loss_any_trained_trial_reached(client, store):
    spec = {
        **LR_SPEC,
        "model": {"hidden_layers": 2, "width": 4},
        "search": {"seeds": 2, "objective": {"metric": "test_loss", "mode": "min"}},
    }
    exp_id = client.post("/api/v1/experiments", json=spec).json["id"]
    losses = {(0.001, 0): 0.8, (0.001, 1): 0.7, (0.01, 0): 0.1, (0.1, 0): 0.3, (0.1, 1): 0.3}
    for t in store.list_trials(exp_id):
        key = (t.config["training"]["learning_rate"], t.config["seed"])
        if key in losses:
            _finish(store, t.id, {"test_loss": losses[key]})
        else:  # lr 0.01, seed 1: counts as 0.8, the worst loss reached, so its mean is 0.45
            _finish(store, t.id, {"test_loss": float("inf")}, TrialState.DIVERGED)
    best = client.get(f"/api/v1/experiments/{exp_id}").json["best_configuration"]
    assert best["params"]["learning_rate"] == 0.1 and best["mean"] == 0.3


REGRESSION_SWEEP = {
    "name": "regress-full",
    "dataset": {"name": "diabetes"},
    "model": {
        "hidden_layers": {"grid": [1, 2]},
        "width": 8,
        "loss": "squared_error",
        "init": "he",
        "dropout": {"grid": [0.0, 0.2]},
    },
    "training": {
        "max_epochs": 4,
        "learning_rate": 0.01,
        "l2": 0.0001,
        "early_stopping": {"metric": "val_loss", "patience": 2},
    },
    "search": {
        "method": "random",
        "num_samples": 1,
        "seeds": 2,
        "objective": {"metric": "test_loss", "mode": "min"},
    },
}


def test_sweep_again_on_a_regression_keeps_every_field_it_does_not_change(client, store):
    exp_id = client.post("/api/v1/experiments", json=REGRESSION_SWEEP).json["id"]
    for t in store.list_trials(exp_id):
        loss = 0.3 + 0.1 * t.config["model"]["hidden_layers"] + t.config["model"]["dropout"]
        _finish(store, t.id, {"test_loss": loss, "test_accuracy": None})
    html = client.get(f"/experiments/new?around={exp_id}").get_data(as_text=True)
    spec = _spec_box(html)
    # the best: one layer, no dropout; what the sweep again does not change stays as it was
    assert spec["model"] == {
        "hidden_layers": {"int_range": [1, 2, 1]},
        "width": {"grid": [4, 8, 16]},
        "loss": "squared_error",
        "init": "he",
        "dropout": 0.0,
    }
    assert spec["training"]["l2"] == 0.0001
    assert spec["training"]["early_stopping"] == {"metric": "val_loss", "patience": 2}
    assert spec["search"]["objective"] == {"metric": "test_loss", "mode": "min"}
    assert spec["search"]["method"] == "random" and spec["search"]["seeds"] == 2
    # the box is checked by the validate endpoint and submitted by the form as it stands
    text = re.search(r'<textarea id="spec_text"[^>]*>(.*?)</textarea>', html, re.S).group(1)
    import html as html_lib

    text = html_lib.unescape(text)
    token = _csrf(client)
    r = client.post(
        "/api/v1/validate",
        data={"spec_text": text, "csrf_token": token},
        headers={"X-CSRF-Token": token},
    )
    # random search crosses the grids (width, learning rate) and draws the depth
    assert r.status_code == 200 and r.json["n_trials"] == 18, r.json
    r = client.post(
        "/experiments/new", data={"spec_text": text, "csrf_token": token, "dataset": "iris"}
    )
    assert r.status_code == 303, r.get_data(as_text=True)
    new_id = r.headers["Location"].rsplit("/", 1)[1]
    stored = client.get(f"/api/v1/experiments/{new_id}/spec").json
    assert stored["model"]["loss"] == "squared_error"
    assert stored["search"]["objective"] == {"metric": "test_loss", "mode": "min"}


def test_the_spec_box_reports_each_error_with_its_path_and_keeps_the_text(client):
    token = _csrf(client)
    text = "name: broken\ndataset: diabetes\nmodel: {width: 0}\n"
    r = client.post("/api/v1/validate", data={"spec_text": text}, headers={"X-CSRF-Token": token})
    assert r.status_code == 400
    message = r.json["fields"]["spec_text"]
    assert message.startswith("model.width: ")
    r = client.post(
        "/api/v1/validate",
        data={"spec_text": "a: &x [1]\nb: *x\n"},
        headers={"X-CSRF-Token": token},
    )
    assert r.status_code == 400 and "aliases" in r.json["fields"]["spec_text"]
    page = client.post("/experiments/new", data={"spec_text": text, "csrf_token": token})
    assert page.status_code == 400
    html = page.get_data(as_text=True)
    assert "name: broken" in html and "model.width" in html


def test_a_blank_regression_sweep_from_the_form_fields_is_valid(client):
    token = _csrf(client)
    form = {
        "name": "blank-regression",
        "dataset": "diabetes",
        "hidden_layers": "1",
        "width": "4",
        "activation": "relu",
        "optimizer": "adam",
        "learning_rate": "0.01",
        "epochs": "2",
        "batch_size": "32",
        "seeds": "1",
    }
    r = client.post("/api/v1/validate", data=form, headers={"X-CSRF-Token": token})
    assert r.status_code == 200, r.json
    assert r.json["spec"]["model"]["loss"] == "squared_error"
    assert r.json["spec"]["search"]["objective"] == {"metric": "test_loss", "mode": "min"}


# --------------------------------------------------------------------------- delete
def test_delete_needs_the_token_and_a_confirmation_and_keeps_shared_trials(make_app):
    app = make_app(API_TOKEN="s3cret")
    client, store = app.test_client(), app.extensions["dnnframe"].store
    auth = {"Authorization": "Bearer s3cret"}
    gone = client.post("/api/v1/experiments", json=LR_SPEC, headers=auth).json["id"]
    kept_spec = {
        **LR_SPEC,
        "name": "kept",
        "training": {"max_epochs": 2, "learning_rate": 0.001},
        "model": {"hidden_layers": 1, "width": 4},
        "search": {"seeds": 1},
    }
    kept = client.post("/api/v1/experiments", json=kept_spec, headers=auth).json["id"]
    shared = store.list_trials(kept)[0].id
    assert gone in store.get_trial(shared).experiment_ids  # the two share one trial
    url = f"/api/v1/experiments/{gone}"
    assert client.delete(url + f"?confirm={gone}").status_code == 401
    r = client.delete(url + "?confirm=lr", headers=auth)
    assert r.status_code == 400 and r.json["errors"][0]["path"] == "confirm"
    r = client.delete(url + f"?confirm={gone}", headers=auth)
    assert r.status_code == 409 and "cancel it" in r.json["message"]
    client.post(url + "/cancel", headers=auth)
    r = client.delete(url + f"?confirm={gone}", headers=auth)
    assert r.status_code == 200 and r.json["deleted_trials"] == 17
    assert client.get(url).status_code == 404
    assert store.get_trial(shared).experiment_ids == [kept]
    assert client.delete(url + f"?confirm={gone}", headers=auth).status_code == 404
    assert (
        "delete" in client.get("/api/v1/openapi.json").json["paths"]["/experiments/{experiment_id}"]
    )


def test_the_page_says_why_a_running_experiment_is_not_deleted(client, store):
    exp_id = client.post("/api/v1/experiments", json=LR_SPEC).json["id"]
    token = _csrf(client, f"/experiments/{exp_id}")
    r = client.post(f"/experiments/{exp_id}/delete", data={"csrf_token": token, "confirm": exp_id})
    assert r.status_code == 409
    page = r.get_data(as_text=True)
    assert 'id="delete-error"' in page and "cancel it" in page
    assert client.get(f"/api/v1/experiments/{exp_id}").status_code == 200


def test_the_page_deletes_after_the_name_is_typed(client, store):
    import re

    exp_id = client.post("/api/v1/experiments", json=LR_SPEC).json["id"]
    client.post(f"/api/v1/experiments/{exp_id}/cancel")
    html = client.get(f"/experiments/{exp_id}").get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)
    wrong = client.post(
        f"/experiments/{exp_id}/delete", data={"csrf_token": token, "confirm": "lr"}
    )
    # the page again, its delete form open with what was typed and why it is not enough
    assert wrong.status_code == 400
    page = wrong.get_data(as_text=True)
    assert '<details class="danger-zone" id="delete-zone" open>' in page
    assert 'value="lr"' in page and 'id="delete-error"' in page
    assert (
        f"to delete experiment &#39;lr-matters&#39; ({exp_id}), confirm must repeat its "
        "name or its id, but got &#39;lr&#39;"
    ) in page
    forged = client.post(f"/experiments/{exp_id}/delete", data={"confirm": "lr-matters"})
    assert (
        forged.status_code == 400 and client.get(f"/api/v1/experiments/{exp_id}").status_code == 200
    )
    r = client.post(
        f"/experiments/{exp_id}/delete", data={"csrf_token": token, "confirm": "lr-matters"}
    )
    assert r.status_code == 303 and r.headers["Location"].endswith(f"/?deleted={exp_id}")
    assert client.get(f"/api/v1/experiments/{exp_id}").status_code == 404
    assert f"Deleted experiment <code>{exp_id}</code>" in client.get(
        r.headers["Location"]
    ).get_data(as_text=True)


# --------------------------------------------------------------------------- compare
def test_compare_shows_the_settings_that_differ_and_the_best_of_each(client, store):
    a = _lr_experiment(client, store)
    b = client.post(
        "/api/v1/experiments",
        json={
            **LR_SPEC,
            "name": "wider",
            "model": {"hidden_layers": {"grid": [1, 2, 3]}, "width": 16},
        },
    ).json["id"]
    html = client.get(f"/compare?ids={a},{b}").get_data(as_text=True)
    rows = re.findall(r'<tr class="difference"><th><code>([^<]+)</code>', html)
    assert rows == ["name", "model.width"]
    # the best configuration of the first by its mean over seeds: 0.9 + 0.03 + 0.0005 (seeds
    # 0 and 1), not its luckier seed's 0.931
    cells = re.findall(r'<td class="num best-configuration">(.*?)</td>', html)
    assert re.sub(r"<[^>]+>", "", cells[0]) == "0.9305 ± 0.0007071 (2 seeds)"
    assert cells[1] == ""  # nothing of the second completed
    r = client.get(f"/compare?ids={a}")
    assert r.status_code == 400 and "choose 2 to 8 experiments" in r.get_data(as_text=True)
    assert client.get(f"/compare?ids={a}&ids=exp-nope").status_code == 404


@pytest.mark.parametrize(
    "module",
    [
        "dashboard.params",
        "dashboard.importance",
        "dashboard.around",
        "dashboard.compare",
        "dashboard.ranking",
    ],
)
def test_module_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0


def test_a_dataset_this_server_cannot_load_is_named_not_a_failed_page(client, store):
    # an experiment run from the CLI on another machine, with a CSV only that machine has
    spec = {"name": "elsewhere", "dataset": {"name": "csv", "path": "/data/theirs.csv"}}
    store.create_experiment("exp-elsewhere", "elsewhere", spec, 1)
    config = {
        "dataset": {"name": "csv", "path": "/data/theirs.csv", "label_column": "y"},
        "model": {"hidden_layers": 1, "width": 4},
        "seed": 0,
    }
    store.create_trials("exp-elsewhere", [("t-elsewhere", config)])
    r = client.get("/experiments/exp-elsewhere")
    assert r.status_code == 200
    assert "cannot load it on this server: DatasetError: CSV file" in r.get_data(as_text=True)
