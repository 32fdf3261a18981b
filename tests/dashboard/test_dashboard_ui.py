"""Pages through Flask's test client: index, sweep form (CSRF, field errors), experiment page."""

from __future__ import annotations

import io
import json
import re

import pytest
from dashboard_support import TINY_SPEC
from werkzeug.datastructures import MultiDict

from dashboard.formatting import duration, significant
from dashboard.forms import FormErrors, errors_by_field, form_to_spec
from dashboard.plotly_bundle import trim

FORM = {
    "name": "ui-sweep",
    "dataset": "iris",
    "hidden_layers": "1-2",
    "width": "4",
    "activation": "relu",
    "optimizer": "adam",
    "learning_rate": "0.01",
    "epochs": "2",
    "batch_size": "32",
    "seeds": "1",
}


def _csrf(client) -> str:
    html = client.get("/experiments/new").get_data(as_text=True)
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def test_form_page_has_fields_and_token(client):
    r = client.get("/experiments/new")
    html = r.get_data(as_text=True)
    assert r.status_code == 200
    for field in (
        "hidden_layers",
        "width",
        "activation",
        "optimizer",
        "learning_rate",
        "epochs",
        "seeds",
        "label_column",
        "csv-file",
    ):
        assert f'id="{field}"' in html or f'name="{field}"' in html, field
    assert 'value="iris"' in html and "/api/v1/validate" in html


def test_form_post_without_or_with_wrong_csrf_is_refused(client, recorder):
    r = client.post("/experiments/new", data=FORM)
    assert r.status_code == 400 and "CSRF" in r.get_data(as_text=True)
    _csrf(client)
    r = client.post("/experiments/new", data={**FORM, "csrf_token": "forged"})
    assert r.status_code == 400 and recorder.submitted == []


def test_form_shows_server_errors_next_to_fields(client, recorder):
    token = _csrf(client)
    r = client.post(
        "/experiments/new",
        data={**FORM, "csrf_token": token, "learning_rate": "-1", "width": "many"},
    )
    html = r.get_data(as_text=True)
    assert r.status_code == 400 and recorder.submitted == []
    assert re.search(r'id="error-width"[^>]*>must be a number', html)
    r = client.post("/experiments/new", data={**FORM, "csrf_token": token, "learning_rate": "-1"})
    assert re.search(r'id="error-learning_rate"[^>]*>[^<]*greater than 0', r.get_data(as_text=True))


def test_form_submits_and_redirects_to_the_experiment(client, store, recorder):
    token = _csrf(client)
    r = client.post("/experiments/new", data={**FORM, "csrf_token": token})
    assert r.status_code == 303
    exp_id = r.headers["Location"].rsplit("/", 1)[-1]
    assert store.get_experiment(exp_id).n_trials == 2 and len(recorder.submitted[0]) == 2
    page = client.get(r.headers["Location"])
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and "ui-sweep" in html and exp_id in html
    assert "/vendor/plotly.min.js" in html
    assert not re.search(r'(src|href)="(https?:)?//', html), (
        "pages must not load anything from the internet"
    )
    index = client.get("/").get_data(as_text=True)
    assert "ui-sweep" in index and f"/experiments/{exp_id}" in index


def test_experiment_page_cancel_needs_csrf(client, store):
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    assert client.post(f"/experiments/{exp_id}/cancel").status_code == 400
    token = _csrf(client)
    r = client.post(f"/experiments/{exp_id}/cancel", data={"csrf_token": token})
    assert r.status_code == 303 and store.get_experiment(exp_id).cancel_requested


def test_unknown_experiment_page_is_404_page(client):
    r = client.get("/experiments/exp-nope")
    assert r.status_code == 404 and "text/html" in r.content_type


def test_queue_links_only_when_configured(make_app, client):
    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    assert "Flower" not in client.get(f"/experiments/{exp_id}").get_data(as_text=True)
    app = make_app(FLOWER_URL="http://localhost:5555", RABBITMQ_UI_URL="http://localhost:15672")
    html = app.test_client().get(f"/experiments/{exp_id}").get_data(as_text=True)
    assert 'href="http://localhost:5555"' in html and 'href="http://localhost:15672"' in html


def test_plotly_is_served_from_the_installed_package(client):
    import plotly

    r = client.get("/vendor/plotly.min.js")
    assert r.status_code == 200 and "javascript" in r.content_type
    expected = plotly.__file__.rsplit("/", 1)[0] + "/package_data/plotly.min.js"
    with open(expected, "rb") as fh:
        shipped = fh.read()
    # the package's bytes, with only its register list shortened (dashboard/plotly_bundle.py)
    assert r.data == trim(shipped) and r.data != shipped
    start, end = re.search(rb"\.register\(\[([^\]]*)\]\)", shipped).span(1)
    assert r.data.startswith(shipped[:start]) and r.data.endswith(shipped[end:])
    r.close()


def test_form_upload_needs_csrf_then_stores(client):
    data = {"file": (io.BytesIO(b"x,y,label\n1,2,a\n3,4,b\n"), "d.csv")}
    assert client.post("/uploads", data=data, content_type="multipart/form-data").status_code == 400
    token = _csrf(client)
    data = {"file": (io.BytesIO(b"x,y,label\n1,2,a\n3,4,b\n"), "d.csv")}
    r = client.post(
        "/uploads", data=data, content_type="multipart/form-data", headers={"X-CSRF-Token": token}
    )
    assert r.status_code == 201 and r.json["label_candidates"] == ["label"]


# --------------------------------------------------------------------------- form → spec
@pytest.mark.parametrize(
    "text, expected",
    [
        ("3", 3),
        ("1-4", {"int_range": [1, 4, 1]}),
        ("2-16:2", {"int_range": [2, 16, 2]}),
        ("1, 2, 4", {"grid": [1, 2, 4]}),
        ("5-5", 5),
        ("1..3", {"int_range": [1, 3, 1]}),
    ],
)
def test_hidden_layer_ranges_and_lists(text, expected):
    spec = form_to_spec(MultiDict({**FORM, "hidden_layers": text}))
    assert spec["model"]["hidden_layers"] == expected


def test_multiple_choices_become_grids():
    form = MultiDict([*FORM.items()])
    form.setlist("activation", ["relu", "tanh"])
    form.setlist("optimizer", ["adam"])
    spec = form_to_spec(form)
    assert spec["model"]["activation"] == {"grid": ["relu", "tanh"]}
    assert spec["training"]["optimizer"] == "adam"
    assert spec["search"]["seeds"] == 1


def test_malformed_fields_are_all_named():
    form = MultiDict(
        {**FORM, "hidden_layers": "", "learning_rate": "fast", "seeds": "two", "dataset": "csv"}
    )
    form.setlist("activation", [])
    with pytest.raises(FormErrors) as info:
        form_to_spec(form)
    assert set(info.value.fields) == {
        "hidden_layers",
        "learning_rate",
        "seeds",
        "activation",
        "upload",
        "label_column",
    }


def test_spec_error_paths_map_to_fields():
    errors = [
        {"path": "model.width.grid[1]", "message": "a"},
        {"path": "training.max_epochs", "message": "b"},
        {"path": "search", "message": "c"},
        {"path": "dataset.label_column", "message": "d"},
    ]
    assert errors_by_field(errors) == {
        "width": "a",
        "epochs": "b",
        "seeds": "c",
        "label_column": "d",
    }


def test_pages_need_the_api_token_too_when_one_is_set(make_app, recorder):
    client = make_app(API_TOKEN="s3cret").test_client()
    r = client.get("/experiments/new")
    assert r.status_code == 302 and "/login" in r.headers["Location"]
    html = client.get("/login?next=/experiments/new").get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)
    # forms cannot be used to go around the token
    r = client.post("/experiments/new", data={**FORM, "csrf_token": token})
    assert r.status_code == 401 and recorder.submitted == []
    r = client.post(
        "/login", data={"csrf_token": token, "token": "wrong", "next": "/experiments/new"}
    )
    assert r.status_code == 401 and "not the server" in r.get_data(as_text=True)
    r = client.post(
        "/login", data={"csrf_token": token, "token": "s3cret", "next": "https://evil.example/"}
    )
    assert r.status_code == 303 and r.headers["Location"] == "/"
    r = client.post("/experiments/new", data={**FORM, "csrf_token": token})
    assert r.status_code == 303 and len(recorder.submitted) == 1


def test_store_outage_is_503_page_and_json(make_app):
    client = make_app(STORE_URL="nosuchscheme://x").test_client()
    assert client.get("/").status_code == 503
    r = client.get("/api/v1/experiments")
    assert r.status_code == 503 and "store" in r.json["message"]


def test_trial_page_shows_curve_data_config_and_error(client, store):
    from dnnframe.store.base import TrialState

    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    tid = store.list_trials(exp_id)[0].id
    store.claim_trial(tid, "w1")
    store.append_metrics(tid, {"epoch": 1, "train_loss": 0.9, "val_loss": 0.8, "val_accuracy": 0.5})
    store.finish_trial(
        tid,
        TrialState.FAILED,
        error="Traceback (most recent call last):\nValueError: <boom>",
        worker="w1",
    )
    r = client.get(f"/trials/{tid}")
    html = r.get_data(as_text=True)
    assert r.status_code == 200 and "ValueError: &lt;boom&gt;" in html and '"val_loss": 0.8' in html
    assert f"/experiments/{exp_id}" in html and "/vendor/plotly.min.js" in html
    assert client.get("/trials/t-nope").status_code == 404


def test_format_and_range_errors_show_together_once_each(client, recorder):
    """``abc`` layers (format), width 0 and epochs -3 (ranges): all at once, one message each."""
    r = client.post(
        "/api/v1/validate", data={**FORM, "hidden_layers": "abc", "width": "0", "epochs": "-3"}
    )
    fields = r.json["fields"]
    assert r.status_code == 400 and set(fields) == {"hidden_layers", "width", "epochs"}
    assert fields["hidden_layers"].startswith("must be a number, a range like 1-4")
    assert "greater than or equal to 1" in fields["width"] and ";" not in fields["width"]
    assert "-3" in fields["epochs"] and ";" not in fields["epochs"]
    token = _csrf(client)
    html = client.post(
        "/experiments/new",
        data={**FORM, "csrf_token": token, "hidden_layers": "abc", "width": "0", "epochs": "-3"},
    ).get_data(as_text=True)
    for field in ("hidden_layers", "width", "epochs"):
        assert re.search(rf'id="error-{field}"[^>]*>\S', html), field
    assert recorder.submitted == []


def test_one_message_per_spec_path():
    errors = [
        {"path": "model.width", "message": "must be >= 1, but got 0"},
        {"path": "model.width", "message": "Input should be a valid list, but got 0"},
        {"path": "model.width.grid[1]", "message": "must be >= 1, but got -2"},
    ]
    assert errors_by_field(errors) == {"width": "must be >= 1, but got 0; must be >= 1, but got -2"}


@pytest.mark.parametrize(
    "value, text",
    [
        (0.8333333333333334, "0.8333"),
        (0.5, "0.5"),
        (1.0, "1"),
        (12345.678, "1.235e4"),
        (8.72e-05, "8.72e-5"),
        (3, 3),
        ("relu", "relu"),
        (0.0, "0"),
    ],
)
def test_significant_digits(value, text):
    assert significant(value) == text


@pytest.mark.parametrize(
    "seconds, text",
    [
        (8.72e-05, "0.0872 ms"),
        (0.25, "250 ms"),
        (3.14159, "3.14 s"),
        (59.96, "60 s"),
        (600.2, "10 min 0 s"),
        (None, None),
    ],
)
def test_durations_read_as_ms_or_s(seconds, text):
    assert duration(seconds) == text


def test_trial_page_rounds_metrics_and_times(client, store):
    from dnnframe.store.base import TrialState

    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    tid = store.list_trials(exp_id)[0].id
    store.claim_trial(tid, "w1")
    result = {
        "metrics": {"test_accuracy": 0.8333333333333334, "test_loss": 0.41234567},
        "timings": {"data": 8.72e-05, "compile": 2.5, "train": 0.123456},
    }
    store.finish_trial(tid, TrialState.COMPLETE, result=result, worker="w1")
    html = client.get(f"/trials/{tid}").get_data(as_text=True)
    metrics = re.search(r'id="final-metrics">(.*?)</table>', html, re.S).group(1)
    timings = re.search(r'id="timings">(.*?)</table>', html, re.S).group(1)
    assert ">0.8333<" in metrics and ">0.4123<" in metrics and "0.83333" not in metrics
    assert ">0.0872 ms<" in timings and ">2.5 s<" in timings and ">123 ms<" in timings


def test_trial_page_names_the_pack_whose_time_the_timings_share(client, store):
    from dnnframe.store.base import TrialState

    exp_id = client.post("/api/v1/experiments", json=TINY_SPEC).json["id"]
    tid = store.list_trials(exp_id)[0].id
    store.claim_trial(tid, "w1")
    result = {
        "metrics": {"test_accuracy": 0.5},
        "timings": {"train": 1.5},
        "pack": {"id": "p7", "size": 4, "index": 1, "wall_seconds": 6.2, "compile_seconds": 2.0},
    }
    store.finish_trial(tid, TrialState.COMPLETE, result=result, worker="w1")
    html = client.get(f"/trials/{tid}").get_data(as_text=True)
    pack = re.search(r'id="pack"[^>]*>(.*?)</td>', html, re.S).group(1)
    assert "p7" in pack and "member 2 of 4" in pack and "6.2 s" in pack


def test_form_offers_the_layer_design_options(client):
    html = client.get("/experiments/new").get_data(as_text=True)
    for field in ("norm_position", "grad_clip", "lr_schedule", "warmup_epochs"):
        assert f'id="{field}"' in html, field
    for value in ("identity", "rezero", "scaled"):
        assert f'name="residual" value="{value}"' in html
    for value in ("batch", "layer"):
        assert f'name="normalization" value="{value}"' in html


def test_form_layer_design_fields_become_the_spec():
    form = MultiDict(
        [
            *FORM.items(),
            ("residual", "rezero"),
            ("residual", "scaled"),
            ("normalization", "layer"),
            ("norm_position", "pre"),
            ("grad_clip", "1.5"),
            ("lr_schedule", "cosine"),
            ("warmup_epochs", "3"),
        ]
    )
    spec = form_to_spec(form)
    assert spec["model"]["residual"] == {"grid": ["rezero", "scaled"]}
    assert (spec["model"]["normalization"], spec["model"]["norm_position"]) == ("layer", "pre")
    assert spec["training"]["grad_clip"] == 1.5
    assert spec["training"]["lr_schedule"] == {"kind": "cosine", "warmup_epochs": 3}
    # left empty, the options keep the spec's defaults
    plain = form_to_spec(MultiDict(FORM))
    assert "residual" not in plain["model"] and "grad_clip" not in plain["training"]


def test_form_design_errors_are_shown_next_to_their_fields(client, recorder):
    token = _csrf(client)
    r = client.post(
        "/experiments/new",
        data={
            **FORM,
            "csrf_token": token,
            "grad_clip": "-1",
            "norm_position": "pre",
            "warmup_epochs": "x",
        },
    )
    html = r.get_data(as_text=True)
    assert r.status_code == 400 and recorder.submitted == []
    assert re.search(r'id="error-grad_clip"[^>]*>[^<]*greater than 0', html)
    assert re.search(r'id="error-warmup_epochs"[^>]*>must be a number', html)


def test_pages_get_the_vocabulary_from_the_server(client):
    html = client.get("/").get_data(as_text=True)
    found = re.search(
        r'<script id="dnnframe-vocabulary" type="application/json">(.*?)</script>', html, re.S
    )
    assert found, "base.html must carry the vocabulary"
    served = json.loads(found.group(1))
    assert served["done"] == ["COMPLETE", "FAILED", "DIVERGED", "PRUNED"]
    assert served["bar"] == ["COMPLETE", "PRUNED", "DIVERGED", "FAILED", "CANCELLED", "RUNNING"]
    assert served["objective"] == {"metric": "test_accuracy", "mode": "max"}
    assert served["metrics"]["val_loss"] == {
        "direction": "min",
        "label": "val loss",
        "bounds": [0.0, None],
    }
    assert served["metrics"]["val_accuracy"]["bounds"] == [0.0, 1.0]
